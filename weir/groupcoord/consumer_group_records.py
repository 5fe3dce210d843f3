"""Kafka's KIP-848 consumer-group records for `__consumer_offsets`, encoded byte-exact.

Keys are non-flexible: an int16 record type (Kafka's "key version") then the fields
with int16-length strings. Values are flexible: an int16 value version (0), compact
strings and arrays (unsigned varint of length + 1), 16-byte uuids and an empty
tagged-field section after every struct. A `None` value is a tombstone.

Record types (Kafka's group-coordinator JSON `validVersions` of each key):
3 ConsumerGroupMetadata, 4 ConsumerGroupPartitionMetadata, 5 ConsumerGroupMemberMetadata,
6 ConsumerGroupTargetAssignmentMetadata, 7 ConsumerGroupTargetAssignmentMember,
8 ConsumerGroupCurrentMemberAssignment.

Decoding is here too, so that a loader can replay what was written.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

GroupRecord = tuple[bytes, bytes | None]  # (key, value); a None value is a tombstone

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_RECORD_TYPES = frozenset(range(3, 9))

VALUE_VERSION = 0
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT8 = struct.Struct(">b")

Partitions = Mapping[uuid.UUID, frozenset[int]]


# ---- encoding --------------------------------------------------------------------------


def _key(record_type: int, *fields: str) -> bytes:
    out = bytearray(_INT16.pack(record_type))
    for text in fields:
        data = text.encode()
        out += _INT16.pack(len(data))
        out += data
    return bytes(out)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return _uvarint(0)
    data = text.encode()
    return _uvarint(len(data) + 1) + data


def _compact_len(count: int) -> bytes:
    return _uvarint(count + 1)


_NO_TAGS = _uvarint(0)


def _topic_partitions(partitions: Partitions) -> bytes:
    out = bytearray(_compact_len(len(partitions)))
    for topic_id in sorted(partitions):
        out += topic_id.bytes
        ps = sorted(partitions[topic_id])
        out += _compact_len(len(ps))
        for p in ps:
            out += _INT32.pack(p)
        out += _NO_TAGS
    return bytes(out)


def group_epoch_record(group_id: str, epoch: int) -> GroupRecord:
    value = _INT16.pack(VALUE_VERSION) + _INT32.pack(epoch) + _NO_TAGS
    return _key(GROUP_METADATA, group_id), value


def group_tombstone(group_id: str) -> GroupRecord:
    return _key(GROUP_METADATA, group_id), None


def partition_metadata_record(
    group_id: str, topics: Mapping[str, tuple[uuid.UUID, int]]
) -> GroupRecord:
    out = bytearray(_INT16.pack(VALUE_VERSION))
    out += _compact_len(len(topics))
    for name in sorted(topics):
        topic_id, count = topics[name]
        out += topic_id.bytes + _compact_string(name) + _INT32.pack(count)
        out += _compact_len(0)  # PartitionMetadata: racks are not tracked
        out += _NO_TAGS
    out += _NO_TAGS
    return _key(PARTITION_METADATA, group_id), bytes(out)


def partition_metadata_tombstone(group_id: str) -> GroupRecord:
    return _key(PARTITION_METADATA, group_id), None


@dataclass(frozen=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


def member_metadata_record(group_id: str, member_id: str, m: MemberMetadata) -> GroupRecord:
    out = bytearray(_INT16.pack(VALUE_VERSION))
    out += _compact_string(m.instance_id) + _compact_string(m.rack_id)
    out += _compact_string(m.client_id) + _compact_string(m.client_host)
    out += _compact_len(len(m.subscribed_topic_names))
    for name in m.subscribed_topic_names:
        out += _compact_string(name)
    out += _compact_string(m.subscribed_topic_regex)
    out += _INT32.pack(m.rebalance_timeout_ms)
    out += _compact_string(m.server_assignor)
    out += _NO_TAGS
    return _key(MEMBER_METADATA, group_id, member_id), bytes(out)


def member_metadata_tombstone(group_id: str, member_id: str) -> GroupRecord:
    return _key(MEMBER_METADATA, group_id, member_id), None


def target_assignment_epoch_record(group_id: str, epoch: int) -> GroupRecord:
    value = _INT16.pack(VALUE_VERSION) + _INT32.pack(epoch) + _NO_TAGS
    return _key(TARGET_ASSIGNMENT_METADATA, group_id), value


def target_assignment_epoch_tombstone(group_id: str) -> GroupRecord:
    return _key(TARGET_ASSIGNMENT_METADATA, group_id), None


def target_assignment_member_record(
    group_id: str, member_id: str, partitions: Partitions
) -> GroupRecord:
    value = _INT16.pack(VALUE_VERSION) + _topic_partitions(partitions) + _NO_TAGS
    return _key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), value


def target_assignment_member_tombstone(group_id: str, member_id: str) -> GroupRecord:
    return _key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None


@dataclass(frozen=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Partitions
    pending_revocation: Partitions


def current_assignment_record(group_id: str, member_id: str, c: CurrentAssignment) -> GroupRecord:
    out = bytearray(_INT16.pack(VALUE_VERSION))
    out += _INT32.pack(c.member_epoch) + _INT32.pack(c.previous_member_epoch)
    out += _INT8.pack(c.state)
    out += _topic_partitions(c.assigned) + _topic_partitions(c.pending_revocation)
    out += _NO_TAGS
    return _key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), bytes(out)


def current_assignment_tombstone(group_id: str, member_id: str) -> GroupRecord:
    return _key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None


# ---- decoding --------------------------------------------------------------------------


class RecordFormatError(ValueError):
    """A consumer-group record that does not parse."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("truncated record")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return int(_INT8.unpack(self.take(1))[0])

    def int16(self) -> int:
        return int(_INT16.unpack(self.take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self.take(4))[0])

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
        return self.take(self.int16()).decode()

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def compact_count(self) -> int:
        n = self.uvarint() - 1
        if n < 0 or n > len(self.data) - self.pos:
            raise RecordFormatError("bad array length")
        return n

    def read_uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def topic_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        result: dict[uuid.UUID, frozenset[int]] = {}
        for _ in range(self.compact_count()):
            topic_id = self.read_uuid()
            result[topic_id] = frozenset(self.int32() for _ in range(self.compact_count()))
            self.skip_tags()
        return result


def decode_key(key: bytes) -> tuple[int, tuple[str, ...]] | None:
    """(record type, key strings) of a consumer-group key, or None for other record types."""
    r = _Reader(key)
    record_type = r.int16()
    if record_type not in CONSUMER_GROUP_RECORD_TYPES:
        return None
    group_keyed = (GROUP_METADATA, PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA)
    count = 1 if record_type in group_keyed else 2
    return record_type, tuple(r.string() for _ in range(count))


def decode_epoch(value: bytes) -> int:
    r = _Reader(value)
    r.int16()
    return r.int32()


def decode_partition_metadata(value: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    r = _Reader(value)
    r.int16()
    topics: dict[str, tuple[uuid.UUID, int]] = {}
    for _ in range(r.compact_count()):
        topic_id = r.read_uuid()
        name = r.compact_string() or ""
        count = r.int32()
        for _ in range(r.compact_count()):
            r.int32()
            for _ in range(r.compact_count()):
                r.compact_string()
            r.skip_tags()
        r.skip_tags()
        topics[name] = (topic_id, count)
    return topics


def decode_member_metadata(value: bytes) -> MemberMetadata:
    r = _Reader(value)
    r.int16()
    instance_id = r.compact_string()
    rack_id = r.compact_string()
    client_id = r.compact_string() or ""
    client_host = r.compact_string() or ""
    names: Sequence[str] = tuple(r.compact_string() or "" for _ in range(r.compact_count()))
    regex = r.compact_string()
    rebalance_timeout_ms = r.int32()
    server_assignor = r.compact_string()
    return MemberMetadata(
        instance_id,
        rack_id,
        client_id,
        client_host,
        tuple(names),
        regex,
        rebalance_timeout_ms,
        server_assignor,
    )


def decode_target_assignment_member(value: bytes) -> dict[uuid.UUID, frozenset[int]]:
    r = _Reader(value)
    r.int16()
    return r.topic_partitions()


def decode_current_assignment(value: bytes) -> CurrentAssignment:
    r = _Reader(value)
    r.int16()
    epoch = r.int32()
    previous = r.int32()
    state = r.int8()
    assigned = r.topic_partitions()
    pending = r.topic_partitions()
    return CurrentAssignment(epoch, previous, state, assigned, pending)
