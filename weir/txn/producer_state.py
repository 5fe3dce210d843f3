"""Per-partition producer state: sequence checks, duplicate detection, and the
transactions each producer has open in the partition.

A producer with an id (from InitProducerId) numbers its batches per partition:
batch sequences run `base_sequence .. base_sequence + last_offset_delta`
(wrapping from 2**31-1 to 0). For each producer id the partition remembers its
epoch and the last `BATCHES_RETAINED_PER_PRODUCER` batches it appended, which
is what a retrying producer can have in flight (`max.in.flight` <= 5).

Rules for a batch from producer P with epoch E and sequences [first, last]
(Kafka's, KIP-98 and KIP-360):

1. E older than P's epoch: INVALID_PRODUCER_EPOCH (a fenced producer).
2. E newer than P's epoch: the producer bumped its epoch and restarted its
   sequences, so `first` must be 0 (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise).
3. Same epoch, and [first, last] equals a retained batch: a retry of a batch
   already in the log. It is not appended again; the producer is answered with
   the offsets it got the first time.
4. Same epoch otherwise: `first` must follow P's last sequence
   (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise).
5. P unknown (new, or expired): any sequence is accepted.

Transactions (KIP-98; Kafka's ProducerAppendInfo and ProducerStateManager):

6. A transactional batch opens P's transaction at its first offset unless one
   is open (a batch with a newer epoch continues it, as Kafka's does). The
   group coordinator's transactional batches (TxnOffsetCommit's records in
   __consumer_offsets, Kafka's AppendOrigin.COORDINATOR) carry no sequence:
   `check_coordinator_batch` applies rule 1 only, and they open the
   transaction like any other.
7. A non-transactional batch while P has a transaction open:
   INVALID_TXN_STATE (after rules 1-4).
8. A control batch (COMMIT or ABORT marker, `check_marker`) with an epoch
   older than P's (transaction version 2, KIP-890: not newer than P's, since
   every EndTxn bumps the epoch and a marker carries the bumped one, so a
   delayed marker of an earlier transaction cannot end the next one):
   INVALID_PRODUCER_EPOCH; with a coordinator epoch older than
   the last marker's: TRANSACTION_COORDINATOR_FENCED. Written (`apply_marker`),
   it closes P's open transaction, if any, as a `CompletedTxn`, and takes its
   epoch and coordinator epoch (a newer epoch, as KIP-890's bumped one, clears
   the retained batches: the next batch must start at sequence 0).
9. The first unstable offset is the smallest first offset of any transaction
   still open, or completed with its marker at or above the high watermark
   (not yet replicated); the last stable offset (LSO) is min(high watermark,
   first unstable offset). An aborted `CompletedTxn` carries the LSO at its
   completion, Kafka's rule: the first offset of the oldest transaction of
   another producer still open, else the marker's offset + 1; that is what the
   aborted-transaction index records.

State is rebuilt after a restart from a snapshot (`encode_snapshot`, which
carries each producer's open transaction) plus the batches after it (`replay`
for data batches, `apply_marker` for markers); entries expire
`producer.id.expiration.ms` after their last append, unless a transaction is
open. The table is bounded: past `producers_max` entries the least recently
used one without an open transaction is forgotten (it then counts as unknown,
rule 5).

This module is pure: no disk, no clock, no network.
"""

from __future__ import annotations

import struct
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import ClassVar

import crc32c

from weir.format.control_records import EndTransactionMarker
from weir.format.errors import ErrorCode

NO_PRODUCER_ID = -1
SEQUENCE_MAX = 2**31 - 1
BATCHES_RETAINED_PER_PRODUCER = 5
PRODUCERS_PER_PARTITION_MAX = 50_000

NO_SEQUENCE = -1  # a coordinator-written transactional batch's base sequence
NO_TRANSACTION = -1  # ProducerEntry.txn_first_offset when no transaction is open
NO_COORDINATOR_EPOCH = -1

# WPS2 adds each entry's coordinator epoch and open transaction's first offset,
# and entries without batches (a marker's); WPS1 snapshots (older data dirs) load.
SNAPSHOT_MAGIC = b"WPS2"
SNAPSHOT_MAGIC_V1 = b"WPS1"
_SNAPSHOT_PREFIX = struct.Struct(">4sI")  # magic, crc32c over everything after it
_SNAPSHOT_BODY_HEAD = struct.Struct(">qI")  # snapshot offset, entry count
_ENTRY_HEAD_V1 = struct.Struct(">qhqB")  # producer id, epoch, last append ms, batch count
# producer id, epoch, last append ms, coordinator epoch, txn first offset, batch count
_ENTRY_HEAD = struct.Struct(">qhqiqB")
_BATCH = struct.Struct(">iiqq")  # first sequence, last sequence, first offset, last offset


class ProducerStateError(Exception):
    """A batch breaks a sequence or epoch rule; `error_code` is the answer."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class SnapshotCorrupt(ValueError):  # noqa: N818 (reads as the condition)
    pass


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """What a partition remembers of one appended batch of a producer."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    last_append_ms: int
    batches: deque[ProducerBatch]
    coordinator_epoch: int = NO_COORDINATOR_EPOCH  # of the last marker written
    txn_first_offset: int = NO_TRANSACTION  # of the open transaction

    @property
    def in_transaction(self) -> bool:
        return self.txn_first_offset != NO_TRANSACTION

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    def find(self, first_sequence: int, last_sequence: int) -> ProducerBatch | None:
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        return None


def last_sequence_of(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record, wrapping past 2**31-1 to 0."""
    return (base_sequence + last_offset_delta) % (SEQUENCE_MAX + 1)


def follows(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == (last_sequence + 1) % (SEQUENCE_MAX + 1)


@dataclass(frozen=True, slots=True)
class PendingBatch:
    """A checked batch not yet in the log; `commit` records it once written."""

    producer_id: int
    epoch: int
    first_sequence: int
    last_sequence: int
    # A class attribute, not a field: an idempotent batch's costs no more to build.
    transactional: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class PendingTxnBatch(PendingBatch):
    """A checked transactional batch: `commit` opens its producer's transaction."""

    transactional: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker closed (rule 8). `last_stable_offset`: the LSO at
    its completion (rule 9), what an aborted one's index entry records."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool
    last_stable_offset: int


class ProducerStateTable:
    def __init__(self, producers_max: int = PRODUCERS_PER_PARTITION_MAX) -> None:
        assert producers_max > 0
        self._producers_max = producers_max
        self._entries: OrderedDict[int, ProducerEntry] = OrderedDict()
        # Open transactions, first offset -> producer id, in first-offset order
        # (transactions open in log order), so the oldest is the first key.
        self._open_txns: OrderedDict[int, int] = OrderedDict()
        # Completed transactions whose marker may be at or above the high
        # watermark: first offset -> marker offset (`on_high_watermark` prunes).
        self._unreplicated_txns: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    # -- the append path -------------------------------------------------

    def check(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        last_offset_delta: int,
        earlier: list[PendingBatch] | None = None,
        transactional: bool = False,
    ) -> ProducerBatch | PendingBatch:
        """Apply rules 1-5 and 7 to one batch. Returns the retained batch for a
        duplicate (rule 3), else a PendingBatch to `commit` after the write.
        `earlier`: batches of the same append checked before this one.
        Raises ProducerStateError."""
        if base_sequence < 0 or epoch < 0:
            raise ProducerStateError(
                ErrorCode.INVALID_RECORD,
                f"producer {producer_id} sent sequence {base_sequence} with epoch {epoch}",
            )
        last_sequence = last_sequence_of(base_sequence, last_offset_delta)
        current_epoch, current_last = self._current(producer_id, earlier or [])
        if current_epoch is not None:
            if epoch < current_epoch:
                raise ProducerStateError(
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"producer {producer_id} epoch {epoch} is older than {current_epoch}",
                )
            duplicate = self._duplicate(producer_id, epoch, base_sequence, last_sequence, earlier)
            if duplicate is not None:
                return duplicate
            self._check_sequence(producer_id, epoch, base_sequence, current_epoch, current_last)
            if (
                not transactional
                and (self._open_txns or earlier)
                and self._in_transaction(producer_id, earlier)
            ):
                raise ProducerStateError(
                    ErrorCode.INVALID_TXN_STATE,
                    f"producer {producer_id} sent a non-transactional batch inside a transaction",
                )
        if transactional:
            return PendingTxnBatch(producer_id, epoch, base_sequence, last_sequence)
        return PendingBatch(producer_id, epoch, base_sequence, last_sequence)

    def check_coordinator_batch(
        self, producer_id: int, epoch: int, earlier: list[PendingBatch] | None = None
    ) -> PendingBatch:
        """Rule 6's coordinator-written transactional batch (no sequence): only
        rule 1 applies. Raises ProducerStateError."""
        if producer_id < 0 or epoch < 0:
            raise ProducerStateError(
                ErrorCode.INVALID_RECORD,
                f"coordinator batch of producer {producer_id} with epoch {epoch}",
            )
        current_epoch, _ = self._current(producer_id, earlier or [])
        if current_epoch is not None and epoch < current_epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {epoch} is older than {current_epoch}",
            )
        return PendingTxnBatch(producer_id, epoch, NO_SEQUENCE, NO_SEQUENCE)

    def _in_transaction(self, producer_id: int, earlier: list[PendingBatch] | None) -> bool:
        """Whether P has a transaction open, counting batches of the same append."""
        entry = self._entries.get(producer_id)
        if entry is not None and entry.in_transaction:
            return True
        return any(p.producer_id == producer_id and p.transactional for p in earlier or ())

    def _current(self, producer_id: int, earlier: list[PendingBatch]) -> tuple[int | None, int]:
        for pending in reversed(earlier):
            if pending.producer_id == producer_id:
                return pending.epoch, pending.last_sequence
        entry = self._entries.get(producer_id)
        if entry is None:
            return None, -1
        return entry.epoch, entry.last_sequence

    def _duplicate(
        self,
        producer_id: int,
        epoch: int,
        first_sequence: int,
        last_sequence: int,
        earlier: list[PendingBatch] | None,
    ) -> ProducerBatch | None:
        entry = self._entries.get(producer_id)
        if entry is None or entry.epoch != epoch:
            return None
        found = entry.find(first_sequence, last_sequence)
        if found is not None and earlier:
            raise ProducerStateError(
                ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                f"producer {producer_id} resent sequence {first_sequence} among other batches",
            )
        return found

    @staticmethod
    def _check_sequence(
        producer_id: int, epoch: int, first_sequence: int, current_epoch: int, current_last: int
    ) -> None:
        if epoch > current_epoch:
            if first_sequence != 0:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {producer_id} began epoch {epoch} at sequence {first_sequence}",
                )
            return
        if not follows(current_last, first_sequence):
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} sent sequence {first_sequence} after {current_last}",
            )

    def commit(
        self, pending: PendingBatch, first_offset: int, last_offset: int, now_ms: int
    ) -> None:
        """Record a checked batch once it is written at [first_offset, last_offset]."""
        if pending.first_sequence < 0:  # a coordinator's batch: no sequence to retain
            self._open_unsequenced(pending.producer_id, pending.epoch, first_offset, now_ms)
            return
        entry = self._record(
            pending.producer_id,
            pending.epoch,
            ProducerBatch(pending.first_sequence, pending.last_sequence, first_offset, last_offset),
            now_ms,
        )
        if pending.transactional and not entry.in_transaction:
            self._open_txn(entry, first_offset)

    def replay(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        first_offset: int,
        last_offset: int,
        timestamp_ms: int,
        is_transactional: bool = False,
    ) -> None:
        """Rebuild from a data batch already in the log (recovery, a follower's
        append): no checks. A transactional batch opens its producer's
        transaction (rule 6). Markers go to `apply_marker`."""
        if producer_id < 0:
            return
        if base_sequence < 0:
            if is_transactional and epoch >= 0:  # a coordinator's batch (rule 6)
                self._open_unsequenced(producer_id, epoch, first_offset, timestamp_ms)
            return
        last_sequence = last_sequence_of(base_sequence, last_offset - first_offset)
        batch = ProducerBatch(base_sequence, last_sequence, first_offset, last_offset)
        entry = self._record(producer_id, epoch, batch, timestamp_ms)
        if is_transactional and not entry.in_transaction:
            self._open_txn(entry, first_offset)

    def _open_unsequenced(
        self, producer_id: int, epoch: int, first_offset: int, now_ms: int
    ) -> None:
        entry = self._entry_at_epoch(producer_id, epoch, now_ms)
        entry.last_append_ms = max(entry.last_append_ms, now_ms)
        if not entry.in_transaction:
            self._open_txn(entry, first_offset)

    def _record(
        self, producer_id: int, epoch: int, batch: ProducerBatch, now_ms: int
    ) -> ProducerEntry:
        entry = self._entries.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = self._entry_at_epoch(producer_id, epoch, now_ms)
        else:  # the common case, on the produce path: no other work
            self._entries.move_to_end(producer_id)
        entry.batches.append(batch)
        entry.last_append_ms = max(entry.last_append_ms, now_ms)
        return entry

    def _entry_at_epoch(self, producer_id: int, epoch: int, now_ms: int) -> ProducerEntry:
        """P's entry, most recently used, at `epoch`: created if unknown; a new
        epoch forgets the retained batches (the open transaction stays open)."""
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = ProducerEntry(
                producer_id, epoch, now_ms, deque(maxlen=BATCHES_RETAINED_PER_PRODUCER)
            )
            self._entries[producer_id] = entry
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
            entry.last_append_ms = now_ms
        self._entries.move_to_end(producer_id)
        while len(self._entries) > self._producers_max and self._forget_least_recent():
            pass
        return entry

    def _forget_least_recent(self) -> bool:
        """Forget the least recently used producer without an open transaction;
        False when every producer has one."""
        for producer_id, entry in self._entries.items():
            if not entry.in_transaction:
                del self._entries[producer_id]
                return True
        return False

    # -- transactions ----------------------------------------------------

    def _open_txn(self, entry: ProducerEntry, first_offset: int) -> None:
        entry.txn_first_offset = first_offset
        if self._open_txns and next(reversed(self._open_txns)) > first_offset:
            self._open_txns[first_offset] = entry.producer_id  # out of log order: re-sort
            self._open_txns = OrderedDict(sorted(self._open_txns.items()))
        else:
            self._open_txns[first_offset] = entry.producer_id

    def check_marker(
        self,
        producer_id: int,
        epoch: int,
        marker: EndTransactionMarker,
        transaction_version: int = 1,
    ) -> None:
        """Rule 8's checks of a marker about to be written (`transaction_version`:
        the coordinator's, 2 for KIP-890's epoch bump). A marker of a producer
        this partition never saw is written (Kafka's rule: harmless, it ends
        nothing). Raises ProducerStateError."""
        entry = self._entries.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch or (transaction_version >= 2 and epoch == entry.epoch):
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker for producer {producer_id} has epoch {epoch} after epoch "
                f"{entry.epoch} (transaction version {transaction_version})",
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker for producer {producer_id} from coordinator epoch "
                f"{marker.coordinator_epoch}, older than {entry.coordinator_epoch}",
            )

    def apply_marker(
        self,
        producer_id: int,
        epoch: int,
        marker: EndTransactionMarker,
        offset: int,
        timestamp_ms: int,
    ) -> CompletedTxn | None:
        """Record a marker written at `offset` (after `check_marker`, or from the
        log in recovery): P takes its epoch and coordinator epoch, and its open
        transaction, if any, completes. Returns it (with the LSO at completion,
        rule 9), or None when P had none open (an empty transaction)."""
        entry = self._entry_at_epoch(producer_id, epoch, timestamp_ms)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_append_ms = max(entry.last_append_ms, timestamp_ms)
        if not entry.in_transaction:
            return None
        first_offset = entry.txn_first_offset
        completed = CompletedTxn(
            producer_id,
            first_offset,
            offset,
            not marker.committed,
            self._stable_offset_after(producer_id, offset),
        )
        entry.txn_first_offset = NO_TRANSACTION
        self._open_txns.pop(first_offset, None)
        self._unreplicated_txns[first_offset] = offset
        return completed

    def _stable_offset_after(self, producer_id: int, marker_offset: int) -> int:
        """The LSO once P's transaction completes: the oldest other open one's first
        offset, else past the marker."""
        for first_offset, owner in self._open_txns.items():
            if owner != producer_id:
                return first_offset
        return marker_offset + 1

    def entries(self) -> list[ProducerEntry]:
        """Every producer the partition remembers, least recently used first."""
        return list(self._entries.values())

    def first_undecided_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None when none is open."""
        return next(iter(self._open_txns), None)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """Rule 9: the oldest first offset of a transaction open, or completed with
        its marker at or above `high_watermark`; None when there is none."""
        first = next(iter(self._open_txns), None)
        for txn_first, marker_offset in self._unreplicated_txns.items():
            if marker_offset >= high_watermark and (first is None or txn_first < first):
                first = txn_first
        return first

    def last_stable_offset(self, high_watermark: int) -> int:
        """LSO = min(high watermark, first unstable offset)."""
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(high_watermark, first)

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below `high_watermark`."""
        if self._unreplicated_txns:
            self._unreplicated_txns = {
                first: marker
                for first, marker in self._unreplicated_txns.items()
                if marker >= high_watermark
            }

    def open_transactions(self) -> list[tuple[int, int]]:
        """(producer id, first offset) of every open transaction, oldest first."""
        return [(pid, first) for first, pid in self._open_txns.items()]

    # -- maintenance -----------------------------------------------------

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for longer than `expiration_ms`; returns how many."""
        expired = [
            pid
            for pid, entry in self._entries.items()
            if now_ms - entry.last_append_ms > expiration_ms and not entry.in_transaction
        ]
        for pid in expired:
            del self._entries[pid]
        return len(expired)

    def clear(self) -> None:
        self._entries.clear()
        self._open_txns.clear()
        self._unreplicated_txns.clear()

    # -- snapshots -------------------------------------------------------

    def encode_snapshot(self, offset: int) -> bytes:
        """The table as of log offset `offset`, with a CRC32C over it."""
        body = bytearray(_SNAPSHOT_BODY_HEAD.pack(offset, len(self._entries)))
        for entry in self._entries.values():
            body += _ENTRY_HEAD.pack(
                entry.producer_id, entry.epoch, entry.last_append_ms, entry.coordinator_epoch,
                entry.txn_first_offset, len(entry.batches),
            )  # fmt: skip
            for batch in entry.batches:
                body += _BATCH.pack(
                    batch.first_sequence, batch.last_sequence, batch.first_offset, batch.last_offset
                )
        return _SNAPSHOT_PREFIX.pack(SNAPSHOT_MAGIC, crc32c.crc32c(body)) + bytes(body)

    @classmethod
    def decode_snapshot(
        cls, data: bytes, producers_max: int = PRODUCERS_PER_PARTITION_MAX
    ) -> tuple[int, ProducerStateTable]:
        """(offset, table) from `encode_snapshot` bytes, or a WPS1 snapshot of an
        older Weir (no transactions); raises SnapshotCorrupt."""
        if len(data) < _SNAPSHOT_PREFIX.size + _SNAPSHOT_BODY_HEAD.size:
            raise SnapshotCorrupt("snapshot is truncated")
        magic, crc = _SNAPSHOT_PREFIX.unpack_from(data, 0)
        body = memoryview(data)[_SNAPSHOT_PREFIX.size :]
        if magic not in (SNAPSHOT_MAGIC, SNAPSHOT_MAGIC_V1) or crc32c.crc32c(body) != crc:
            raise SnapshotCorrupt("snapshot magic or CRC32C mismatch")
        offset, count = _SNAPSHOT_BODY_HEAD.unpack_from(body, 0)
        table = cls(producers_max)
        position = _SNAPSHOT_BODY_HEAD.size
        decode_entry = table._decode_entry if magic == SNAPSHOT_MAGIC else table._decode_entry_v1
        for _ in range(count):
            position = decode_entry(body, position)
        if position != len(body):
            raise SnapshotCorrupt("snapshot has trailing bytes")
        table._reopen_transactions()
        return offset, table

    def _decode_entry_v1(self, body: memoryview, position: int) -> int:
        if len(body) - position < _ENTRY_HEAD_V1.size:
            raise SnapshotCorrupt("snapshot entry is truncated")
        producer_id, epoch, last_append_ms, batches_count = _ENTRY_HEAD_V1.unpack_from(
            body, position
        )
        position += _ENTRY_HEAD_V1.size
        if len(body) - position < batches_count * _BATCH.size:
            raise SnapshotCorrupt("snapshot batches are truncated")
        for _ in range(batches_count):
            batch = ProducerBatch(*_BATCH.unpack_from(body, position))
            self._record(producer_id, epoch, batch, last_append_ms)
            position += _BATCH.size
        return position

    def _decode_entry(self, body: memoryview, position: int) -> int:
        if len(body) - position < _ENTRY_HEAD.size:
            raise SnapshotCorrupt("snapshot entry is truncated")
        producer_id, epoch, last_append_ms, coordinator_epoch, txn_first_offset, batches_count = (
            _ENTRY_HEAD.unpack_from(body, position)
        )
        position += _ENTRY_HEAD.size
        if len(body) - position < batches_count * _BATCH.size:
            raise SnapshotCorrupt("snapshot batches are truncated")
        if producer_id < 0 or txn_first_offset < NO_TRANSACTION or producer_id in self._entries:
            raise SnapshotCorrupt(f"snapshot entry of producer {producer_id} is invalid")
        entry = self._entry_at_epoch(producer_id, epoch, last_append_ms)
        entry.coordinator_epoch = coordinator_epoch
        entry.txn_first_offset = txn_first_offset
        for _ in range(batches_count):
            entry.batches.append(ProducerBatch(*_BATCH.unpack_from(body, position)))
            position += _BATCH.size
        return position

    def _reopen_transactions(self) -> None:
        """The open-transaction order, from the entries a snapshot restored."""
        self._open_txns = OrderedDict(
            sorted(
                (entry.txn_first_offset, entry.producer_id)
                for entry in self._entries.values()
                if entry.in_transaction
            )
        )
