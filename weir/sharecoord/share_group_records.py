"""Kafka's share-group records (KIP-932) for `__consumer_offsets`, declared and encoded.

Transcribed from Kafka 4.4's group-coordinator message specs (the JSON files named after
each message, shipped in kafka-group-coordinator-4.4.0.jar). A stored key or value is an
int16 and then the body (`weir.format.versioned_records`); for a key, that int16 is the
record type (Kafka's "apiKey" of a coordinator record), the body its version 0:

| type | ShareGroup...Key | key fields | value fields (ShareGroup...Value v0, flexible) |
|---|---|---|---|
| 10 | MemberMetadata | group, member | RackId?, ClientId, ClientHost, SubscribedTopicNames |
| 11 | Metadata | group | Epoch, MetadataHash |
| 12 | TargetAssignmentMetadata | group | AssignmentEpoch, tag 0: AssignmentTimestamp |
| 13 | TargetAssignmentMember | group, member | TopicPartitions |
| 14 | CurrentMemberAssignment | group, member | MemberEpoch, PreviousMemberEpoch, State, |
|    |                         |               | AssignedPartitions |

Type 15 (ShareGroupStatePartitionMetadata: which share partitions Kafka's share coordinator
has initialized) is not written: Weir's share partitions start their state when first
fetched, so every partition of a subscribed topic is assignable at once. Types 3-8 are the
KIP-848 consumer groups' (`weir.groupcoord.record_schemas`), 0-2 offsets and classic groups;
their decoders answer None for 10-14, so a loader that does not know share groups skips them.

`ShareGroupRecord` is what the coordinator hands the broker to append: the key and value
bytes and the group they belong to, shaped like `weir.groupcoord`'s `GroupRecord` (a
`(key, value)` pair with `group_id`), which this package may not import.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weir.format.schema import INT8, INT32, INT64, STRING, UUID, Array, Field, Message, Struct
from weir.format.versioned_records import (
    RecordFormatError,
    decode_record,
    encode_record,
    record_version,
)

__all__ = [
    "CURRENT_MEMBER_ASSIGNMENT",
    "GROUP_METADATA",
    "MEMBER_METADATA",
    "SHARE_GROUP_RECORD_TYPES",
    "TARGET_ASSIGNMENT_MEMBER",
    "TARGET_ASSIGNMENT_METADATA",
    "CurrentAssignment",
    "MemberMetadata",
    "RecordFormatError",
    "ShareGroupRecord",
]

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_RECORD_TYPES = frozenset(range(10, 15))

VALUE_VERSION = 0
# Kafka's MemberState byte; a share-group member is always STABLE (no revocation).
MEMBER_STATE_STABLE = 0

Partitions = Mapping[uuid.UUID, frozenset[int]]


class ShareGroupRecord(tuple[bytes, bytes | None]):
    """One `__consumer_offsets` record: a `(key, value)` pair (a None value is a
    tombstone) that also carries `group_id`, the group whose partition it goes to."""

    group_id: str

    def __new__(cls, group_id: str, key: bytes, value: bytes | None) -> ShareGroupRecord:
        record = super().__new__(cls, (key, value))
        record.group_id = group_id
        return record

    @property
    def key(self) -> bytes:
        return self[0]

    @property
    def value(self) -> bytes | None:
        return self[1]

    def __repr__(self) -> str:
        return f"ShareGroupRecord({self.group_id!r}, {self[0]!r}, {self[1]!r})"


# ---- declarations ------------------------------------------------------------------------


# Kafka 4.x declares each key as version 0 of a coordinator record whose int16 prefix is
# the record type; the bytes are those of a key "version" equal to the type, as Weir's
# other `__consumer_offsets` keys are declared (`weir.groupcoord.record_schemas`).
def _group_key(name: str, record_type: int) -> Message:
    return Message(
        name, valid=str(record_type), flexible="none", fields=[Field("group_id", STRING)]
    )


def _member_key(name: str, record_type: int) -> Message:
    return Message(
        name,
        valid=str(record_type),
        flexible="none",
        fields=[Field("group_id", STRING), Field("member_id", STRING)],
    )


SHARE_GROUP_MEMBER_METADATA_KEY = _member_key("ShareGroupMemberMetadataKey", 10)
SHARE_GROUP_METADATA_KEY = _group_key("ShareGroupMetadataKey", 11)
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _group_key("ShareGroupTargetAssignmentMetadataKey", 12)
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _member_key("ShareGroupTargetAssignmentMemberKey", 13)
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _member_key("ShareGroupCurrentMemberAssignmentKey", 14)

SHARE_GROUP_MEMBER_METADATA_VALUE = Message(
    "ShareGroupMemberMetadataValue",
    valid="0",
    flexible="0+",
    fields=[
        Field("rack_id", STRING, nullable="0+", default=None),
        Field("client_id", STRING),
        Field("client_host", STRING),
        Field("subscribed_topic_names", Array(STRING)),
    ],
)

SHARE_GROUP_METADATA_VALUE = Message(
    "ShareGroupMetadataValue",
    valid="0",
    flexible="0+",
    fields=[Field("epoch", INT32), Field("metadata_hash", INT64)],
)

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message(
    "ShareGroupTargetAssignmentMetadataValue",
    valid="0",
    flexible="0+",
    fields=[
        Field("assignment_epoch", INT32),
        # Kafka 4.3 (KIP-1263): when the target was computed, for the assignment interval.
        Field("assignment_timestamp", INT64, tag=0, default=0),
    ],
)

_TOPIC_PARTITIONS = Struct(Field("topic_id", UUID), Field("partitions", Array(INT32)))

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message(
    "ShareGroupTargetAssignmentMemberValue",
    valid="0",
    flexible="0+",
    fields=[Field("topic_partitions", Array(_TOPIC_PARTITIONS))],
)

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "ShareGroupCurrentMemberAssignmentValue",
    valid="0",
    flexible="0+",
    fields=[
        Field("member_epoch", INT32),
        Field("previous_member_epoch", INT32),
        Field("state", INT8),
        Field("assigned_partitions", Array(_TOPIC_PARTITIONS)),
    ],
)

# Every declaration, for tests and documentation.
RECORD_MESSAGES = (
    SHARE_GROUP_MEMBER_METADATA_KEY,
    SHARE_GROUP_MEMBER_METADATA_VALUE,
    SHARE_GROUP_METADATA_KEY,
    SHARE_GROUP_METADATA_VALUE,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
)

_KEYS: dict[int, Message] = {
    MEMBER_METADATA: SHARE_GROUP_MEMBER_METADATA_KEY,
    GROUP_METADATA: SHARE_GROUP_METADATA_KEY,
    TARGET_ASSIGNMENT_METADATA: SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    TARGET_ASSIGNMENT_MEMBER: SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
    CURRENT_MEMBER_ASSIGNMENT: SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
}
_MEMBER_KEYED = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})


# ---- encoding ----------------------------------------------------------------------------


def _key(record_type: int, group_id: str, member_id: str | None) -> bytes:
    body = {"group_id": group_id}
    if record_type in _MEMBER_KEYED:
        body["member_id"] = member_id or ""
    return encode_record(_KEYS[record_type], record_type, body)


def _record(
    record_type: int,
    group_id: str,
    member_id: str | None,
    value: Message | None,
    body: Mapping[str, Any],
) -> ShareGroupRecord:
    data = None if value is None else encode_record(value, VALUE_VERSION, body)
    return ShareGroupRecord(group_id, _key(record_type, group_id, member_id), data)


def _topic_partitions(partitions: Partitions) -> list[dict[str, Any]]:
    return [
        {"topic_id": topic_id, "partitions": sorted(partitions[topic_id])}
        for topic_id in sorted(partitions)
        if partitions[topic_id]
    ]


@dataclass(frozen=True)
class MemberMetadata:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


def member_metadata_record(group_id: str, member_id: str, m: MemberMetadata) -> ShareGroupRecord:
    body = {
        "rack_id": m.rack_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "subscribed_topic_names": list(m.subscribed_topic_names),
    }
    value = SHARE_GROUP_MEMBER_METADATA_VALUE
    return _record(MEMBER_METADATA, group_id, member_id, value, body)


def member_metadata_tombstone(group_id: str, member_id: str) -> ShareGroupRecord:
    return _record(MEMBER_METADATA, group_id, member_id, None, {})


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> ShareGroupRecord:
    body = {"epoch": epoch, "metadata_hash": metadata_hash}
    return _record(GROUP_METADATA, group_id, None, SHARE_GROUP_METADATA_VALUE, body)


def group_tombstone(group_id: str) -> ShareGroupRecord:
    return _record(GROUP_METADATA, group_id, None, None, {})


def target_assignment_epoch_record(
    group_id: str, epoch: int, timestamp_ms: int
) -> ShareGroupRecord:
    value = SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE
    body = {"assignment_epoch": epoch, "assignment_timestamp": timestamp_ms}
    return _record(TARGET_ASSIGNMENT_METADATA, group_id, None, value, body)


def target_assignment_epoch_tombstone(group_id: str) -> ShareGroupRecord:
    return _record(TARGET_ASSIGNMENT_METADATA, group_id, None, None, {})


def target_assignment_member_record(
    group_id: str, member_id: str, partitions: Partitions
) -> ShareGroupRecord:
    value = SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE
    body = {"topic_partitions": _topic_partitions(partitions)}
    return _record(TARGET_ASSIGNMENT_MEMBER, group_id, member_id, value, body)


def target_assignment_member_tombstone(group_id: str, member_id: str) -> ShareGroupRecord:
    return _record(TARGET_ASSIGNMENT_MEMBER, group_id, member_id, None, {})


@dataclass(frozen=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    assigned: Partitions


def current_assignment_record(
    group_id: str, member_id: str, c: CurrentAssignment
) -> ShareGroupRecord:
    body = {
        "member_epoch": c.member_epoch,
        "previous_member_epoch": c.previous_member_epoch,
        "state": MEMBER_STATE_STABLE,
        "assigned_partitions": _topic_partitions(c.assigned),
    }
    value = SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE
    return _record(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id, value, body)


def current_assignment_tombstone(group_id: str, member_id: str) -> ShareGroupRecord:
    return _record(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id, None, {})


# ---- decoding ----------------------------------------------------------------------------


def decode_key(key: bytes) -> tuple[int, str, str] | None:
    """(record type, group id, member id or "") of a share-group key; None for any other
    record type. Raises RecordFormatError on a share-group key that does not parse."""
    record_type = record_version(key)
    message = _KEYS.get(record_type)
    if message is None:
        return None
    _, body = decode_record(message, key)
    member_id: str = body.member_id if record_type in _MEMBER_KEYED else ""
    group_id: str = body.group_id
    return record_type, group_id, member_id


def decode_member_metadata(value: bytes) -> MemberMetadata:
    _, body = decode_record(SHARE_GROUP_MEMBER_METADATA_VALUE, value)
    names: Sequence[str] = body.subscribed_topic_names
    return MemberMetadata(body.rack_id, body.client_id, body.client_host, tuple(names))


def decode_group_metadata(value: bytes) -> tuple[int, int]:
    """(group epoch, metadata hash) of a ShareGroupMetadataValue."""
    _, body = decode_record(SHARE_GROUP_METADATA_VALUE, value)
    return body.epoch, body.metadata_hash


def decode_target_assignment_metadata(value: bytes) -> tuple[int, int]:
    """(assignment epoch, assignment timestamp ms) of a TargetAssignmentMetadataValue."""
    _, body = decode_record(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE, value)
    return body.assignment_epoch, body.assignment_timestamp


def _partitions(topics: Sequence[Any]) -> dict[uuid.UUID, frozenset[int]]:
    return {t.topic_id: frozenset(t.partitions) for t in topics if t.partitions}


def decode_target_assignment_member(value: bytes) -> dict[uuid.UUID, frozenset[int]]:
    _, body = decode_record(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE, value)
    return _partitions(body.topic_partitions)


def decode_current_assignment(value: bytes) -> CurrentAssignment:
    _, body = decode_record(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE, value)
    return CurrentAssignment(
        body.member_epoch, body.previous_member_epoch, _partitions(body.assigned_partitions)
    )
