"""What a transaction-coordinator call hands back: its answer and what the broker must do.

The same protocol as the group coordinators' (`weir.groupcoord.pending`), kept as a
small equivalent here because the layers contract puts `weir.txn` below
`weir.groupcoord`; it adds the transaction markers to write. Every mutating call
returns a `Reply` (its own answer) or, for `advance`, `markers_written` and loading,
an `Effects`, carrying:

- `records`: `TransactionRecord`s to append to the transactional id's
  `__transaction_state` partition, in order;
- `markers`: `MarkerRequest`s, the commit or abort markers to write to every
  partition of a transaction whose Prepare record is among `records` (or was loaded);
- `completed`: every `Pending` answered during the call.

The broker's protocol, for every call:

1. append `records` and wait until they are durable; then call
   `records_durable(records)` (the coordinator's durable view, which the
   broker-to-broker verification and the admin views read);
2. only then send `markers` (WriteTxnMarkers to each partition's leader, retried
   until written, to the new leader after a failover) and report each written
   partition back with `markers_written`;
3. wake the waiter of each handle in `completed`, and answer its own request with
   `reply.pending.result`.

Step 2 after step 1 is what makes "a marker is written only for a decision that
survives a crash" hold. If an append fails, the coordinator's memory is ahead of the
log: the broker unloads the partition and loads it again from the log (as for the
group coordinators).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from weir.txn.transaction_records import TopicPartition, TransactionRecord

T = TypeVar("T")


class Pending(Generic[T]):
    """A result that may not be known yet. Identity-hashable, so usable as a dict key."""

    __slots__ = ("_result",)

    def __init__(self) -> None:
        self._result: T | None = None

    @property
    def done(self) -> bool:
        return self._result is not None

    @property
    def result(self) -> T:
        if self._result is None:
            raise RuntimeError("pending result read before it was completed")
        return self._result

    def complete(self, result: T) -> bool:
        """Fill in the result; False (and no change) if it was already done."""
        if self._result is not None:
            return False
        self._result = result
        return True

    def __repr__(self) -> str:
        return f"Pending({self._result!r})"


@dataclass(frozen=True, slots=True)
class MarkerRequest:
    """The end of one transaction, to be written as a control batch to each partition
    (WriteTxnMarkers): its producer id and epoch, commit or abort, the coordinator
    epoch (the `__transaction_state` partition's leader epoch, so a leader refuses
    markers of a deposed coordinator) and the transaction version (KIP-890)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction_version: int
    partitions: frozenset[TopicPartition]


@dataclass
class Effects:
    """What a call did besides answering its own request (see the module docstring)."""

    records: list[TransactionRecord] = field(default_factory=list)
    markers: list[MarkerRequest] = field(default_factory=list)
    completed: list[Pending[Any]] = field(default_factory=list)


@dataclass
class Reply(Generic[T]):
    """A call's own answer (possibly not done yet) and its effects."""

    pending: Pending[T]
    records: list[TransactionRecord] = field(default_factory=list)
    markers: list[MarkerRequest] = field(default_factory=list)
    completed: list[Pending[Any]] = field(default_factory=list)


class Outbox:
    """The coordinator's effects of the call under way, handed out (and emptied) with
    the call's `Reply` or `Effects`."""

    def __init__(self) -> None:
        self.records: list[TransactionRecord] = []
        self.markers: list[MarkerRequest] = []
        self.completed: list[Pending[Any]] = []

    def complete(self, pending: Pending[T] | None, result: T) -> None:
        if pending is not None and pending.complete(result):
            self.completed.append(pending)

    def reply(self, pending: Pending[T]) -> Reply[T]:
        reply = Reply(pending, self.records, self.markers, self.completed)
        self.records, self.markers, self.completed = [], [], []
        return reply

    def answer(self, result: T) -> Reply[T]:
        """A reply answered at once (the broker still sends it only after `records`
        are durable)."""
        pending: Pending[T] = Pending()
        self.complete(pending, result)
        return self.reply(pending)

    def effects(self) -> Effects:
        effects = Effects(self.records, self.markers, self.completed)
        self.records, self.markers, self.completed = [], [], []
        return effects
