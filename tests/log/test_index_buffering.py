"""Index entries are buffered in memory and written in bulk, but always reach
their files before a segment is sealed, truncated or closed."""

from __future__ import annotations

from collections.abc import Callable

from weir.format.record_batch import iter_batch_headers
from weir.log.index import OFFSET_ENTRY_BYTES, TIME_ENTRY_BYTES
from weir.log.partition import PartitionLog
from weir.log.segment import Segment

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]


def index_file_entries(segment: Segment) -> tuple[int, int]:
    offset_bytes = segment.offset_index.path.stat().st_size
    time_bytes = segment.time_index.path.stat().st_size
    return offset_bytes // OFFSET_ENTRY_BYTES, time_bytes // TIME_ENTRY_BYTES


def append_many(log: PartitionLog, batch: MakeBatch, now_ms: int, count: int) -> None:
    for i in range(count):
        log.append(batch(1, timestamp_ms=now_ms + i), leader_epoch=0, now_ms=now_ms)


def test_appends_do_not_write_each_index_entry(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(index_interval_bytes=0)
    append_many(log, batch, now_ms, 20)
    active = log.segments[-1]
    assert len(active.offset_index) == 19  # every batch after the first
    assert index_file_entries(active) == (0, 0)


def test_a_sealed_segment_has_every_index_entry_in_its_files(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(index_interval_bytes=0, segment_bytes=2048)
    append_many(log, batch, now_ms, 60)
    assert len(log.segments) > 2
    for sealed in log.segments[:-1]:
        assert len(sealed.offset_index) > 0
        assert index_file_entries(sealed) == (len(sealed.offset_index), len(sealed.time_index))


def test_close_writes_the_buffered_entries(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(index_interval_bytes=0)
    append_many(log, batch, now_ms, 20)
    active = log.segments[-1]
    expected = (len(active.offset_index), len(active.time_index))
    log.close()
    assert index_file_entries(active) == expected


def test_truncation_of_buffered_entries_leaves_indexes_that_load_after_restart(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(index_interval_bytes=0)
    append_many(log, batch, now_ms, 40)
    log.flush()
    log.truncate_to(25)
    append_many(log, batch, now_ms + 100, 5)
    log.roll()
    sealed = log.segments[0]
    assert index_file_entries(sealed) == (len(sealed.offset_index), len(sealed.time_index))
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    log.close()

    reopened = open_log(index_interval_bytes=0)
    assert reopened.log_end_offset == 31
    for offset in (0, 12, 24, 25, 29):
        result = reopened.read(offset, bytes_max=1, end_offset=31)
        assert [h.base_offset for _, h in iter_batch_headers(result.records)] == [offset]
    assert reopened.offset_for_timestamp(now_ms + 101) == (26, now_ms + 101)
