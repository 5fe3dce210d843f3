"""/metrics of a real `weir` (weir/broker/metrics.py): request latency histograms
per API, produce and fetch traffic per topic, and kafka_exporter's families
(`kafka_brokers`, `kafka_topic_partition_*`, `kafka_consumergroup_*`)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from compat_tests.harness import WeirProcess, create_topic

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 2
RECORDS_PER_PARTITION = 30
CONSUMED_PER_PARTITION = 20


def produce(broker: WeirProcess, topic: str) -> int:
    """RECORDS_PER_PARTITION records to each partition; the bytes of their values."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for partition in range(PARTITIONS):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, f"value-{i}".encode(), partition=partition)
    assert producer.flush(20) == 0
    return PARTITIONS * RECORDS_PER_PARTITION


def consume_and_commit(broker: WeirProcess, topic: str, group: str) -> int:
    """Read CONSUMED_PER_PARTITION records of each partition and commit there."""
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen = {p: 0 for p in range(PARTITIONS)}
        deadline = time.monotonic() + 20
        while sum(seen.values()) < PARTITIONS * RECORDS_PER_PARTITION:
            assert time.monotonic() < deadline, f"consumed only {seen}"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen[message.partition()] += 1
        consumer.commit(
            offsets=[TopicPartition(topic, p, CONSUMED_PER_PARTITION) for p in range(PARTITIONS)],
            asynchronous=False,
        )
        return sum(seen.values())
    finally:
        consumer.close()


def test_request_latency_is_a_histogram_per_api(module_broker: WeirProcess, topic: str) -> None:
    create_topic(module_broker.bootstrap, topic, partitions=PARTITIONS)
    produce(module_broker, topic)
    counts = module_broker.metric_samples("weir_request_duration_seconds_count")
    assert counts['api="PRODUCE"'] >= PARTITIONS * RECORDS_PER_PARTITION / 100
    assert counts['api="METADATA"'] >= 1
    buckets = module_broker.metric_samples("weir_request_duration_seconds_bucket")
    assert buckets['api="PRODUCE",le="+Inf"'] == counts['api="PRODUCE"']
    assert buckets['api="PRODUCE",le="30.0"'] == counts['api="PRODUCE"']
    assert module_broker.metric_samples("weir_request_duration_seconds_sum")['api="PRODUCE"'] > 0


def test_produced_and_fetched_bytes_and_records_are_counted_per_topic(
    module_broker: WeirProcess, topic: str
) -> None:
    create_topic(module_broker.bootstrap, topic, partitions=PARTITIONS)
    produced = produce(module_broker, topic)
    consumed = consume_and_commit(module_broker, topic, f"{topic}-group")
    label = f'topic="{topic}"'
    assert module_broker.metric_samples("weir_topic_produced_records_total")[label] == produced
    assert module_broker.metric_samples("weir_topic_fetched_records_total")[label] == consumed
    produced_bytes = module_broker.metric_samples("weir_topic_produced_bytes_total")[label]
    assert produced_bytes > sum(len(f"value-{i}") for i in range(RECORDS_PER_PARTITION))
    assert module_broker.metric_samples("weir_topic_fetched_bytes_total")[label] > 0


def test_a_deleted_topics_traffic_families_are_gone(module_broker: WeirProcess, topic: str) -> None:
    create_topic(module_broker.bootstrap, topic, partitions=PARTITIONS)
    produce(module_broker, topic)
    label = f'topic="{topic}"'
    assert label in module_broker.metric_samples("weir_topic_produced_records_total")
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(timeout=20)
    assert label not in module_broker.metric_samples("weir_topic_produced_records_total")
    assert label not in module_broker.metric_samples("weir_topic_produced_bytes_total")


def test_offsets_and_group_lag_under_kafka_exporter_names(
    module_broker: WeirProcess, topic: str
) -> None:
    create_topic(module_broker.bootstrap, topic, partitions=PARTITIONS)
    produce(module_broker, topic)
    group = f"{topic}-group"
    consume_and_commit(module_broker, topic, group)
    assert module_broker.metric_samples("kafka_brokers") == {"": 1.0}
    for partition in range(PARTITIONS):
        labels = f'partition="{partition}",topic="{topic}"'  # names sorted
        current = module_broker.metric_samples("kafka_topic_partition_current_offset")
        assert current[labels] == RECORDS_PER_PARTITION
        assert module_broker.metric_samples("kafka_topic_partition_oldest_offset")[labels] == 0
        under = module_broker.metric_samples("kafka_topic_partition_under_replicated_partition")
        assert under[labels] == 0
        group_labels = f'consumergroup="{group}",{labels}'
        lag = module_broker.metric_samples("kafka_consumergroup_lag")
        assert lag[group_labels] == RECORDS_PER_PARTITION - CONSUMED_PER_PARTITION
        committed = module_broker.metric_samples("kafka_consumergroup_current_offset")
        assert committed[group_labels] == CONSUMED_PER_PARTITION


def test_process_metrics_are_exposed(module_broker: WeirProcess) -> None:
    assert module_broker.metric_samples("process_cpu_seconds_total")[""] > 0
    assert module_broker.metric_samples("process_resident_memory_bytes")[""] > 0


def test_an_open_transaction_shows_in_the_transaction_states_and_the_last_stable_offset(
    module_broker: WeirProcess, topic: str
) -> None:
    create_topic(module_broker.bootstrap, topic)
    producer = Producer(
        {"bootstrap.servers": module_broker.bootstrap, "transactional.id": f"{topic}-tx"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open")
    producer.flush(30)
    assert module_broker.metric_samples("weir_transactions")['state="Ongoing"'] >= 1
    label = f'partition="0",topic="{topic}"'
    assert module_broker.metric_samples("weir_partition_high_watermark")[label] == 1
    assert module_broker.metric_samples("weir_partition_last_stable_offset")[label] == 0
    producer.abort_transaction(30)
    deadline = time.monotonic() + 10
    while module_broker.metric_samples("weir_partition_last_stable_offset")[label] < 2:
        assert time.monotonic() < deadline, "the abort marker did not move the LSO"
        time.sleep(0.05)
