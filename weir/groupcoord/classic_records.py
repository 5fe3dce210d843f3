"""Kafka's classic-group record for `__consumer_offsets`, byte-exact: GroupMetadata.

A record is a `(key, value)` pair of bytes (`GroupRecord`); a `None` value is a
tombstone. Every key starts with an int16 *key version* that says what the record is:
0 and 1 are offset commits (`committed_offsets`), 2 is GroupMetadata (here), 3-8 are
KIP-848 records (`consumer_group_records`).

- GroupMetadataKey version 2: int16 2, group (string).
- GroupMetadataValue version 3 (written; versions 0-4 read, 4 flexible): int16
  version, protocol type (string), generation (int32), protocol (nullable string),
  leader (nullable string), current state timestamp (int64, v2+), members (int32
  count) of: member id, group instance id (nullable, v3+), client id, client host,
  rebalance timeout (int32, v1+), session timeout (int32), subscription (bytes),
  assignment (bytes).

Strings are int16-length UTF-8 (-1 for null), bytes int32-length: Kafka's non-flexible
encoding of these versions. Declared in `weir.groupcoord.record_schemas`.

Public API:

- `group_metadata_record(group_id, GroupMetadataValue) -> GroupRecord`
- `group_metadata_tombstone(group_id) -> GroupRecord`
- `decode_group_metadata_key(key) -> str | None` (None: another record type)
- `decode_group_metadata_value(value) -> GroupMetadataValue`

Malformed bytes raise `RecordFormatError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from weir.format.versioned_records import (
    RecordFormatError,
    decode_record,
    encode_record,
    record_version,
)
from weir.groupcoord.record_schemas import GROUP_METADATA_KEY, GROUP_METADATA_VALUE, GroupRecord

__all__ = [
    "GroupMetadataValue",
    "MemberRecord",
    "RecordFormatError",
    "decode_group_metadata_key",
    "decode_group_metadata_value",
    "group_metadata_record",
    "group_metadata_tombstone",
]

GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3


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


def _group_metadata_key(group_id: str) -> bytes:
    return encode_record(GROUP_METADATA_KEY, GROUP_METADATA_KEY_VERSION, {"group": group_id})


def _member_body(m: MemberRecord) -> dict[str, object]:
    return {
        "member_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "rebalance_timeout": m.rebalance_timeout_ms,
        "session_timeout": m.session_timeout_ms,
        "subscription": m.subscription,
        "assignment": m.assignment,
    }


def group_metadata_record(group_id: str, value: GroupMetadataValue) -> GroupRecord:
    body = {
        "protocol_type": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
        "current_state_timestamp": value.current_state_timestamp_ms,
        "members": [_member_body(m) for m in value.members],
    }
    data = encode_record(GROUP_METADATA_VALUE, GROUP_METADATA_VALUE_VERSION, body)
    return GroupRecord(group_id, _group_metadata_key(group_id), data)


def group_metadata_tombstone(group_id: str) -> GroupRecord:
    return GroupRecord(group_id, _group_metadata_key(group_id), None)


# ---- decoding --------------------------------------------------------------------------


def decode_group_metadata_key(key: bytes) -> str | None:
    """The group id of a GroupMetadataKey, or None for other record types."""
    if record_version(key) != GROUP_METADATA_KEY_VERSION:
        return None
    _, body = decode_record(GROUP_METADATA_KEY, key)
    group_id: str = body.group
    return group_id


def _member(fields: Any) -> MemberRecord:
    session_timeout_ms = fields.session_timeout
    rebalance_timeout_ms = fields.get("rebalance_timeout", -1)  # v1+
    if rebalance_timeout_ms == -1:  # v0 had none; Kafka uses the session timeout
        rebalance_timeout_ms = session_timeout_ms
    return MemberRecord(
        fields.member_id,
        fields.get("group_instance_id"),  # v3+
        fields.client_id,
        fields.client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        fields.subscription,
        fields.assignment,
    )


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    _, body = decode_record(GROUP_METADATA_VALUE, value)
    return GroupMetadataValue(
        body.protocol_type,
        body.generation,
        body.protocol,
        body.leader,
        body.get("current_state_timestamp", -1),  # v2+
        [_member(m) for m in body.members],
    )
