"""Appending validates and stamps batches; reading returns them byte-for-byte."""

from __future__ import annotations

import struct
from collections.abc import Callable

import crc32c
import pytest

from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    decode_records,
    iter_batch_headers,
    parse_batch_header,
    verify_crc,
)
from weir.log.errors import LogError, OffsetOutOfRange
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]


def test_assigns_dense_offsets_and_patches_base_offset(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    first = log.append(batch(3), leader_epoch=0, now_ms=now_ms)
    second = log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    assert (first.base_offset, first.last_offset) == (0, 2)
    assert (second.base_offset, second.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    records = log.read(0, bytes_max=1 << 20, end_offset=5).records
    headers = list(iter_batch_headers(records))
    assert [h.base_offset for _, h in headers] == [0, 3]
    assert all(verify_crc(records, pos, h) for pos, h in headers)
    assert [r.offset for r in decode_records(records, uncompressed_bytes_max=1 << 20)] == [
        0,
        1,
        2,
        3,
        4,
    ]


def test_stores_batches_byte_for_byte_except_offset_and_epoch(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    sent = batch(4, value_bytes=100, base_offset=77, partition_leader_epoch=-1)
    log.append(memoryview(sent), leader_epoch=9, now_ms=now_ms)
    stored = log.read(0, bytes_max=1 << 20, end_offset=4).records
    assert len(stored) == len(sent)
    assert stored[16:] == sent[16:]  # magic, crc and everything after are untouched
    assert stored[8:12] == sent[8:12]  # batch length
    header = parse_batch_header(stored)
    assert header.base_offset == 0
    assert header.partition_leader_epoch == 9


def test_stamps_leader_epoch_and_records_epoch_starts(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(2), leader_epoch=1, now_ms=now_ms)
    log.append(batch(2), leader_epoch=1, now_ms=now_ms)
    log.append(batch(3), leader_epoch=4, now_ms=now_ms)
    assert log.epoch_cache.entries == [(1, 0), (4, 4)]
    records = log.read(4, bytes_max=1 << 20, end_offset=7).records
    assert parse_batch_header(records).partition_leader_epoch == 4


def test_log_append_time_stamps_max_timestamp(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    result = log.append(batch(2, timestamp_ms=5), leader_epoch=0, now_ms=now_ms)
    assert result.log_append_time_ms == now_ms
    records = log.read(0, bytes_max=1 << 20, end_offset=2).records
    header = parse_batch_header(records)
    assert header.timestamp_type == 1 and header.max_timestamp == now_ms
    assert verify_crc(records, 0, header)
    assert log.max_timestamp() == (0, now_ms)  # every record carries the append time


def test_create_time_reports_no_append_time(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    assert log.append(batch(), leader_epoch=0, now_ms=now_ms).log_append_time_ms == -1


def test_rejects_crc_mismatch_as_corrupt_message(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 0xFF
    with pytest.raises(LogError) as raised:
        log.append(corrupt, leader_epoch=0, now_ms=now_ms)
    assert raised.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0


def test_rejects_whole_request_when_any_batch_is_bad(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    bad = bytearray(batch(1))
    bad[30] ^= 1
    with pytest.raises(LogError):
        log.append(batch(1) + bytes(bad), leader_epoch=0, now_ms=now_ms)
    assert log.log_end_offset == 0 and log.size_bytes == 0


@pytest.mark.parametrize(
    ("mangle", "code"),
    [
        (lambda b: b[:40], ErrorCode.CORRUPT_MESSAGE),  # short header
        (lambda b: b[:-3], ErrorCode.CORRUPT_MESSAGE),  # truncated batch
        (lambda b: b + b"\x00" * 7, ErrorCode.CORRUPT_MESSAGE),  # trailing bytes
        (lambda b: b[:16] + b"\x01" + b[17:], ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),  # magic
        (lambda b: b[:8] + struct.pack(">i", 10) + b[12:], ErrorCode.CORRUPT_MESSAGE),  # length
        (lambda b: b"", ErrorCode.INVALID_RECORD),
    ],
)
def test_rejects_malformed_batches(
    open_log: OpenLog, batch: MakeBatch, now_ms: int, mangle, code
) -> None:  # type: ignore[no-untyped-def]
    log = open_log()
    with pytest.raises(LogError) as raised:
        log.append(mangle(batch(2)), leader_epoch=0, now_ms=now_ms)
    assert raised.value.error_code == code


def test_rejects_records_count_inconsistent_with_last_offset_delta(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    data = bytearray(batch(2))
    struct.pack_into(">i", data, 57, 3)  # records_count
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))  # a valid CRC again
    with pytest.raises(LogError) as raised:
        log.append(data, leader_epoch=0, now_ms=now_ms)
    assert raised.value.error_code == ErrorCode.INVALID_RECORD


def test_rejects_batch_larger_than_max_message_bytes(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(max_message_bytes=1000)
    log.append(batch(1, value_bytes=800), leader_epoch=0, now_ms=now_ms)
    with pytest.raises(LogError) as raised:
        log.append(batch(1, value_bytes=1000), leader_epoch=0, now_ms=now_ms)
    assert raised.value.error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_rejects_control_batches_from_clients(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    control = batch(1, is_control=True, producer_id=1, producer_epoch=0)
    with pytest.raises(LogError) as raised:
        log.append(control, leader_epoch=0, now_ms=now_ms)
    assert raised.value.error_code == ErrorCode.INVALID_RECORD
    assert log.append(control, leader_epoch=0, now_ms=now_ms, allow_control_batches=True)


def test_rejects_timestamps_outside_configured_difference(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(message_timestamp_difference_max_ms=1000)
    log.append(batch(timestamp_ms=now_ms - 999), leader_epoch=0, now_ms=now_ms)
    with pytest.raises(LogError) as raised:
        log.append(batch(timestamp_ms=now_ms + 5000), leader_epoch=0, now_ms=now_ms)
    assert raised.value.error_code == ErrorCode.INVALID_TIMESTAMP


def test_read_returns_the_batch_containing_the_offset(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(5), leader_epoch=0, now_ms=now_ms)
    log.append(batch(5), leader_epoch=0, now_ms=now_ms)
    result = log.read(7, bytes_max=1 << 20, end_offset=10)
    assert parse_batch_header(result.records).base_offset == 5
    assert result.next_offset == 10


def test_read_returns_at_least_one_batch_beyond_bytes_max(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    big = batch(1, value_bytes=5000)
    log.append(big, leader_epoch=0, now_ms=now_ms)
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    result = log.read(0, bytes_max=10, end_offset=2)
    assert len(result.records) == len(big)
    assert result.next_offset == 1


def test_read_stops_at_whole_batches_within_bytes_max(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(index_interval_bytes=100)
    sizes = []
    for _ in range(50):
        one = batch(1, value_bytes=50)
        sizes.append(len(one))
        log.append(one, leader_epoch=0, now_ms=now_ms)
    for bytes_max in (sizes[0], sizes[0] + 1, 3 * sizes[0] + 10, 1000, 10_000):
        result = log.read(0, bytes_max=bytes_max, end_offset=50)
        expected_batches = max(1, min(50, bytes_max // sizes[0]))
        assert len(result.records) == expected_batches * sizes[0], bytes_max
        assert result.next_offset == expected_batches
    result = log.read(13, bytes_max=5 * sizes[0], end_offset=50)
    assert [h.base_offset for _, h in iter_batch_headers(result.records)] == [13, 14, 15, 16, 17]


def test_read_never_passes_end_offset(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log(index_interval_bytes=0)
    for _ in range(10):
        log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    result = log.read(0, bytes_max=1 << 20, end_offset=6)
    assert [h.last_offset for _, h in iter_batch_headers(result.records)] == [1, 3, 5]
    assert result.next_offset == 6
    assert log.read(6, bytes_max=1 << 20, end_offset=6).records == b""
    # A batch straddling the end offset is not returned.
    assert log.read(6, bytes_max=1 << 20, end_offset=7).records == b""


def test_read_out_of_range_raises(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log()
    log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    assert log.read(2, bytes_max=100, end_offset=2).records == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(3, bytes_max=100, end_offset=2)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, bytes_max=100, end_offset=2)


def test_read_of_empty_log_is_empty(open_log: OpenLog) -> None:
    log = open_log()
    assert log.read(0, bytes_max=100, end_offset=0).records == b""
    assert log.max_timestamp() is None
    assert log.offset_for_timestamp(0) is None


def test_reads_across_rolled_segments(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log(segment_bytes=1024, index_interval_bytes=0)
    for _ in range(40):
        log.append(batch(2, value_bytes=40), leader_epoch=0, now_ms=now_ms)
    assert len(log.segments) > 3
    offset = 0
    seen = []
    while offset < log.log_end_offset:
        result = log.read(offset, bytes_max=300, end_offset=log.log_end_offset)
        seen.extend(h.base_offset for _, h in iter_batch_headers(result.records))
        offset = result.next_offset
    assert seen == list(range(0, 80, 2))


def test_relaxed_mode_counts_writes_as_durable(tmp_path, batch: MakeBatch, now_ms: int) -> None:  # type: ignore[no-untyped-def]
    from weir.log.config import LogConfig

    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), GroupFlusher(fsync_enabled=False))
    log.append(batch(3), leader_epoch=0, now_ms=now_ms)
    assert log.durable_end_offset == 3


def test_read_refuses_a_batch_corrupted_on_disk(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    """Bit rot after recovery: the stored batch no longer matches its CRC32C."""
    log = open_log()
    log.append(batch(3), leader_epoch=0, now_ms=now_ms)
    log.append(batch(3), leader_epoch=0, now_ms=now_ms)
    log.flush()
    path = log.segments[-1].log_path
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the last record of the second batch
    path.write_bytes(bytes(data))
    assert len(log.read(0, bytes_max=1, end_offset=6).records) > 0  # the first is intact
    with pytest.raises(LogError) as raised:
        log.read(3, bytes_max=1 << 20, end_offset=6)
    assert raised.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
