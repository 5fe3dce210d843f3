"""Control records (transaction markers): Kafka's key and value schemas, byte for
byte, and the control batch a coordinator writes."""

from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch

from weir.format.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    InvalidControlRecord,
    build_end_txn_marker_batch,
    decode_control_key,
    encode_control_key,
    read_end_txn_marker,
)
from weir.format.errors import ErrorCode
from weir.format.record_batch import InvalidBatch, build_batch, parse_batch_header

NOW_MS = 1_700_000_000_000


def test_control_key_is_version_0_then_the_type_as_int16s() -> None:
    assert encode_control_key(ControlRecordType.ABORT) == b"\x00\x00\x00\x00"
    assert encode_control_key(ControlRecordType.COMMIT) == b"\x00\x00\x00\x01"


def test_end_txn_marker_value_is_version_0_then_the_coordinator_epoch() -> None:
    marker = EndTransactionMarker(ControlRecordType.COMMIT, 0x01020304)
    assert marker.encode_value() == b"\x00\x00\x01\x02\x03\x04"
    negative = EndTransactionMarker(ControlRecordType.ABORT, -1)
    assert negative.encode_value() == b"\x00\x00\xff\xff\xff\xff"


@pytest.mark.parametrize("control_type", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
def test_marker_round_trips_through_key_and_value(control_type: ControlRecordType) -> None:
    marker = EndTransactionMarker(control_type, 7)
    decoded = EndTransactionMarker.decode(marker.encode_key(), marker.encode_value())
    assert decoded == marker
    assert decoded.committed == (control_type == ControlRecordType.COMMIT)


def test_newer_versions_are_read_as_version_0_with_trailing_fields_ignored() -> None:
    key = struct.pack(">hh", 3, 1) + b"future"
    value = struct.pack(">hi", 2, 9) + b"more"
    assert EndTransactionMarker.decode(key, value) == EndTransactionMarker(
        ControlRecordType.COMMIT, 9
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"\x00\x00\x00", b"\x00\x00\x00\x00\x00\x01"),  # key too short
        (None, b"\x00\x00\x00\x00\x00\x01"),  # null key
        (b"\xff\xff\x00\x01", b"\x00\x00\x00\x00\x00\x01"),  # negative key version
        (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00"),  # value too short
        (b"\x00\x00\x00\x01", None),  # null value
        (b"\x00\x00\x00\x01", b"\x80\x00\x00\x00\x00\x01"),  # negative value version
        (b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x01"),  # a leader change, not a marker
    ],
)
def test_malformed_markers_are_invalid_records(key: bytes | None, value: bytes | None) -> None:
    with pytest.raises(InvalidControlRecord) as raised:
        EndTransactionMarker.decode(key, value)
    assert raised.value.error_code == ErrorCode.INVALID_RECORD


def test_unknown_control_types_decode_to_their_id() -> None:
    assert decode_control_key(b"\x00\x00\x00\x2a") == 42


def test_only_commit_and_abort_make_a_marker() -> None:
    with pytest.raises(ValueError, match="does not end a transaction"):
        EndTransactionMarker(ControlRecordType.LEADER_CHANGE, 0)


def test_marker_batch_is_byte_exact() -> None:
    marker = EndTransactionMarker(ControlRecordType.COMMIT, 5)
    batch = build_end_txn_marker_batch(
        marker,
        producer_id=1000,
        producer_epoch=3,
        timestamp_ms=NOW_MS,
        base_offset=42,
        partition_leader_epoch=7,
    )
    # One record: length 16, attributes, timestamp delta 0, offset delta 0,
    # key length 4, key, value length 6, value, no headers (zig-zag varints).
    record = bytes([32, 0, 0, 0, 8]) + b"\x00\x00\x00\x01" + bytes([12])
    record += b"\x00\x00\x00\x00\x00\x05" + bytes([0])
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0x30,  # attributes: transactional | control, CreateTime, uncompressed
            0,  # last offset delta
            NOW_MS,  # base timestamp
            NOW_MS,  # max timestamp
            1000,  # producer id
            3,  # producer epoch
            -1,  # base sequence
            1,  # records count
        )
        + record
    )
    expected = (
        struct.pack(">qiib", 42, 78 - 12, 7, 2)
        + struct.pack(">I", crc32c.crc32c(after_crc))
        + after_crc
    )
    assert len(batch) == 78
    assert batch == expected


def test_marker_batch_header_predicates() -> None:
    batch = build_end_txn_marker_batch(
        EndTransactionMarker(ControlRecordType.ABORT, 0),
        producer_id=5,
        producer_epoch=0,
        timestamp_ms=NOW_MS,
    )
    header = parse_batch_header(batch)
    assert header.is_control and header.is_transactional
    assert (header.base_sequence, header.records_count, header.compression) == (-1, 1, 0)
    plain = parse_batch_header(build_batch([(b"k", b"v", [])], timestamp_ms=NOW_MS))
    assert not plain.is_control and not plain.is_transactional


def test_marker_batch_reads_back_as_its_marker() -> None:
    marker = EndTransactionMarker(ControlRecordType.ABORT, 12)
    batch = build_end_txn_marker_batch(marker, producer_id=9, producer_epoch=1, timestamp_ms=NOW_MS)
    padded = b"\x00" * 10 + batch + b"\xff" * 5
    assert read_end_txn_marker(padded, 10) == marker


def test_an_independent_client_library_reads_the_marker_batch() -> None:
    """kafka-python's RecordBatch v2 reader (its own code, not Weir's) sees a valid
    control batch holding an abort marker."""
    batch = build_end_txn_marker_batch(
        EndTransactionMarker(ControlRecordType.ABORT, 3),
        producer_id=77,
        producer_epoch=2,
        timestamp_ms=NOW_MS,
        base_offset=10,
    )
    read = DefaultRecordBatch(batch)
    assert read.validate_crc()
    assert read.is_control_batch and read.is_transactional
    assert (read.producer_id, read.producer_epoch, read.base_sequence) == (77, 2, -1)
    (record,) = list(read)
    assert record.abort and record.version == 0 and record.offset == 10
    assert record.value == b"\x00\x00\x00\x00\x00\x03"


def test_reading_a_data_batch_as_a_marker_is_refused() -> None:
    with pytest.raises(InvalidBatch, match="not a control batch"):
        read_end_txn_marker(build_batch([(b"k", b"v", [])], timestamp_ms=NOW_MS))


def test_a_truncated_marker_batch_is_refused() -> None:
    batch = build_end_txn_marker_batch(
        EndTransactionMarker(ControlRecordType.COMMIT, 0),
        producer_id=1,
        producer_epoch=0,
        timestamp_ms=NOW_MS,
    )
    with pytest.raises(InvalidBatch):
        read_end_txn_marker(batch[:-1])


def test_a_marker_batch_with_a_flipped_bit_fails_its_crc() -> None:
    batch = bytearray(
        build_end_txn_marker_batch(
            EndTransactionMarker(ControlRecordType.COMMIT, 0),
            producer_id=1,
            producer_epoch=0,
            timestamp_ms=NOW_MS,
        )
    )
    batch[-2] ^= 0x01
    with pytest.raises(InvalidBatch, match="CRC"):
        read_end_txn_marker(bytes(batch))


def test_a_control_batch_emptied_by_compaction_holds_no_marker() -> None:
    """Compaction can remove a marker's record once its transaction is gone from
    the log; Kafka then treats the batch as ending nothing."""
    full = build_end_txn_marker_batch(
        EndTransactionMarker(ControlRecordType.COMMIT, 0),
        producer_id=1,
        producer_epoch=0,
        timestamp_ms=NOW_MS,
    )
    header = parse_batch_header(full)
    empty = bytearray(full[:61])
    struct.pack_into(">i", empty, 8, 61 - 12)  # batch length without records
    struct.pack_into(">i", empty, 57, 0)  # records count
    struct.pack_into(">I", empty, 17, crc32c.crc32c(bytes(empty[21:])))
    assert header.records_count == 1
    assert read_end_txn_marker(bytes(empty)) is None


def test_marker_batch_needs_a_producer_id() -> None:
    with pytest.raises(ValueError, match="producer id"):
        build_end_txn_marker_batch(
            EndTransactionMarker(ControlRecordType.COMMIT, 0),
            producer_id=-1,
            producer_epoch=0,
            timestamp_ms=NOW_MS,
        )
