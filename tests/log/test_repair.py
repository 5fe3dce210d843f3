"""`weir repair`'s protocol (weir.log.repair): every intact batch kept at its
offset, damaged ranges skipped, offsets never reused, the result opens."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from weir.format.record_batch import iter_batch_headers
from weir.log.config import LogConfig
from weir.log.errors import LogDamaged
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog
from weir.log.repair import apply_repair, plan_repair

MakeBatch = Callable[..., bytes]
CONFIG = LogConfig.from_overrides({"segment.bytes": "2048"})


def written_log(directory: Path, batch: MakeBatch, now_ms: int, batches: int) -> list[int]:
    """A cleanly closed log of `batches` 2-record batches; their base offsets."""
    log = PartitionLog.open(directory, CONFIG, GroupFlusher())
    for _ in range(batches):
        log.append(batch(2, value_bytes=40), leader_epoch=0, now_ms=now_ms)
    assert len(log.segments) >= 4
    log.close()
    return list(range(0, 2 * batches, 2))


def base_offsets(log: PartitionLog) -> list[int]:
    """Base offsets of every batch, read as a consumer would (across gaps)."""
    found: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, bytes_max=1 << 24, end_offset=log.log_end_offset)
        assert result.records, f"nothing to read at {offset}"
        headers = [header for _, header in iter_batch_headers(result.records)]
        found += [header.base_offset for header in headers]
        offset = headers[-1].last_offset + 1
    return found


def segment_paths(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def test_repair_skips_flipped_bytes_and_keeps_every_intact_batch(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    directory = tmp_path / "t-0"
    offsets = written_log(directory, batch, now_ms, 60)
    second = segment_paths(directory)[1]
    with open(second, "r+b") as f:
        f.seek(100)
        f.write(b"\xff" * 16)
    second.with_suffix(".index").unlink()  # else found when read: its CRC fails
    with pytest.raises(LogDamaged):
        PartitionLog.open(directory, CONFIG, GroupFlusher())
    plan = plan_repair(directory)
    assert plan.needs_repair and len(plan.damaged) == 1
    assert plan.end_offset == 120
    apply_repair(plan)
    assert list((directory / "damaged").iterdir())
    log = PartitionLog.open(directory, CONFIG, GroupFlusher())
    kept = base_offsets(log)
    assert len(kept) == len(offsets) - 1, "exactly the damaged batch is skipped"
    assert set(kept) < set(offsets)
    assert log.log_end_offset == 120
    assert log.append(batch(1), leader_epoch=0, now_ms=now_ms).base_offset == 120


def test_repair_of_a_deleted_last_segment_continues_above_its_offsets(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    directory = tmp_path / "t-0"
    written_log(directory, batch, now_ms, 60)
    os.unlink(segment_paths(directory)[-1])
    with pytest.raises(LogDamaged, match="are missing"):
        PartitionLog.open(directory, CONFIG, GroupFlusher())
    plan = plan_repair(directory)
    assert plan.missing and plan.missing[-1][1] == 120
    apply_repair(plan)
    log = PartitionLog.open(directory, CONFIG, GroupFlusher())
    assert log.log_end_offset == 120
    assert log.append(batch(1), leader_epoch=0, now_ms=now_ms).base_offset == 120


def test_repair_of_a_deleted_middle_segment_keeps_the_segments_after_it(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    directory = tmp_path / "t-0"
    offsets = written_log(directory, batch, now_ms, 60)
    doomed = segment_paths(directory)[1]
    first_lost = int(doomed.name.removesuffix(".log"))
    os.unlink(doomed)
    plan = plan_repair(directory)
    assert plan.missing[0][0] == first_lost
    apply_repair(plan)
    log = PartitionLog.open(directory, CONFIG, GroupFlusher())
    kept = base_offsets(log)
    next_base = plan.missing[0][1]
    assert kept == [o for o in offsets if o < first_lost or o >= next_base]


def test_an_intact_partition_needs_no_repair(tmp_path: Path, batch: MakeBatch, now_ms: int) -> None:
    directory = tmp_path / "t-0"
    written_log(directory, batch, now_ms, 60)
    before = {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}
    assert not plan_repair(directory).needs_repair
    assert {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()} == before
