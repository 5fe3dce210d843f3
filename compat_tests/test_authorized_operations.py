"""KIP-430 authorized operations, as Kafka without an authorizer answers them: when
a client asks, Metadata, DescribeCluster, DescribeGroups and ConsumerGroupDescribe
report every operation valid for the resource type; when it does not ask, the
"not provided" sentinel (Int32 min). Checked on the wire (requests encoded by
Weir's declared schemas over a plain socket to the real process) and through
confluent-kafka's admin client, which turns the bit fields into AclOperations."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.wire_client import connect, round_trip

TIMEOUT_S = 20.0
NOT_PROVIDED = -(2**31)
METADATA, DESCRIBE_GROUPS, DESCRIBE_CLUSTER = 3, 15, 60
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69

# Kafka's AclEntry.supportedOperations, by ACL operation code.
TOPIC_CODES = {3, 4, 5, 6, 7, 8, 10, 11}  # READ WRITE CREATE DELETE ALTER DESCRIBE *_CONFIGS
GROUP_CODES = {3, 6, 8, 10, 11}  # READ DELETE DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
CLUSTER_CODES = {
    5,
    7,
    8,
    9,
    10,
    11,
    12,
}  # CREATE ALTER DESCRIBE CLUSTER_ACTION *_CONFIGS IDEMPOTENT


def codes(bits: int) -> set[int]:
    assert bits != NOT_PROVIDED
    return {code for code in range(32) if bits >> code & 1}


@pytest.fixture
def sock(broker: WeirProcess) -> Iterator[socket.socket]:
    with connect(broker) as connection:
        yield connection


def commit_as(bootstrap: str, group_id: str, topic: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.parametrize("version", [8, 10, 12])
def test_metadata_reports_topic_and_cluster_operations_only_when_asked(
    broker: WeirProcess, sock: socket.socket, topic: str, version: int
) -> None:
    create_topic(broker.bootstrap, topic)
    for asked in (True, False):
        body: dict[str, Any] = {
            "topics": [{"name": topic}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": asked,
        }
        if version <= 10:
            body["include_cluster_authorized_operations"] = asked
        response = round_trip(sock, METADATA, version, body)
        [described] = response.topics
        assert (described.name, described.error_code) == (topic, 0)
        if asked:
            assert codes(described.topic_authorized_operations) == TOPIC_CODES
        else:
            assert described.topic_authorized_operations == NOT_PROVIDED
        if version <= 10:  # v11 dropped the cluster's field
            if asked:
                assert codes(response.cluster_authorized_operations) == CLUSTER_CODES
            else:
                assert response.cluster_authorized_operations == NOT_PROVIDED
    assert broker.connection_trouble() == {}


def test_describe_cluster_reports_cluster_operations_only_when_asked(
    broker: WeirProcess, sock: socket.socket
) -> None:
    asked = round_trip(sock, DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True})
    assert codes(asked.cluster_authorized_operations) == CLUSTER_CODES
    not_asked = round_trip(sock, DESCRIBE_CLUSTER, 1, {})
    assert not_asked.cluster_authorized_operations == NOT_PROVIDED


def test_describe_groups_reports_group_operations_only_when_asked(
    broker: WeirProcess, sock: socket.socket, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    commit_as(broker.bootstrap, group_id, topic)
    for asked in (True, False):
        body = {"groups": [group_id], "include_authorized_operations": asked}
        [group] = round_trip(sock, DESCRIBE_GROUPS, 5, body).groups
        assert (group.group_id, group.error_code, group.group_state) == (group_id, 0, "Empty")
        if asked:
            assert codes(group.authorized_operations) == GROUP_CODES
        else:
            assert group.authorized_operations == NOT_PROVIDED


def test_consumer_group_describe_reports_a_kip848_group_with_its_members_and_operations(
    broker: WeirProcess, sock: socket.socket, topic: str
) -> None:
    """Also a regression test: describing a KIP-848 group that had members failed
    in the broker (stale assignment fields) and closed the connection."""
    create_topic(broker.bootstrap, topic)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    member_id = str(uuid.uuid4())
    joined = round_trip(sock, CONSUMER_GROUP_HEARTBEAT, 0, {
        "group_id": group_id, "member_id": member_id, "member_epoch": 0,
        "rebalance_timeout_ms": 30_000, "subscribed_topic_names": [topic], "topic_partitions": [],
    })  # fmt: skip
    assert joined.error_code == 0
    for asked in (True, False):
        body = {"group_ids": [group_id], "include_authorized_operations": asked}
        [group] = round_trip(sock, CONSUMER_GROUP_DESCRIBE, 0, body).groups
        assert (group.error_code, group.group_id) == (0, group_id)
        [member] = group.members
        assert member.member_id == member_id
        [assigned] = member.assignment.topic_partitions
        assert (assigned.topic_name, assigned.partitions) == (topic, [0])
        if asked:
            assert codes(group.authorized_operations) == GROUP_CODES
        else:
            assert group.authorized_operations == NOT_PROVIDED
    assert broker.connection_trouble() == {}


def test_consumer_group_describe_leaves_unknown_groups_without_operations(
    broker: WeirProcess, sock: socket.socket
) -> None:
    """Kafka sets the operations only on groups described without error."""
    body = {"group_ids": [f"missing-{uuid.uuid4().hex[:8]}"], "include_authorized_operations": True}
    [group] = round_trip(sock, CONSUMER_GROUP_DESCRIBE, 0, body).groups
    assert group.error_code != 0
    assert group.authorized_operations == NOT_PROVIDED


def test_confluent_admin_sees_every_operation_with_no_authorizer(
    broker: WeirProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    commit_as(broker.bootstrap, group_id, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    topics = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    described_topic = topics[topic].result(timeout=TIMEOUT_S)
    assert {op.value for op in described_topic.authorized_operations} == TOPIC_CODES

    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=TIMEOUT_S)
    assert {op.value for op in cluster.authorized_operations} == CLUSTER_CODES

    groups = admin.describe_consumer_groups([group_id], include_authorized_operations=True)
    group = groups[group_id].result(timeout=TIMEOUT_S)
    assert {op.value for op in group.authorized_operations} == GROUP_CODES
    assert AclOperation.DESCRIBE_CONFIGS in group.authorized_operations

    plain = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=TIMEOUT_S)
    assert not plain.authorized_operations  # not asked: none reported
    assert broker.connection_trouble() == {}
