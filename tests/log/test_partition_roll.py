"""Rolling (partition_roll.py): when the active segment is sealed and the next
begins, and the files a segment is named by."""

from __future__ import annotations

import os
from collections.abc import Callable

from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]


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


def test_batch_larger_than_segment_bytes_gets_its_own_segment(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024)
    log.append(batch(1, value_bytes=100), leader_epoch=0, now_ms=now_ms)
    log.append(batch(1, value_bytes=900), leader_epoch=0, now_ms=now_ms)
    assert [s.base_offset for s in log.segments] == [0, 1]
