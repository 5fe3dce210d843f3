"""RecordBatch v2: header view, CRC, patching, and the record codec."""

from __future__ import annotations

import contextlib
import random
import struct

import pytest

from weir.format.compression import Codec
from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    BATCH_HEADER_SIZE,
    InvalidBatch,
    RecordInput,
    build_batch,
    decode_records,
    iter_batch_headers,
    parse_batch_header,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
    verify_crc,
)

RECORDS: list[RecordInput] = [
    (b"k1", b"v1", [("h", b"x"), ("null", None)]),
    (None, b"v" * 1000, []),
    (b"k3", None, [], 1_700_000_000_123),
]


def _decode(batch: bytes | bytearray, **kwargs: object) -> list:
    return list(decode_records(batch, uncompressed_bytes_max=1 << 20, **kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", list(Codec))
def test_built_batches_decode_for_every_codec(codec: Codec) -> None:
    batch = build_batch(RECORDS, base_offset=100, compression=codec, timestamp_ms=1_000)
    header = parse_batch_header(batch)
    assert header.compression == codec
    assert header.records_count == 3 and header.last_offset_delta == 2
    assert header.size == len(batch)
    assert (header.base_offset, header.last_offset, header.next_offset) == (100, 102, 103)
    assert (header.base_timestamp, header.max_timestamp) == (1_000, 1_700_000_000_123)
    assert verify_crc(batch, 0, header)
    records = _decode(batch)
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in records] == [
        (100, 1_000, b"k1", b"v1", [("h", b"x"), ("null", None)]),
        (101, 1_000, None, b"v" * 1000, []),
        (102, 1_700_000_000_123, b"k3", None, []),
    ]


def test_header_fields_and_flags() -> None:
    batch = build_batch(
        [(b"k", b"v", [])],
        producer_id=77,
        producer_epoch=3,
        base_sequence=9,
        partition_leader_epoch=4,
        is_transactional=True,
        timestamp_ms=5,
    )
    header = parse_batch_header(memoryview(batch))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 9)
    assert header.partition_leader_epoch == 4 and header.magic == 2
    assert header.is_transactional and not header.is_control
    assert header.timestamp_type == 0


def test_crc_mismatch_is_detected() -> None:
    batch = bytearray(build_batch(RECORDS, timestamp_ms=1))
    header = parse_batch_header(batch)
    batch[-3] ^= 0x01
    assert not verify_crc(batch, 0, header)
    with pytest.raises(InvalidBatch, match="CRC") as info:
        _decode(batch)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_crc_covers_attributes_but_not_offset_or_epoch() -> None:
    batch = bytearray(build_batch(RECORDS, timestamp_ms=1))
    patch_base_offset(batch, 0, 123_456)
    patch_leader_epoch(batch, 0, 42)
    header = parse_batch_header(batch)
    assert (header.base_offset, header.partition_leader_epoch) == (123_456, 42)
    assert verify_crc(batch, 0, header)
    assert _decode(batch)[0].offset == 123_456
    batch[22] ^= 0x08  # attributes: flip the timestamp type
    assert not verify_crc(batch, 0, parse_batch_header(batch))


def test_set_log_append_time_rewrites_crc_and_timestamps() -> None:
    batch = bytearray(build_batch(RECORDS, timestamp_ms=1))
    set_log_append_time(batch, 0, 9_999)
    header = parse_batch_header(batch)
    assert header.timestamp_type == 1 and header.max_timestamp == 9_999
    assert verify_crc(batch, 0, header)
    assert {r.timestamp_ms for r in _decode(batch)} == {9_999}


def test_iter_batch_headers_walks_consecutive_batches() -> None:
    first = build_batch(RECORDS, base_offset=0, timestamp_ms=1)
    second = build_batch([(b"a", b"b", [])], base_offset=3, compression=Codec.ZSTD, timestamp_ms=1)
    buf = first + second
    positions = [(pos, h.base_offset) for pos, h in iter_batch_headers(buf)]
    assert positions == [(0, 0), (len(first), 3)]
    assert [r.offset for r in _decode(buf)] == [0, 1, 2, 3]


def test_truncated_batch_is_rejected() -> None:
    batch = build_batch(RECORDS, timestamp_ms=1)
    with pytest.raises(InvalidBatch, match="remain"):
        list(iter_batch_headers(batch[:-1]))
    with pytest.raises(InvalidBatch, match="61 bytes"):
        parse_batch_header(batch[:60])
    assert parse_batch_header(batch[:BATCH_HEADER_SIZE]).records_count == 3


def test_bad_magic_is_unsupported_for_message_format() -> None:
    batch = bytearray(build_batch(RECORDS, timestamp_ms=1))
    batch[16] = 1
    with pytest.raises(InvalidBatch) as info:
        parse_batch_header(batch)
    assert info.value.error_code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


@pytest.mark.parametrize("batch_length", [-1, 0, 48])
def test_batch_length_too_small_is_rejected(batch_length: int) -> None:
    batch = bytearray(build_batch(RECORDS, timestamp_ms=1))
    struct.pack_into(">i", batch, 8, batch_length)
    with pytest.raises(InvalidBatch):
        parse_batch_header(batch)


def _with_records(records_section: bytes, records_count: int) -> bytes:
    """A valid-CRC batch whose records section is exactly `records_section`."""
    template = bytearray(build_batch([(None, b"x", [])], timestamp_ms=1))
    batch = template[:BATCH_HEADER_SIZE] + records_section
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 57, records_count)
    set_log_append_time(batch, 0, 1)  # rewrites the CRC
    return bytes(batch)


def test_record_count_larger_than_the_data_is_rejected() -> None:
    with pytest.raises(InvalidBatch, match="cannot fit"):
        _decode(_with_records(b"\x00" * 10, 2**31 - 1))


def test_record_length_beyond_the_batch_is_rejected() -> None:
    with pytest.raises(InvalidBatch, match="exceeds"):
        _decode(_with_records(b"\xfe\xff\xff\xff\x0f" + b"\x00" * 8, 1))


def test_huge_header_count_is_rejected_before_allocating() -> None:
    # length 9, attributes, ts delta 0, offset delta 0, key null, value null, headers 2**31-1
    record = b"\x12\x00\x00\x00\x01\x01" + b"\xfe\xff\xff\xff\x0f"
    with pytest.raises(InvalidBatch, match="header count"):
        _decode(_with_records(record, 1))


def test_overlong_record_varint_is_rejected() -> None:
    with pytest.raises(InvalidBatch, match="varint"):
        _decode(_with_records(b"\xff" * 11, 1))


def test_bytes_after_the_last_record_are_rejected() -> None:
    good = build_batch([(None, b"x", [])], timestamp_ms=1)[BATCH_HEADER_SIZE:]
    with pytest.raises(InvalidBatch, match="after its last record"):
        _decode(_with_records(good + b"\x00", 1))


def test_decompression_bound_applies_across_batches() -> None:
    one = build_batch([(None, b"z" * 10_000, [])], compression=Codec.GZIP, timestamp_ms=1)
    assert len(list(decode_records(one, uncompressed_bytes_max=20_000))) == 1
    with pytest.raises(InvalidBatch) as info:
        list(decode_records(one + one, uncompressed_bytes_max=20_000))
    assert info.value.error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_corrupt_compressed_records_are_invalid() -> None:
    batch = bytearray(build_batch(RECORDS, compression=Codec.LZ4, timestamp_ms=1))
    batch[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 4] = b"JUNK"
    set_log_append_time(batch, 0, 1)
    with pytest.raises(InvalidBatch):
        _decode(batch)


def test_control_batches_are_skipped_unless_asked_for() -> None:
    marker = build_batch([(b"\x00\x00\x00\x01", b"\x00" * 6, [])], is_control=True, timestamp_ms=1)
    data = build_batch([(b"k", b"v", [])], base_offset=1, timestamp_ms=1)
    assert [r.offset for r in _decode(marker + data)] == [1]
    assert [r.offset for r in _decode(marker + data, include_control=True)] == [0, 1]


def test_empty_batches_cannot_be_built() -> None:
    with pytest.raises(ValueError):
        build_batch([])


def test_corrupted_batches_raise_only_invalid_batch() -> None:
    rng = random.Random(7)
    for codec in Codec:
        batch = build_batch(RECORDS, compression=codec, timestamp_ms=1)
        for _ in range(300):
            corrupted = bytearray(batch)
            for _ in range(rng.randint(1, 3)):
                corrupted[rng.randrange(len(corrupted))] = rng.randrange(256)
            with contextlib.suppress(InvalidBatch):
                if rng.random() < 0.5:
                    set_log_append_time(corrupted, 0, 1)  # a valid CRC over the damage
                _decode(corrupted)
