"""Reading (partition_read.py): whole batches byte for byte up to the high
watermark, and the timestamp and leader-epoch lookups."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    iter_batch_headers,
    parse_batch_header,
)
from weir.log.errors import LogError, OffsetOutOfRange
from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]


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
