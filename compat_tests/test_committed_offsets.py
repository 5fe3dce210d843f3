"""Committed offsets with real clients: FindCoordinator, OffsetCommit, OffsetFetch,
stored in __consumer_offsets and intact across a broker restart.

Consumers here use assign() (no group membership): what every client does to
store its position in a group without the rebalance protocol.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.structs import OffsetAndMetadata

from compat_tests.harness import WeirProcess, create_topic

TIMEOUT_S = 20.0


def confluent_consumer(bootstrap: str, group_id: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


def test_confluent_commit_is_read_back_after_a_broker_restart(
    own_broker: WeirProcess, topic: str
) -> None:
    create_topic(own_broker.bootstrap, topic, partitions=3)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    consumer = confluent_consumer(own_broker.bootstrap, group_id)
    try:
        wanted = [TopicPartition(topic, 0, 5), TopicPartition(topic, 2, 17)]
        committed = consumer.commit(offsets=wanted, asynchronous=False)
        assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [
            (0, 5, None),
            (2, 17, None),
        ]
    finally:
        consumer.close()

    own_broker.stop()
    own_broker.restart()

    reader = confluent_consumer(own_broker.bootstrap, group_id)
    try:
        asked = [TopicPartition(topic, p) for p in range(3)]
        found = reader.committed(asked, timeout=TIMEOUT_S)
        assert [(tp.partition, tp.offset) for tp in found] == [(0, 5), (1, -1001), (2, 17)]
    finally:
        reader.close()


def test_commit_survives_sigkill_once_acknowledged(own_broker: WeirProcess, topic: str) -> None:
    create_topic(own_broker.bootstrap, topic, partitions=1)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    consumer = confluent_consumer(own_broker.bootstrap, group_id)
    try:
        for offset in range(1, 21):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()
    own_broker.kill()
    own_broker.start()
    reader = confluent_consumer(own_broker.bootstrap, group_id)
    try:
        [found] = reader.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert found.offset == 20
    finally:
        reader.close()


def test_admin_lists_and_alters_group_offsets(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, 1, 42)])]
    )
    altered[group_id].result(timeout=TIMEOUT_S)
    listed = admin.list_consumer_group_offsets(
        [
            ConsumerGroupTopicPartitions(
                group_id, [TopicPartition(topic, 0), TopicPartition(topic, 1)]
            )
        ]
    )
    result = listed[group_id].result(timeout=TIMEOUT_S)
    assert [(tp.partition, tp.offset) for tp in result.topic_partitions] == [(0, -1001), (1, 42)]


def test_kafka_python_commit_and_committed_round_trip(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, partitions=1)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group_id,
        enable_auto_commit=False,
        request_timeout_ms=int(TIMEOUT_S * 1000),
    )
    try:
        partition = KafkaPythonTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.commit({partition: OffsetAndMetadata(7, "note", -1)})
        assert consumer.committed(partition) == 7
    finally:
        consumer.close()


def test_commit_to_an_unknown_partition_fails_for_that_partition(
    broker: WeirProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=1)
    consumer = confluent_consumer(broker.bootstrap, f"g-{uuid.uuid4().hex[:8]}")
    try:
        with pytest.raises(KafkaException) as raised:
            consumer.commit(offsets=[TopicPartition(topic, 9, 1)], asynchronous=False)
        assert raised.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        consumer.close()


SLOW_OFFSETS_TOPIC_PARTITIONS = 1000


def test_a_fresh_broker_creates_its_offsets_topic_before_any_group_request(
    tmp_path: Path,
) -> None:
    """librdkafka's admin client retries FindCoordinator's COORDINATOR_NOT_AVAILABLE
    for a few hundred ms only, then waits out its timeout even once the coordinator
    is ready (seen: AlterConsumerGroupOffsets timed out after 40 s with a 1,000
    partition offsets topic ready 2 s in). So the broker creates `__consumer_offsets`
    in the background as soon as it serves, not on the first group request."""
    broker = WeirProcess.configured(
        tmp_path, f"offsets_topic_partition_count = {SLOW_OFFSETS_TOPIC_PARTITIONS}\n"
    )
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        deadline_s = time.monotonic() + 60
        while time.monotonic() < deadline_s:
            listed = admin.list_topics(timeout=TIMEOUT_S).topics
            if "__consumer_offsets" in listed:
                break
            time.sleep(0.2)  # polling a real process
        assert len(listed["__consumer_offsets"].partitions) == SLOW_OFFSETS_TOPIC_PARTITIONS
        create_topic(broker.bootstrap, "t", partitions=1)
        group_id = "g-fresh"
        altered = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id, [TopicPartition("t", 0, 7)])]
        )
        altered[group_id].result(timeout=TIMEOUT_S)
    finally:
        broker.close()
