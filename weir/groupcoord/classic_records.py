"""Kafka's classic-group and offset-commit records for `__consumer_offsets`, byte-exact.

A record is a `(key, value)` pair of bytes (`GroupRecord`); a `None` value is a
tombstone. Every key starts with an int16 *key version* that says what the record is:

| key version | key fields                                  | value written            |
|-------------|---------------------------------------------|--------------------------|
| 0, 1        | group (string), topic (string), partition (int32) | OffsetCommitValue v3 |
| 2           | group (string)                              | GroupMetadataValue v3    |
| 3..8        | KIP-848 records (see `consumer_group_records`) | -                     |

Strings are int16-length UTF-8, nullable strings use length -1, bytes are int32-length,
arrays int32-count: these value versions are Kafka's non-flexible ones. Values start with
an int16 value version. Weir writes key version 1 for offsets (as Kafka does), and reads
OffsetCommitValue v0-v4 and GroupMetadataValue v0-v3 so that a log written by any Kafka
broker since 0.9 replays.

Public API:

- `offset_commit_record(group_id, topic, partition, offset) -> GroupRecord`
- `offset_commit_tombstone(group_id, topic, partition) -> GroupRecord`
- `group_metadata_record(group_id, value) -> GroupRecord`
- `group_metadata_tombstone(group_id) -> GroupRecord`
- `decode_key(key) -> OffsetCommitKey | GroupMetadataKey | None` (None: not a classic
  record, e.g. a KIP-848 one)
- `decode_offset_commit_value(value) -> CommittedOffset`
- `decode_group_metadata_value(value) -> GroupMetadataValue`

Malformed bytes raise `RecordFormatError`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from weir.groupcoord.consumer_group_records import GroupRecord
from weir.groupcoord.offsets import CommittedOffset

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """Bytes that are not a well-formed record of a known version."""


@dataclass(frozen=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True)
class MemberRecord:
    """One member as stored in GroupMetadataValue (its metadata for the chosen protocol)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int  # -1: unknown
    members: Sequence[MemberRecord]


# ---- encoding --------------------------------------------------------------------------


def _string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


def _nullable_string(text: str | None) -> bytes:
    return _INT16.pack(-1) if text is None else _string(text)


def _bytes(data: bytes) -> bytes:
    return _INT32.pack(len(data)) + data


def _offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    return (
        _INT16.pack(OFFSET_COMMIT_KEY_VERSION)
        + _string(group_id)
        + _string(topic)
        + _INT32.pack(partition)
    )


def _group_metadata_key(group_id: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + _string(group_id)


def offset_commit_record(
    group_id: str, topic: str, partition: int, offset: CommittedOffset
) -> GroupRecord:
    value = (
        _INT16.pack(OFFSET_COMMIT_VALUE_VERSION)
        + _INT64.pack(offset.offset)
        + _INT32.pack(offset.leader_epoch)
        + _string(offset.metadata)
        + _INT64.pack(offset.commit_timestamp_ms)
    )
    return _offset_commit_key(group_id, topic, partition), value


def offset_commit_tombstone(group_id: str, topic: str, partition: int) -> GroupRecord:
    return _offset_commit_key(group_id, topic, partition), None


def _member(m: MemberRecord) -> bytes:
    return b"".join(
        (
            _string(m.member_id),
            _nullable_string(m.group_instance_id),
            _string(m.client_id),
            _string(m.client_host),
            _INT32.pack(m.rebalance_timeout_ms),
            _INT32.pack(m.session_timeout_ms),
            _bytes(m.subscription),
            _bytes(m.assignment),
        )
    )


def group_metadata_record(group_id: str, value: GroupMetadataValue) -> GroupRecord:
    out = bytearray(_INT16.pack(GROUP_METADATA_VALUE_VERSION))
    out += _string(value.protocol_type)
    out += _INT32.pack(value.generation)
    out += _nullable_string(value.protocol)
    out += _nullable_string(value.leader)
    out += _INT64.pack(value.current_state_timestamp_ms)
    out += _INT32.pack(len(value.members))
    for m in value.members:
        out += _member(m)
    return _group_metadata_key(group_id), bytes(out)


def group_metadata_tombstone(group_id: str) -> GroupRecord:
    return _group_metadata_key(group_id), None


# ---- decoding --------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise RecordFormatError("record truncated")
        out = bytes(self._data[self._pos : self._pos + n])
        self._pos += n
        return out

    def int16(self) -> int:
        value: int = _INT16.unpack(self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self.take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _INT64.unpack(self.take(8))[0]
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RecordFormatError("varint too long")

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise RecordFormatError("null where a string is required")
        return text

    def nullable_string(self) -> str | None:
        length = self.int16()
        if length == -1:
            return None
        return self._decode(self.take(length))

    def compact_string(self) -> str:
        length = self.uvarint() - 1
        if length < 0:
            raise RecordFormatError("null where a string is required")
        return self._decode(self.take(length))

    def bytes_(self) -> bytes:
        length = self.int32()
        return b"" if length == -1 else self.take(length)

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def end(self) -> None:
        if self._pos != len(self._data):
            raise RecordFormatError("trailing bytes after record")

    @staticmethod
    def _decode(data: bytes) -> str:
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError("string is not UTF-8") from exc


def decode_key(key: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The classic record a key names, or None for other record types (KIP-848)."""
    r = _Reader(key)
    version = r.int16()
    if version in (0, 1):
        out: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(r.string(), r.string(), r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        out = GroupMetadataKey(r.string())
    else:
        return None
    r.end()
    return out


def decode_offset_commit_value(value: bytes) -> CommittedOffset:
    r = _Reader(value)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.compact_string() if version >= 4 else r.string()
    commit_timestamp_ms = r.int64()
    expire_timestamp_ms = r.int64() if version == 1 else -1
    if version >= 4:
        r.skip_tags()
    r.end()
    return CommittedOffset(offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms)


def _decode_member(r: _Reader, version: int) -> MemberRecord:
    member_id = r.string()
    group_instance_id = r.nullable_string() if version >= 3 else None
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout_ms = r.int32() if version >= 1 else -1
    session_timeout_ms = r.int32()
    if rebalance_timeout_ms == -1:
        rebalance_timeout_ms = session_timeout_ms
    return MemberRecord(
        member_id,
        group_instance_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        r.bytes_(),
        r.bytes_(),
    )


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    r = _Reader(value)
    version = r.int16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp_ms = r.int64() if version >= 2 else -1
    count = r.int32()
    if count < 0 or count > len(value):
        raise RecordFormatError(f"bad member count {count}")
    members = [_decode_member(r, version) for _ in range(count)]
    r.end()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp_ms, members
    )
