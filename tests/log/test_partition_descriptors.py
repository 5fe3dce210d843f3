"""Partition logs within a descriptor budget: sealed segments and idle partitions
hold no descriptor, recovery opens segments one at a time, and a flush round's
files are never closed under it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from weir.format.record_batch import iter_batch_headers
from weir.log import descriptors
from weir.log.config import LogConfig
from weir.log.descriptors import DescriptorCache
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]
SMALL_SEGMENTS = {"segment.bytes": "1024"}


@pytest.fixture
def install_cache(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], DescriptorCache]:
    """install_cache(capacity): a fresh process-wide log file cache for this test."""

    def install(capacity: int) -> DescriptorCache:
        cache = DescriptorCache(capacity)
        monkeypatch.setattr(descriptors, "LOG_FILES", cache)
        return cache

    return install


def open_partition(path: Path, flusher: GroupFlusher, **configs: str) -> PartitionLog:
    return PartitionLog.open(path, LogConfig.from_overrides(configs), flusher)


async def append_segments(log: PartitionLog, batch: MakeBatch, now_ms: int, count: int) -> None:
    """`count` appends of about 600 bytes each: with 1 KiB segments, one segment each."""
    for _ in range(count):
        result = log.append(batch(1, value_bytes=600), leader_epoch=0, now_ms=now_ms)
        with trio.fail_after(10):
            await log.wait_durable(result.last_offset + 1)


def read_all_offsets(log: PartitionLog) -> list[int]:
    offsets: list[int] = []
    offset = log.log_start_offset
    while offset < log.durable_end_offset:
        result = log.read(offset, bytes_max=1 << 20, end_offset=log.durable_end_offset)
        offsets += [header.base_offset for _, header in iter_batch_headers(result.records)]
        offset = result.next_offset
    return offsets


async def test_many_sealed_segments_use_no_more_descriptors_than_the_cache_holds(
    tmp_path: Path,
    nursery: trio.Nursery,
    batch: MakeBatch,
    now_ms: int,
    install_cache: Callable[[int], DescriptorCache],
) -> None:
    cache = install_cache(12)
    flusher = GroupFlusher()
    await nursery.start(flusher.run)
    log = open_partition(tmp_path / "t-0", flusher, **SMALL_SEGMENTS)
    await append_segments(log, batch, now_ms, 60)
    assert len(log.segments) == 60
    assert cache.open_count <= 12
    assert read_all_offsets(log) == list(range(60))  # sealed segments reopen to be read
    assert cache.open_count <= 12
    assert cache.evictions_count > 0
    log.close()
    assert cache.open_count == 0


async def test_a_log_with_more_segments_than_the_cache_holds_reopens_after_a_crash(
    tmp_path: Path,
    nursery: trio.Nursery,
    batch: MakeBatch,
    now_ms: int,
    install_cache: Callable[[int], DescriptorCache],
) -> None:
    cache = install_cache(12)
    flusher = GroupFlusher()
    await nursery.start(flusher.run)
    log = open_partition(tmp_path / "t-0", flusher, **SMALL_SEGMENTS)
    await append_segments(log, batch, now_ms, 40)
    (tmp_path / "t-0" / "recovery-point-offset-checkpoint").unlink()  # scan every segment
    # A crash: the files are left as they are, nothing closed cleanly.
    reopened = open_partition(tmp_path / "t-0", flusher, **SMALL_SEGMENTS)
    assert len(reopened.segments) == 40
    assert reopened.log_end_offset == 40
    assert read_all_offsets(reopened) == list(range(40))
    await append_segments(reopened, batch, now_ms, 5)
    assert cache.open_count <= 12


async def test_an_idle_partition_releases_its_active_segment_and_reopens_it_to_append(
    tmp_path: Path,
    nursery: trio.Nursery,
    batch: MakeBatch,
    now_ms: int,
    install_cache: Callable[[int], DescriptorCache],
) -> None:
    cache = install_cache(3)
    flusher = GroupFlusher()
    await nursery.start(flusher.run)
    busy = open_partition(tmp_path / "busy-0", flusher)
    idle = open_partition(tmp_path / "idle-0", flusher)
    await append_segments(idle, batch, now_ms, 1)
    assert idle.segments[-1].pinned
    assert not idle.release_idle_files()  # written since the last check
    assert idle.release_idle_files()
    assert not idle.segments[-1].pinned
    await append_segments(busy, batch, now_ms, 1)  # takes the idle one's descriptors
    assert busy.segments[-1].pinned
    assert not idle.segments[-1].log_file.is_open
    assert cache.open_count == 3
    busy.release_idle_files()
    assert busy.release_idle_files()
    await append_segments(idle, batch, now_ms, 1)  # reopens its files
    assert idle.segments[-1].pinned
    assert read_all_offsets(idle) == [0, 1]


async def test_a_partition_with_unsynced_appends_keeps_its_files(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    flusher = GroupFlusher()  # not running: the append stays unsynced
    log = open_partition(tmp_path / "t-0", flusher)
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    log.release_idle_files()
    assert not log.release_idle_files()
    assert log.segments[-1].log_file.pinned


async def test_a_roll_waits_while_every_descriptor_is_held_by_a_flush_round(
    tmp_path: Path,
    nursery: trio.Nursery,
    batch: MakeBatch,
    now_ms: int,
    install_cache: Callable[[int], DescriptorCache],
) -> None:
    cache = install_cache(12)
    flusher = GroupFlusher()
    log = open_partition(tmp_path / "t-0", flusher, **SMALL_SEGMENTS)
    for _ in range(3):  # two rolls: sealed segments stay pinned until a round syncs them
        log.append(batch(1, value_bytes=600), leader_epoch=0, now_ms=now_ms)
    job = log.begin_flush()  # a round in flight holds them
    assert job is not None
    held = {synced: synced.fd for synced in job.files}
    other = open_partition(tmp_path / "u-0", flusher, **SMALL_SEGMENTS)
    for _ in range(5):  # no room for a roll: the active segment grows instead
        other.append(batch(1, value_bytes=600), leader_epoch=0, now_ms=now_ms)
    assert len(other.segments) == 1
    assert cache.open_count == 12
    assert all(synced.is_open and synced.fd == fd for synced, fd in held.items())
    job.release()
    log.end_flush(job, None)  # synced: the sealed segments' descriptors can go
    await nursery.start(flusher.run)
    await append_segments(other, batch, now_ms, 3)
    assert len(other.segments) == 4
    assert cache.open_count <= 12
    assert read_all_offsets(other) == list(range(8))
