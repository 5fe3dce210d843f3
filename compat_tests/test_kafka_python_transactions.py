"""kafka-python's transactional producer (kafka-python 3.x: init, commit, abort,
`send_offsets_to_transaction`, fencing) with read_committed and read_uncommitted
consumers, against the real `weir serve` process."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import kafka.errors as kafka_errors
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.group import OffsetAndMetadata

from compat_tests.harness import WeirProcess, create_topic

pytestmark = pytest.mark.timeout(180)

CLIENT_TIMEOUT_MS = 20_000
POLL_DEADLINE_S = 20


def transactional_producer(broker: WeirProcess, transactional_id: str) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        transactional_id=transactional_id,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
    )


@pytest.fixture
def topic(module_broker: WeirProcess) -> str:
    name = f"kp-txn-{uuid.uuid4().hex[:8]}"
    create_topic(module_broker.bootstrap, name, partitions=2)
    return name


@pytest.fixture
def producer(module_broker: WeirProcess) -> Iterator[KafkaProducer]:
    client = transactional_producer(module_broker, f"kp-{uuid.uuid4()}")
    client.init_transactions()
    yield client
    client.close(timeout=5)


def read_values(broker: WeirProcess, topic: str, isolation: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=2_000,
    )
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    values: list[bytes] = []
    deadline = time.monotonic() + POLL_DEADLINE_S
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values += [r.value for r in records]
    # nothing more arrives (an aborted record would arrive late here)
    for records in consumer.poll(timeout_ms=1_000).values():
        values += [r.value for r in records]
    consumer.close()
    return sorted(values)


def send(producer: KafkaProducer, topic: str, *values: bytes) -> None:
    for index, value in enumerate(values):
        producer.send(topic, value=value, partition=index % 2)
    producer.flush()


def test_commit_is_read_committed_and_abort_only_read_uncommitted(
    module_broker: WeirProcess, topic: str, producer: KafkaProducer
) -> None:
    producer.begin_transaction()
    send(producer, topic, b"c0", b"c1")
    producer.commit_transaction()
    producer.begin_transaction()
    send(producer, topic, b"a0", b"a1")
    producer.abort_transaction()
    producer.begin_transaction()
    send(producer, topic, b"c2", b"c3")
    producer.commit_transaction()
    assert read_values(module_broker, topic, "read_committed", 4) == [b"c0", b"c1", b"c2", b"c3"]
    assert read_values(module_broker, topic, "read_uncommitted", 6) == [
        b"a0", b"a1", b"c0", b"c1", b"c2", b"c3"
    ]  # fmt: skip


def test_offsets_sent_with_a_transaction_are_committed_only_with_it(
    module_broker: WeirProcess, topic: str, producer: KafkaProducer
) -> None:
    group = f"kp-group-{uuid.uuid4().hex[:8]}"
    partition = TopicPartition(topic, 0)
    producer.begin_transaction()
    producer.send_offsets_to_transaction({partition: OffsetAndMetadata(7, "", -1)}, group)
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send_offsets_to_transaction({partition: OffsetAndMetadata(5, "", -1)}, group)
    producer.commit_transaction()
    consumer = KafkaConsumer(bootstrap_servers=module_broker.bootstrap, group_id=group)
    try:
        deadline = time.monotonic() + POLL_DEADLINE_S
        committed: Any = None
        while time.monotonic() < deadline:
            committed = consumer.committed(partition)
            if committed is not None:
                break
            time.sleep(0.2)
        assert committed == 5
    finally:
        consumer.close()


def test_a_second_producer_with_the_same_id_fences_the_first(
    module_broker: WeirProcess, topic: str
) -> None:
    transactional_id = f"kp-fence-{uuid.uuid4()}"
    first = transactional_producer(module_broker, transactional_id)
    first.init_transactions()
    first.begin_transaction()
    send(first, topic, b"zombie")
    second = transactional_producer(module_broker, transactional_id)
    second.init_transactions()  # fences the first and aborts its transaction
    with pytest.raises(kafka_errors.KafkaError) as fenced:
        first.commit_transaction()
    assert isinstance(
        fenced.value, kafka_errors.ProducerFencedError | kafka_errors.InvalidProducerEpochError
    ), fenced.value
    second.begin_transaction()
    send(second, topic, b"live")
    second.commit_transaction()
    first.close(timeout=1)
    second.close(timeout=5)
    assert read_values(module_broker, topic, "read_committed", 1) == [b"live"]
