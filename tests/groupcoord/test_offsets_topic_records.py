"""`__consumer_offsets` records: the bytes on disk are the ones Weir always wrote
(golden bytes, and the old hand-written encoders compared with today's), and hostile
bytes give RecordFormatError, never a crash or an allocation sized by a length."""

from __future__ import annotations

import contextlib
import struct
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.format.versioned_records import RECORD_ELEMENTS_MAX, RecordFormatError
from weir.groupcoord import classic_records as classic
from weir.groupcoord import consumer_group_records as kip848
from weir.groupcoord.committed_offsets import (
    CommittedOffset,
    decode_offset_key,
    decode_offset_value,
    offset_record,
)
from weir.groupcoord.record_schemas import RECORD_MESSAGES, GroupRecord

from . import legacy_record_encoders as legacy

T1 = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
T2 = uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100")

# Bytes written by the hand-written encoders before the records were declared in the
# schema DSL (captured from that code): what existing data dirs hold.
GOLDEN: dict[str, tuple[GroupRecord, str, str | None]] = {
    "offset commit": (
        offset_record("grp", "tp", 7, CommittedOffset(42, 5, "md", 1000)),
        "000100036772700002747000000007",
        "0003000000000000002a0000000500026d6400000000000003e8",
    ),
    "offset tombstone": (
        offset_record("grp", "tp", 7, None),
        "000100036772700002747000000007",
        None,
    ),
    "group metadata": (
        classic.group_metadata_record(
            "g",
            classic.GroupMetadataValue(
                "consumer",
                4,
                "range",
                "m1",
                1234,
                [
                    classic.MemberRecord("m1", "i1", "c", "/h", 30000, 10000, b"S", b"A"),
                    classic.MemberRecord("m2", None, "c2", "/h2", 5, 6, b"", b""),
                ],
            ),
        ),
        "0002000167",
        "00030008636f6e73756d657200000004000572616e676500026d3100000000000004d200000002"
        "00026d310002693100016300022f6800007530000027100000000153000000014100026d32ffff"
        "0002633200032f683200000005000000060000000000000000",
    ),
    "group metadata tombstone": (classic.group_metadata_tombstone("g"), "0002000167", None),
    "consumer group epoch": (kip848.group_epoch_record("g", 5), "0003000167", "00000000000500"),
    "partition metadata": (
        kip848.partition_metadata_record("g", {"b": (T2, 3), "a": (T1, 1)}),
        "0004000167",
        "00000300112233445566778899aabbccddeeff0261000000010100ffeeddccbbaa9988776655443322"
        "1100026200000003010000",
    ),
    "member metadata": (
        kip848.member_metadata_record(
            "g",
            "m",
            kip848.MemberMetadata(
                "i", None, "cid", "/1.2.3.4", ("t1", "t2"), None, 300000, "uniform"
            ),
        ),
        "000500016700016d",
        "000002690004636964092f312e322e332e340303743103743200000493e008756e69666f726d00",
    ),
    "member metadata with nulls": (
        kip848.member_metadata_record(
            "g", "m", kip848.MemberMetadata(None, "r", "", "", (), "re.*", -1, None)
        ),
        "000500016700016d",
        "00000002720101010572652e2affffffff0000",
    ),
    "target assignment epoch": (
        kip848.target_assignment_epoch_record("g", 9),
        "0006000167",
        "00000000000900",
    ),
    "target assignment member": (
        kip848.target_assignment_member_record(
            "g", "m", {T2: frozenset({2, 0}), T1: frozenset({1})}
        ),
        "000700016700016d",
        "00000300112233445566778899aabbccddeeff020000000100ffeeddccbbaa99887766554433221100"
        "0300000000000000020000",
    ),
    "current assignment": (
        kip848.current_assignment_record(
            "g",
            "m",
            kip848.CurrentAssignment(3, 2, 1, {T1: frozenset({0, 1})}, {T2: frozenset({4})}),
        ),
        "000800016700016d",
        "00000000000300000002010200112233445566778899aabbccddeeff0300000000000000010002ffee"
        "ddccbbaa9988776655443322110002000000040000",
    ),
}


def decode_value(key: bytes, value: bytes) -> Any:
    """Decode `value` with the decoder its key's record type selects."""
    if decode_offset_key(key) is not None:
        return decode_offset_value(value)
    if classic.decode_group_metadata_key(key) is not None:
        return classic.decode_group_metadata_value(value)
    decoded = kip848.decode_key(key)
    assert decoded is not None
    decoders: dict[int, Callable[[bytes], Any]] = {
        kip848.GROUP_METADATA: kip848.decode_epoch,
        kip848.PARTITION_METADATA: kip848.decode_partition_metadata,
        kip848.MEMBER_METADATA: kip848.decode_member_metadata,
        kip848.TARGET_ASSIGNMENT_METADATA: kip848.decode_target_assignment_epoch,
        kip848.TARGET_ASSIGNMENT_MEMBER: kip848.decode_target_assignment_member,
        kip848.CURRENT_MEMBER_ASSIGNMENT: kip848.decode_current_assignment,
    }
    return decoders[decoded[0]](value)


def group_of_key(key: bytes) -> str:
    offset_key = decode_offset_key(key)
    if offset_key is not None:
        return offset_key[0]
    classic_group = classic.decode_group_metadata_key(key)
    if classic_group is not None:
        return classic_group
    decoded = kip848.decode_key(key)
    assert decoded is not None
    return decoded[1][0]


# ---- golden bytes ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_records_are_written_byte_for_byte_as_before(name: str) -> None:
    record, key_hex, value_hex = GOLDEN[name]
    assert record.key.hex() == key_hex
    assert (None if record.value is None else record.value.hex()) == value_hex


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_stored_records_decode_to_their_group_and_value(name: str) -> None:
    record, key_hex, value_hex = GOLDEN[name]
    assert group_of_key(bytes.fromhex(key_hex)) == record.group_id
    if value_hex is not None:
        value = bytes.fromhex(value_hex)
        assert decode_value(record.key, value) is not None


def test_golden_values_decode_to_what_was_encoded() -> None:
    assert decode_offset_value(bytes.fromhex(GOLDEN["offset commit"][2] or "")) == (
        CommittedOffset(42, 5, "md", 1000)
    )
    current = kip848.decode_current_assignment(bytes.fromhex(GOLDEN["current assignment"][2] or ""))
    assert current == kip848.CurrentAssignment(
        3, 2, 1, {T1: frozenset({0, 1})}, {T2: frozenset({4})}
    )
    assert kip848.decode_partition_metadata(
        bytes.fromhex(GOLDEN["partition metadata"][2] or "")
    ) == {"a": (T1, 1), "b": (T2, 3)}


def test_every_record_carries_its_group_and_still_unpacks_as_key_and_value() -> None:
    record = kip848.member_metadata_tombstone("the-group", "m")
    key, value = record
    assert record.group_id == "the-group" and value is None
    assert record == (key, None)


def test_kafkas_older_and_flexible_versions_are_read() -> None:
    v0_offset = struct.pack(">hqh2sq", 0, 42, 2, b"md", 1000)
    assert decode_offset_value(v0_offset) == CommittedOffset(42, -1, "md", 1000)
    # OffsetCommitValue v4 is flexible: compact string, empty tag section.
    v4_offset = struct.pack(">hqi", 4, 42, 5) + b"\x03md" + struct.pack(">q", 1000) + b"\x00"
    assert decode_offset_value(v4_offset) == CommittedOffset(42, 5, "md", 1000)
    v2_group = (
        struct.pack(">h", 2)
        + b"\x00\x08consumer"
        + struct.pack(">i", 1)
        + b"\xff\xff\xff\xff"
        + struct.pack(">qi", 77, 0)
    )
    assert classic.decode_group_metadata_value(v2_group) == classic.GroupMetadataValue(
        "consumer", 1, None, None, 77, []
    )


# ---- the old hand-written encoders against today's -------------------------------------

names = st.text(max_size=12)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
partition_maps = st.dictionaries(
    st.uuids(), st.frozensets(st.integers(0, 2**31 - 1), max_size=5), max_size=4
)


@settings(max_examples=60, deadline=None)
@given(names, names, int32s, int64s, int32s, names, int64s)
def test_offset_records_match_the_old_encoder(
    group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str, ts: int
) -> None:
    committed = CommittedOffset(offset, epoch, metadata, ts)
    record = offset_record(group, topic, partition, committed)
    old_key = legacy.key(1, group, topic) + struct.pack(">i", partition)
    old_value = legacy.offset_value(offset, epoch, metadata, ts)
    assert record == (old_key, old_value)
    assert decode_offset_key(old_key) == (group, topic, partition)
    assert decode_offset_value(old_value) == committed


members = st.tuples(
    names,
    st.none() | names,
    names,
    names,
    int32s.filter(lambda n: n != -1),
    int32s,
    st.binary(max_size=8),
    st.binary(max_size=8),
)


@settings(max_examples=60, deadline=None)
@given(
    names,
    names,
    int32s,
    st.none() | names,
    st.none() | names,
    int64s,
    st.lists(members, max_size=3),
)
def test_group_metadata_matches_the_old_encoder(
    group: str,
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    state_ms: int,
    member_fields: list[tuple[str, str | None, str, str, int, int, bytes, bytes]],
) -> None:
    value = classic.GroupMetadataValue(
        protocol_type,
        generation,
        protocol,
        leader,
        state_ms,
        [classic.MemberRecord(*fields) for fields in member_fields],
    )
    old = legacy.group_metadata_value(
        protocol_type, generation, protocol, leader, state_ms, member_fields
    )
    assert classic.group_metadata_record(group, value) == (legacy.key(2, group), old)
    assert classic.decode_group_metadata_value(old) == value


@settings(max_examples=60, deadline=None)
@given(
    names,
    names,
    st.builds(
        kip848.MemberMetadata,
        st.none() | names,
        st.none() | names,
        names,
        names,
        st.lists(names, max_size=3).map(tuple),
        st.none() | names,
        int32s,
        st.none() | names,
    ),
)
def test_member_metadata_matches_the_old_encoder(
    group: str, member: str, meta: kip848.MemberMetadata
) -> None:
    old = legacy.member_metadata_value(
        meta.instance_id,
        meta.rack_id,
        meta.client_id,
        meta.client_host,
        meta.subscribed_topic_names,
        meta.subscribed_topic_regex,
        meta.rebalance_timeout_ms,
        meta.server_assignor,
    )
    record = kip848.member_metadata_record(group, member, meta)
    assert record == (legacy.key(5, group, member), old)
    assert kip848.decode_member_metadata(old) == meta


@settings(max_examples=60, deadline=None)
@given(names, names, int32s, int32s, st.integers(-128, 127), partition_maps, partition_maps)
def test_assignment_records_match_the_old_encoder(
    group: str,
    member: str,
    epoch: int,
    previous: int,
    state: int,
    assigned: dict[uuid.UUID, frozenset[int]],
    pending: dict[uuid.UUID, frozenset[int]],
) -> None:
    current = kip848.CurrentAssignment(epoch, previous, state, assigned, pending)
    old = legacy.current_assignment_value(epoch, previous, state, assigned, pending)
    assert kip848.current_assignment_record(group, member, current) == (
        legacy.key(8, group, member),
        old,
    )
    assert kip848.decode_current_assignment(old) == current
    old_target = legacy.target_member_value(assigned)
    target = kip848.target_assignment_member_record(group, member, assigned)
    assert target == (legacy.key(7, group, member), old_target)
    assert kip848.decode_target_assignment_member(old_target) == assigned
    for record_type, record in (
        (3, kip848.group_epoch_record(group, epoch)),
        (6, kip848.target_assignment_epoch_record(group, epoch)),
    ):
        assert record == (legacy.key(record_type, group), legacy.epoch_value(epoch))


@settings(max_examples=60, deadline=None)
@given(names, st.dictionaries(names, st.tuples(st.uuids(), int32s), max_size=4))
def test_partition_metadata_matches_the_old_encoder(
    group: str, topics: dict[str, tuple[uuid.UUID, int]]
) -> None:
    old = legacy.partition_metadata_value(topics)
    assert kip848.partition_metadata_record(group, topics) == (legacy.key(4, group), old)
    assert kip848.decode_partition_metadata(old) == topics


# ---- hostile bytes -----------------------------------------------------------------------


def stored_pieces() -> list[tuple[str, bytes, Callable[[bytes], Any]]]:
    """(what, bytes, decoder) for every golden key and value."""
    pieces: list[tuple[str, bytes, Callable[[bytes], Any]]] = []
    for name, (record, key_hex, value_hex) in GOLDEN.items():
        pieces.append((f"{name} key", bytes.fromhex(key_hex), group_of_key))
        if value_hex is not None:
            key = record.key
            pieces.append(
                (f"{name} value", bytes.fromhex(value_hex), lambda v, k=key: decode_value(k, v))
            )
    return pieces


@pytest.mark.parametrize(("what", "data", "decode"), stored_pieces())
def test_every_truncation_is_a_record_format_error(
    what: str, data: bytes, decode: Callable[[bytes], Any]
) -> None:
    for cut in range(len(data)):
        with pytest.raises(RecordFormatError):
            decode(data[:cut])


@pytest.mark.parametrize(("what", "data", "decode"), stored_pieces())
def test_trailing_bytes_are_a_record_format_error(
    what: str, data: bytes, decode: Callable[[bytes], Any]
) -> None:
    with pytest.raises(RecordFormatError):
        decode(data + b"\x00")


HUGE_COUNTS = {
    "group members": (
        classic.decode_group_metadata_value,
        struct.pack(">h", 3)
        + b"\x00\x01c"
        + struct.pack(">i", 1)
        + b"\xff\xff" * 2
        + struct.pack(">qi", 0, 0x7FFFFFFF),
    ),
    "offset metadata length": (
        decode_offset_value,
        struct.pack(">hqih", 3, 1, 1, 0x7FFF) + b"x" * 10,
    ),
    "member subscription bytes": (
        classic.decode_group_metadata_value,
        struct.pack(">h", 0)
        + b"\x00\x01c"
        + struct.pack(">i", 1)
        + b"\xff\xff" * 2
        + struct.pack(">i", 1)
        + b"\x00\x01m\x00\x01c\x00\x01h"
        + struct.pack(">ii", 1, 2**31 - 1),
    ),
    "assignment topics (varint)": (
        kip848.decode_target_assignment_member,
        struct.pack(">h", 0) + b"\xff\xff\xff\xff\x0f",
    ),
    "assignment partitions (varint)": (
        kip848.decode_current_assignment,
        struct.pack(">hiib", 0, 1, 0, 1) + b"\x02" + T1.bytes + b"\xfe\xff\xff\xff\x0f",
    ),
    "subscribed topic names": (
        kip848.decode_member_metadata,
        struct.pack(">h", 0) + b"\x00\x00\x01\x01" + b"\xff\xff\xff\x7f",
    ),
    "overlong varint": (
        kip848.decode_member_metadata,
        struct.pack(">h", 0) + b"\xff\xff\xff\xff\xff\xff\x01",
    ),
}


@pytest.mark.parametrize("what", sorted(HUGE_COUNTS))
def test_huge_counts_and_lengths_fail_without_allocating(what: str) -> None:
    decode, data = HUGE_COUNTS[what]
    compile_every_declaration()  # code generation is not the decode's allocation
    tracemalloc.start()
    try:
        with pytest.raises(RecordFormatError):
            decode(data)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < 256 * 1024


def test_more_array_elements_than_the_record_limit_is_an_error() -> None:
    count = RECORD_ELEMENTS_MAX + 1
    # One topic of `count` partitions: every byte is there, the element budget is not.
    value = (
        struct.pack(">h", 0)
        + b"\x02"
        + T1.bytes
        + bytes(_uvarint(count + 1))
        + struct.pack(f">{count}i", *range(count))
        + b"\x00\x00"
    )
    with pytest.raises(RecordFormatError, match="elements"):
        kip848.decode_target_assignment_member(value)


def _uvarint(value: int) -> bytearray:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return out


def test_unknown_versions_and_non_utf8_ids_are_record_format_errors() -> None:
    with pytest.raises(RecordFormatError, match="version"):
        decode_offset_value(struct.pack(">h", 5) + bytes(30))
    with pytest.raises(RecordFormatError, match="version"):
        kip848.decode_epoch(struct.pack(">hi", 1, 0) + b"\x00")
    with pytest.raises(RecordFormatError):
        decode_offset_key(struct.pack(">hh", 1, 2) + b"\xff\xfe" + bytes(6))
    with pytest.raises(RecordFormatError):
        kip848.decode_key(b"\x00")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(GOLDEN)), st.binary(max_size=64), st.integers(0, 80))
def test_random_damage_is_a_record_format_error_or_a_value(
    name: str, noise: bytes, position: int
) -> None:
    record, _, value_hex = GOLDEN[name]
    data = bytearray.fromhex(value_hex or GOLDEN["offset commit"][2] or "")
    data[position : position + len(noise)] = noise
    key = record.key if value_hex is not None else GOLDEN["offset commit"][0].key
    with contextlib.suppress(RecordFormatError):
        decode_value(key, bytes(data))


def compile_every_declaration() -> None:
    for message in RECORD_MESSAGES:
        high = message.valid.high
        assert high is not None
        for version in range(message.valid.low, high + 1):
            message.compiled_for(version)


def test_every_declaration_compiles_for_each_of_its_versions() -> None:
    compile_every_declaration()
