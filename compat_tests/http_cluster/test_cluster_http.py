"""The HTTP views of a 3-broker cluster: `GET /v1/groups` on any broker lists
every group of the cluster (each broker coordinates some), and kafka_exporter's
families are reported cluster-wide without double counting: `kafka_brokers` by
every broker, a partition's offsets by its leader, a group's lag by its
coordinator (weir/broker/http/exporter_metrics.py, weir/broker/http/group_views.py)."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from compat_tests.cluster_harness import WeirCluster
from compat_tests.harness import WeirProcess, unique_topic_name

pytestmark = pytest.mark.timeout(180)

GROUPS = 8
PARTITIONS = 3
RECORDS_PER_PARTITION = 10
COMMITTED_OFFSET = 4


@pytest.fixture(scope="module")
def topic_with_groups(cluster: WeirCluster) -> tuple[str, list[str]]:
    """A topic (3 partitions, 3 replicas) with records, and GROUPS groups that
    committed COMMITTED_OFFSET on each partition (spread over the coordinators)."""
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers.values())
    topic = unique_topic_name("cluster-http")
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for partition in range(PARTITIONS):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, f"v{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    groups = [f"{topic}-g{i}" for i in range(GROUPS)]
    for group in groups:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            offsets = [TopicPartition(topic, p, COMMITTED_OFFSET) for p in range(PARTITIONS)]
            commit_retrying(consumer, offsets)
        finally:
            consumer.close()
    return topic, groups


def commit_retrying(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    """Commit, retrying while the group's coordinator is still being set up."""
    deadline = time.monotonic() + 30
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def listed_groups(broker: WeirProcess) -> dict[str, dict[str, object]]:
    status, body = broker.http_get("/v1/groups")
    assert status == 200, body
    document = json.loads(body)
    assert document.get("brokers_not_answering", []) == []
    return {str(g["group_id"]): g for g in document["groups"]}


def test_every_broker_lists_every_group_of_the_cluster(
    cluster: WeirCluster, topic_with_groups: tuple[str, list[str]]
) -> None:
    _, groups = topic_with_groups
    coordinators = set()
    for broker in cluster.brokers.values():
        listed = listed_groups(broker)
        assert set(groups) <= set(listed), f"missing: {set(groups) - set(listed)}"
        coordinators |= {listed[g]["coordinator"] for g in groups}
    assert len(coordinators) > 1, "every group has the same coordinator: nothing was proven"


def samples_over_brokers(
    cluster: WeirCluster, name: str, needle: str
) -> list[tuple[int, str, float]]:
    """(node id, labels, value) of every sample of `name` whose labels hold `needle`."""
    return [
        (node_id, labels, value)
        for node_id, broker in cluster.brokers.items()
        for labels, value in broker.metric_samples(name).items()
        if needle in labels
    ]


def test_kafka_exporter_families_count_each_partition_and_group_once(
    cluster: WeirCluster, topic_with_groups: tuple[str, list[str]]
) -> None:
    topic, groups = topic_with_groups
    for broker in cluster.brokers.values():
        assert broker.metric_samples("kafka_brokers") == {"": 3.0}
    deadline = time.monotonic() + 20
    while True:  # a follower's high watermark trails its leader's by a fetch
        current = samples_over_brokers(
            cluster, "kafka_topic_partition_current_offset", f'topic="{topic}"'
        )
        lags = samples_over_brokers(cluster, "kafka_consumergroup_lag", f'topic="{topic}"')
        settled = all(v == RECORDS_PER_PARTITION - COMMITTED_OFFSET for _, _, v in lags)
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert sorted(labels for _, labels, _ in current) == [
        f'partition="{p}",topic="{topic}"' for p in range(PARTITIONS)
    ], "each partition is reported once, by its leader"
    assert {v for _, _, v in current} == {float(RECORDS_PER_PARTITION)}
    under = samples_over_brokers(
        cluster, "kafka_topic_partition_under_replicated_partition", f'topic="{topic}"'
    )
    assert sorted(v for _, _, v in under) == [0.0] * PARTITIONS
    assert len(lags) == GROUPS * PARTITIONS, "each group is reported once, by its coordinator"
    assert {v for _, _, v in lags} == {float(RECORDS_PER_PARTITION - COMMITTED_OFFSET)}
    reporters = {node_id for node_id, _, _ in lags}
    assert len(reporters) > 1
    assert {labels.split(",")[0] for _, labels, _ in lags} == {
        f'consumergroup="{g}"' for g in groups
    }
