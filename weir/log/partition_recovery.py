"""Recovery of a partition's directory at open (`PartitionLog.open` drives it):

1. If `.clean-shutdown` exists, remove it durably (unlink, fsync the directory):
   every segment but the last is trusted. Otherwise trust only the segments
   wholly below the recovery point. Then an interrupted compaction pass is
   rolled back or forward (compaction.py, `finish_interrupted_compaction`).
2. A trusted segment is loaded, not scanned: its indexes must exist and be
   sane (sizes, strictly increasing entries, within the file and the next
   segment's base), the last offset index entry must point at a batch with
   that last offset, and the batches after it must parse to the end of file.
   Otherwise it is scanned like the rest.
3. Every other segment is scanned batch by batch: header, monotonic offsets,
   records_count, CRC32C. The first batch that fails and everything after it
   is truncated; both indexes are rebuilt. If a segment ends short of the
   next segment's base, the later segments are deleted (no holes), unless
   it lies below the cleaned offset and lost nothing: compaction's gap.
4. The epoch cache is truncated to the recovered log end, then completed from
   the epochs seen in scanned batches; it is trimmed to the log start.
5. What was scanned is fsynced (the process may have died with it only in the
   page cache), the directory is fsynced, and the recovery point is written.
   Only then does `durable_end_offset` equal the log end offset.
6. Producer state and transactions (partition_producers.py): each segment's
   aborted-transaction index (`.txnindex`) must pass its sanity check, else
   it is emptied; after an unclean shutdown its entries of markers at or
   above the fsynced point (max of the recovery point and the durable offset
   checkpoint) are dropped. The producer table is loaded from the newest
   snapshot at or below the lowest such point, and every batch after it is
   replayed: data batches open transactions, markers complete them, and an
   abort the index lacks is appended to its segment's index (fsynced). The
   open transactions give the LSO.

Steps 2-3 are `SegmentLoader`; 4-5 are `PartitionLog._finish_recovery`; 6 is
`PartitionLog._load_producer_state`. This
module also reads the directory's single-offset checkpoints for `weir repair`.
"""

from __future__ import annotations

import os
from pathlib import Path

from weir.format.record_batch import BatchHeader
from weir.log.checkpoint import fsync_directory, read_checkpoint
from weir.log.compaction import read_cleaned_offset
from weir.log.config import LogConfig
from weir.log.errors import LogCorrupt, LogDamaged
from weir.log.partition_base import (
    CLEAN_SHUTDOWN_FILE_NAME,
    REPAIRED_OFFSET_CHECKPOINT_FILE_NAME,
    log,
)
from weir.log.segment import LOG_SUFFIX, Segment, parse_segment_file_name, segment_file_name


class SegmentLoader:
    """Opens a partition's segments, trusting or scanning each (see the module docstring)."""

    def __init__(self, directory: Path, config: LogConfig, trust_below: int | None) -> None:
        self.directory = directory
        self.config = config
        self.trust_below = trust_below  # None: clean shutdown, trust all but the active
        self.scanned: list[Segment] = []
        self.recovery_point = 0
        self.durable_below = 0  # max(recovery point, durable offset checkpoint)
        self.epoch_starts: list[tuple[int, int]] = []
        self.truncated_bytes = 0
        # Compaction leaves gaps: below this offset a segment may end short of the next.
        self.gaps_allowed_below = 0

    def load(self) -> list[Segment]:
        """Open every segment; raises LogDamaged (closing what it opened) when
        records that were made durable are damaged or missing."""
        bases = segment_bases(self.directory)
        segments: list[Segment] = []
        try:
            for i, base in enumerate(bases):
                next_base = bases[i + 1] if i + 1 < len(bases) else None
                segment = Segment(self.directory, base, self.config.segment_index_bytes)
                segments.append(segment)
                if not self._open_segment(segment, next_base, bases[i + 1 :]):
                    for later in bases[i + 1 :]:  # all empty: _check_torn_tail proved it
                        Segment(self.directory, later, self.config.segment_index_bytes).delete()
                    break
            self._check_reaches_recovery_point(segments)
        except LogDamaged:
            for segment in segments:
                segment.close()
            raise
        return segments

    def _open_segment(self, segment: Segment, next_base: int | None, later: list[int]) -> bool:
        """Load or scan one segment; False when the segments after it must go
        (a torn tail was cut and every later segment is empty)."""
        trusted = next_base is not None and (
            self.trust_below is None or next_base <= self.trust_below
        )
        truncated = 0
        if not (trusted and segment.load(next_base)):
            if trusted:
                log.warning("%s: index not sane, rebuilding", segment.log_path)
            file_size = segment.file_size_bytes
            valid_end = segment.scan(self.config.index_interval_bytes, self._on_batch)
            self.scanned.append(segment)
            if valid_end < file_size:
                self._check_torn_tail(segment, valid_end, later)
                segment.truncate_file(valid_end)
                truncated = file_size - valid_end
                self.truncated_bytes += truncated
                log.warning("%s: truncated %d bytes of a torn tail (never acknowledged)",
                            segment.log_path, truncated)  # fmt: skip
        if next_base is None or segment.next_offset == next_base:
            return True
        if truncated:
            return False
        if segment.next_offset < next_base <= self.gaps_allowed_below:
            return True  # records removed by compaction (or skipped by a repair), not lost
        raise self._damaged(
            f"{segment.log_path.name} ends at offset {segment.next_offset} but the next "
            f"segment starts at {next_base}: offsets {segment.next_offset}..{next_base - 1} "
            "are missing"
            if segment.next_offset < next_base
            else f"{segment.log_path.name} overlaps the next segment at offset {next_base}"
        )

    def _check_torn_tail(self, segment: Segment, valid_end: int, later: list[int]) -> None:
        """Recovery may cut bytes only where a crash can have torn an append that
        was never acknowledged: at or past the recovery point, with no intact
        batch after them in this segment and no record in any later one."""
        where = (
            f"{segment.log_path.name} is damaged at byte {valid_end} "
            f"(the batch that should hold offset {segment.next_offset})"
        )
        if segment.next_offset < self.durable_below:
            raise self._damaged(
                f"{where}, below offset {self.durable_below}: those records were "
                "fsynced, so they may have been acknowledged"
            )
        for base in later:
            path = self.directory / segment_file_name(base, LOG_SUFFIX)
            if path.stat().st_size > 0:
                raise self._damaged(f"{where}, and {path.name} after it holds records")
        try:
            intact = segment.find_valid_batch_after(valid_end, segment.next_offset)
        except LogCorrupt as exc:
            raise self._damaged(f"{where}; {exc}") from exc
        if intact is not None:
            position, offset = intact
            raise self._damaged(
                f"{where}, and intact records follow at byte {position} (offset {offset})"
            )

    def _check_reaches_recovery_point(self, segments: list[Segment]) -> None:
        end = segments[-1].next_offset if segments else 0
        if end < self.durable_below:
            raise self._damaged(
                f"the log ends at offset {end} but records up to offset "
                f"{self.durable_below - 1} were fsynced: offsets "
                f"{end}..{self.durable_below - 1} are missing"
            )

    def _damaged(self, problem: str) -> LogDamaged:
        return LogDamaged(self.directory.name, problem)

    def _on_batch(self, header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not self.epoch_starts or epoch > self.epoch_starts[-1][0]):
            self.epoch_starts.append((epoch, header.base_offset))


def gaps_allowed_below(directory: Path) -> int:
    """Below this offset a segment may end short of the next one: records
    compaction removed, or a range `weir repair` skipped. Never lost records."""
    return max(
        read_cleaned_offset(directory),
        read_single_checkpoint(directory / REPAIRED_OFFSET_CHECKPOINT_FILE_NAME, 0),
    )


def segment_bases(directory: Path) -> list[int]:
    bases = []
    for name in os.listdir(directory):
        base = parse_segment_file_name(name)
        if base is not None:
            bases.append(base)
    return sorted(bases)


def ensure_directory(directory: Path) -> bool:
    """Create `directory` (durably) unless it exists; True when it was created."""
    if directory.is_dir():
        return False
    directory.mkdir(parents=True)
    fsync_directory(directory.parent)
    return True


def consume_clean_shutdown_marker(directory: Path) -> bool:
    marker = directory / CLEAN_SHUTDOWN_FILE_NAME
    if not marker.exists():
        return False
    marker.unlink()
    # Durable removal: a crash from now on must not look like a clean shutdown.
    fsync_directory(directory)
    return True


def write_clean_shutdown_marker(directory: Path) -> None:
    fd = os.open(directory / CLEAN_SHUTDOWN_FILE_NAME, os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    fsync_directory(directory)


def remove_stray_files(directory: Path) -> None:
    """Temporary checkpoint files, and index files (aborted-transaction indexes
    too) whose log file is gone."""
    names = set(os.listdir(directory))
    for name in names:
        stem, _, suffix = name.rpartition(".")
        orphan_index = suffix in ("index", "timeindex", "txnindex") and f"{stem}.log" not in names
        if name.endswith(".tmp") or orphan_index:
            os.unlink(directory / name)


def read_single_checkpoint(path: Path, default: int) -> int:
    """The one non-negative offset a checkpoint holds, else `default`."""
    entries = read_checkpoint(path, width=1)
    if not entries or entries[0][0] < 0:
        return default
    return entries[0][0]
