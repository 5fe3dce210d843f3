"""The hand-written `__consumer_offsets` encoders Weir used before the records were
declared in the schema DSL, kept verbatim in spirit (struct packing, own varints) so
that tests can prove data written by older brokers still decodes, and that today's
encoders write the same bytes."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence

_NO_TAGS = b"\x00"


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _nullable_string(text: str | None) -> bytes:
    return struct.pack(">h", -1) if text is None else _string(text)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if not value:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return _uvarint(0)
    data = text.encode()
    return _uvarint(len(data) + 1) + data


def key(record_type: int, *fields: str) -> bytes:
    return struct.pack(">h", record_type) + b"".join(_string(f) for f in fields)


def offset_value(offset: int, leader_epoch: int, metadata: str, commit_ms: int) -> bytes:
    return (
        struct.pack(">hqi", 3, offset, leader_epoch)
        + _string(metadata)
        + struct.pack(">q", commit_ms)
    )


def group_metadata_value(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    state_ms: int,
    members: Sequence[tuple[str, str | None, str, str, int, int, bytes, bytes]],
) -> bytes:
    out = bytearray(struct.pack(">h", 3) + _string(protocol_type) + struct.pack(">i", generation))
    out += _nullable_string(protocol) + _nullable_string(leader)
    out += struct.pack(">qi", state_ms, len(members))
    for member_id, instance_id, client_id, host, rebalance_ms, session_ms, sub, assign in members:
        out += _string(member_id) + _nullable_string(instance_id)
        out += _string(client_id) + _string(host)
        out += struct.pack(">iii", rebalance_ms, session_ms, len(sub)) + sub
        out += struct.pack(">i", len(assign)) + assign
    return bytes(out)


def epoch_value(epoch: int) -> bytes:
    return struct.pack(">hi", 0, epoch) + _NO_TAGS


def topic_partitions(partitions: Mapping[uuid.UUID, frozenset[int]]) -> bytes:
    out = bytearray(_uvarint(len(partitions) + 1))
    for topic_id in sorted(partitions):
        numbers = sorted(partitions[topic_id])
        out += topic_id.bytes + _uvarint(len(numbers) + 1)
        out += struct.pack(f">{len(numbers)}i", *numbers) + _NO_TAGS
    return bytes(out)


def partition_metadata_value(topics: Mapping[str, tuple[uuid.UUID, int]]) -> bytes:
    out = bytearray(struct.pack(">h", 0) + _uvarint(len(topics) + 1))
    for name in sorted(topics):
        topic_id, count = topics[name]
        out += topic_id.bytes + _compact_string(name) + struct.pack(">i", count)
        out += _uvarint(1) + _NO_TAGS  # no partition racks
    return bytes(out + _NO_TAGS)


def member_metadata_value(
    instance_id: str | None,
    rack_id: str | None,
    client_id: str,
    client_host: str,
    topic_names: Sequence[str],
    regex: str | None,
    rebalance_timeout_ms: int,
    server_assignor: str | None,
) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    out += _compact_string(instance_id) + _compact_string(rack_id)
    out += _compact_string(client_id) + _compact_string(client_host)
    out += _uvarint(len(topic_names) + 1) + b"".join(_compact_string(n) for n in topic_names)
    out += _compact_string(regex) + struct.pack(">i", rebalance_timeout_ms)
    return bytes(out + _compact_string(server_assignor) + _NO_TAGS)


def target_member_value(partitions: Mapping[uuid.UUID, frozenset[int]]) -> bytes:
    return struct.pack(">h", 0) + topic_partitions(partitions) + _NO_TAGS


def current_assignment_value(
    epoch: int,
    previous_epoch: int,
    state: int,
    assigned: Mapping[uuid.UUID, frozenset[int]],
    pending: Mapping[uuid.UUID, frozenset[int]],
) -> bytes:
    head = struct.pack(">hiib", 0, epoch, previous_epoch, state)
    return head + topic_partitions(assigned) + topic_partitions(pending) + _NO_TAGS
