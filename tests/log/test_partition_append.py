"""A leader's append (partition_append.py): every batch validated, offsets,
leader epoch and LogAppendTime stamped, in the caller's buffer when it is a
writable view (a request frame of its own) and into a copy otherwise."""

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
from weir.log.errors import LogError
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]


def stored_headers(log: PartitionLog) -> list[tuple[int, int]]:
    result = log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset)
    return [
        (h.base_offset, h.partition_leader_epoch) for _, h in iter_batch_headers(result.records)
    ]


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


def test_relaxed_mode_counts_writes_as_durable(tmp_path, batch: MakeBatch, now_ms: int) -> None:  # type: ignore[no-untyped-def]
    from weir.log.config import LogConfig

    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), GroupFlusher(fsync_enabled=False))
    log.append(batch(3), leader_epoch=0, now_ms=now_ms)
    assert log.durable_end_offset == 3


def test_a_writable_view_is_patched_in_place(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(3), leader_epoch=4, now_ms=now_ms)
    frame = bytearray(b"header" + batch(2) + batch(1))
    records = memoryview(frame)[6:]
    log.append(records, leader_epoch=5, now_ms=now_ms)
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in iter_batch_headers(records)] == [
        (3, 5),
        (5, 5),
    ]
    assert frame[:6] == b"header"
    assert stored_headers(log) == [(0, 4), (3, 5), (5, 5)]


def test_read_only_input_is_never_modified(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(3), leader_epoch=4, now_ms=now_ms)
    original = batch(2)
    for records in (original, memoryview(original)):
        log.append(records, leader_epoch=6, now_ms=now_ms)
    assert original == batch(2)
    assert stored_headers(log) == [(0, 4), (3, 6), (5, 6)]


def test_stale_epoch_append_does_not_rewrite_the_cache(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(1), leader_epoch=3, now_ms=now_ms)
    log.append(batch(1), leader_epoch=2, now_ms=now_ms)
    assert log.epoch_cache.entries == [(3, 0)]
