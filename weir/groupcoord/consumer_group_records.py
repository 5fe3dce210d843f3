"""Kafka's KIP-848 consumer-group records for `__consumer_offsets`, encoded byte-exact.

Keys are non-flexible: an int16 record type (Kafka's "key version") then the fields
with int16-length strings. Values are flexible: an int16 value version (0), compact
strings and arrays (unsigned varint of length + 1), 16-byte uuids and an empty
tagged-field section after every struct. A `None` value is a tombstone.

Record types (Kafka's group-coordinator JSON `validVersions` of each key):
3 ConsumerGroupMetadata, 4 ConsumerGroupPartitionMetadata, 5 ConsumerGroupMemberMetadata,
6 ConsumerGroupTargetAssignmentMetadata, 7 ConsumerGroupTargetAssignmentMember,
8 ConsumerGroupCurrentMemberAssignment.

Declared in `weir.groupcoord.record_schemas`; decoding is here too, so that a loader
can replay what was written. Malformed bytes raise `RecordFormatError`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weir.format.schema import Message
from weir.format.versioned_records import (
    RecordFormatError,
    decode_record,
    encode_record,
    record_version,
)
from weir.groupcoord import record_schemas as schemas
from weir.groupcoord.record_schemas import GroupRecord

__all__ = [
    "CONSUMER_GROUP_RECORD_TYPES",
    "CURRENT_MEMBER_ASSIGNMENT",
    "GROUP_METADATA",
    "MEMBER_METADATA",
    "PARTITION_METADATA",
    "TARGET_ASSIGNMENT_MEMBER",
    "TARGET_ASSIGNMENT_METADATA",
    "CurrentAssignment",
    "GroupRecord",
    "MemberMetadata",
    "RecordFormatError",
]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_RECORD_TYPES = frozenset(range(3, 9))

VALUE_VERSION = 0

# The key declaration of each record type.
_KEYS: dict[int, Message] = {
    GROUP_METADATA: schemas.CONSUMER_GROUP_METADATA_KEY,
    PARTITION_METADATA: schemas.CONSUMER_GROUP_PARTITION_METADATA_KEY,
    MEMBER_METADATA: schemas.CONSUMER_GROUP_MEMBER_METADATA_KEY,
    TARGET_ASSIGNMENT_METADATA: schemas.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    TARGET_ASSIGNMENT_MEMBER: schemas.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
    CURRENT_MEMBER_ASSIGNMENT: schemas.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
}
_MEMBER_KEYED = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})

Partitions = Mapping[uuid.UUID, frozenset[int]]


# ---- encoding --------------------------------------------------------------------------


def _key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    body = {"group_id": group_id, "member_id": member_id}
    return encode_record(_KEYS[record_type], record_type, body)


def _record(
    record_type: int,
    group_id: str,
    member_id: str | None,
    value: Message | None,
    body: Mapping[str, Any],
) -> GroupRecord:
    """The record (key, value) of `record_type`; a None `value` declaration: a tombstone."""
    data = None if value is None else encode_record(value, VALUE_VERSION, body)
    return GroupRecord(group_id, _key(record_type, group_id, member_id), data)


def _topic_partitions(partitions: Partitions) -> list[dict[str, Any]]:
    return [
        {"topic_id": topic_id, "partitions": sorted(partitions[topic_id])}
        for topic_id in sorted(partitions)
    ]


def group_epoch_record(group_id: str, epoch: int) -> GroupRecord:
    value = schemas.CONSUMER_GROUP_METADATA_VALUE
    return _record(GROUP_METADATA, group_id, None, value, {"epoch": epoch})


def group_tombstone(group_id: str) -> GroupRecord:
    return _record(GROUP_METADATA, group_id, None, None, {})


def partition_metadata_record(
    group_id: str, topics: Mapping[str, tuple[uuid.UUID, int]]
) -> GroupRecord:
    body = {
        "topics": [
            # PartitionRacks stays empty: racks are not tracked.
            {"topic_id": topics[name][0], "topic_name": name, "num_partitions": topics[name][1]}
            for name in sorted(topics)
        ]
    }
    value = schemas.CONSUMER_GROUP_PARTITION_METADATA_VALUE
    return _record(PARTITION_METADATA, group_id, None, value, body)


def partition_metadata_tombstone(group_id: str) -> GroupRecord:
    return _record(PARTITION_METADATA, group_id, None, None, {})


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
    body = {
        "instance_id": m.instance_id,
        "rack_id": m.rack_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "subscribed_topic_names": list(m.subscribed_topic_names),
        "subscribed_topic_regex": m.subscribed_topic_regex,
        "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "server_assignor": m.server_assignor,
    }
    value = schemas.CONSUMER_GROUP_MEMBER_METADATA_VALUE
    return _record(MEMBER_METADATA, group_id, member_id, value, body)


def member_metadata_tombstone(group_id: str, member_id: str) -> GroupRecord:
    return _record(MEMBER_METADATA, group_id, member_id, None, {})


def target_assignment_epoch_record(group_id: str, epoch: int) -> GroupRecord:
    value = schemas.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE
    return _record(TARGET_ASSIGNMENT_METADATA, group_id, None, value, {"assignment_epoch": epoch})


def target_assignment_epoch_tombstone(group_id: str) -> GroupRecord:
    return _record(TARGET_ASSIGNMENT_METADATA, group_id, None, None, {})


def target_assignment_member_record(
    group_id: str, member_id: str, partitions: Partitions
) -> GroupRecord:
    value = schemas.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE
    body = {"topic_partitions": _topic_partitions(partitions)}
    return _record(TARGET_ASSIGNMENT_MEMBER, group_id, member_id, value, body)


def target_assignment_member_tombstone(group_id: str, member_id: str) -> GroupRecord:
    return _record(TARGET_ASSIGNMENT_MEMBER, group_id, member_id, None, {})


@dataclass(frozen=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Partitions
    pending_revocation: Partitions


def current_assignment_record(group_id: str, member_id: str, c: CurrentAssignment) -> GroupRecord:
    body = {
        "member_epoch": c.member_epoch,
        "previous_member_epoch": c.previous_member_epoch,
        "state": c.state,
        "assigned_partitions": _topic_partitions(c.assigned),
        "partitions_pending_revocation": _topic_partitions(c.pending_revocation),
    }
    value = schemas.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE
    return _record(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id, value, body)


def current_assignment_tombstone(group_id: str, member_id: str) -> GroupRecord:
    return _record(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id, None, {})


# ---- decoding --------------------------------------------------------------------------


def decode_key(key: bytes) -> tuple[int, tuple[str, ...]] | None:
    """(record type, key strings) of a consumer-group key, or None for other record types."""
    record_type = record_version(key)
    message = _KEYS.get(record_type)
    if message is None:
        return None
    _, body = decode_record(message, key)
    if record_type in _MEMBER_KEYED:
        return record_type, (body.group_id, body.member_id)
    return record_type, (body.group_id,)


def decode_epoch(value: bytes) -> int:
    """The group epoch of a ConsumerGroupMetadataValue."""
    _, body = decode_record(schemas.CONSUMER_GROUP_METADATA_VALUE, value)
    epoch: int = body.epoch
    return epoch


def decode_target_assignment_epoch(value: bytes) -> int:
    """The assignment epoch of a ConsumerGroupTargetAssignmentMetadataValue."""
    _, body = decode_record(schemas.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE, value)
    epoch: int = body.assignment_epoch
    return epoch


def decode_partition_metadata(value: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    _, body = decode_record(schemas.CONSUMER_GROUP_PARTITION_METADATA_VALUE, value)
    return {t.topic_name: (t.topic_id, t.num_partitions) for t in body.topics}


def decode_member_metadata(value: bytes) -> MemberMetadata:
    _, body = decode_record(schemas.CONSUMER_GROUP_MEMBER_METADATA_VALUE, value)
    names: Sequence[str] = body.subscribed_topic_names
    return MemberMetadata(
        body.instance_id,
        body.rack_id,
        body.client_id,
        body.client_host,
        tuple(names),
        body.subscribed_topic_regex,
        body.rebalance_timeout_ms,
        body.server_assignor,
    )


def _partitions(topics: Sequence[Any]) -> dict[uuid.UUID, frozenset[int]]:
    return {t.topic_id: frozenset(t.partitions) for t in topics}


def decode_target_assignment_member(value: bytes) -> dict[uuid.UUID, frozenset[int]]:
    _, body = decode_record(schemas.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE, value)
    return _partitions(body.topic_partitions)


def decode_current_assignment(value: bytes) -> CurrentAssignment:
    _, body = decode_record(schemas.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE, value)
    return CurrentAssignment(
        body.member_epoch,
        body.previous_member_epoch,
        body.state,
        _partitions(body.assigned_partitions),
        _partitions(body.partitions_pending_revocation),
    )
