"""Segments leaving the log's start (partition_retention.py): retention by time
and size, DeleteRecords."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from weir.format.record_batch import parse_batch_header
from weir.log.errors import OffsetOutOfRange
from weir.log.partition import PartitionLog
from weir.log.partition_base import LOG_START_CHECKPOINT_FILE_NAME
from weir.log.segment import segment_file_name

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]
HOUR_MS = 3_600_000


def test_retention_ms_deletes_old_segments_by_max_timestamp(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024, retention_ms=HOUR_MS)
    for hour in range(6):
        ts = now_ms + hour * HOUR_MS
        log.append(batch(2, value_bytes=400, timestamp_ms=ts), leader_epoch=0, now_ms=ts)
    log.flush()
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    now = now_ms + 5 * HOUR_MS
    deleted = log.enforce_retention(now)
    assert deleted > 0
    assert all(now - s.max_timestamp_ms <= HOUR_MS for s in log.segments)
    assert log.log_start_offset == log.segments[0].base_offset
    assert not (log.directory / segment_file_name(0, ".log")).exists()
    with pytest.raises(OffsetOutOfRange):
        log.read(0, bytes_max=100, end_offset=log.log_end_offset)


def test_retention_ms_rolls_and_deletes_an_expired_active_segment(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(retention_ms=HOUR_MS)
    log.append(batch(3), leader_epoch=0, now_ms=now_ms)
    log.flush()
    assert log.enforce_retention(now_ms + 2 * HOUR_MS) == 1
    assert log.log_start_offset == log.log_end_offset == 3
    assert log.read(3, bytes_max=100, end_offset=3).records == b""
    assert log.append(batch(1), leader_epoch=0, now_ms=now_ms).base_offset == 3


def test_retention_keeps_segments_that_are_not_durable(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024, retention_ms=HOUR_MS)
    for _ in range(6):
        log.append(batch(2, value_bytes=400), leader_epoch=0, now_ms=now_ms)
    assert log.durable_end_offset == 0
    assert log.enforce_retention(now_ms + 10 * HOUR_MS) == 0


def test_retention_bytes_deletes_oldest_segments_while_over(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024, retention_bytes=2500)
    for _ in range(12):
        log.append(batch(1, value_bytes=400), leader_epoch=0, now_ms=now_ms)
    log.flush()
    before = log.size_bytes
    log.enforce_retention(now_ms)
    assert log.size_bytes >= 2500 or log.size_bytes == log.segments[-1].size_bytes
    # Deleting one more segment would have gone below the limit.
    assert log.size_bytes - log.segments[0].size_bytes < 2500
    assert log.size_bytes < before
    assert log.log_start_offset == log.segments[0].base_offset


def test_unlimited_retention_and_compact_policy_keep_everything(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024, retention_ms=-1, retention_bytes=-1)
    for _ in range(8):
        log.append(batch(1, value_bytes=400), leader_epoch=0, now_ms=now_ms)
    log.flush()
    assert log.enforce_retention(now_ms + 10**12) == 0
    log.close()
    log = open_log(segment_bytes=1024, retention_ms=1, cleanup_policy="compact")
    assert log.enforce_retention(now_ms + 10**12) == 0


def test_delete_records_moves_log_start_and_deletes_whole_segments(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024)
    for _ in range(10):
        log.append(batch(2, value_bytes=300), leader_epoch=0, now_ms=now_ms)
    log.flush()
    second_base = log.segments[1].base_offset
    new_start = second_base + 1
    assert log.delete_records_before(new_start) == new_start
    assert log.log_start_offset == new_start
    assert log.segments[0].base_offset == second_base
    assert (log.directory / LOG_START_CHECKPOINT_FILE_NAME).exists()
    # Reading at the start returns the batch that holds it.
    records = log.read(new_start, bytes_max=1, end_offset=log.log_end_offset).records
    assert parse_batch_header(records).base_offset == second_base
    with pytest.raises(OffsetOutOfRange):
        log.read(new_start - 1, bytes_max=1, end_offset=log.log_end_offset)
    assert log.delete_records_before(0) == new_start  # never moves back
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(log.log_end_offset + 1)
