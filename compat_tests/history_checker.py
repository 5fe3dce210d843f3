"""A checker in the style of Jepsen's Kafka workloads, for the cluster fault tests.

A `ProduceLoad` writes unique values (`w-<seq>`) with one idempotent acks=all
producer on a thread and keeps every delivery report; a `ConcurrentReader` reads
every partition from the beginning while the faults happen and keeps every record
it saw. At the end `check` reads each partition from the beginning to its high
watermark and reports:

- lost: acknowledged writes missing from the final log;
- duplicated: a value at more than one offset;
- reordered: within a partition, two acknowledged writes whose offsets are in the
  opposite order of their sequence (one idempotent producer keeps its order);
- offset_mismatch: a write acknowledged at one offset and found at another;
- vanished: a record a reader saw during the run (so below the high watermark
  then) that the final log does not hold at that offset: data that disappeared;
- unexpected: values nobody wrote;
- failed: writes whose delivery failed (with idempotence and enough retries, none
  should).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from compat_tests.cluster_harness import WeirCluster

READ_TIMEOUT_S = 60.0


class AckLog:
    """Delivery reports of one producer: acknowledged values with their offsets, and
    per partition, in order, when each acknowledgement arrived (`time.monotonic()`)
    and when its write was produced (its CreateTime, wall-clock ms), from which the
    fault run measures unavailability."""

    def __init__(self) -> None:
        self.acked: dict[str, tuple[int, int]] = {}
        self.failed: dict[str, str] = {}
        self.ack_times: dict[int, list[float]] = {}
        self.ack_created_ms: dict[int, list[int]] = {}
        self._lock = threading.Lock()

    def report(self, error: KafkaError | None, message: Message) -> None:
        value = message.value().decode()
        with self._lock:
            if error is None:
                self.acked[value] = (message.partition(), message.offset())
                self.ack_times.setdefault(message.partition(), []).append(time.monotonic())
                created_ms = message.timestamp()[1]
                self.ack_created_ms.setdefault(message.partition(), []).append(created_ms)
            else:
                self.failed[value] = error.str()

    def acked_snapshot(self) -> dict[str, tuple[int, int]]:
        """A copy of `acked` taken while no report is being added (the producer's
        thread adds them while the test reads)."""
        with self._lock:
            return dict(self.acked)


class ProduceLoad:
    """acks=all idempotent writes of unique values at a steady pace, on a thread,
    until stopped; every delivery report is kept."""

    def __init__(self, bootstrap: str, topic: str, pause_s: float = 0.002) -> None:
        self.topic = topic
        self.acks = AckLog()
        self.sent = 0
        self._pause_s = pause_s
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ProduceLoad:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is None:
            self.stop()
        else:  # unwinding (a failure, Ctrl-C): stop producing, wait for no reports
            self._stop.set()
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._producer.produce(
                self.topic, value=f"w-{self.sent}".encode(), on_delivery=self.acks.report
            )
            self.sent += 1
            self._producer.poll(self._pause_s)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(10)
            remaining = self._producer.flush(150)
            assert remaining == 0, f"{remaining} writes got no delivery report"

    def acked_since(self, count: int, timeout_s: float) -> None:
        """Wait until `count` more writes are acknowledged (the load makes progress)."""
        target = len(self.acks.acked) + count
        deadline = time.monotonic() + timeout_s
        while len(self.acks.acked) < target:
            assert time.monotonic() < deadline, (
                f"{count} writes not acknowledged within {timeout_s:.0f} s "
                f"(failed so far: {list(self.acks.failed.items())[:3]})"
            )
            time.sleep(0.05)  # polling the producer thread's progress


class ConcurrentReader:
    """Reads every partition from the beginning during the run, on a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.reads: list[tuple[int, int, str]] = []
        self._stop = threading.Event()
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
        )
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ConcurrentReader:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.reads.append((message.partition(), message.offset(), message.value().decode()))


def read_everything(
    bootstrap: str, topic: str, partitions: int
) -> dict[int, list[tuple[int, str]]]:
    """Every record of every partition, from the beginning to the high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        ends = {p: _high_watermark(consumer, topic, p) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline and any(
            (records[p][-1][0] + 1 if records[p] else 0) < ends[p] for p in range(partitions)
        ):
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            records[message.partition()].append((message.offset(), message.value().decode()))
        return records
    finally:
        consumer.close()


def _high_watermark(consumer: Consumer, topic: str, partition: int) -> int:
    """The partition's high watermark, asked again while leadership settles."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while True:
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            return int(high)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)  # a leader election is in progress


@dataclass
class Anomalies:
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    reordered: list[tuple[str, str]] = field(default_factory=list)
    offset_mismatch: list[tuple[str, tuple[int, int], tuple[int, int]]] = field(
        default_factory=list
    )
    vanished: list[tuple[int, int, str]] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    acknowledged_count: int = 0
    read_count: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.offset_mismatch
                    or self.vanished or self.unexpected or self.failed)  # fmt: skip

    def summary(self) -> str:
        counts = {
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "reordered": len(self.reordered),
            "offset_mismatch": len(self.offset_mismatch),
            "vanished": len(self.vanished),
            "unexpected": len(self.unexpected),
            "failed": len(self.failed),
        }
        examples = {
            name: values[:3]
            for name, values in (
                ("lost", self.lost),
                ("duplicated", self.duplicated),
                ("reordered", self.reordered),
                ("offset_mismatch", self.offset_mismatch),
                ("vanished", self.vanished),
                ("unexpected", self.unexpected),
                ("failed", self.failed),
            )  # fmt: skip
            if values
        }
        return (f"{self.acknowledged_count} acknowledged, {self.read_count} read back; "
                f"anomalies {counts}; e.g. {examples}")  # fmt: skip


def check(
    acks: AckLog,
    sent: int,
    final: dict[int, list[tuple[int, str]]],
    reads_during_run: Sequence[tuple[int, int, str]] = (),
) -> Anomalies:
    """The anomalies of one producer's history (`sent` writes: w-0 .. w-<sent-1>)."""
    found = Anomalies(acknowledged_count=len(acks.acked), failed=sorted(acks.failed))
    written = {f"w-{seq}" for seq in range(sent)}
    at: dict[str, tuple[int, int]] = {}
    by_offset: dict[tuple[int, int], str] = {}
    for partition, items in final.items():
        for offset, value in items:
            found.read_count += 1
            by_offset[(partition, offset)] = value
            if value in at:
                found.duplicated.append(value)
            at.setdefault(value, (partition, offset))
            if value not in written:
                found.unexpected.append(value)
    for value, where in acks.acked.items():
        if value not in at:
            found.lost.append(value)
        elif at[value] != where:
            found.offset_mismatch.append((value, where, at[value]))
    for items in final.values():
        acked_in_order = [v for _, v in items if v in acks.acked]
        sequences = [int(v.split("-", 1)[1]) for v in acked_in_order]
        for earlier, later in zip(sequences, sequences[1:], strict=False):
            if later < earlier:
                found.reordered.append((f"w-{earlier}", f"w-{later}"))
    for partition, offset, value in reads_during_run:
        if by_offset.get((partition, offset)) != value:
            found.vanished.append((partition, offset, value))
    return found


def check_history(
    cluster: WeirCluster,
    load: ProduceLoad,
    partitions: int,
    reader: ConcurrentReader | None = None,
) -> None:
    """Zero anomalies: nothing acknowledged lost, nothing duplicated or reordered,
    nothing read during the run disappeared (the final read goes to the running
    brokers)."""
    bootstrap = ",".join(b.bootstrap for b in cluster.running())
    final = read_everything(bootstrap, load.topic, partitions)
    anomalies = check(load.acks, load.sent, final, reader.reads if reader else ())
    assert load.sent > 0 and anomalies.acknowledged_count == load.sent, anomalies.summary()
    assert anomalies.ok, anomalies.summary()
