"""Transactional load for the cluster fault tests, recorded for `txn_history.check`.

- `TxnProducer`: a transactional confluent-kafka producer on a thread, running
  transactions one after another until stopped; each writes unique values
  (`<name>-t<n>-v<i>`) to a random subset of the given partitions and commits
  (or, at `abort_ratio`, aborts). Every step goes to a `Journal` first, so the
  outcome is what the client was told (see `txn_history.Outcome`): a commit that
  raised a retriable error is retried; an abortable one is aborted (FAILED); a
  fatal one (fenced, the producer's state lost) leaves the outcome UNKNOWN and the
  producer is created again (init_transactions fences the old one).
- `python -m compat_tests.txn_load produce ...`: the same producer as a process of
  its own, journaling to a file line by line, so a SIGKILL loses nothing it was
  told; `--pause-before-commit-s` holds each transaction open after its values
  are written (a kill then lands mid-transaction).
- `TxnConsumer`: a consumer on a thread, at one isolation level, assigned every
  partition from the beginning, recording every poll.
- `await_stable` and `scan`: the final reads, once every partition's last stable
  offset has reached its high watermark.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from compat_tests.txn_history import (
    READ_COMMITTED,
    ConsumerLog,
    Outcome,
    Record,
    Scan,
    Txn,
)
from compat_tests.txn_history import TopicPartition as Tp

CLIENT_TIMEOUT_S = 30.0
COMMIT_ATTEMPTS = 5
RETRY_PAUSE_S = 0.5
POLL_INTERVAL_S = 0.1


class Journal:
    """A producer's transactions as it saw them, each step recorded before it is
    taken; also appended to `path` as JSON lines (flushed each) when given."""

    def __init__(self, path: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._file: IO[str] | None = open(path, "a", buffering=1) if path else None  # noqa: SIM115
        self._writes: dict[str, list[tuple[Tp, str]]] = {}
        self._committing: set[str] = set()
        self._outcomes: dict[str, Outcome] = {}
        self.sent: set[str] = set()  # transactions whose values were all acknowledged

    def _line(self, entry: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(entry) + "\n")

    def begin(self, txn_id: str) -> None:
        with self._lock:
            self._writes[txn_id] = []
            self._line({"begin": txn_id})

    def write(self, txn_id: str, tp: Tp, value: str) -> None:
        with self._lock:
            self._writes[txn_id].append((tp, value))
            self._line({"write": txn_id, "topic": tp[0], "partition": tp[1], "value": value})

    def written(self, txn_id: str) -> None:
        with self._lock:
            self.sent.add(txn_id)
            self._line({"sent": txn_id})

    def committing(self, txn_id: str) -> None:
        with self._lock:
            self._committing.add(txn_id)
            self._line({"committing": txn_id})

    def end(self, txn_id: str, outcome: Outcome) -> None:
        with self._lock:
            self._outcomes[txn_id] = outcome
            self._line({"end": txn_id, "outcome": outcome.value})

    def txns(self) -> list[Txn]:
        """Every transaction; one without an end is ABORTED if it never asked to
        commit (the coordinator aborts it), else UNKNOWN."""
        with self._lock:
            return [
                Txn(txn_id, tuple(writes), self._outcome(txn_id))
                for txn_id, writes in self._writes.items()
            ]

    def _outcome(self, txn_id: str) -> Outcome:
        if txn_id in self._outcomes:
            return self._outcomes[txn_id]
        return Outcome.UNKNOWN if txn_id in self._committing else Outcome.ABORTED

    def outcomes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for txn in self.txns():
            counts[txn.outcome.value] = counts.get(txn.outcome.value, 0) + 1
        return counts

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    @classmethod
    def read(cls, path: Path) -> Journal:
        """A journal file written by another process (a torn last line is dropped)."""
        journal = cls()
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "begin" in entry:
                journal.begin(entry["begin"])
            elif "write" in entry:
                tp = (entry["topic"], int(entry["partition"]))
                journal.write(entry["write"], tp, entry["value"])
            elif "sent" in entry:
                journal.written(entry["sent"])
            elif "committing" in entry:
                journal.committing(entry["committing"])
            elif "end" in entry:
                journal.end(entry["end"], Outcome(entry["outcome"]))
        return journal


class TxnProducer:
    """Transactions one after another on a thread until `stop` (see the module)."""

    def __init__(
        self,
        bootstrap: str,
        transactional_id: str,
        name: str,
        partitions: Sequence[Tp],
        *,
        seed: int = 0,
        values_per_partition: int = 2,
        abort_ratio: float = 0.2,
        transaction_timeout_ms: int = 20_000,
        pause_before_commit_s: float = 0.0,
        journal: Journal | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.name = name
        self.partitions = list(partitions)
        self.journal = journal or Journal()
        self.errors: list[str] = []
        self.recreated = 0
        self._rng = random.Random(seed)
        self._values_per_partition = values_per_partition
        self._abort_ratio = abort_ratio
        self._timeout_ms = transaction_timeout_ms
        self._pause_s = pause_before_commit_s
        self._count = 0
        self._stop = threading.Event()
        self._producer: Producer | None = None
        self._thread = threading.Thread(target=self.run, daemon=True, name=name)

    def __enter__(self) -> TxnProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self, timeout_s: float = 90.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
            assert not self._thread.is_alive(), f"{self.name} did not stop"

    def committed_since(self, count: int, timeout_s: float) -> None:
        """Wait until `count` more transactions commit (the load makes progress)."""
        target = self._committed() + count
        deadline = time.monotonic() + timeout_s
        while self._committed() < target:
            assert self._thread.is_alive() or self._stop.is_set(), f"{self.name} died"
            assert time.monotonic() < deadline, (
                f"{self.name}: {count} transactions not committed within {timeout_s:.0f} s "
                f"({self.journal.outcomes()}; errors {self.errors[-5:]})"
            )
            time.sleep(POLL_INTERVAL_S)  # polling the producer thread's progress

    @property
    def transactions_begun(self) -> int:
        return self._count

    def _committed(self) -> int:
        return self.journal.outcomes().get(Outcome.COMMITTED.value, 0)

    def run(self) -> None:
        while not self._stop.is_set():
            if self._producer is None and not self._start_producer():
                continue
            self._one_transaction()

    def _start_producer(self) -> bool:
        self._producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": self._timeout_ms,
                "linger.ms": 5,
            }
        )
        try:
            self._producer.init_transactions(CLIENT_TIMEOUT_S)
            return True
        except KafkaException as exc:
            self._note(exc)
            self._producer = None
            time.sleep(RETRY_PAUSE_S)  # the coordinator is moving: try again
            return False

    def _note(self, exc: KafkaException) -> None:
        self.errors.append(str(exc.args[0]))

    def _one_transaction(self) -> None:
        producer = self._producer
        assert producer is not None
        txn_id = f"{self.name}-t{self._count}"
        self._count += 1
        chosen = self._rng.sample(self.partitions, self._rng.randint(1, len(self.partitions)))
        try:
            producer.begin_transaction()
        except KafkaException as exc:
            self._note(exc)
            self._recover(exc)
            return
        self.journal.begin(txn_id)
        try:
            self._send(producer, txn_id, chosen)
            time.sleep(self._pause_s)  # held open: a kill may land here
            if self._rng.random() < self._abort_ratio:
                producer.abort_transaction(CLIENT_TIMEOUT_S)
                self.journal.end(txn_id, Outcome.ABORTED)
                return
        except KafkaException as exc:  # never asked to commit: not committed
            self._note(exc)
            self.journal.end(txn_id, Outcome.ABORTED)
            self._recover(exc)
            return
        self._commit(producer, txn_id)

    def _send(self, producer: Producer, txn_id: str, chosen: Sequence[Tp]) -> None:
        failed: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                failed.append(err)

        index = 0
        for topic, partition in chosen:
            for _ in range(self._values_per_partition):
                value = f"{txn_id}-v{index}"
                index += 1
                self.journal.write(txn_id, (topic, partition), value)
                producer.produce(
                    topic, value=value.encode(), partition=partition, on_delivery=on_delivery
                )
        remaining = producer.flush(CLIENT_TIMEOUT_S)
        if remaining or failed:
            error = failed[0] if failed else KafkaError(KafkaError._TIMED_OUT, "flush")
            raise KafkaException(error)
        self.journal.written(txn_id)

    def _commit(self, producer: Producer, txn_id: str) -> None:
        self.journal.committing(txn_id)
        for _ in range(COMMIT_ATTEMPTS):
            try:
                producer.commit_transaction(CLIENT_TIMEOUT_S)
                self.journal.end(txn_id, Outcome.COMMITTED)
                return
            except KafkaException as exc:
                self._note(exc)
                error: KafkaError = exc.args[0]
                if error.txn_requires_abort():
                    self._abort_after_failed_commit(producer, txn_id)
                    return
                if not error.retriable():
                    break  # fatal: the outcome is for the coordinator to decide
        self.journal.end(txn_id, Outcome.UNKNOWN)
        self._recreate()

    def _abort_after_failed_commit(self, producer: Producer, txn_id: str) -> None:
        try:
            producer.abort_transaction(CLIENT_TIMEOUT_S)
            self.journal.end(txn_id, Outcome.FAILED)
        except KafkaException as exc:
            self._note(exc)
            self.journal.end(txn_id, Outcome.FAILED)
            self._recover(exc)

    def _recover(self, exc: KafkaException) -> None:
        """After an error outside commit: abort when the client asks for it, start a
        new producer when it is fatal (or the abort fails)."""
        error: KafkaError = exc.args[0]
        producer = self._producer
        if producer is not None and error.txn_requires_abort() and not error.fatal():
            try:
                producer.abort_transaction(CLIENT_TIMEOUT_S)
                return
            except KafkaException as again:
                self._note(again)
        elif producer is not None and not error.fatal():
            try:  # e.g. a timed-out flush: the transaction is still open
                producer.abort_transaction(CLIENT_TIMEOUT_S)
                return
            except KafkaException as again:
                self._note(again)
        self._recreate()

    def _recreate(self) -> None:
        self.recreated += 1
        self._producer = None


class TxnConsumer:
    """Every poll of one consumer at `isolation`, assigned every partition from the
    beginning (topics fresh: offset 0), on a thread."""

    def __init__(self, bootstrap: str, name: str, isolation: str, partitions: Sequence[Tp]) -> None:
        self.log = ConsumerLog(name, isolation)
        self.errors: list[str] = []
        self._partitions = list(partitions)
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"unused-{name}",
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "auto.offset.reset": "earliest",
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    @property
    def polled(self) -> int:
        return sum(len(getattr(e, "records", ())) for e in self.log.events)

    def __enter__(self) -> TxnConsumer:
        self._consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in self._partitions])
        self.log.assign(dict.fromkeys(self._partitions, 0))
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            records = []
            for message in self._consumer.consume(500, 0.2):
                error = message.error()
                if error is not None:
                    self.errors.append(str(error))
                    continue
                value = message.value()
                tp, offset = position(message)
                records.append(Record(tp, offset, value.decode() if value else ""))
            self.log.poll(records)


def position(message: Message) -> tuple[Tp, int]:
    """A consumed message's partition and offset (an EOF event's offset is its end)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None
    return (topic, partition), -1 if offset is None else offset


def latest_offsets(
    bootstrap: str, partitions: Sequence[Tp], isolation: IsolationLevel
) -> dict[Tp, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets(
        {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions},
        isolation_level=isolation,
        request_timeout=CLIENT_TIMEOUT_S,
    )
    return {
        (tp.topic, tp.partition): future.result(CLIENT_TIMEOUT_S).offset
        for tp, future in futures.items()
    }


def wait_until(condition: Callable[[], bool], timeout_s: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if condition():
                return
        except KafkaException:
            pass  # a leader is moving: ask again
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what()}")
        time.sleep(POLL_INTERVAL_S)  # polling another process: no event to wait on


def stable_lag(bootstrap: str, partitions: Sequence[Tp]) -> dict[Tp, tuple[int, int]]:
    """Partitions whose last stable offset is behind the high watermark: (LSO, HW)."""
    committed = latest_offsets(bootstrap, partitions, IsolationLevel.READ_COMMITTED)
    uncommitted = latest_offsets(bootstrap, partitions, IsolationLevel.READ_UNCOMMITTED)
    return {
        tp: (committed[tp], uncommitted[tp])
        for tp in partitions
        if committed[tp] != uncommitted[tp]
    }


def await_stable(bootstrap: str, partitions: Sequence[Tp], timeout_s: float) -> None:
    """Until every partition's last stable offset has reached its high watermark."""
    last: list[object] = ["not asked yet"]

    def stable() -> bool:
        lag = stable_lag(bootstrap, partitions)
        last[0] = lag
        return not lag

    wait_until(stable, timeout_s, lambda: f"(LSO, HW) of partitions not stable: {last[0]}")


def scan(bootstrap: str, partitions: Sequence[Tp], isolation: str, timeout_s: float = 60.0) -> Scan:
    """Every record a consumer at `isolation` reads, from the beginning to the end
    (the last stable offset at read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-scan",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    read: dict[Tp, list[tuple[int, str]]] = {tp: [] for tp in partitions}
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions])
        at_end: set[Tp] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < len(read):
            assert time.monotonic() < deadline, f"{isolation} scan did not reach the end: {at_end}"
            for message in consumer.consume(500, 0.2):
                tp, offset = position(message)
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(tp)
                    continue
                value = message.value()
                read[tp].append((offset, value.decode() if value else ""))
    finally:
        consumer.close()
    return read


def final_scans(
    bootstrap: str, partitions: Sequence[Tp], timeout_s: float = 60.0
) -> tuple[Scan, Scan]:
    """(read_committed, read_uncommitted) scans once everything is stable."""
    await_stable(bootstrap, partitions, timeout_s)
    return scan(bootstrap, partitions, READ_COMMITTED), scan(
        bootstrap, partitions, "read_uncommitted"
    )


def parse_partitions(text: str) -> list[Tp]:
    """`topic:0,topic:1,other:2`"""
    partitions = []
    for item in text.split(","):
        topic, _, index = item.rpartition(":")
        partitions.append((topic, int(index)))
    return partitions


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.txn_load")
    commands = parser.add_subparsers(dest="command", required=True)
    produce = commands.add_parser("produce", help="run transactions until killed")
    produce.add_argument("--bootstrap", required=True)
    produce.add_argument("--transactional-id", required=True)
    produce.add_argument("--name", required=True, help="prefix of the values")
    produce.add_argument("--partitions", required=True, type=parse_partitions)
    produce.add_argument("--journal", required=True, type=Path)
    produce.add_argument("--transaction-timeout-ms", type=int, default=20_000)
    produce.add_argument("--pause-before-commit-s", type=float, default=0.0)
    produce.add_argument("--abort-ratio", type=float, default=0.2)
    produce.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    producer = TxnProducer(
        args.bootstrap,
        args.transactional_id,
        args.name,
        args.partitions,
        seed=args.seed,
        abort_ratio=args.abort_ratio,
        transaction_timeout_ms=args.transaction_timeout_ms,
        pause_before_commit_s=args.pause_before_commit_s,
        journal=Journal(args.journal),
    )
    producer.run()  # until killed
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
