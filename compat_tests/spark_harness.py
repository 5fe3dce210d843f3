"""What the Spark tests share: records produced and read back with confluent-kafka (an
independent client), the checkpoint's batch logs, and the windowed totals computed in
plain Python. The pipeline under test is spark_demo/; nothing here imports it.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Sent:
    """One record as produced, with the partition and offset the broker gave it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


@dataclass(frozen=True)
class Outgoing:
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int | None = None
    partition: int | None = None


def produce(
    bootstrap: str, topic: str, records: Iterable[Outgoing], *, batch_each: bool = False
) -> list[Sent]:
    """Produce in order (idempotent, acks=all) and return each record's delivery;
    `batch_each` waits for each record's acknowledgement, so each is a batch of its own."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2}
    )
    sent: list[Sent] = []
    failures: list[str] = []
    for record in records:

        def delivered(
            error: KafkaError | None, message: Message, record: Outgoing = record
        ) -> None:
            if error is not None:
                failures.append(str(error))
                return
            sent.append(
                Sent(
                    topic=topic,
                    partition=message.partition(),
                    offset=message.offset(),
                    key=record.key,
                    value=record.value,
                    headers=record.headers,
                    timestamp_ms=message.timestamp()[1],
                )
            )

        kwargs: dict[str, object] = {}
        if record.timestamp_ms is not None:
            kwargs["timestamp"] = record.timestamp_ms
        if record.partition is not None:
            kwargs["partition"] = record.partition
        producer.produce(
            topic,
            key=record.key,
            value=record.value,
            headers=record.headers,
            on_delivery=delivered,
            **kwargs,
        )
        producer.poll(0)
        if batch_each:
            assert producer.flush(30) == 0, "record undelivered after 30 s"
    assert producer.flush(30) == 0, "records still undelivered after 30 s"
    assert not failures, failures
    return sent


def begin_transaction(
    bootstrap: str, topic: str, records: Iterable[Outgoing], transactional_id: str
) -> Producer:
    """A transactional producer that wrote `records` (acknowledged) in a transaction it
    leaves open: the caller commits or aborts it."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    for record in records:
        kwargs: dict[str, object] = {}
        if record.timestamp_ms is not None:
            kwargs["timestamp"] = record.timestamp_ms
        if record.partition is not None:
            kwargs["partition"] = record.partition
        producer.produce(topic, key=record.key, value=record.value, headers=record.headers,
                         **kwargs)  # fmt: skip
        producer.poll(0)
    assert producer.flush(30) == 0, "transactional records undelivered after 30 s"
    return producer


def produce_transaction(
    bootstrap: str,
    topic: str,
    records: Iterable[Outgoing],
    transactional_id: str,
    *,
    commit: bool,
) -> None:
    """Write `records` in one transaction, then commit or abort it."""
    producer = begin_transaction(bootstrap, topic, records, transactional_id)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def wait_stable(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
    """Wait until every partition's last stable offset equals its high watermark: the
    markers of the transactions ended so far are written (they are written after
    EndTxn answers)."""
    uncommitted = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-tests-lso"})
    committed = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "spark-tests-lso",
         "isolation.level": "read_committed"}
    )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ends = [
                (
                    consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                    for p in range(partitions)
                )
                for consumer in (uncommitted, committed)
            ]
            high, stable = (list(e) for e in ends)
            if high == stable:
                return
            time.sleep(0.1)
        raise AssertionError(
            f"{topic}: last stable offsets {stable} below {high} after {timeout_s}s"
        )
    finally:
        uncommitted.close()
        committed.close()


def read_topic(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[Message]:
    """Every record of `topic` from its log start to its end offsets at the call."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "spark-tests-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends: dict[int, int] = {}
        starts: list[TopicPartition] = []
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
            if high > low:
                ends[partition] = high
                starts.append(TopicPartition(topic, partition, low))
        consumer.assign(starts)
        records: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while ends and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            records.append(message)
            if message.offset() + 1 >= ends.get(message.partition(), 0):
                ends.pop(message.partition(), None)
        assert not ends, f"partitions {sorted(ends)} not read to their end in {timeout_s}s"
        return records
    finally:
        consumer.close()


def low_watermark(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-tests-watermarks"})
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
        return int(low)
    finally:
        consumer.close()


# -- Structured Streaming checkpoints ------------------------------------------------------


def _batch_ids(directory: Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(entry.name) for entry in directory.iterdir() if entry.name.isdigit()}


def planned_batches(checkpoint: Path) -> set[int]:
    """Batch ids in the offset log: written before a micro-batch runs."""
    return _batch_ids(checkpoint / "offsets")


def committed_batches(checkpoint: Path) -> set[int]:
    """Batch ids in the commit log: written after a micro-batch's sink write returned."""
    return _batch_ids(checkpoint / "commits")


def committed_input_records(checkpoint: Path) -> int:
    """Input records (all partitions) up to the end of the last committed micro-batch:
    the last line of its offset-log entry is the Kafka source's offsets JSON."""
    committed = committed_batches(checkpoint)
    if not committed:
        return 0
    entry = (checkpoint / "offsets" / str(max(committed))).read_text().splitlines()
    per_topic: dict[str, dict[str, int]] = json.loads(entry[-1])
    return sum(sum(per_partition.values()) for per_partition in per_topic.values())


# -- The windowed totals, in plain Python ---------------------------------------------------

WindowTotals = dict[str, dict[str, object]]


def windowed_totals(views: Sequence[dict[str, object]], window_ms: int) -> WindowTotals:
    """Per `<window start ms>|<page>`: the totals the streaming job must write for the
    page-view bodies `views` (every window closed)."""
    groups: dict[tuple[int, str], list[int]] = defaultdict(list)
    for view in views:
        event_time_ms = int(str(view["event_time_ms"]))
        start_ms = event_time_ms - event_time_ms % window_ms
        groups[(start_ms, str(view["page"]))].append(int(str(view["dwell_ms"])))
    return {
        f"{start_ms}|{page}": {
            "window_start_ms": start_ms,
            "window_end_ms": start_ms + window_ms,
            "page": page,
            "views": len(dwells),
            "dwell_ms_total": sum(dwells),
            "dwell_ms_max": max(dwells),
        }
        for (start_ms, page), dwells in groups.items()
    }


def output_windows(messages: Iterable[Message]) -> dict[str, list[dict[str, object]]]:
    """The streaming job's output records by key: every copy written, in read order."""
    copies: dict[str, list[dict[str, object]]] = defaultdict(list)
    for message in messages:
        key = (message.key() or b"").decode()
        copies[key].append(json.loads(message.value() or b"null"))
    return copies
