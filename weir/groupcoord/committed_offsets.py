"""Committed offsets of every group, and their `__consumer_offsets` records.

A pure state machine (no clock, no disk): commits and deletions return the
records the broker must append, in Kafka's own formats, and `replay` rebuilds the
store from those records in log order.

Records (Kafka's group-coordinator message specs):

- key: OffsetCommitKey version 1 (int16 1, group string, topic string,
  partition int32); versions 0 and 1 are read.
- value: OffsetCommitValue version 3 (int16 3, offset int64, leader epoch int32,
  metadata string, commit timestamp int64); versions 0-3 are read (1 adds an
  expire timestamp, 3 the leader epoch). A null value (tombstone) deletes.

Expiry (`offsets.retention.minutes`, default 7 days): the offsets of a group that
has no members expire once it has been empty, and the offset unchanged, for the
retention time. The caller says which groups are empty and since when.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3

GroupRecord = tuple[bytes, bytes | None]


class OffsetRecordError(ValueError):
    """A stored offset record that does not parse."""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


TopicPartition = tuple[str, int]


class OffsetStore:
    def __init__(self) -> None:
        self._groups: dict[str, dict[TopicPartition, CommittedOffset]] = {}

    # -- queries -----------------------------------------------------------

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._groups.get(group_id))

    def fetch(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._groups.get(group_id, {}).get((topic, partition))

    def group_offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        return dict(self._groups.get(group_id, {}))

    # -- changes -------------------------------------------------------------

    def commit(
        self, group_id: str, offsets: Iterable[tuple[str, int, CommittedOffset]]
    ) -> list[GroupRecord]:
        """Store `offsets` (topic, partition, committed) and return their records."""
        records: list[GroupRecord] = []
        stored = self._groups.setdefault(group_id, {})
        for topic, partition, committed in offsets:
            stored[(topic, partition)] = committed
            records.append(
                (encode_offset_key(group_id, topic, partition), encode_offset_value(committed))
            )
        return records

    def delete(self, group_id: str, partitions: Iterable[TopicPartition]) -> list[GroupRecord]:
        """Forget the offsets of `partitions` (OffsetDelete); returns tombstones."""
        stored = self._groups.get(group_id, {})
        records: list[GroupRecord] = []
        for topic, partition in partitions:
            if stored.pop((topic, partition), None) is not None:
                records.append((encode_offset_key(group_id, topic, partition), None))
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

    def replay(self, key: bytes, value: bytes | None) -> bool:
        """Apply one `__consumer_offsets` record; False when it is not an offset
        record (the caller hands it to the group coordinators). Raises
        OffsetRecordError on an offset record that does not parse."""
        decoded = decode_offset_key(key)
        if decoded is None:
            return False
        group_id, topic, partition = decoded
        if value is None:
            self.delete(group_id, [(topic, partition)])
        else:
            self._groups.setdefault(group_id, {})[(topic, partition)] = decode_offset_value(value)
        return True


# -- record formats ------------------------------------------------------------


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def encode_offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return (
        struct.pack(">h", OFFSET_COMMIT_KEY_VERSION)
        + _string(group_id)
        + _string(topic)
        + struct.pack(">i", partition)
    )


def encode_offset_value(committed: CommittedOffset) -> bytes:
    return (
        struct.pack(">hqi", OFFSET_COMMIT_VALUE_VERSION, committed.offset, committed.leader_epoch)
        + _string(committed.metadata)
        + struct.pack(">q", committed.commit_timestamp_ms)
    )


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self._position + size > len(self._data):
            raise OffsetRecordError("offset record is truncated")
        chunk = self._data[self._position : self._position + size]
        self._position += size
        return chunk

    def unpack(self, layout: str) -> tuple[int, ...]:
        return struct.unpack(layout, self.take(struct.calcsize(layout)))

    def string(self) -> str:
        (length,) = self.unpack(">h")
        try:
            return self.take(length).decode()
        except UnicodeDecodeError as exc:
            raise OffsetRecordError("offset record string is not UTF-8") from exc


def decode_offset_key(key: bytes) -> tuple[str, str, int] | None:
    """(group, topic, partition) of an OffsetCommitKey, None for other keys."""
    if len(key) < 2:
        raise OffsetRecordError("record key is shorter than its version")
    (version,) = struct.unpack_from(">h", key)
    if version not in (0, 1):
        return None
    reader = _Reader(key)
    reader.take(2)
    group_id, topic = reader.string(), reader.string()
    (partition,) = reader.unpack(">i")
    return group_id, topic, partition


def decode_offset_value(value: bytes) -> CommittedOffset:
    reader = _Reader(value)
    (version,) = reader.unpack(">h")
    if not 0 <= version <= 3:
        raise OffsetRecordError(f"unknown OffsetCommitValue version {version}")
    (offset,) = reader.unpack(">q")
    leader_epoch = reader.unpack(">i")[0] if version >= 3 else -1
    metadata = reader.string()
    (commit_timestamp_ms,) = reader.unpack(">q")
    return CommittedOffset(offset, leader_epoch, metadata, commit_timestamp_ms)


def offsets_by_topic(
    offsets: dict[TopicPartition, CommittedOffset],
) -> Iterator[tuple[str, list[tuple[int, CommittedOffset]]]]:
    """(topic, [(partition, committed)]) sorted, for building responses."""
    topics: dict[str, list[tuple[int, CommittedOffset]]] = {}
    for (topic, partition), committed in sorted(offsets.items()):
        topics.setdefault(topic, []).append((partition, committed))
    yield from topics.items()
