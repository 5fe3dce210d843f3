"""Reads on the event loop take only what the page cache holds (RWF_NOWAIT); a
cold range is named, warmed on a worker, and then served from the cache."""

from __future__ import annotations

import os

import pytest

from weir.log.errors import LogError
from weir.log.page_cache import ReadNotCached, warm
from weir.log.partition import PartitionLog

from .conftest import MakeBatch, OpenLog

pytestmark = pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="needs RWF_NOWAIT")


def evict(log: PartitionLog) -> None:
    """Drop the (synced, so clean) segment pages from the page cache."""
    for segment in log.segments:
        os.posix_fadvise(segment.log_file.fd, 0, 0, os.POSIX_FADV_DONTNEED)


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
    evict(log)
    with pytest.raises(ReadNotCached) as raised:
        log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset, cached_only=True)
    cold = raised.value.cold
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
    evict(log)
    with pytest.raises(ReadNotCached) as raised:
        log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset, cached_only=True)
    log.close()
    assert not raised.value.cold.file.try_hold()
    with pytest.raises(LogError):
        log.read(0, bytes_max=1, end_offset=1)
