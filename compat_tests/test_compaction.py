"""A compacted topic with the real broker and confluent-kafka: many updates per key
read back as the latest value of every key, at the offset it was produced at."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from compat_tests.harness import WeirProcess, create_topic

KEYS = 20
UPDATES_PER_KEY = 100
WAIT_S = 60.0


def read_compacted(bootstrap: str, topic: str) -> dict[int, tuple[bytes | None, bytes | None]]:
    """offset -> (key, value) of every record from the start to the high watermark;
    offsets have gaps where compaction removed records."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compaction-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records: dict[int, tuple[bytes | None, bytes | None]] = {}
        deadline = time.monotonic() + 30
        while high - 1 not in records and time.monotonic() < deadline:
            msg = consumer.poll(0.25)
            if msg is None:
                continue
            assert msg.error() is None, f"consumer error: {msg.error()!r}"
            records[msg.offset()] = (msg.key(), msg.value())
        assert high - 1 in records, f"never reached the high watermark {high}"
        return records
    finally:
        consumer.close()


@pytest.fixture
def cleaning_broker(tmp_path: Path) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(
        tmp_path, "retention_check_interval_ms = 300\nlog_cleaner_backoff_ms = 300\n"
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


def test_compacted_topic_keeps_the_latest_value_of_every_key_at_its_offset(
    cleaning_broker: WeirProcess, topic: str
) -> None:
    bootstrap = cleaning_broker.bootstrap
    create_topic(
        bootstrap,
        topic,
        partitions=1,
        config={
            "cleanup.policy": "compact",
            "segment.bytes": "1024",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100",
        },
    )
    latest: dict[bytes, tuple[int, bytes]] = {}
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
            return
        key, value = msg.key(), msg.value()
        assert key is not None and value is not None
        latest[key] = (msg.offset(), value)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for update in range(UPDATES_PER_KEY):
        for key in range(KEYS):
            producer.produce(
                topic, key=b"k%d" % key, value=b"v%d-%d" % (key, update), on_delivery=on_delivery
            )
        producer.flush(20)
    assert errors == [] and len(latest) == KEYS
    produced = KEYS * UPDATES_PER_KEY

    deadline = time.monotonic() + WAIT_S
    stored = read_compacted(bootstrap, topic)
    while len(stored) > produced // 4 and time.monotonic() < deadline:
        time.sleep(1)  # polling the real broker's background cleaner
        stored = read_compacted(bootstrap, topic)
    assert len(stored) <= produced // 4, f"still {len(stored)} of {produced} records"

    newest: dict[bytes, tuple[int, bytes]] = {}
    for offset, (key, value) in sorted(stored.items()):
        assert key is not None and value is not None
        newest[key] = (offset, value)
    assert newest == latest  # latest value per key, at its original offset
