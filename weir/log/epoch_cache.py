"""Leader epoch cache: epoch -> start offset, persisted as `leader-epoch-checkpoint`.

Semantics follow Kafka's LeaderEpochFileCache (KIP-101/279): entries are
strictly increasing in both epoch and start offset; an append with a new epoch
adds (epoch, first offset of the append); truncation at the end removes entries
starting at or after the new log end; moving the log start clamps the first
remaining entry to it.
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

from weir.log.checkpoint import read_checkpoint, write_checkpoint

EPOCH_CHECKPOINT_FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: Path) -> None:
        self.path = directory / EPOCH_CHECKPOINT_FILE_NAME
        loaded = read_checkpoint(self.path, width=2) or []
        self._entries: list[tuple[int, int]] = []
        for epoch, start_offset in loaded:
            if epoch < 0 or start_offset < 0:
                continue
            if self._entries and (
                epoch <= self._entries[-1][0] or start_offset < self._entries[-1][1]
            ):
                continue
            self._entries.append((epoch, start_offset))

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    def assign(self, epoch: int, start_offset: int, *, persist: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset` if it is newer than the
        latest epoch. Returns whether the cache changed."""
        if epoch < 0:
            return False
        if self._entries:
            latest_epoch, latest_start = self._entries[-1]
            if epoch <= latest_epoch:
                return False
            if start_offset < latest_start:
                # A stale entry starting later (e.g. written before a crash
                # took its batches): drop it, as Kafka does.
                self._entries = [e for e in self._entries if e[1] < start_offset]
        self._entries.append((epoch, start_offset))
        if persist:
            self.flush()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: (the largest epoch <= requested,
        the start offset of the next larger epoch or the log end offset)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self._entries[-1][0]:
            return requested_epoch, log_end_offset
        epochs = [epoch for epoch, _ in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        next_start = self._entries[higher][1]
        if higher == 0:
            return requested_epoch, next_start
        return self._entries[higher - 1][0], next_start

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries that start at or after `end_offset` (the new log end)."""
        kept = [e for e in self._entries if e[1] < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before `start_offset`; the last of them now starts there."""
        starts = [start for _, start in self._entries]
        i = bisect_right(starts, start_offset)
        if i == 0 or (i == 1 and self._entries[0][1] == start_offset):
            return
        epoch = self._entries[i - 1][0]
        self._entries = [(epoch, start_offset), *self._entries[i:]]
        self.flush()

    def clear(self) -> None:
        self._entries = []
        self.flush()

    def flush(self) -> None:
        write_checkpoint(self.path, self._entries)
