"""Kafka's classic-group record for `__consumer_offsets`, byte-exact: GroupMetadata.

A record is a `(key, value)` pair of bytes (`GroupRecord`); a `None` value is a
tombstone. Every key starts with an int16 *key version* that says what the record is:
0 and 1 are offset commits (`committed_offsets`), 2 is GroupMetadata (here), 3-8 are
KIP-848 records (`consumer_group_records`).

- GroupMetadataKey version 2: int16 2, group (string).
- GroupMetadataValue version 3 (written; versions 0-3 read): int16 version, protocol
  type (string), generation (int32), protocol (nullable string), leader (nullable
  string), current state timestamp (int64, v2+), members (int32 count) of: member id,
  group instance id (nullable, v3+), client id, client host, rebalance timeout (int32,
  v1+), session timeout (int32), subscription (bytes), assignment (bytes).

Strings are int16-length UTF-8 (-1 for null), bytes int32-length: Kafka's non-flexible
encoding of these versions.

Public API:

- `group_metadata_record(group_id, GroupMetadataValue) -> GroupRecord`
- `group_metadata_tombstone(group_id) -> GroupRecord`
- `decode_group_metadata_key(key) -> str | None` (None: another record type)
- `decode_group_metadata_value(value) -> GroupMetadataValue`

Malformed bytes raise `RecordFormatError`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from weir.groupcoord.consumer_group_records import GroupRecord

GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """Bytes that are not a well-formed record of a known version."""


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


def _group_metadata_key(group_id: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + _string(group_id)


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

    def bytes_(self) -> bytes:
        length = self.int32()
        return b"" if length == -1 else self.take(length)

    def end(self) -> None:
        if self._pos != len(self._data):
            raise RecordFormatError("trailing bytes after record")

    @staticmethod
    def _decode(data: bytes) -> str:
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError("string is not UTF-8") from exc


def decode_group_metadata_key(key: bytes) -> str | None:
    """The group id of a GroupMetadataKey, or None for other record types."""
    r = _Reader(key)
    if r.int16() != GROUP_METADATA_KEY_VERSION:
        return None
    group_id = r.string()
    r.end()
    return group_id


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
