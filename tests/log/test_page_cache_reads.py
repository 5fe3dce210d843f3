"""Reads on the event loop take only what the page cache holds (RWF_NOWAIT); a
cold range is named, warmed on a worker, and then served from the cache."""

from __future__ import annotations

import mmap
import os
import time

import pytest

from weir.log.errors import LogError
from weir.log.page_cache import (
    ColdRange,
    ReadNotCached,
    is_cached,
    is_cached_supported,
    warm,
)
from weir.log.partition import PartitionLog

from .conftest import MakeBatch, OpenLog

pytestmark = pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="needs RWF_NOWAIT")


def evict(log: PartitionLog) -> None:
    """Drop the (synced, so clean) segment pages from the page cache, and turn off
    readahead on the log's descriptors: the plain reads of batch headers a read
    makes first would otherwise bring the records back in before the read looks.
    Pages a loaded machine has not finished writing back are not dropped: where
    cachestat can tell, try again until none is left."""
    for segment in log.segments:
        fd, size = segment.log_file.fd, segment.size_bytes
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for _ in range(50):
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if not is_cached_supported() or not any_page_cached(fd, size):
                break
            time.sleep(0.02)


def cold_read(log: PartitionLog) -> ColdRange:
    """The cold range a cached-only read of the evicted log names. The kernel may
    bring pages back between the eviction and the read (another task's
    readahead on a loaded machine): evict and read again, a bounded number of
    times."""
    for _ in range(10):
        evict(log)
        try:
            log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset, cached_only=True)
        except ReadNotCached as exc:
            return exc.cold
    pytest.fail("ten evictions in a row did not leave the log uncached")


def any_page_cached(fd: int, size: int) -> bool:
    return any(is_cached(fd, start, 1) for start in range(0, size, mmap.PAGESIZE))


def filled(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> PartitionLog:
    log = open_log()
    for _ in range(64):
        log.append(batch(16, value_bytes=1000), leader_epoch=0, now_ms=now_ms)
    log.flush()
    return log


def test_a_cached_read_returns_what_a_plain_read_returns(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = filled(open_log, batch, now_ms)
    plain = log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset)
    cached = log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset, cached_only=True)
    assert bytes(cached.records) == bytes(plain.records) and len(plain.records) > 500_000
    assert cached.next_offset == plain.next_offset
    log.close()


def test_an_evicted_range_is_named_then_served_from_the_cache_once_warmed(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = filled(open_log, batch, now_ms)
    expected = bytes(log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset).records)
    cold = cold_read(log)
    assert cold.start + cold.size == len(expected)  # the range the read needed
    assert cold.file.try_hold()
    assert warm([cold]) == cold.size
    found = log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset, cached_only=True)
    assert bytes(found.records) == expected
    log.close()


def test_warming_a_file_closed_meanwhile_is_refused(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = filled(open_log, batch, now_ms)
    cold = cold_read(log)
    log.close()
    assert not cold.file.try_hold()
    with pytest.raises(LogError):
        log.read(0, bytes_max=1, end_offset=1)


@pytest.mark.skipif(not is_cached_supported(), reason="needs cachestat (Linux 6.5+)")
def test_a_range_the_page_cache_holds_is_read_into_bytes_not_a_zero_filled_buffer(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = filled(open_log, batch, now_ms)
    found = log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset, cached_only=True)
    assert type(found.records) is bytes  # os.pread's, with no bytearray filled first
    log.close()


@pytest.mark.skipif(not is_cached_supported(), reason="needs cachestat (Linux 6.5+)")
def test_cachestat_tells_a_cached_range_from_an_evicted_one(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = filled(open_log, batch, now_ms)
    segment = log.segments[0]
    fd, size = segment.log_file.fd, segment.size_bytes
    assert is_cached(fd, 0, size) and is_cached(fd, size - 1, 1)
    assert not is_cached(fd, 0, size + 8192)  # pages past the end are not cached
    evict(log)
    assert not is_cached(fd, 0, size) and not is_cached(fd, size // 2, 10)
    log.close()
