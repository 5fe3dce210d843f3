"""The committed-offset store and its __consumer_offsets records."""

from __future__ import annotations

import struct

import pytest

from weir.format.versioned_records import RecordFormatError
from weir.groupcoord.committed_offsets import (
    CommittedOffset,
    OffsetStore,
    decode_offset_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
)
from weir.groupcoord.placement import group_partition, java_string_hash

NOW_MS = 1_700_000_000_000


def test_commits_are_fetched_back_and_rebuilt_from_their_records() -> None:
    store = OffsetStore()
    records = store.commit("g", [("t", 0, CommittedOffset(5, 2, "m", NOW_MS))])
    records += store.commit("g", [("t", 0, CommittedOffset(9, 2, "", NOW_MS + 1))])
    records += store.commit("g", [("u", 3, CommittedOffset(1))])
    records += store.delete("g", [("u", 3)])
    rebuilt = OffsetStore()
    for key, value in records:
        assert rebuilt.replay(key, value)
    assert rebuilt.group_offsets("g") == {("t", 0): CommittedOffset(9, 2, "", NOW_MS + 1)}
    assert store.group_offsets("g") == rebuilt.group_offsets("g")


def test_key_and_value_bytes_follow_kafkas_formats() -> None:
    key = encode_offset_key("grp", "tp", 7)
    assert key == struct.pack(">hh3sh2si", 1, 3, b"grp", 2, b"tp", 7)
    value = encode_offset_value(CommittedOffset(42, 5, "md", 1000))
    assert value == struct.pack(">hqih2sq", 3, 42, 5, 2, b"md", 1000)
    # Version 1 values (with an expire timestamp, no leader epoch) are read too.
    v1 = struct.pack(">hqh2sqq", 1, 42, 2, b"md", 1000, -1)
    assert decode_offset_value(v1) == CommittedOffset(42, -1, "md", 1000)
    assert decode_offset_key(key) == ("grp", "tp", 7)


def test_other_record_types_are_left_to_their_owners() -> None:
    assert OffsetStore().replay(struct.pack(">h", 2) + b"\x00\x01g", b"x") is False


@pytest.mark.parametrize("cut", [1, 3, 9])
def test_truncated_records_raise_offset_record_error(cut: int) -> None:
    key = encode_offset_key("group", "topic", 1)
    with pytest.raises(RecordFormatError):
        decode_offset_key(key[:cut])
    with pytest.raises(RecordFormatError):
        decode_offset_value(encode_offset_value(CommittedOffset(1))[:cut])


def test_offsets_of_a_group_empty_past_retention_expire() -> None:
    store = OffsetStore()
    store.commit("empty", [("t", 0, CommittedOffset(1, commit_timestamp_ms=NOW_MS))])
    store.commit("busy", [("t", 0, CommittedOffset(1, commit_timestamp_ms=NOW_MS))])

    def empty_since(group: str) -> int | None:
        return NOW_MS if group == "empty" else None

    assert store.expire(NOW_MS + 100, 100, empty_since) == []
    tombstones = store.expire(NOW_MS + 101, 100, empty_since)
    assert tombstones == [(encode_offset_key("empty", "t", 0), None)]
    assert store.groups() == ["busy"]


def test_group_placement_matches_java_hash_code() -> None:
    # String.hashCode() values printed by Java 17 (a surrogate pair included).
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("console-consumer-12345") == 158455506
    assert java_string_hash("gr\u00fc\u00dfe-\U0001f44d") == 347391142
    assert java_string_hash("group-0-consumers") == -1911774318  # wraps like Java's int
    assert group_partition("group-0-consumers", 50) == (-1911774318 & 0x7FFFFFFF) % 50


# -- the committed view: what readers are answered ----------------------------------


def test_a_commit_is_answered_to_readers_only_once_its_record_is_committed() -> None:
    store = OffsetStore()
    first = store.commit("g", [("t", 0, CommittedOffset(5))])
    store.place(0, 10, first)
    second = store.commit("g", [("t", 0, CommittedOffset(8))])
    store.place(0, 11, second)
    assert store.group_offsets("g") == {("t", 0): CommittedOffset(8)}  # decisions
    assert store.committed_group_offsets("g") == {}
    store.promote(0, 10)
    assert store.committed_group_offsets("g") == {("t", 0): CommittedOffset(5)}
    store.promote(0, 11)
    assert store.committed_group_offsets("g") == {("t", 0): CommittedOffset(8)}
    assert store.uncommitted_count() == 0


def test_a_deletion_hides_an_offset_from_readers_only_once_committed() -> None:
    store = OffsetStore()
    store.place(0, 1, store.commit("g", [("t", 0, CommittedOffset(5))]))
    store.promote(0, 1)
    store.place(0, 2, store.delete("g", [("t", 0)]))
    assert not store.has_offsets("g")
    assert store.committed_group_offsets("g") == {("t", 0): CommittedOffset(5)}
    store.promote(0, 2)
    assert store.committed_group_offsets("g") == {}
    assert store.committed_groups() == []


def test_changes_whose_append_failed_never_reach_readers() -> None:
    store = OffsetStore()
    written = store.commit("a", [("t", 0, CommittedOffset(1))])
    refused = store.commit("b", [("t", 0, CommittedOffset(2))])
    store.place(0, 4, written)
    store.discard(refused)
    store.promote(0, 100)
    store.promote(1, 100)
    assert store.committed_groups() == ["a"]
    assert store.uncommitted_count() == 0


def test_a_change_is_placed_by_its_own_record_whatever_was_appended_meanwhile() -> None:
    """A handler may append its records later than it changed the store (a deferred
    answer): another group's append in between must neither place nor drop it."""
    store = OffsetStore()
    deletion = store.delete_group("a") + store.commit("a", [("t", 0, CommittedOffset(9))])
    other = store.commit("b", [("t", 0, CommittedOffset(2))])
    store.place(1, 7, other)  # another partition's append comes first
    store.promote(1, 7)
    assert store.committed_groups() == ["b"]
    store.place(0, 3, deletion)
    store.promote(0, 3)
    assert store.committed_group_offsets("a") == {("t", 0): CommittedOffset(9)}


def test_each_log_partition_commits_its_own_changes() -> None:
    store = OffsetStore()
    store.place(0, 4, store.commit("a", [("t", 0, CommittedOffset(1))]))
    store.place(1, 7, store.commit("b", [("t", 0, CommittedOffset(2))]))
    store.promote(1, 7)
    assert store.committed_groups() == ["b"]


def test_forgotten_groups_leave_nothing_waiting_to_be_committed() -> None:
    store = OffsetStore()
    store.place(0, 1, store.commit("a", [("t", 0, CommittedOffset(1))]))
    store.commit("b", [("t", 0, CommittedOffset(2))])
    store.forget(["a", "b"])
    assert store.uncommitted_count() == 0
    store.promote(0, 1)
    assert store.committed_groups() == []


def test_records_loaded_past_the_high_watermark_are_answered_once_committed() -> None:
    writer = OffsetStore()
    records = writer.commit("g", [("t", 0, CommittedOffset(5))])
    records += writer.commit("g", [("t", 0, CommittedOffset(9))])
    loaded = OffsetStore()
    (first_key, first_value), (second_key, second_value) = records
    loaded.replay(first_key, first_value)  # below the high watermark: committed
    loaded.replay(second_key, second_value, uncommitted=(3, 42))
    assert loaded.group_offsets("g") == {("t", 0): CommittedOffset(9)}
    assert loaded.committed_group_offsets("g") == {("t", 0): CommittedOffset(5)}
    loaded.promote(3, 42)
    assert loaded.committed_group_offsets("g") == {("t", 0): CommittedOffset(9)}
