"""`__consumer_offsets` record formats, the partition hash, and rebuilding from the log."""

from __future__ import annotations

import struct

import pytest

from weir.format.errors import ErrorCode
from weir.groupcoord import classic_records as rec
from weir.groupcoord import consumer_group_records as kip848
from weir.groupcoord.classic_coordinator import ClassicGroupCoordinator, load
from weir.groupcoord.classic_group import GroupState
from weir.groupcoord.classic_messages import LeavingMember
from weir.groupcoord.committed_offsets import (
    CommittedOffset,
    encode_offset_key,
    encode_offset_value,
)
from weir.groupcoord.placement import group_partition, java_string_hash

from .classic_harness import GROUP, SESSION_TIMEOUT_MS, Harness

# (text, Java's String.hashCode(), (hash & 0x7fffffff) % 50) computed with Java 17's jshell.
JAVA_HASHES = [
    ("", 0, 0),
    ("a", 97, 47),
    ("hello", 99162322, 22),
    ("my-group", -1906497762, 36),
    ("polygenelubricants", -2147483648, 0),
    ("console-consumer-12345", 158455506, 6),
    ("groupé", -1237460406, 42),
    ("g\U0001f600x", 58028462, 12),  # a surrogate pair counts as two UTF-16 units
    ("test-group-negative-zz", -1776400113, 35),
]


@pytest.mark.parametrize(("text", "java_hash", "partition"), JAVA_HASHES)
def test_group_partition_matches_kafka(text: str, java_hash: int, partition: int) -> None:
    assert java_string_hash(text) == java_hash
    assert group_partition(text, 50) == partition


def test_group_metadata_record_is_kafkas_key_v2_and_value_v3_byte_for_byte() -> None:
    member = rec.MemberRecord("m1", "i1", "c", "/h", 30_000, 10_000, b"S", b"A")
    value = rec.GroupMetadataValue("consumer", 4, "range", "m1", 1234, [member])
    key, data = rec.group_metadata_record("g", value)
    assert key == b"\x00\x02\x00\x01g"
    assert data == (
        b"\x00\x03"
        + b"\x00\x08consumer"
        + struct.pack(">i", 4)
        + b"\x00\x05range"
        + b"\x00\x02m1"
        + struct.pack(">q", 1234)
        + struct.pack(">i", 1)
        + b"\x00\x02m1"
        + b"\x00\x02i1"
        + b"\x00\x01c"
        + b"\x00\x02/h"
        + struct.pack(">ii", 30_000, 10_000)
        + b"\x00\x00\x00\x01S"
        + b"\x00\x00\x00\x01A"
    )
    assert rec.decode_group_metadata_key(key) == "g"
    assert rec.decode_group_metadata_value(data) == value


def test_empty_group_metadata_has_null_protocol_and_leader() -> None:
    value = rec.GroupMetadataValue("consumer", 2, None, None, 5, [])
    _, data = rec.group_metadata_record("g", value)
    assert data is not None
    assert b"\xff\xff\xff\xff" in data  # two null strings
    assert rec.decode_group_metadata_value(data) == value


def test_group_metadata_value_v0_decodes_with_rebalance_timeout_from_session() -> None:
    data = (
        b"\x00\x00\x00\x08consumer\x00\x00\x00\x01\x00\x05range\x00\x02m1"
        + struct.pack(">i", 1)
        + b"\x00\x02m1\x00\x01c\x00\x02/h"
        + struct.pack(">i", 10_000)
        + b"\x00\x00\x00\x00\x00\x00\x00\x00"
    )
    value = rec.decode_group_metadata_value(data)
    (member,) = value.members
    assert member.rebalance_timeout_ms == member.session_timeout_ms == 10_000
    assert member.group_instance_id is None and value.current_state_timestamp_ms == -1


def test_malformed_records_raise_record_format_error() -> None:
    with pytest.raises(rec.RecordFormatError):
        rec.decode_group_metadata_key(b"\x00\x02\x00\x05ab")
    with pytest.raises(rec.RecordFormatError):
        rec.decode_group_metadata_value(b"\x00\x09")
    with pytest.raises(rec.RecordFormatError):
        rec.decode_group_metadata_value(b"\x00\x03\x00\x01c" + b"\x7f\xff\xff\xff")


def test_kip848_keys_are_not_classic_records() -> None:
    key, _ = kip848.group_epoch_record("g", 1)
    assert rec.decode_group_metadata_key(key) is None
    assert rec.decode_group_metadata_key(encode_offset_key("g", "t", 0)) is None


def test_loader_rebuilds_stable_groups_members_assignments_and_offsets() -> None:
    h = Harness()
    a, b = h.stable_group(
        {"client_id": "a", "topics": ["t"]}, {"client_id": "b", "instance_id": "ib"}
    )
    h.commit([("t", 0, 11), ("t", 1, 12)], generation_id=1, member_id=a.member_id)
    h.commit([("x", 0, 1)], group_id="simple")
    loaded = load(h.log, now_ms=h.now_ms + 1)
    group = loaded.groups[GROUP]
    assert group.state is GroupState.STABLE
    assert (group.generation_id, group.protocol_type, group.protocol_name) == (
        1,
        "consumer",
        "range",
    )
    assert group.leader_id == a.member_id
    assert group.static_members == {"ib": b.member_id}
    assert group.subscribed_topics == frozenset({"t"})
    assert loaded.describe_group(GROUP) == h.coord.describe_group(GROUP)
    assert loaded.fetch_offsets(GROUP, None) == h.coord.fetch_offsets(GROUP, None)
    assert loaded.fetch_offsets("simple", None) == h.coord.fetch_offsets("simple", None)
    assert loaded.group_state("simple") is GroupState.EMPTY


def test_loaded_members_keep_their_generation_and_sessions_restart_at_load() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    load_ms = h.now_ms + 60_000  # the broker restarted a minute later
    loaded = load(h.log, now_ms=load_ms)
    assert loaded.heartbeat(GROUP, a.generation_id, a.member_id, None, load_ms) is ErrorCode.NONE
    loaded.advance(load_ms + SESSION_TIMEOUT_MS - 1)
    assert loaded.group_state(GROUP) is GroupState.STABLE
    loaded.advance(load_ms + 2 * SESSION_TIMEOUT_MS)  # no more heartbeats: the member goes
    assert loaded.group_state(GROUP) is GroupState.EMPTY
    assert loaded.groups[GROUP].generation_id == a.generation_id + 1


def test_loader_applies_tombstones_in_log_order() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    h.commit([("t", 0, 1)], generation_id=1, member_id=a.member_id)
    h.leave(LeavingMember(a.member_id))
    assert load(h.log, now_ms=h.now_ms).group_state(GROUP) is GroupState.EMPTY
    h.log.extend(h.coord.delete_groups([GROUP], h.now_ms).records)
    loaded = load(h.log, now_ms=h.now_ms)
    assert not loaded.has_group(GROUP)


def test_loader_keeps_offsets_of_a_group_whose_metadata_was_removed() -> None:
    records = [
        rec.group_metadata_record(GROUP, rec.GroupMetadataValue("consumer", 1, None, None, 0, [])),
        (encode_offset_key(GROUP, "t", 0), encode_offset_value(CommittedOffset(3, -1, "", 0))),
        rec.group_metadata_tombstone(GROUP),
    ]
    loaded = load(records, now_ms=0)
    assert loaded.group_state(GROUP) is GroupState.EMPTY
    assert loaded.groups[GROUP].protocol_type is None
    assert [p.offset for p in loaded.fetch_offsets(GROUP, None).partitions] == [3]


def test_loader_skips_kip848_records() -> None:
    coordinator = load([kip848.group_epoch_record("other", 3)], now_ms=0)
    assert coordinator.groups == {}
    assert coordinator.replay(*kip848.group_epoch_record("other", 3)) is False


def test_emptied_group_reloads_as_empty_with_its_generation() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    h.commit([("t", 0, 1)], generation_id=1, member_id=a.member_id)
    h.leave(LeavingMember(a.member_id))
    loaded = load(h.log, now_ms=h.now_ms)
    group = loaded.groups[GROUP]
    assert (group.state, group.generation_id, group.protocol_type) == (
        GroupState.EMPTY,
        2,
        "consumer",
    )
    assert group.state_timestamp_ms == h.coord.groups[GROUP].state_timestamp_ms


def test_offsets_of_kip848_groups_do_not_become_classic_groups_on_load() -> None:
    h = Harness()
    h.commit([("t", 0, 1)], group_id="simple")
    h.commit([("t", 0, 2)], group_id="kip848-group")
    coordinator = ClassicGroupCoordinator()
    for key, value in h.log:
        assert coordinator.offsets.replay(key, value)
    coordinator.finish_loading(h.now_ms, other_group_ids={"kip848-group"})
    assert coordinator.has_group("simple")
    assert not coordinator.has_group("kip848-group")
    assert coordinator.offsets.fetch("kip848-group", "t", 0) is not None


def test_classic_replay_declines_offset_records() -> None:
    coordinator = ClassicGroupCoordinator()
    key = encode_offset_key("g", "t", 0)
    assert coordinator.replay(key, encode_offset_value(CommittedOffset(1))) is False
