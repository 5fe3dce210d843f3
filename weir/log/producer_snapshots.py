"""Producer-state snapshot files of a partition: `<20-digit offset>.snapshot`.

A snapshot holds the idempotent-producer table (weir.txn.producer_state) as of
a log offset: every batch below that offset is in it, none at or above.
Snapshots are written at each segment roll and at clean close, replaced by
rename, and not fsynced: a torn or lost snapshot fails its CRC32C or is absent,
and recovery falls back to an older one (or to scanning the whole log). A
snapshot above the recovered log end describes batches a crash took away and is
deleted.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from weir.txn.producer_state import ProducerStateTable, SnapshotCorrupt

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_KEPT = 2
# Far above what PRODUCERS_PER_PARTITION_MAX entries take (about 230 bytes each).
SNAPSHOT_BYTES_MAX = 64 * 1024 * 1024


def snapshot_offsets(directory: Path) -> list[int]:
    offsets = []
    for name in os.listdir(directory):
        stem, dot, suffix = name.partition(".")
        if dot and suffix == SNAPSHOT_SUFFIX[1:] and len(stem) == 20 and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def write_snapshot(
    directory: Path, table: ProducerStateTable, offset: int, existing: list[int] | None = None
) -> list[int]:
    """Write the snapshot at `offset` and keep only the newest SNAPSHOTS_KEPT.
    `existing`: the snapshot offsets already there, as this function last returned
    them (None: list the directory, which holds every segment's files: a roll
    must not cost a listing of thousands of names). Returns the offsets kept."""
    path = snapshot_path(directory, offset)
    temp_path = path.with_name(path.name + ".tmp")
    with open(temp_path, "wb") as f:
        f.write(table.encode_snapshot(offset))
    os.replace(temp_path, path)
    known = snapshot_offsets(directory) if existing is None else sorted({*existing, offset})
    for older in known[:-SNAPSHOTS_KEPT]:
        snapshot_path(directory, older).unlink(missing_ok=True)
    return known[-SNAPSHOTS_KEPT:]


def delete_snapshots_above(directory: Path, offset: int) -> None:
    for found in snapshot_offsets(directory):
        if found > offset:
            snapshot_path(directory, found).unlink(missing_ok=True)


def delete_all_snapshots(directory: Path) -> None:
    delete_snapshots_above(directory, -1)


def load_latest_snapshot(
    directory: Path, end_offset: int, at_or_below: int | None = None
) -> tuple[int, ProducerStateTable]:
    """The newest readable snapshot at or below `end_offset` (and `at_or_below`,
    when given: recovery replays from there) as (offset, table); (0, empty
    table) when there is none. Snapshots above `end_offset` are deleted."""
    delete_snapshots_above(directory, end_offset)
    limit = end_offset if at_or_below is None else min(end_offset, at_or_below)
    for offset in reversed(snapshot_offsets(directory)):
        if offset > limit:
            continue
        path = snapshot_path(directory, offset)
        try:
            data = _read_bounded(path)
            found_offset, table = ProducerStateTable.decode_snapshot(data)
        except (OSError, SnapshotCorrupt) as exc:
            log.warning("%s: ignoring unreadable producer snapshot: %s", path, exc)
            path.unlink(missing_ok=True)
            continue
        if found_offset == offset:
            return offset, table
        log.warning("%s: snapshot claims offset %d, ignoring it", path, found_offset)
        path.unlink(missing_ok=True)
    return 0, ProducerStateTable()


def _read_bounded(path: Path) -> bytes:
    with open(path, "rb") as f:
        data = f.read(SNAPSHOT_BYTES_MAX + 1)
    if len(data) > SNAPSHOT_BYTES_MAX:
        raise SnapshotCorrupt(f"snapshot exceeds {SNAPSHOT_BYTES_MAX} bytes")
    return data
