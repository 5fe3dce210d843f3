"""`weir repair`: make a damaged partition servable again without losing an
intact record and without ever handing out an offset twice.

Recovery (partition_recovery.py) refuses to cut records that were made durable; it
takes such a partition offline and leaves its files untouched. A repair, run
by an operator with the broker stopped, does what recovery may not:

1. Scan every segment of the partition batch by batch (header, offsets that
   only grow, CRC32C). Bytes that fail are a damaged range; the scan resumes at
   the next intact batch (`find_intact_batch`), so every intact batch is kept.
2. The offsets the log must end at or after: the last intact batch's, the
   recovery point (everything below it was durable, so acknowledged offsets may
   lie there), the base of the last segment, and the newest producer snapshot.
   Offsets of the damaged ranges and of missing files are skipped, never
   reused: the log keeps a gap there, as compaction leaves gaps.
3. Apply (only with `execute`): copy each damaged range to `damaged/` in the
   partition directory; rewrite each damaged segment with only its intact
   batches (temp file, fsync, rename) and drop its indexes (recovery rebuilds
   them); when the intact records end below the offset of step 2, add an empty
   segment there; write `repaired-offset-checkpoint` (below it recovery accepts
   gaps between segments); remove `.clean-shutdown` so the next start scans.
   A missing partition directory is recreated empty at the start offset the
   operator gives.

Nothing here knows the Kafka wire or the broker; `weir.cli.repair_command`
drives it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from weir.log.checkpoint import fsync_directory, write_checkpoint
from weir.log.errors import LogCorrupt
from weir.log.partition_base import (
    CLEAN_SHUTDOWN_FILE_NAME,
    DURABLE_OFFSET_CHECKPOINT_FILE_NAME,
    LOG_START_CHECKPOINT_FILE_NAME,
    RECOVERY_POINT_CHECKPOINT_FILE_NAME,
    REPAIRED_OFFSET_CHECKPOINT_FILE_NAME,
)
from weir.log.partition_metadata import PartitionIdentity, write_partition_metadata
from weir.log.partition_recovery import gaps_allowed_below, read_single_checkpoint, segment_bases
from weir.log.producer_snapshots import snapshot_offsets
from weir.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    find_intact_batch,
    intact_batch_at,
    segment_file_name,
)

DAMAGED_DIRECTORY_NAME = "damaged"


@dataclass
class DamagedRange:
    segment_name: str
    position: int
    size_bytes: int
    offsets_from: int  # offsets from here up to the next intact batch are skipped


@dataclass
class SegmentScan:
    base_offset: int
    kept: list[tuple[int, int]] = field(default_factory=list)  # (position, size)
    damaged: list[DamagedRange] = field(default_factory=list)
    next_offset: int = 0  # after its last intact batch (its base when none)


@dataclass
class RepairPlan:
    directory: Path
    segments: list[SegmentScan]
    end_offset: int  # the log end after the repair: never below an offset it held
    missing: list[tuple[int, int]]  # offset ranges [from, to) no file holds

    @property
    def damaged(self) -> list[DamagedRange]:
        return [d for scan in self.segments for d in scan.damaged]

    @property
    def needs_repair(self) -> bool:
        return bool(self.damaged or self.missing)

    def describe(self) -> list[str]:
        lines = [
            f"{d.segment_name}: {d.size_bytes} damaged bytes at byte {d.position}, "
            f"skipping offsets from {d.offsets_from}"
            for d in self.damaged
        ]
        lines += [
            f"offsets {start}..{end - 1} are in no file: skipped" for start, end in self.missing
        ]

        if self.needs_repair:
            lines.append(f"the log will continue at offset {self.end_offset}")
        return lines


def plan_repair(directory: Path) -> RepairPlan:
    """Scan the partition (read only) and decide what a repair keeps and skips."""
    scans = [_scan_segment(directory, base) for base in segment_bases(directory)]
    missing = []
    gaps_below = gaps_allowed_below(directory)
    for earlier, later in zip(scans, scans[1:]):  # noqa: B905
        gap = earlier.next_offset < later.base_offset
        if gap and not earlier.damaged and later.base_offset > gaps_below:
            missing.append((earlier.next_offset, later.base_offset))
    log_end = scans[-1].next_offset if scans else 0
    if scans and not scans[-1].kept:
        log_end = max(log_end, scans[-1].base_offset)  # an empty active segment
    end_offset = max(
        log_end,
        read_single_checkpoint(directory / RECOVERY_POINT_CHECKPOINT_FILE_NAME, 0),
        read_single_checkpoint(directory / DURABLE_OFFSET_CHECKPOINT_FILE_NAME, 0),
        _newest_snapshot_offset(directory),
    )
    if log_end < end_offset:
        missing.append((log_end, end_offset))
    return RepairPlan(directory, scans, end_offset, missing)


def apply_repair(plan: RepairPlan) -> None:
    """Carry out `plan` (step 3 of the module docstring)."""
    directory = plan.directory
    for scan in plan.segments:
        if scan.damaged:
            _keep_damaged_bytes(directory, scan)
            _rewrite_segment(directory, scan)
    last = plan.segments[-1] if plan.segments else None
    if last is None or (last.next_offset < plan.end_offset and last.base_offset < plan.end_offset):
        _create_empty_segment(directory, plan.end_offset)
    write_checkpoint(directory / REPAIRED_OFFSET_CHECKPOINT_FILE_NAME, [[plan.end_offset]])
    _remove_clean_shutdown_marker(directory)
    fsync_directory(directory)


def recreate_missing_partition(
    directory: Path, identity: PartitionIdentity, start_offset: int
) -> None:
    """A partition directory that is gone: recreate it empty, its first offset
    `start_offset` (the operator's choice: above every offset it ever held)."""
    directory.mkdir()
    write_partition_metadata(directory, identity)
    write_checkpoint(directory / LOG_START_CHECKPOINT_FILE_NAME, [[start_offset]])
    write_checkpoint(directory / REPAIRED_OFFSET_CHECKPOINT_FILE_NAME, [[start_offset]])
    _create_empty_segment(directory, start_offset)
    fsync_directory(directory)
    fsync_directory(directory.parent)


# -- scanning ----------------------------------------------------------------


def _scan_segment(directory: Path, base_offset: int) -> SegmentScan:
    name = segment_file_name(base_offset, LOG_SUFFIX)
    scan = SegmentScan(base_offset, next_offset=base_offset)
    fd = os.open(directory / name, os.O_RDONLY)
    try:
        file_size = os.fstat(fd).st_size
        position = 0
        while position < file_size:
            header = intact_batch_at(fd, position, file_size, scan.next_offset, base_offset)
            if header is not None:
                scan.kept.append((position, header.size))
                scan.next_offset = header.last_offset + 1
                position += header.size
                continue
            resume = _next_intact(fd, position, scan.next_offset, base_offset, directory / name)
            end = file_size if resume is None else resume
            scan.damaged.append(DamagedRange(name, position, end - position, scan.next_offset))
            position = end
    finally:
        os.close(fd)
    return scan


def _next_intact(fd: int, position: int, offset_min: int, base: int, path: Path) -> int | None:
    try:
        found = find_intact_batch(fd, position + 1, offset_min, base, path)
    except LogCorrupt:
        return None  # too damaged to search: everything after is skipped
    return found[0] if found is not None else None


# -- applying ----------------------------------------------------------------


def _keep_damaged_bytes(directory: Path, scan: SegmentScan) -> None:
    """Copies of the damaged ranges, for whoever wants to look at them."""
    kept_dir = directory / DAMAGED_DIRECTORY_NAME
    kept_dir.mkdir(exist_ok=True)
    source = directory / segment_file_name(scan.base_offset, LOG_SUFFIX)
    with open(source, "rb") as f:
        for damaged in scan.damaged:
            f.seek(damaged.position)
            target = kept_dir / f"{damaged.segment_name}.at-byte-{damaged.position}"
            target.write_bytes(f.read(damaged.size_bytes))
    fsync_directory(kept_dir)


def _rewrite_segment(directory: Path, scan: SegmentScan) -> None:
    path = directory / segment_file_name(scan.base_offset, LOG_SUFFIX)
    temp_path = path.with_name(path.name + ".repair.tmp")
    with open(path, "rb") as source, open(temp_path, "wb") as target:
        for position, size in scan.kept:
            source.seek(position)
            target.write(source.read(size))
        target.flush()
        os.fsync(target.fileno())
    os.replace(temp_path, path)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        (directory / segment_file_name(scan.base_offset, suffix)).unlink(missing_ok=True)


def _create_empty_segment(directory: Path, base_offset: int) -> None:
    path = directory / segment_file_name(base_offset, LOG_SUFFIX)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_clean_shutdown_marker(directory: Path) -> None:
    (directory / CLEAN_SHUTDOWN_FILE_NAME).unlink(missing_ok=True)


# -- reading the partition's other files --------------------------------------


def _newest_snapshot_offset(directory: Path) -> int:
    return max(snapshot_offsets(directory), default=0)
