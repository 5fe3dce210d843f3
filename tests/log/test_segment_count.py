"""An append and its fsync round do the same work whatever the number of segments.

Work is counted, not timed (this machine's speed drifts): segments looked at
(reads of a segment's size, which every walk over segments makes) and names
listed from directories. Before the fix, every roll listed the partition
directory (three names per segment) to find old producer snapshots, and every
round walked the segments in the page cache window (16 MiB: up to 16,384 segments
of 1 KiB), so throughput fell about 5x as small segments accumulated."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from weir.log import partition_base
from weir.log.config import LogConfig
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog
from weir.log.segment import Segment

MakeBatch = Callable[..., bytes]
APPENDS_MEASURED = 100
SEGMENTS_MANY = 1000


class WorkCounter:
    def __init__(self) -> None:
        self.counting = False
        self.segment_visits = 0
        self.names_listed = 0


@contextmanager
def counting(counter: WorkCounter) -> Iterator[WorkCounter]:
    counter.counting = True
    counter.segment_visits = counter.names_listed = 0
    try:
        yield counter
    finally:
        counter.counting = False


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> WorkCounter:
    counter = WorkCounter()

    def get_size(segment: Segment) -> int:
        counter.segment_visits += counter.counting
        return int(segment.__dict__["_counted_size_bytes"])

    def set_size(segment: Segment, value: int) -> None:
        segment.__dict__["_counted_size_bytes"] = value

    real_listdir = os.listdir

    def listdir(path: Any = ".") -> list[str]:
        names = real_listdir(path)
        counter.names_listed += len(names) * counter.counting
        return names

    monkeypatch.setattr(Segment, "size_bytes", property(get_size, set_size), raising=False)
    monkeypatch.setattr(os, "listdir", listdir)
    return counter


def append_and_sync(log: PartitionLog, batch: bytes, now_ms: int, count: int) -> None:
    """`count` appends, each rolling a segment, each synced by a round."""
    for _ in range(count):
        log.append(batch, leader_epoch=0, now_ms=now_ms)
        log.flush()


def test_append_work_does_not_grow_with_segment_count(
    tmp_path: Path,
    batch: MakeBatch,
    now_ms: int,
    work: WorkCounter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The disk is not what is measured: no fsync (of rounds or of the recovery point).
    monkeypatch.setattr(partition_base, "write_checkpoint", lambda path, entries, **options: None)
    flusher = GroupFlusher(
        sync_file=lambda fd: None,
        sync_directory=lambda path: None,
        page_cache_window_bytes=16 * 1024 * 1024,
    )
    log = PartitionLog.open(
        tmp_path / "t-0", LogConfig.from_overrides({"segment.bytes": "1024"}), flusher
    )
    one_segment = batch(1, value_bytes=600)
    append_and_sync(log, one_segment, now_ms, 10)
    with counting(work):
        append_and_sync(log, one_segment, now_ms, APPENDS_MEASURED)
    few = (work.segment_visits, work.names_listed)
    append_and_sync(log, one_segment, now_ms, SEGMENTS_MANY - len(log.segments))
    assert len(log.segments) >= SEGMENTS_MANY
    with counting(work):
        append_and_sync(log, one_segment, now_ms, APPENDS_MEASURED)
    many = (work.segment_visits, work.names_listed)
    log.close()
    assert many[0] <= few[0] + APPENDS_MEASURED, f"segments visited: {few} -> {many}"
    assert many[1] <= few[1] + APPENDS_MEASURED, f"names listed: {few} -> {many}"
