"""Rolling, retention, DeleteRecords, truncation and the index lookups."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from weir.format.record_batch import iter_batch_headers, parse_batch_header
from weir.log.errors import OffsetOutOfRange
from weir.log.partition import PartitionLog
from weir.log.partition_base import LOG_START_CHECKPOINT_FILE_NAME
from weir.log.segment import segment_file_name

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]
HOUR_MS = 3_600_000


def test_segment_files_use_kafka_names(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log(segment_bytes=1024)
    for _ in range(10):
        log.append(batch(3, value_bytes=100), leader_epoch=0, now_ms=now_ms)
    names = sorted(os.listdir(log.directory))
    assert "00000000000000000000.log" in names
    assert "00000000000000000000.index" in names
    assert "00000000000000000000.timeindex" in names
    for segment in log.segments:
        assert segment.log_path.name == f"{segment.base_offset:020d}.log"
    assert "leader-epoch-checkpoint" in names


def test_rolls_when_segment_bytes_would_be_exceeded(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024)
    one = batch(1, value_bytes=300)
    for _ in range(7):
        log.append(one, leader_epoch=0, now_ms=now_ms)
    per_segment = 1024 // len(one)
    assert [s.base_offset for s in log.segments] == list(range(0, 7, per_segment))
    assert all(s.size_bytes <= 1024 for s in log.segments)


def test_batch_larger_than_segment_bytes_gets_its_own_segment(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024)
    log.append(batch(1, value_bytes=100), leader_epoch=0, now_ms=now_ms)
    log.append(batch(1, value_bytes=900), leader_epoch=0, now_ms=now_ms)
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_rolls_after_segment_ms(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log(segment_ms=1000)
    log.append(batch(1, timestamp_ms=now_ms), leader_epoch=0, now_ms=now_ms)
    log.append(batch(1, timestamp_ms=now_ms + 500), leader_epoch=0, now_ms=now_ms + 500)
    assert len(log.segments) == 1
    log.append(batch(1, timestamp_ms=now_ms + 1500), leader_epoch=0, now_ms=now_ms + 1500)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_rolls_when_offset_index_fills(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log(segment_index_bytes=48, index_interval_bytes=0)  # 6 offset / 4 time entries
    for _ in range(20):
        log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    # The first batch of a segment is never indexed: 1 + 6 batches per segment.
    assert [s.base_offset for s in log.segments] == [0, 7, 14]
    assert all(len(s.offset_index) <= 6 for s in log.segments)


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


def test_truncate_to_removes_batches_at_and_after_offset(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024, index_interval_bytes=0)
    for epoch in range(1, 11):
        log.append(batch(2, value_bytes=200), leader_epoch=epoch, now_ms=now_ms)
    log.flush()
    assert len(log.segments) > 2
    log.truncate_to(7)  # inside batch 6..7: that batch goes too
    assert log.log_end_offset == 6
    assert log.durable_end_offset == 6
    assert log.segments[-1].next_offset == 6
    assert log.epoch_cache.entries == [(e, 2 * (e - 1)) for e in range(1, 4)]
    result = log.read(4, bytes_max=1 << 20, end_offset=10)
    assert [h.base_offset for _, h in iter_batch_headers(result.records)] == [4]
    assert result.next_offset == 6
    assert log.append(batch(1), leader_epoch=11, now_ms=now_ms).base_offset == 6
    log.close()
    log = open_log(segment_bytes=1024, index_interval_bytes=0)
    assert log.log_end_offset == 7


def test_truncate_below_log_start_restarts_the_log(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    for _ in range(5):
        log.append(batch(2), leader_epoch=1, now_ms=now_ms)
    log.flush()
    log.delete_records_before(6)
    log.truncate_to(4)
    assert log.log_start_offset == log.log_end_offset == 4
    assert log.append(batch(1), leader_epoch=2, now_ms=now_ms).base_offset == 4


def test_offset_for_timestamp_finds_first_record_at_or_after(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024, index_interval_bytes=0)
    for i in range(30):
        log.append(
            batch(2, value_bytes=100, timestamp_ms=now_ms + 10 * i), leader_epoch=0, now_ms=now_ms
        )
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, now_ms)
    assert log.offset_for_timestamp(now_ms + 100) == (20, now_ms + 100)
    assert log.offset_for_timestamp(now_ms + 95) == (20, now_ms + 100)
    assert log.offset_for_timestamp(now_ms + 290) == (58, now_ms + 290)
    assert log.offset_for_timestamp(now_ms + 291) is None


def test_offset_for_timestamp_resolves_records_inside_a_batch(
    open_log: OpenLog, now_ms: int
) -> None:
    from weir.format.record_batch import build_batch

    log = open_log()
    records = [(None, b"v", [], now_ms + delta) for delta in (0, 30, 10, 50)]
    log.append(build_batch(records), leader_epoch=0, now_ms=now_ms)
    assert log.offset_for_timestamp(now_ms + 20) == (1, now_ms + 30)
    assert log.offset_for_timestamp(now_ms + 40) == (3, now_ms + 50)
    assert log.max_timestamp() == (3, now_ms + 50)


def test_max_timestamp_names_the_record_not_the_batch_end(open_log: OpenLog, now_ms: int) -> None:
    from weir.format.record_batch import build_batch

    log = open_log()
    log.append(build_batch([(None, b"v", [], now_ms)]), leader_epoch=0, now_ms=now_ms)
    records = [(None, b"v", [], now_ms + delta) for delta in (0, 90, 10, 90)]
    log.append(build_batch(records), leader_epoch=0, now_ms=now_ms)
    assert log.max_timestamp() == (2, now_ms + 90)


def test_offset_for_timestamp_skips_records_before_log_start(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(4, timestamp_ms=now_ms), leader_epoch=0, now_ms=now_ms)
    log.flush()
    log.delete_records_before(2)
    assert log.offset_for_timestamp(0) == (2, now_ms)


def test_max_timestamp_reports_largest_batch(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024)
    for ts in (5, 50, 20, 7):
        log.append(
            batch(2, value_bytes=300, timestamp_ms=now_ms + ts), leader_epoch=0, now_ms=now_ms
        )
    assert log.max_timestamp() == (2, now_ms + 50)


def test_time_index_survives_restart(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log(segment_bytes=1024, index_interval_bytes=0)
    for i in range(30):
        log.append(
            batch(2, value_bytes=100, timestamp_ms=now_ms + 10 * i), leader_epoch=0, now_ms=now_ms
        )
    log.close()
    log = open_log(segment_bytes=1024, index_interval_bytes=0)
    assert log.offset_for_timestamp(now_ms + 95) == (20, now_ms + 100)
    assert [s.max_timestamp_ms for s in log.segments][0] > now_ms


def test_end_offset_for_epoch_follows_kafka(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    assert log.end_offset_for_epoch(0) == (-1, -1)
    log.append(batch(2), leader_epoch=2, now_ms=now_ms)  # epoch 2 starts at 0
    log.append(batch(3), leader_epoch=4, now_ms=now_ms)  # epoch 4 starts at 2
    log.append(batch(1), leader_epoch=7, now_ms=now_ms)  # epoch 7 starts at 5
    assert log.end_offset_for_epoch(7) == (7, 6)  # latest: the log end
    assert log.end_offset_for_epoch(4) == (4, 5)
    assert log.end_offset_for_epoch(5) == (4, 5)  # largest epoch <= 5 is 4
    assert log.end_offset_for_epoch(2) == (2, 2)
    assert log.end_offset_for_epoch(1) == (1, 0)  # below every epoch
    assert log.end_offset_for_epoch(9) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)


def test_stale_epoch_append_does_not_rewrite_the_cache(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(1), leader_epoch=3, now_ms=now_ms)
    log.append(batch(1), leader_epoch=2, now_ms=now_ms)
    assert log.epoch_cache.entries == [(3, 0)]
