"""Opening a log recovers it: torn tails truncated, indexes rebuilt, epochs trimmed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.format.record_batch import iter_batch_headers
from weir.log.config import LogConfig
from weir.log.errors import LogDamaged
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog
from weir.log.partition_base import CLEAN_SHUTDOWN_FILE_NAME, DURABLE_OFFSET_CHECKPOINT_FILE_NAME
from weir.log.partition_durability import write_durable_checkpoints
from weir.log.segment import Segment

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]


def crash(log: PartitionLog) -> None:
    """Drop the log without a clean close (files stay as written), after the
    broker's last fsync round and its record of the fsynced offset."""
    log.flush()
    record_durable_offset(log)
    for segment in log.segments:
        segment.close()


def record_durable_offset(log: PartitionLog) -> None:
    """What LogManager's once-a-second job does for this log, in place."""
    due = log.durable_checkpoint_due()
    if due is not None:
        for checkpoint in write_durable_checkpoints([due]):
            log.durable_checkpoint_written(checkpoint)


def forget_durable_offset(log: PartitionLog) -> None:
    """As if the crash came before the flusher recorded the last fsync (it does
    so at most every second): what follows may be an unacknowledged tail."""
    (log.directory / DURABLE_OFFSET_CHECKPOINT_FILE_NAME).unlink(missing_ok=True)


def active_log_path(log: PartitionLog) -> Path:
    return log.segments[-1].log_path


def fill(log: PartitionLog, batch: MakeBatch, now_ms: int, batches: int, **kw: object) -> None:
    for _ in range(batches):
        log.append(batch(2, **kw), leader_epoch=0, now_ms=now_ms)


def test_reopens_cleanly_closed_log(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log(segment_bytes=1024)
    fill(log, batch, now_ms, 30, value_bytes=30)
    end, segments = log.log_end_offset, len(log.segments)
    expected = log.read(0, bytes_max=1 << 20, end_offset=end).records
    log.close()
    assert (log.directory / CLEAN_SHUTDOWN_FILE_NAME).exists()
    log = open_log(segment_bytes=1024)
    assert not (log.directory / CLEAN_SHUTDOWN_FILE_NAME).exists()
    assert (log.log_end_offset, len(log.segments)) == (end, segments)
    assert log.durable_end_offset == end
    assert log.read(0, bytes_max=1 << 20, end_offset=end).records == expected


def test_truncates_torn_tail_on_recovery(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log()
    fill(log, batch, now_ms, 5)
    size = log.size_bytes
    crash(log)
    whole = batch(2)
    with open(active_log_path(log), "ab") as f:
        f.write(whole[: len(whole) // 2])  # a partial batch
    log = open_log()
    assert log.log_end_offset == 10
    assert os.path.getsize(active_log_path(log)) == size
    log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    assert log.read(10, bytes_max=1000, end_offset=12).records


def test_truncates_garbage_tail_on_recovery(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    fill(log, batch, now_ms, 3)
    crash(log)
    with open(active_log_path(log), "ab") as f:
        f.write(os.urandom(500))
    log = open_log()
    assert log.log_end_offset == 6


def test_truncates_a_last_batch_failing_crc(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    """Within a second of the crash the last batches are not recorded as fsynced:
    a bad last batch may be an append the crash tore, never acknowledged."""
    log = open_log()
    fill(log, batch, now_ms, 6)
    second = len(batch(2))
    crash(log)
    forget_durable_offset(log)
    flip_byte(active_log_path(log), 5 * second + 70)  # inside the last batch's records
    log = open_log()
    assert log.log_end_offset == 10
    records = log.read(0, bytes_max=1 << 20, end_offset=10).records
    assert [h.base_offset for _, h in iter_batch_headers(records)] == [0, 2, 4, 6, 8]


def test_a_bad_last_batch_recorded_as_fsynced_takes_the_log_offline(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    fill(log, batch, now_ms, 6)
    second = len(batch(2))
    crash(log)
    path = active_log_path(log)
    flip_byte(path, 5 * second + 70)
    size = path.stat().st_size
    with pytest.raises(LogDamaged, match="below offset 12: those records were fsynced"):
        open_log()
    assert path.stat().st_size == size


def test_truncation_lowers_the_durable_offset_so_a_restart_is_clean(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    fill(log, batch, now_ms, 6)
    log.flush()
    log.truncate_to(4)
    crash(log)
    assert open_log().log_end_offset == 4


def test_a_truncation_while_the_durable_offset_is_written_keeps_its_lower_value(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    """The once-a-second record is written on a worker thread: if a truncation
    lowers it meanwhile, the worker's older, higher value must not stay on disk
    (a restart would take the records below it for lost and go offline)."""
    log = open_log()
    fill(log, batch, now_ms, 6)
    log.flush()
    taken = log.durable_checkpoint_due()  # collected on the Trio thread
    assert taken is not None and taken.offset == 12
    log.truncate_to(4)  # writes 4
    written = write_durable_checkpoints([taken])  # the worker finishes: 12 on disk
    assert read_durable_offset(log) == 12
    for checkpoint in written:
        log.durable_checkpoint_written(checkpoint)  # back on the Trio thread
    assert read_durable_offset(log) == 4
    crash(log)
    assert open_log().log_end_offset == 4


def read_durable_offset(log: PartitionLog) -> int:
    text = (log.directory / DURABLE_OFFSET_CHECKPOINT_FILE_NAME).read_text()
    return int(text.split()[-1])


def test_damage_followed_by_intact_batches_takes_the_log_offline_untouched(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    """A bad batch with intact ones after it is not a torn append (those are
    only ever at the end): cutting there would drop acknowledged records."""
    log = open_log()
    fill(log, batch, now_ms, 6)
    second = len(batch(2))
    crash(log)
    forget_durable_offset(log)
    path = active_log_path(log)
    flip_byte(path, 3 * second + 70)  # inside the 4th of 6 batches
    before = path.read_bytes()
    with pytest.raises(LogDamaged, match=r"intact records follow at byte \d+ \(offset 8\)"):
        open_log()
    assert path.read_bytes() == before


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_zero_filled_tail_is_truncated(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log()
    fill(log, batch, now_ms, 2)
    crash(log)
    with open(active_log_path(log), "ab") as f:
        f.write(b"\x00" * 4096)
    log = open_log()
    assert log.log_end_offset == 4


def test_rebuilds_corrupt_offset_index(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log(segment_bytes=2048, index_interval_bytes=100)
    fill(log, batch, now_ms, 60, value_bytes=30)
    assert len(log.segments) >= 3
    first = log.segments[0]
    index_path = first.offset_index.path
    expected_entries = len(first.offset_index)
    assert expected_entries > 2
    log.close()
    with open(index_path, "r+b") as f:
        f.seek(8)
        f.write(b"\xff" * 8)  # entries no longer increase
    log = open_log(segment_bytes=2048, index_interval_bytes=100)
    assert len(log.segments[0].offset_index) == expected_entries
    for offset in range(0, log.log_end_offset, 7):
        records = log.read(offset, bytes_max=1, end_offset=log.log_end_offset).records
        header = next(iter(iter_batch_headers(records)))[1]
        assert header.base_offset <= offset <= header.last_offset


def test_rebuilds_missing_indexes(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log(segment_bytes=2048, index_interval_bytes=100)
    fill(log, batch, now_ms, 60, value_bytes=30)
    first = log.segments[0]
    entries, max_timestamp = len(first.offset_index), first.max_timestamp_ms
    log.close()
    first.offset_index.path.unlink()
    first.time_index.path.unlink()
    log = open_log(segment_bytes=2048, index_interval_bytes=100)
    assert len(log.segments[0].offset_index) == entries
    assert log.segments[0].max_timestamp_ms == max_timestamp


def test_index_pointing_at_wrong_batch_is_rebuilt(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=2048, index_interval_bytes=100)
    fill(log, batch, now_ms, 60, value_bytes=30)
    first = log.segments[0]
    path = first.offset_index.path
    original_last = first.offset_index.last_entry()
    log.close()
    data = bytearray(path.read_bytes())
    # Off by one offset, still sane on its own (increasing, below the next
    # segment's base): only comparing it with the batch it points at tells.
    data[-8:-4] = (int.from_bytes(data[-8:-4], "big") - 1).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    log = open_log(segment_bytes=2048, index_interval_bytes=100)
    last = log.segments[0].offset_index.last_entry()
    assert last == original_last, "the wrong entry was trusted, not rebuilt"
    assert last is not None
    records = log.read(last[0], bytes_max=1, end_offset=log.log_end_offset).records
    assert next(iter(iter_batch_headers(records)))[1].last_offset == last[0]


def test_torn_segment_with_records_after_it_takes_the_log_offline(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024)
    fill(log, batch, now_ms, 40, value_bytes=40)
    assert len(log.segments) >= 4
    second_last = log.segments[-2]
    crash(log)
    forget_durable_offset(log)
    size = os.path.getsize(second_last.log_path)
    os.truncate(second_last.log_path, size - 10)
    files_before = sorted(os.listdir(log.directory))
    with pytest.raises(LogDamaged, match="after it holds records"):
        open_log(segment_bytes=1024)
    assert sorted(os.listdir(log.directory)) == files_before


def test_torn_sealed_segment_before_an_empty_active_one_is_truncated(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    """A crash right after a roll: the sealed segment's tail was never synced
    (so never acknowledged) and the new active segment holds nothing."""
    log = open_log(segment_bytes=1024)
    fill(log, batch, now_ms, 40, value_bytes=40)
    log.roll()
    assert log.segments[-1].is_empty
    sealed = log.segments[-2]
    crash(log)
    forget_durable_offset(log)
    os.truncate(sealed.log_path, os.path.getsize(sealed.log_path) - 10)
    log = open_log(segment_bytes=1024)
    assert log.log_end_offset == sealed.next_offset - 2
    assert log.segments[-1].base_offset == sealed.base_offset
    records = log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset).records
    offsets = [h.base_offset for _, h in iter_batch_headers(records)]
    assert offsets == list(range(0, offsets[-1] + 1, 2))


def test_epoch_cache_is_truncated_to_recovered_end(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(2), leader_epoch=1, now_ms=now_ms)
    size = log.size_bytes
    log.append(batch(2), leader_epoch=2, now_ms=now_ms)
    assert log.epoch_cache.entries == [(1, 0), (2, 2)]
    crash(log)
    forget_durable_offset(log)
    os.truncate(active_log_path(log), size + 30)
    log = open_log()
    assert log.log_end_offset == 2
    assert log.epoch_cache.entries == [(1, 0)]
    assert log.end_offset_for_epoch(1) == (1, 2)


def test_epoch_cache_rebuilt_from_batches_when_checkpoint_lost(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(2), leader_epoch=1, now_ms=now_ms)
    log.append(batch(2), leader_epoch=3, now_ms=now_ms)
    crash(log)
    log.epoch_cache.path.unlink()
    log = open_log()
    assert log.epoch_cache.entries == [(1, 0), (3, 2)]


def test_recovered_log_accepts_appends_after_torn_tail(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(index_interval_bytes=0)
    fill(log, batch, now_ms, 4)
    crash(log)
    with open(active_log_path(log), "ab") as f:
        f.write(batch(2)[:70])
    log = open_log(index_interval_bytes=0)
    fill(log, batch, now_ms, 2)
    records = log.read(0, bytes_max=1 << 20, end_offset=12).records
    assert [h.base_offset for _, h in iter_batch_headers(records)] == [0, 2, 4, 6, 8, 10]


def test_log_start_offset_survives_restart(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    fill(log, batch, now_ms, 5)
    log.flush()
    assert log.delete_records_before(3) == 3
    crash(log)
    log = open_log()
    assert log.log_start_offset == 3


async def test_fsynced_batches_survive_reopen(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    flusher = GroupFlusher()
    await nursery.start(flusher.run)
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), flusher)
    for _ in range(5):
        result = log.append(batch(3), leader_epoch=0, now_ms=now_ms)
        await log.wait_durable(result.last_offset + 1)
    for segment in log.segments:
        segment.close()
    reopened = PartitionLog.open(tmp_path / "t-0", LogConfig(), flusher)
    assert reopened.log_end_offset == 15


async def test_unclean_restart_trusts_segments_below_the_recovery_point(
    tmp_path: Path,
    nursery: trio.Nursery,
    batch: MakeBatch,
    now_ms: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flusher = GroupFlusher()
    await nursery.start(flusher.run)
    config = LogConfig.from_overrides({"segment.bytes": "1024"})
    log = PartitionLog.open(tmp_path / "t-0", config, flusher)
    for _ in range(30):
        result = log.append(batch(1, value_bytes=300), leader_epoch=0, now_ms=now_ms)
        await log.wait_durable(result.last_offset + 1)
    segments = len(log.segments)
    assert segments >= 8
    for segment in log.segments:
        segment.close()  # crash: no clean-shutdown marker
    scanned: list[int] = []
    original = Segment.scan

    def counting_scan(self: Segment, *args: Any) -> int:
        scanned.append(self.base_offset)
        return original(self, *args)

    monkeypatch.setattr(Segment, "scan", counting_scan)
    reopened = PartitionLog.open(tmp_path / "t-0", config, flusher)
    assert reopened.log_end_offset == 30
    assert len(reopened.segments) == segments
    assert 1 <= len(scanned) <= 3, scanned
    assert scanned[-1] == reopened.segments[-1].base_offset
