"""Group administration with real admin clients: list, describe, delete groups."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError

from compat_tests.harness import WeirProcess, create_topic

TIMEOUT_S = 20.0


def commit_as(bootstrap: str, group_id: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_confluent_admin_lists_describes_and_deletes_a_group(
    broker: WeirProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    commit_as(broker.bootstrap, group_id, topic, 3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    listed = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    states = {g.group_id: g.state for g in listed.valid}
    assert states[group_id] == ConsumerGroupState.EMPTY

    described = admin.describe_consumer_groups([group_id])[group_id].result(timeout=TIMEOUT_S)
    assert (described.group_id, described.state, described.members) == (
        group_id,
        ConsumerGroupState.EMPTY,
        [],
    )

    admin.delete_consumer_groups([group_id])[group_id].result(timeout=TIMEOUT_S)
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert group_id not in {g.group_id for g in listed.valid}
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id})
    try:
        [committed] = reader.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert committed.offset < 0  # the group's offsets went with it
    finally:
        reader.close()


def test_kafka_python_admin_filters_groups_and_deletes_offsets(
    broker: WeirProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    commit_as(broker.bootstrap, group_id, topic, 9)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        empty = {g["group_id"]: g for g in admin.list_groups(states_filter=["Empty"])}
        assert empty[group_id]["group_type"] == "classic"
        assert group_id not in {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
        assert admin.describe_groups([group_id])[group_id]["group_state"] == "Empty"
        deleted = admin.delete_group_offsets(group_id, [KafkaPythonTopicPartition(topic, 0)])
        assert list(deleted.values()) == [NoError]
    finally:
        admin.close()
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id})
    try:
        [committed] = reader.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert committed.offset < 0  # OffsetDelete removed it
    finally:
        reader.close()
