"""The share partition's durable state and its `__share_group_state` record."""

from __future__ import annotations

import contextlib
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.format.versioned_records import RecordFormatError
from weir.sharecoord.share_state import (
    STATE_SPAN_RECORDS_MAX,
    RecordState,
    ShareState,
    ShareStateKey,
    StateBatch,
    decode_share_snapshot_key,
    decode_share_snapshot_value,
    encode_share_snapshot,
)

KEY = ShareStateKey("g", uuid.UUID("67f31322-5ca8-8442-189f-07cb3f9f9bb3"), 3)
STATE = ShareState(
    10,
    1,
    2,
    (
        StateBatch(10, 12, RecordState.ACKNOWLEDGED, 1),
        StateBatch(13, 13, RecordState.AVAILABLE, 2),
    ),
)
# Read back by Kafka 4.4's own generated classes (kafka-share-coordinator-4.4.0.jar's
# ShareSnapshotKey/ShareSnapshotValue, version from the first two bytes): groupId='g',
# partition=3, snapshotEpoch=7, stateEpoch=1, leaderEpoch=2, startOffset=10,
# deliveryCompleteCount=3, createTimestamp=5, writeTimestamp=6, the two batches.
KEY_HEX = "000000016767f313225ca88442189f07cb3f9f9bb300000003"
VALUE_HEX = (
    "0000"  # value version 0
    "00000007"  # SnapshotEpoch
    "00000001"  # StateEpoch
    "00000002"  # LeaderEpoch
    "000000000000000a"  # StartOffset
    "0000000000000005"  # CreateTimestamp
    "0000000000000006"  # WriteTimestamp
    "03"  # StateBatches: compact array of 2
    "000000000000000a000000000000000c020001"  # 10-12 ACKNOWLEDGED x1
    "00"  # its tagged fields
    "000000000000000d000000000000000d000002"  # 13-13 AVAILABLE x2
    "00"
    "01"  # one tagged field
    "000400000003"  # tag 0 (DeliveryCompleteCount), 4 bytes: 3
)


def encode(state: ShareState = STATE) -> tuple[bytes, bytes]:
    return encode_share_snapshot(
        KEY, state, create_timestamp_ms=5, write_timestamp_ms=6, snapshot_epoch=7
    )


def test_a_snapshot_is_encoded_as_kafka_44_declares_it():
    key, value = encode()
    assert key.hex() == KEY_HEX
    assert value.hex() == VALUE_HEX


def test_a_snapshot_decodes_to_what_was_encoded():
    key, value = encode()
    assert decode_share_snapshot_key(key) == KEY
    snapshot = decode_share_snapshot_value(value)
    assert snapshot.state == STATE
    assert (snapshot.snapshot_epoch, snapshot.create_timestamp_ms) == (7, 5)
    assert snapshot.write_timestamp_ms == 6


def test_delivery_complete_count_counts_finished_offsets():
    assert STATE.delivery_complete_count == 3
    assert ShareState(0, 0, 0).delivery_complete_count == 0


@pytest.mark.parametrize(
    "batches",
    [
        (StateBatch(9, 10, RecordState.AVAILABLE, 1),),  # below the start offset
        (StateBatch(12, 11, RecordState.AVAILABLE, 1),),  # ends before it starts
        (
            StateBatch(10, 12, RecordState.AVAILABLE, 1),
            StateBatch(12, 13, RecordState.AVAILABLE, 1),
        ),  # overlapping
        (
            StateBatch(14, 15, RecordState.AVAILABLE, 1),
            StateBatch(10, 11, RecordState.AVAILABLE, 1),
        ),  # out of order
        (StateBatch(10, 10, RecordState.ACQUIRED, 1),),  # never stored
        (StateBatch(10, 10, RecordState.AVAILABLE, -1),),
        (StateBatch(10, 10 + STATE_SPAN_RECORDS_MAX, RecordState.AVAILABLE, 1),),  # too wide
    ],
)
def test_a_malformed_state_is_refused_on_construction_and_on_decoding(batches):
    with pytest.raises(ValueError):
        ShareState(10, 0, 0, batches)
    value = _value_bytes(
        10, [(b.first_offset, b.last_offset, int(b.state), b.delivery_count) for b in batches]
    )
    with pytest.raises(RecordFormatError):
        decode_share_snapshot_value(value)


def test_an_unknown_delivery_state_is_refused():
    with pytest.raises(RecordFormatError, match="delivery state 5"):
        decode_share_snapshot_value(_value_bytes(0, [(0, 0, 5, 1)]))


def test_archiving_records_and_the_dead_letter_mark_round_trip():
    """Kafka 4.4 stores ARCHIVING as DeliveryState 3; Weir's dead-letter mark rides in
    its own tagged field, absent (Kafka's bytes) when there is none."""
    state = ShareState(10, 0, 0, (StateBatch(10, 12, RecordState.ARCHIVING, 5),), 42)
    key, value = encode_share_snapshot(KEY, state, create_timestamp_ms=1, write_timestamp_ms=2)
    assert decode_share_snapshot_value(value).state == state
    plain = ShareState(10, 0, 0, (StateBatch(10, 12, RecordState.ARCHIVING, 5),))
    _, plain_value = encode_share_snapshot(KEY, plain, create_timestamp_ms=1, write_timestamp_ms=2)
    assert decode_share_snapshot_value(plain_value).state.dead_letter_mark == -1
    assert len(value) > len(plain_value)


def test_truncated_and_trailing_bytes_are_refused():
    key, value = encode()
    for cut in range(len(value)):
        with pytest.raises(RecordFormatError):
            decode_share_snapshot_value(value[:cut])
    with pytest.raises(RecordFormatError):
        decode_share_snapshot_value(value + b"\x00")
    with pytest.raises(RecordFormatError):
        decode_share_snapshot_key(key[:-1])


def test_an_array_count_larger_than_the_bytes_is_refused_before_allocating():
    header = bytes.fromhex(VALUE_HEX[: 4 + 2 * (4 + 4 + 4 + 8 + 8 + 8)])
    huge = header + bytes.fromhex("ffffffff0f")  # a compact count of about 4 billion
    with pytest.raises(RecordFormatError):
        decode_share_snapshot_value(huge)


def test_another_record_type_is_not_a_snapshot_key():
    with pytest.raises(RecordFormatError, match="record type 1"):
        decode_share_snapshot_key(b"\x00\x01" + bytes.fromhex(KEY_HEX)[2:])


def _value_bytes(start: int, batches: list[tuple[int, int, int, int]]) -> bytes:
    """A ShareSnapshotValue v0 built by hand, so that states the encoder refuses can be written."""
    out = struct.pack(">hiiiqqq", 0, 0, 0, 0, start, 0, 0)
    out += bytes([len(batches) + 1])
    for first, last, state, count in batches:
        out += struct.pack(">qqbh", first, last, state, count) + b"\x00"
    return out + b"\x00"


states = st.integers(0, 1000).flatmap(
    lambda start: st.lists(
        st.tuples(
            st.integers(0, 20),
            st.integers(0, 20),
            st.sampled_from(
                [RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED]
            ),
            st.integers(0, 10),
        ),
        max_size=30,
    ).map(lambda spans: _state_from_spans(start, spans))
)


def _state_from_spans(start: int, spans: list[tuple[int, int, RecordState, int]]) -> ShareState:
    batches, offset = [], start
    for skip, length, state, count in spans:
        first = offset + skip
        batches.append(StateBatch(first, first + length, state, count))
        offset = first + length + 1
    return ShareState(start, 3, 4, tuple(batches))


@settings(max_examples=200, deadline=None)
@given(states, st.integers(-(2**63), 2**63 - 1))
def test_any_state_round_trips_through_its_record(state, timestamp_ms):
    key, value = encode_share_snapshot(
        KEY, state, create_timestamp_ms=timestamp_ms, write_timestamp_ms=timestamp_ms
    )
    assert decode_share_snapshot_key(key) == KEY
    assert decode_share_snapshot_value(value).state == state


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_record_format_error(data):
    for decode in (decode_share_snapshot_key, decode_share_snapshot_value):
        with contextlib.suppress(RecordFormatError):
            decode(data)
