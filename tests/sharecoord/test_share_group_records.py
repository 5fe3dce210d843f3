"""The share-group records of __consumer_offsets: Kafka 4.4's layouts, and that Weir's
other loaders pass them by."""

from __future__ import annotations

import struct
import uuid

import pytest

from weir.format.versioned_records import RecordFormatError
from weir.groupcoord import classic_records
from weir.groupcoord import consumer_group_records as consumer_rec
from weir.groupcoord.classic_coordinator import ClassicGroupCoordinator
from weir.groupcoord.committed_offsets import decode_offset_key
from weir.sharecoord import share_group_records as rec

T1 = uuid.UUID("00000000-0000-0000-0000-0000000000a1")


def every_kind_of_record() -> list[rec.ShareGroupRecord]:
    parts = {T1: frozenset({2, 0})}
    return [
        rec.member_metadata_record("g", "m", rec.MemberMetadata(None, "c", "/h", ("t",))),
        rec.member_metadata_tombstone("g", "m"),
        rec.group_epoch_record("g", 3, -5),
        rec.group_tombstone("g"),
        rec.target_assignment_epoch_record("g", 3, 1234),
        rec.target_assignment_epoch_tombstone("g"),
        rec.target_assignment_member_record("g", "m", parts),
        rec.target_assignment_member_tombstone("g", "m"),
        rec.current_assignment_record("g", "m", rec.CurrentAssignment(3, 2, parts)),
        rec.current_assignment_tombstone("g", "m"),
    ]


def kafka_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_keys_are_the_record_type_then_the_ids_as_kafka_writes_them() -> None:
    assert rec.group_epoch_record("g1", 1, 0).key == struct.pack(">h", 11) + kafka_string("g1")
    member_key = rec.current_assignment_record("g1", "m1", rec.CurrentAssignment(1, 0, {})).key
    assert member_key == struct.pack(">h", 14) + kafka_string("g1") + kafka_string("m1")
    types = [struct.unpack(">h", r.key[:2])[0] for r in every_kind_of_record()]
    assert sorted(set(types)) == [10, 11, 12, 13, 14]


def test_values_are_version_0_flexible_as_kafka_writes_them() -> None:
    value = rec.group_epoch_record("g", 7, -2).value
    assert value == struct.pack(">hiq", 0, 7, -2) + b"\x00"
    assignment = rec.target_assignment_member_record("g", "m", {T1: frozenset({1, 0})}).value
    # int16 version, compact array of 1 (2), uuid, compact array of 2 (3), 0, 1, tags, tags
    assert assignment == (
        struct.pack(">h", 0) + b"\x02" + T1.bytes + b"\x03" + struct.pack(">ii", 0, 1) + b"\0\0"
    )


def test_the_assignment_timestamp_is_tagged_field_0() -> None:
    assert rec.target_assignment_epoch_record("g", 4, 0).value == struct.pack(">hi", 0, 4) + b"\0"
    stamped = rec.target_assignment_epoch_record("g", 4, 99).value
    assert stamped == struct.pack(">hi", 0, 4) + b"\x01\x00\x08" + struct.pack(">q", 99)
    assert rec.decode_target_assignment_metadata(stamped) == (4, 99)


def test_every_record_decodes_to_what_was_encoded() -> None:
    member, _, epoch, _, target_epoch, _, target, _, current, _ = every_kind_of_record()
    assert rec.decode_key(member.key) == (rec.MEMBER_METADATA, "g", "m")
    assert rec.decode_key(epoch.key) == (rec.GROUP_METADATA, "g", "")
    assert member.value is not None and epoch.value is not None
    assert rec.decode_member_metadata(member.value) == rec.MemberMetadata(None, "c", "/h", ("t",))
    assert rec.decode_group_metadata(epoch.value) == (3, -5)
    assert target_epoch.value is not None and target.value is not None
    assert rec.decode_target_assignment_metadata(target_epoch.value) == (3, 1234)
    assert rec.decode_target_assignment_member(target.value) == {T1: frozenset({0, 2})}
    assert current.value is not None
    assert rec.decode_current_assignment(current.value) == rec.CurrentAssignment(
        3, 2, {T1: frozenset({0, 2})}
    )


def test_other_record_types_are_not_share_records() -> None:
    assert rec.decode_key(consumer_rec.group_epoch_record("g", 1).key) is None
    assert rec.decode_key(struct.pack(">h", 15) + kafka_string("g")) is None


def test_a_truncated_share_key_is_a_format_error() -> None:
    with pytest.raises(RecordFormatError):
        rec.decode_key(struct.pack(">h", 11) + b"\x00")


def test_weir_group_loaders_pass_share_records_by() -> None:
    """The offsets, classic and KIP-848 loaders answer 'not mine' for every share
    record, so the broker's loader hands them on instead of failing."""
    classic = ClassicGroupCoordinator()
    for record in every_kind_of_record():
        assert decode_offset_key(record.key) is None
        assert classic_records.decode_group_metadata_key(record.key) is None
        assert consumer_rec.decode_key(record.key) is None
        assert classic.replay(record.key, record.value) is False
