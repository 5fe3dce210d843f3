"""Per-partition idempotent-producer state: sequence checks and duplicate detection.

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

State is rebuilt after a restart from a snapshot (`encode_snapshot`) plus the
batch headers after it (`replay`); entries expire `producer.id.expiration.ms`
after their last append. The table is bounded: past `producers_max` entries the
least recently used one is forgotten (it then counts as unknown, rule 5).

This module is pure: no disk, no clock, no network.
"""

from __future__ import annotations

import struct
from collections import OrderedDict, deque
from dataclasses import dataclass

import crc32c

from weir.format.errors import ErrorCode

NO_PRODUCER_ID = -1
SEQUENCE_MAX = 2**31 - 1
BATCHES_RETAINED_PER_PRODUCER = 5
PRODUCERS_PER_PARTITION_MAX = 50_000

SNAPSHOT_MAGIC = b"WPS1"
_SNAPSHOT_PREFIX = struct.Struct(">4sI")  # magic, crc32c over everything after it
_SNAPSHOT_BODY_HEAD = struct.Struct(">qI")  # snapshot offset, entry count
_ENTRY_HEAD = struct.Struct(">qhqB")  # producer id, epoch, last append ms, batch count
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


class ProducerStateTable:
    def __init__(self, producers_max: int = PRODUCERS_PER_PARTITION_MAX) -> None:
        assert producers_max > 0
        self._producers_max = producers_max
        self._entries: OrderedDict[int, ProducerEntry] = OrderedDict()

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
    ) -> ProducerBatch | PendingBatch:
        """Apply rules 1-5 to one batch. Returns the retained batch for a
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
        return PendingBatch(producer_id, epoch, base_sequence, last_sequence)

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
        if current_last >= 0 and not follows(current_last, first_sequence):
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} sent sequence {first_sequence} after {current_last}",
            )

    def commit(
        self, pending: PendingBatch, first_offset: int, last_offset: int, now_ms: int
    ) -> None:
        """Record a checked batch once it is written at [first_offset, last_offset]."""
        self._record(
            pending.producer_id,
            pending.epoch,
            ProducerBatch(pending.first_sequence, pending.last_sequence, first_offset, last_offset),
            now_ms,
        )

    def replay(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        first_offset: int,
        last_offset: int,
        timestamp_ms: int,
    ) -> None:
        """Rebuild from a batch already in the log (recovery): no checks."""
        if producer_id < 0 or base_sequence < 0:
            return
        last_sequence = last_sequence_of(base_sequence, last_offset - first_offset)
        batch = ProducerBatch(base_sequence, last_sequence, first_offset, last_offset)
        self._record(producer_id, epoch, batch, timestamp_ms)

    def _record(self, producer_id: int, epoch: int, batch: ProducerBatch, now_ms: int) -> None:
        entry = self._entries.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = ProducerEntry(
                producer_id, epoch, now_ms, deque(maxlen=BATCHES_RETAINED_PER_PRODUCER)
            )
            self._entries[producer_id] = entry
        entry.batches.append(batch)
        entry.last_append_ms = max(entry.last_append_ms, now_ms)
        self._entries.move_to_end(producer_id)
        while len(self._entries) > self._producers_max:
            self._entries.popitem(last=False)

    # -- maintenance -----------------------------------------------------

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for longer than `expiration_ms`; returns how many."""
        expired = [
            pid
            for pid, entry in self._entries.items()
            if now_ms - entry.last_append_ms > expiration_ms
        ]
        for pid in expired:
            del self._entries[pid]
        return len(expired)

    def clear(self) -> None:
        self._entries.clear()

    # -- snapshots -------------------------------------------------------

    def encode_snapshot(self, offset: int) -> bytes:
        """The table as of log offset `offset`, with a CRC32C over it."""
        body = bytearray(_SNAPSHOT_BODY_HEAD.pack(offset, len(self._entries)))
        for entry in self._entries.values():
            body += _ENTRY_HEAD.pack(
                entry.producer_id, entry.epoch, entry.last_append_ms, len(entry.batches)
            )
            for batch in entry.batches:
                body += _BATCH.pack(
                    batch.first_sequence, batch.last_sequence, batch.first_offset, batch.last_offset
                )
        return _SNAPSHOT_PREFIX.pack(SNAPSHOT_MAGIC, crc32c.crc32c(body)) + bytes(body)

    @classmethod
    def decode_snapshot(
        cls, data: bytes, producers_max: int = PRODUCERS_PER_PARTITION_MAX
    ) -> tuple[int, ProducerStateTable]:
        """(offset, table) from `encode_snapshot` bytes; raises SnapshotCorrupt."""
        if len(data) < _SNAPSHOT_PREFIX.size + _SNAPSHOT_BODY_HEAD.size:
            raise SnapshotCorrupt("snapshot is truncated")
        magic, crc = _SNAPSHOT_PREFIX.unpack_from(data, 0)
        body = memoryview(data)[_SNAPSHOT_PREFIX.size :]
        if magic != SNAPSHOT_MAGIC or crc32c.crc32c(body) != crc:
            raise SnapshotCorrupt("snapshot magic or CRC32C mismatch")
        offset, count = _SNAPSHOT_BODY_HEAD.unpack_from(body, 0)
        table = cls(producers_max)
        position = _SNAPSHOT_BODY_HEAD.size
        for _ in range(count):
            position = table._decode_entry(body, position)
        if position != len(body):
            raise SnapshotCorrupt("snapshot has trailing bytes")
        return offset, table

    def _decode_entry(self, body: memoryview, position: int) -> int:
        if len(body) - position < _ENTRY_HEAD.size:
            raise SnapshotCorrupt("snapshot entry is truncated")
        producer_id, epoch, last_append_ms, batches_count = _ENTRY_HEAD.unpack_from(body, position)
        position += _ENTRY_HEAD.size
        if len(body) - position < batches_count * _BATCH.size:
            raise SnapshotCorrupt("snapshot batches are truncated")
        for _ in range(batches_count):
            batch = ProducerBatch(*_BATCH.unpack_from(body, position))
            self._record(producer_id, epoch, batch, last_append_ms)
            position += _BATCH.size
        return position
