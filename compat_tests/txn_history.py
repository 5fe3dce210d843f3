"""A history checker for transactions, with the anomaly names of Jepsen's Kafka checker.

Pure: it takes what the clients recorded and what a final read found, and names
what is wrong; `compat_tests/txn_load.py` records such histories against a running
broker. A history is:

- transactions (`Txn`): each writes unique values ("p3-t17-v2") to partitions of
  several topics and ends with an `Outcome`: COMMITTED (commit_transaction
  returned), ABORTED (abort_transaction returned, or the producer died before it
  asked to commit: the coordinator aborts it), FAILED (commit_transaction raised an
  error that says the transaction did not commit: it must be aborted) or UNKNOWN
  (commit_transaction raised an error that leaves the outcome open, or the producer
  died while committing). A transaction may also record the values it read
  (consume-transform-produce), from which information flows between transactions;
- consumers (`ConsumerLog`), each at one isolation level, recording every poll
  (partition, offset, value) and every assignment (the offset each partition
  starts at): polls between two assignments must move forward without gaps;
- two final scans of every partition from the beginning to its end, once every
  transaction has ended (last stable offset = high watermark): read_committed and
  read_uncommitted. Neither returns control batches, so the read_uncommitted scan
  says which offsets hold records.

A transaction counts as committed when it is COMMITTED, or UNKNOWN and seen (by
the final read_committed scan or any read_committed poll). `check` reports:

- aborted_read: a value of an ABORTED transaction read at read_committed;
- g1a: a value of a FAILED transaction read at read_committed (Adya's G1a,
  aborted read, where the client was told the commit failed);
- lost_write: a value of a committed transaction missing from the final
  read_committed scan;
- partial_txn: a transaction some of whose values the final read_committed scan
  holds, and others not;
- duplicate: a value at two positions (in a scan, or as polls saw it);
- non_monotonic_poll: a consumer's poll of a partition at an offset not after the
  one it polled before, with no assignment between;
- skipped_poll: offsets a consumer went past without reading them, although they
  hold records it should read: at read_uncommitted every record of the final
  read_uncommitted scan, at read_committed those of committed transactions
  (control batches and aborted records are legitimately skipped);
- g1c: cyclic information flow: transactions that read each other's writes, in a
  cycle (only write-read edges: Kafka does not order the writes of concurrent
  transactions across partitions, so write-write cycles are allowed);
- wrong_partition: a value found in a partition it was not written to;
- unexpected: a value nobody wrote.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]
# Every record a scan returned, per partition, in offset order: (offset, value).
Scan = Mapping[TopicPartition, Sequence[tuple[int, str]]]

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


class Outcome(enum.Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    FAILED = "failed"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Txn:
    txn_id: str
    writes: tuple[tuple[TopicPartition, str], ...]
    outcome: Outcome
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class Record:
    partition: TopicPartition
    offset: int
    value: str


@dataclass(frozen=True)
class Assign:
    """The consumer (re)starts these partitions at these offsets (assign or seek)."""

    positions: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class Poll:
    records: tuple[Record, ...]


@dataclass
class ConsumerLog:
    name: str
    isolation: str
    events: list[Assign | Poll] = field(default_factory=list)

    def assign(self, positions: Mapping[TopicPartition, int]) -> None:
        self.events.append(Assign(dict(positions)))

    def poll(self, records: Iterable[Record]) -> None:
        batch = tuple(records)
        if batch:
            self.events.append(Poll(batch))


@dataclass
class TxnAnomalies:
    aborted_read: list[tuple[str, str]] = field(default_factory=list)  # (reader, value)
    g1a: list[tuple[str, str]] = field(default_factory=list)
    lost_write: list[str] = field(default_factory=list)
    partial_txn: list[tuple[str, list[str], list[str]]] = field(default_factory=list)
    duplicate: list[tuple[str, list[tuple[TopicPartition, int]]]] = field(default_factory=list)
    non_monotonic_poll: list[tuple[str, TopicPartition, int, int]] = field(default_factory=list)
    skipped_poll: list[tuple[str, TopicPartition, list[int]]] = field(default_factory=list)
    g1c: list[list[str]] = field(default_factory=list)
    wrong_partition: list[tuple[str, TopicPartition, TopicPartition]] = field(default_factory=list)
    unexpected: list[tuple[TopicPartition, int, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    KINDS = (
        "aborted_read", "g1a", "lost_write", "partial_txn", "duplicate",
        "non_monotonic_poll", "skipped_poll", "g1c", "wrong_partition", "unexpected",
    )  # fmt: skip

    def found(self) -> dict[str, list[object]]:
        """Each kind of anomaly with at least one instance."""
        return {kind: list(getattr(self, kind)) for kind in self.KINDS if getattr(self, kind)}

    @property
    def ok(self) -> bool:
        return not self.found()

    def summary(self) -> str:
        found = self.found()
        counts = {kind: len(items) for kind, items in found.items()}
        examples = {kind: items[:3] for kind, items in found.items()}
        return f"{self.counts}; anomalies {counts or 'none'}; e.g. {examples}"


def check(
    txns: Sequence[Txn],
    consumers: Sequence[ConsumerLog],
    final_committed: Scan,
    final_uncommitted: Scan,
) -> TxnAnomalies:
    """The anomalies of one history (see the module's docstring)."""
    found = TxnAnomalies()
    writer = {value: txn for txn in txns for _, value in txn.writes}
    written_to = {value: tp for txn in txns for tp, value in txn.writes}
    visible = _values(final_committed)
    read_committed_polls = {
        record.value
        for consumer in consumers
        if consumer.isolation == READ_COMMITTED
        for record in _records(consumer)
    }
    committed = {
        txn.txn_id
        for txn in txns
        if txn.outcome == Outcome.COMMITTED
        or (
            txn.outcome == Outcome.UNKNOWN
            and any(v in visible or v in read_committed_polls for _, v in txn.writes)
        )
    }
    _check_isolation(found, writer, consumers, final_committed)
    _check_final_read(found, txns, committed, visible)
    _check_positions(found, written_to, final_committed, final_uncommitted, consumers)
    _check_polls(found, writer, committed, consumers, final_uncommitted)
    found.g1c = _read_cycles(txns, writer)
    found.counts = {
        "transactions": len(txns),
        "committed": len(committed),
        **{o.value: sum(1 for t in txns if t.outcome == o) for o in Outcome},
        "values_read_committed": len(visible),
        "polled_records": sum(len(list(_records(c))) for c in consumers),
    }
    return found


def _records(consumer: ConsumerLog) -> Iterable[Record]:
    for event in consumer.events:
        if isinstance(event, Poll):
            yield from event.records


def _values(scan: Scan) -> set[str]:
    return {value for records in scan.values() for _, value in records}


def _check_isolation(
    found: TxnAnomalies, writer: Mapping[str, Txn], consumers: Sequence[ConsumerLog], final: Scan
) -> None:
    """Values of aborted or failed transactions read at read_committed."""
    reads = [("final read_committed scan", value) for value in sorted(_values(final))]
    for consumer in consumers:
        if consumer.isolation == READ_COMMITTED:
            reads.extend((consumer.name, record.value) for record in _records(consumer))
    seen: set[tuple[str, str]] = set()
    for reader, value in reads:
        txn = writer.get(value)
        if txn is None or (reader, value) in seen:
            continue
        seen.add((reader, value))
        if txn.outcome == Outcome.ABORTED:
            found.aborted_read.append((reader, value))
        elif txn.outcome == Outcome.FAILED:
            found.g1a.append((reader, value))


def _check_final_read(
    found: TxnAnomalies, txns: Sequence[Txn], committed: set[str], visible: set[str]
) -> None:
    for txn in txns:
        values = [value for _, value in txn.writes]
        present = [v for v in values if v in visible]
        missing = [v for v in values if v not in visible]
        if txn.txn_id in committed:
            found.lost_write.extend(missing)
        if present and missing:
            found.partial_txn.append((txn.txn_id, present, missing))


def _check_positions(
    found: TxnAnomalies,
    written_to: Mapping[str, TopicPartition],
    final_committed: Scan,
    final_uncommitted: Scan,
    consumers: Sequence[ConsumerLog],
) -> None:
    """Each value at one position, in the partition it was written to."""
    positions: dict[str, set[tuple[TopicPartition, int]]] = {}
    for scan in (final_committed, final_uncommitted):
        for tp, records in scan.items():
            for offset, value in records:
                positions.setdefault(value, set()).add((tp, offset))
    for consumer in consumers:
        for record in _records(consumer):
            positions.setdefault(record.value, set()).add((record.partition, record.offset))
    for value, where in sorted(positions.items()):
        if len(where) > 1:
            found.duplicate.append((value, sorted(where)))
        target = written_to.get(value)
        for tp, offset in sorted(where):
            if target is None:
                found.unexpected.append((tp, offset, value))
            elif tp != target:
                found.wrong_partition.append((value, target, tp))


def _check_polls(
    found: TxnAnomalies,
    writer: Mapping[str, Txn],
    committed: set[str],
    consumers: Sequence[ConsumerLog],
    final_uncommitted: Scan,
) -> None:
    """Each consumer's polls of a partition go forward, past no record it should read."""
    holding = {tp: [offset for offset, _ in records] for tp, records in final_uncommitted.items()}
    readable_committed = {
        tp: [
            offset
            for offset, value in records
            if value not in writer or writer[value].txn_id in committed
        ]
        for tp, records in final_uncommitted.items()
    }
    for consumer in consumers:
        readable = holding if consumer.isolation == READ_UNCOMMITTED else readable_committed
        # Per partition: the offset the next poll should not go below (and reads from).
        next_offset: dict[TopicPartition, int] = {}
        for event in consumer.events:
            if isinstance(event, Assign):
                next_offset.update(event.positions)
                continue
            for record in event.records:
                tp = record.partition
                expected = next_offset.get(tp)
                if expected is not None and record.offset < expected:
                    # Reported once; then follow the consumer from where it went back to.
                    found.non_monotonic_poll.append(
                        (consumer.name, tp, expected - 1, record.offset)
                    )
                elif expected is not None:
                    passed = [o for o in readable.get(tp, []) if expected <= o < record.offset]
                    if passed:
                        found.skipped_poll.append((consumer.name, tp, passed))
                next_offset[tp] = record.offset + 1


def _read_cycles(txns: Sequence[Txn], writer: Mapping[str, Txn]) -> list[list[str]]:
    """Strongly connected components of more than one transaction in the graph of
    write-read edges (T1 -> T2 when T2 read a value T1 wrote); a transaction that
    read its own write is a cycle of one."""
    edges: dict[str, set[str]] = {txn.txn_id: set() for txn in txns}
    cycles: list[list[str]] = []
    for txn in txns:
        for value in txn.reads:
            source = writer.get(value)
            if source is None:
                continue
            if source.txn_id == txn.txn_id:
                cycles.append([txn.txn_id])
            else:
                edges[source.txn_id].add(txn.txn_id)
    cycles.extend(c for c in _components(edges) if len(c) > 1)
    return cycles


def _components(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (histories are long)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components
