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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from weir.format.versioned_records import decode_record, encode_record, record_version
from weir.groupcoord.record_schemas import OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE, GroupRecord

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
        self._uncommitted: dict[int, deque[tuple[int, OffsetChange]]] = {}

    # -- queries -----------------------------------------------------------

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def forget(self, group_ids: Iterable[str]) -> None:
        """Drop these groups' offsets from memory (their partition moved to another
        coordinator; the records stay in the log)."""
        doomed = set(group_ids)
        for group_id in doomed:
            self._groups.pop(group_id, None)
            self._committed.pop(group_id, None)
        self._unplaced = {k: v for k, v in self._unplaced.items() if v[1][0] not in doomed}
        for partition, changes in list(self._uncommitted.items()):
            kept = deque((end, c) for end, c in changes if c[0] not in doomed)
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

    # -- the committed view -------------------------------------------------

    def place(self, partition: int, end_offset: int, records: Iterable[GroupRecord]) -> None:
        """These records were appended to log `partition`, ending before `end_offset`:
        the changes they carry join the committed view once that is committed."""
        for record in records:
            entry = self._unplaced.pop(id(record), None)
            if entry is not None and entry[0] is record:
                self._uncommitted.setdefault(partition, deque()).append((end_offset, entry[1]))

    def discard(self, records: Iterable[GroupRecord]) -> None:
        """These records were not written (the append failed): their changes never
        join the committed view."""
        for record in records:
            entry = self._unplaced.get(id(record))
            if entry is not None and entry[0] is record:
                del self._unplaced[id(record)]

    def promote(self, partition: int, committed_end_offset: int) -> None:
        """Everything before `committed_end_offset` in log `partition` is committed:
        its changes join the committed view, in log order."""
        changes = self._uncommitted.get(partition)
        while changes and changes[0][0] <= committed_end_offset:
            _, change = changes.popleft()
            self._apply_committed(change)
        if changes is not None and not changes:
            del self._uncommitted[partition]

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
        stored = self._groups.setdefault(group_id, {})
        for topic, partition, committed in offsets:
            stored[(topic, partition)] = committed
            record = offset_record(group_id, topic, partition, committed)
            self._unplaced[id(record)] = (record, (group_id, (topic, partition), committed))
            records.append(record)
        return records

    def delete(self, group_id: str, partitions: Iterable[TopicPartition]) -> list[GroupRecord]:
        """Forget the offsets of `partitions` (OffsetDelete); returns tombstones."""
        stored = self._groups.get(group_id, {})
        records: list[GroupRecord] = []
        for topic, partition in partitions:
            if stored.pop((topic, partition), None) is not None:
                record = offset_record(group_id, topic, partition, None)
                self._unplaced[id(record)] = (record, (group_id, (topic, partition), None))
                records.append(record)
        if not stored:
            self._groups.pop(group_id, None)
        return records

    def delete_group(self, group_id: str) -> list[GroupRecord]:
        """Forget every offset of the group; returns tombstones."""
        return self.delete(group_id, list(self._groups.get(group_id, {})))

    def expire(
        self,
        now_ms: int,
        retention_ms: int,
        empty_since_ms: Callable[[str], int | None],
    ) -> list[GroupRecord]:
        """Tombstones for the offsets of groups empty (no members) for longer than
        `retention_ms`, counting from the later of the group becoming empty and the
        offset's commit. `empty_since_ms(group)` is None while it has members."""
        records: list[GroupRecord] = []
        for group_id in list(self._groups):
            since_ms = empty_since_ms(group_id)
            if since_ms is None:
                continue
            doomed = [
                tp
                for tp, committed in self._groups[group_id].items()
                if now_ms - max(since_ms, committed.commit_timestamp_ms) > retention_ms
            ]
            records += self.delete(group_id, doomed)
        return records

    # -- loading -----------------------------------------------------------

    def replay(
        self, key: bytes, value: bytes | None, uncommitted: tuple[int, int] | None = None
    ) -> bool:
        """Apply one `__consumer_offsets` record; False when it is not an offset
        record (the caller hands it to the group coordinators). `uncommitted`:
        (log partition, the record's offset + 1) when the record is not committed
        yet (a new leader loads its whole log), so it joins the committed view
        only at `promote`. Raises RecordFormatError on an offset record that does
        not parse."""
        decoded = decode_offset_key(key)
        if decoded is None:
            return False
        group_id, topic, partition = decoded
        committed = None if value is None else decode_offset_value(value)
        if committed is None:
            stored = self._groups.get(group_id, {})
            stored.pop((topic, partition), None)
            if not stored:
                self._groups.pop(group_id, None)
        else:
            self._groups.setdefault(group_id, {})[(topic, partition)] = committed
        change = (group_id, (topic, partition), committed)
        if uncommitted is None:
            self._apply_committed(change)
        else:
            log_partition, end_offset = uncommitted
            self._uncommitted.setdefault(log_partition, deque()).append((end_offset, change))
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
