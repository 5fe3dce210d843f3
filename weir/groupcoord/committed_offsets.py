"""Committed offsets of every group, and their `__consumer_offsets` records.

A pure state machine (no clock, no disk): commits and deletions return the
records the broker must append, in Kafka's own formats, and `replay` rebuilds the
store from those records in log order.

Records (Kafka's group-coordinator message specs):

- key: OffsetCommitKey version 1 (int16 1, group string, topic string,
  partition int32); versions 0 and 1 are read.
- value: OffsetCommitValue version 3 (int16 3, offset int64, leader epoch int32,
  metadata string, commit timestamp int64); versions 0-4 are read (1 adds an
  expire timestamp, 3 the leader epoch, 4 is flexible). A null value (tombstone)
  deletes. Both are declared in `weir.groupcoord.record_schemas`.

Expiry (`offsets.retention.minutes`, default 7 days): the offsets of a group that
has no members expire once it has been empty, and the offset unchanged, for the
retention time. The caller says which groups are empty and since when.

Two views (Kafka's coordinator reads at the log's last committed offset too):

- the latest: every change as soon as it is made; the coordinator's decisions
  (what to delete, what expired, whether a group still has offsets) use it;
- the committed one: what OffsetFetch and the group views answer. A change joins
  it once its record is committed (durable on a single node, below the high
  watermark in a cluster), so a reader never sees an offset that a failover can
  take back. The broker says where each change's record was appended (`place`,
  by the record itself: other appends may come between a change and its own)
  and how far a partition is committed (`promote`).

Transactional offsets (TxnOffsetCommit) are pending until their transaction's
marker (`weir.groupcoord.txn_offsets`): in neither view, they enter the latest
one at the COMMIT marker (`end_transaction`), placed by the marker, so readers
see them once the marker is committed; `is_unstable` says which partitions a
require_stable OffsetFetch must not answer yet.
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from weir.format.versioned_records import decode_record, encode_record, record_version
from weir.groupcoord.record_schemas import OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE, GroupRecord
from weir.groupcoord.txn_offsets import PendingOffset, PendingTxnOffsets

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


TopicPartition = tuple[str, int]
# A change of one group's offset: (group, (topic, partition), the new value or None
# for a deletion).
OffsetChange = tuple[str, TopicPartition, CommittedOffset | None]
# A change waiting in its log partition for the high watermark: the offset that ends
# its record, the change, and whether a transaction's COMMIT marker made it.
Uncommitted = tuple[int, OffsetChange, bool]
NO_PRODUCER_ID = -1


@dataclass(frozen=True, slots=True)
class _UnplacedTxnOffset:
    """A TxnOffsetCommit's record not yet appended, and the pending offset of the
    same producer and partition it replaced (restored if the append fails)."""

    record: GroupRecord
    producer_id: int
    group_id: str
    topic_partition: TopicPartition
    written: PendingOffset[CommittedOffset]
    replaced: PendingOffset[CommittedOffset] | None


class OffsetStore:
    def __init__(self) -> None:
        self._groups: dict[str, dict[TopicPartition, CommittedOffset]] = {}  # latest
        self._committed: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        # Changes made but not yet appended, by the identity of the record that
        # carries each (kept alive here): `place` gives them their log position once
        # that very record is appended, whatever else was appended meanwhile.
        self._unplaced: dict[int, tuple[GroupRecord, OffsetChange]] = {}
        # Per log partition: changes appended, with the offset that ends their
        # records, in log order, waiting to be committed (`promote`).
        self._uncommitted: dict[int, deque[Uncommitted]] = {}
        # Transactions' offsets waiting for their marker, and the TxnOffsetCommit
        # records not yet appended (by identity: a failed append drops their offsets).
        self._pending: PendingTxnOffsets[CommittedOffset] = PendingTxnOffsets()
        self._unplaced_txn: dict[int, _UnplacedTxnOffset] = {}
        # The order of the change that set each latest offset (a counter over every
        # change, in log order when loading): a committed transaction's offset
        # replaces only an offset set before its own record.
        self._orders: dict[tuple[str, TopicPartition], int] = {}
        self._next_order = 0
        # Offsets a COMMIT marker set, per (group, partition), until committed.
        self._txn_uncommitted: dict[tuple[str, TopicPartition], int] = {}

    # -- queries -----------------------------------------------------------

    def groups(self) -> list[str]:
        """The groups with offsets, or with offsets pending in a transaction."""
        return sorted(set(self._groups) | self._pending.groups())

    def forget(self, group_ids: Iterable[str]) -> None:
        """Drop these groups' offsets from memory (their partition moved to another
        coordinator; the records stay in the log)."""
        doomed = set(group_ids)
        for group_id in doomed:
            self._groups.pop(group_id, None)
            self._committed.pop(group_id, None)
        self._unplaced = {k: v for k, v in self._unplaced.items() if v[1][0] not in doomed}
        self._unplaced_txn = {
            k: v for k, v in self._unplaced_txn.items() if v.group_id not in doomed
        }
        self._pending.forget(doomed)
        self._orders = {k: v for k, v in self._orders.items() if k[0] not in doomed}
        self._txn_uncommitted = {
            k: v for k, v in self._txn_uncommitted.items() if k[0] not in doomed
        }
        for partition, changes in list(self._uncommitted.items()):
            kept = deque(entry for entry in changes if entry[1][0] not in doomed)
            if kept:
                self._uncommitted[partition] = kept
            else:
                del self._uncommitted[partition]

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._groups.get(group_id))

    def fetch(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._groups.get(group_id, {}).get((topic, partition))

    def group_offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """The latest offsets, committed to the log or not (for decisions)."""
        return dict(self._groups.get(group_id, {}))

    def committed_group_offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """The offsets whose records are committed (what readers are answered)."""
        return dict(self._committed.get(group_id, {}))

    def committed_groups(self) -> list[str]:
        return sorted(self._committed)

    def uncommitted_count(self) -> int:
        return len(self._unplaced) + sum(len(c) for c in self._uncommitted.values())

    # -- transactions: queries ------------------------------------------------

    def has_pending_transaction(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of this partition."""
        return self._pending.has(group_id, (topic, partition))

    def has_open_transactions(self, group_id: str) -> bool:
        """Whether an open transaction holds offsets of the group (Kafka keeps such a
        group, and those partitions' offsets, from expiring)."""
        return self._pending.has_group(group_id)

    def is_unstable(self, group_id: str, topic: str, partition: int) -> bool:
        """What OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for: an
        offset pending in an open transaction, or one a COMMIT marker set that is not
        committed yet (call `promote` first)."""
        key = (group_id, (topic, partition))
        return key in self._txn_uncommitted or self._pending.has(group_id, key[1])

    def pending_producers(self) -> list[int]:
        """The producer ids with transactional offsets waiting for their marker."""
        return self._pending.producers()

    # -- the committed view -------------------------------------------------

    def place(self, partition: int, end_offset: int, records: Iterable[GroupRecord]) -> None:
        """These records were appended to log `partition`, ending before `end_offset`:
        the changes they carry join the committed view once that is committed."""
        for record in records:
            entry = self._unplaced.pop(id(record), None)
            if entry is not None and entry[0] is record:
                self._queue(partition, end_offset, entry[1])
            txn_entry = self._unplaced_txn.get(id(record))
            if txn_entry is not None and txn_entry.record is record:
                del self._unplaced_txn[id(record)]  # pending until its marker

    def discard(self, records: Iterable[GroupRecord]) -> None:
        """These records were not written (the append failed): their changes never
        join the committed view, and transactional offsets they carry are dropped."""
        for record in records:
            entry = self._unplaced.get(id(record))
            if entry is not None and entry[0] is record:
                del self._unplaced[id(record)]
            txn_entry = self._unplaced_txn.get(id(record))
            if txn_entry is not None and txn_entry.record is record:
                del self._unplaced_txn[id(record)]
                self._pending.undo(
                    txn_entry.producer_id,
                    txn_entry.group_id,
                    txn_entry.topic_partition,
                    txn_entry.written,
                    txn_entry.replaced,
                )

    def promote(self, partition: int, committed_end_offset: int) -> None:
        """Everything before `committed_end_offset` in log `partition` is committed:
        its changes join the committed view, in log order."""
        changes = self._uncommitted.get(partition)
        while changes and changes[0][0] <= committed_end_offset:
            _, change, from_txn = changes.popleft()
            self._apply_committed(change)
            if from_txn:
                self._txn_committed(change)
        if changes is not None and not changes:
            del self._uncommitted[partition]

    def _queue(
        self, partition: int, end_offset: int, change: OffsetChange, from_txn: bool = False
    ) -> None:
        """Wait for `end_offset` to be committed; kept in log order (a marker is
        placed after records appended before it was reported)."""
        changes = self._uncommitted.setdefault(partition, deque())
        entry = (end_offset, change, from_txn)
        if not changes or changes[-1][0] <= end_offset:
            changes.append(entry)
        else:
            insort(changes, entry, key=lambda e: e[0])
        if from_txn:
            key = (change[0], change[1])
            self._txn_uncommitted[key] = self._txn_uncommitted.get(key, 0) + 1

    def _txn_committed(self, change: OffsetChange) -> None:
        key = (change[0], change[1])
        left = self._txn_uncommitted.get(key, 0) - 1
        if left > 0:
            self._txn_uncommitted[key] = left
        else:
            self._txn_uncommitted.pop(key, None)

    def _apply_committed(self, change: OffsetChange) -> None:
        group_id, topic_partition, committed = change
        if committed is not None:
            self._committed.setdefault(group_id, {})[topic_partition] = committed
            return
        stored = self._committed.get(group_id)
        if stored is not None:
            stored.pop(topic_partition, None)
            if not stored:
                del self._committed[group_id]

    # -- changes -------------------------------------------------------------

    def commit(
        self, group_id: str, offsets: Iterable[tuple[str, int, CommittedOffset]]
    ) -> list[GroupRecord]:
        """Store `offsets` (topic, partition, committed) and return their records."""
        records: list[GroupRecord] = []
        for topic, partition, committed in offsets:
            self._set_latest(group_id, (topic, partition), committed)
            record = offset_record(group_id, topic, partition, committed)
            self._unplaced[id(record)] = (record, (group_id, (topic, partition), committed))
            records.append(record)
        return records

    def delete(self, group_id: str, partitions: Iterable[TopicPartition]) -> list[GroupRecord]:
        """Forget the offsets of `partitions` (OffsetDelete), those pending in open
        transactions too (as Kafka's tombstone does); returns tombstones."""
        records: list[GroupRecord] = []
        for topic, partition in partitions:
            stored = self._groups.get(group_id, {}).get((topic, partition))
            pending = self._pending.has(group_id, (topic, partition))
            if stored is None and not pending:
                continue
            self._set_latest(group_id, (topic, partition), None)
            self._pending.drop_partition(group_id, (topic, partition))
            record = offset_record(group_id, topic, partition, None)
            self._unplaced[id(record)] = (record, (group_id, (topic, partition), None))
            records.append(record)
        return records

    def delete_group(self, group_id: str) -> list[GroupRecord]:
        """Forget every offset of the group, pending ones included; returns tombstones."""
        partitions = set(self._groups.get(group_id, {})) | self._pending.partitions(group_id)
        return self.delete(group_id, sorted(partitions))

    def expire(
        self,
        now_ms: int,
        retention_ms: int,
        empty_since_ms: Callable[[str], int | None],
    ) -> list[GroupRecord]:
        """Tombstones for the offsets of groups empty (no members) for longer than
        `retention_ms`, counting from the later of the group becoming empty and the
        offset's commit. `empty_since_ms(group)` is None while it has members. An
        offset with a transaction's offset pending for its partition stays."""
        records: list[GroupRecord] = []
        for group_id in list(self._groups):
            since_ms = empty_since_ms(group_id)
            if since_ms is None:
                continue
            doomed = [
                tp
                for tp, committed in self._groups[group_id].items()
                if now_ms - max(since_ms, committed.commit_timestamp_ms) > retention_ms
                and not self._pending.has(group_id, tp)
            ]
            records += self.delete(group_id, doomed)
        return records

    def _set_latest(
        self, group_id: str, topic_partition: TopicPartition, committed: CommittedOffset | None
    ) -> None:
        if committed is None:
            stored = self._groups.get(group_id, {})
            stored.pop(topic_partition, None)
            if not stored:
                self._groups.pop(group_id, None)
            self._orders.pop((group_id, topic_partition), None)
            return
        self._groups.setdefault(group_id, {})[topic_partition] = committed
        self._orders[(group_id, topic_partition)] = self._take_order()

    def _take_order(self) -> int:
        self._next_order += 1
        return self._next_order

    # -- transactions ----------------------------------------------------------

    def commit_transactional(
        self,
        producer_id: int,
        group_id: str,
        offsets: Iterable[tuple[str, int, CommittedOffset]],
    ) -> list[GroupRecord]:
        """Hold `offsets` pending in producer `producer_id`'s transaction (TxnOffsetCommit)
        and return their records, to be appended in a transactional batch of that
        producer. They enter neither view until `end_transaction`."""
        records: list[GroupRecord] = []
        for topic, partition, committed in offsets:
            written = PendingOffset(committed, self._take_order())
            replaced = self._pending.get(producer_id, group_id, (topic, partition))
            self._pending.add(producer_id, group_id, (topic, partition), written)
            record = offset_record(group_id, topic, partition, committed)
            self._unplaced_txn[id(record)] = _UnplacedTxnOffset(
                record, producer_id, group_id, (topic, partition), written, replaced
            )
            records.append(record)
        return records

    def end_transaction(
        self,
        producer_id: int,
        commit: bool,
        belongs: Callable[[str], bool],
        log_partition: int,
        end_offset: int | None,
    ) -> int:
        """The transaction of `producer_id` ended: its marker was written to log
        `log_partition`, ending before `end_offset` (None: the marker is already
        committed, as when loading below the high watermark). Applies to the
        groups `belongs` accepts (those of that log partition). COMMIT: each pending
        offset becomes the group's, unless a change after its own record set the
        partition's offset (Kafka keeps the most recent); readers see it once the
        marker is committed. ABORT: they are dropped. Returns how many offsets
        the commit set."""
        taken = self._pending.take(producer_id, belongs)
        if not commit:
            return 0
        applied = 0
        for group_id, offsets in taken.items():
            for topic_partition, pending in sorted(offsets.items()):
                current = self._orders.get((group_id, topic_partition))
                if current is not None and current > pending.order:
                    continue
                self._groups.setdefault(group_id, {})[topic_partition] = pending.committed
                self._orders[(group_id, topic_partition)] = pending.order
                change = (group_id, topic_partition, pending.committed)
                if end_offset is None:
                    self._apply_committed(change)
                else:
                    self._queue(log_partition, end_offset, change, from_txn=True)
                applied += 1
        return applied

    # -- loading -----------------------------------------------------------

    def replay(
        self,
        key: bytes,
        value: bytes | None,
        uncommitted: tuple[int, int] | None = None,
        producer_id: int = NO_PRODUCER_ID,
    ) -> bool:
        """Apply one `__consumer_offsets` record; False when it is not an offset
        record (the caller hands it to the group coordinators). `uncommitted`:
        (log partition, the record's offset + 1) when the record is not committed
        yet (a new leader loads its whole log), so it joins the committed view
        only at `promote`. `producer_id`: the producer of the transactional batch
        holding the record (its offset is pending until the marker, read back with
        `end_transaction`). Raises RecordFormatError on an offset record that does
        not parse."""
        decoded = decode_offset_key(key)
        if decoded is None:
            return False
        group_id, topic, partition = decoded
        committed = None if value is None else decode_offset_value(value)
        if committed is not None and producer_id != NO_PRODUCER_ID:
            pending = PendingOffset(committed, self._take_order())
            self._pending.add(producer_id, group_id, (topic, partition), pending)
            return True
        self._set_latest(group_id, (topic, partition), committed)
        if committed is None:
            self._pending.drop_partition(group_id, (topic, partition))
        change = (group_id, (topic, partition), committed)
        if uncommitted is None:
            self._apply_committed(change)
        else:
            log_partition, end_offset = uncommitted
            self._queue(log_partition, end_offset, change)
        return True


# -- record formats ------------------------------------------------------------


def encode_offset_key(group_id: str, topic: str, partition: int) -> bytes:
    body = {"group": group_id, "topic": topic, "partition": partition}
    return encode_record(OFFSET_COMMIT_KEY, OFFSET_COMMIT_KEY_VERSION, body)


def encode_offset_value(committed: CommittedOffset) -> bytes:
    body = {
        "offset": committed.offset,
        "leader_epoch": committed.leader_epoch,
        "metadata": committed.metadata,
        "commit_timestamp": committed.commit_timestamp_ms,
    }
    return encode_record(OFFSET_COMMIT_VALUE, OFFSET_COMMIT_VALUE_VERSION, body)


def offset_record(
    group_id: str, topic: str, partition: int, committed: CommittedOffset | None
) -> GroupRecord:
    """The record of a commit, or with None its tombstone."""
    key = encode_offset_key(group_id, topic, partition)
    return GroupRecord(group_id, key, None if committed is None else encode_offset_value(committed))


def decode_offset_key(key: bytes) -> tuple[str, str, int] | None:
    """(group, topic, partition) of an OffsetCommitKey, None for other keys."""
    if record_version(key) not in OFFSET_COMMIT_KEY.valid:
        return None
    _, body = decode_record(OFFSET_COMMIT_KEY, key)
    return body["group"], body["topic"], body["partition"]


def decode_offset_value(value: bytes) -> CommittedOffset:
    _, body = decode_record(OFFSET_COMMIT_VALUE, value)
    leader_epoch = body.get("leader_epoch", -1)  # v3+
    return CommittedOffset(body["offset"], leader_epoch, body["metadata"], body["commit_timestamp"])


def offsets_by_topic(
    offsets: dict[TopicPartition, CommittedOffset],
) -> Iterator[tuple[str, list[tuple[int, CommittedOffset]]]]:
    """(topic, [(partition, committed)]) sorted, for building responses."""
    topics: dict[str, list[tuple[int, CommittedOffset]]] = {}
    for (topic, partition), committed in sorted(offsets.items()):
        topics.setdefault(topic, []).append((partition, committed))
    yield from topics.items()
