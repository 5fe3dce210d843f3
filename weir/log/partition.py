"""A partition's log: `PartitionLog`, composed of its parts, with its opening
(recovery) and closing.

The directory and the offsets: partition_base.py. The parts, each a mixin in its
own module, lowest first (a part uses only those below it; `lint-imports`
checks it):

- partition_base: the state, the segments and their sums, the invariants;
- partition_durability: the flusher protocol, `wait_durable`, going offline;
- partition_producers: the idempotent-producer table's snapshots and rebuild;
- partition_read: Fetch, ListOffsets and OffsetForLeaderEpoch lookups;
- partition_recovery: the segments' load or scan at open (steps 1-5 there);
- partition_roll: sealing the active segment and starting the next;
- partition_append: a leader's `append`, a follower's `append_replicated`;
- partition_truncation: a follower's truncation (KIP-279);
- partition_retention: DeleteRecords, retention, compaction's swap.

Checkpoints and segment creation are rare and written synchronously; batch
appends never fsync on the caller's thread. All methods run on the Trio thread.
"""

from __future__ import annotations

from pathlib import Path

from weir.log.compaction import finish_interrupted_compaction
from weir.log.config import LogConfig
from weir.log.epoch_cache import LeaderEpochCache
from weir.log.errors import LogClosed
from weir.log.flusher import GroupFlusher
from weir.log.partition_append import AppendMixin
from weir.log.partition_base import (
    DURABLE_OFFSET_CHECKPOINT_FILE_NAME,
    LOG_START_CHECKPOINT_FILE_NAME,
    RECOVERY_POINT_CHECKPOINT_FILE_NAME,
    log,
)
from weir.log.partition_read import ReadMixin
from weir.log.partition_recovery import (
    SegmentLoader,
    consume_clean_shutdown_marker,
    ensure_directory,
    gaps_allowed_below,
    read_single_checkpoint,
    remove_stray_files,
    write_clean_shutdown_marker,
)
from weir.log.partition_retention import RetentionMixin
from weir.log.partition_truncation import TruncationMixin
from weir.log.segment import Segment


class PartitionLog(RetentionMixin, TruncationMixin, AppendMixin, ReadMixin):
    """Use `PartitionLog.open`. Offsets: `log_start_offset <= durable_end_offset
    <= log_end_offset`; `log_end_offset` is the next offset to assign."""

    @classmethod
    def open(
        cls, directory: Path, config: LogConfig, flusher: GroupFlusher, *, fresh: bool = False
    ) -> PartitionLog:
        """Open (creating if needed) and recover the log in `directory`; `fresh`:
        the caller just created the directory for a new partition."""
        created = ensure_directory(directory) or fresh
        clean = consume_clean_shutdown_marker(directory) or created
        finish_interrupted_compaction(directory)
        remove_stray_files(directory)
        epoch_cache = LeaderEpochCache(directory)
        recovery_point = read_single_checkpoint(directory / RECOVERY_POINT_CHECKPOINT_FILE_NAME, 0)
        loader = SegmentLoader(directory, config, trust_below=None if clean else recovery_point)
        loader.recovery_point = recovery_point
        loader.durable_below = max(
            recovery_point,
            read_single_checkpoint(directory / DURABLE_OFFSET_CHECKPOINT_FILE_NAME, 0),
        )
        loader.gaps_allowed_below = gaps_allowed_below(directory)
        segments = loader.load()
        log_start = max(read_single_checkpoint(directory / LOG_START_CHECKPOINT_FILE_NAME, 0),
                        segments[0].base_offset if segments else 0)  # fmt: skip
        if not segments or log_start > segments[-1].next_offset:
            for segment in segments:
                segment.delete()
            segments = [Segment(directory, log_start, config.segment_index_bytes)]
            if epoch_cache.entries:
                epoch_cache.clear()
        partition = cls(directory, config, flusher, segments, epoch_cache, log_start)
        partition._finish_recovery(loader, clean, created)
        # Aborted-transaction index entries above what was fsynced are rebuilt.
        partition._load_producer_state(None if clean else loader.durable_below)
        return partition

    def _finish_recovery(self, loader: SegmentLoader, clean: bool, created: bool) -> None:
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        changed = False
        for epoch, start_offset in loader.epoch_starts:
            if start_offset < self.log_end_offset:
                changed = self.epoch_cache.assign(epoch, start_offset, persist=False) or changed
        if changed:
            self.epoch_cache.flush()
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        # What recovery read may still be only in the page cache (the process,
        # not the machine, crashed): make it durable before serving it.
        for segment in loader.scanned:
            if not segment.log_file.closed:
                for synced in segment.files:
                    self.flusher.sync_file(synced.fd)
        self.flusher.sync_directory(self.directory)
        for segment in self._segments[:-1]:
            segment.release_index_files()
        self._recovery_point = loader.recovery_point
        if not clean:
            self._write_recovery_point(self.log_end_offset)
        if created:
            log.info("created %s", self.directory.name)
            return
        log.info(
            "opened %s: offsets %d..%d, %d segments, %s shutdown, %d bytes truncated",
            self.directory.name, self.log_start_offset, self.log_end_offset,
            len(self._segments), "clean" if clean else "unclean", loader.truncated_bytes,
        )  # fmt: skip

    def close(self) -> None:
        """fsync everything, mark a clean shutdown, close the files."""
        if self._closed:
            return
        try:
            if self._failure is None:
                self._segments[-1].pin()
                self._unsynced.update(dict.fromkeys(self._segments[-1].files))
                self.flush()
                self._write_recovery_point(self.log_end_offset)
                self._write_producer_snapshot()
                write_clean_shutdown_marker(self.directory)
        finally:
            self._closed = True
            self.flusher.forget(self)
            for segment in self._segments:
                segment.close()
            self._fail_waiters(LogClosed)

    def delete_files(self) -> None:
        """Close without flushing and remove the segment files (topic deletion)."""
        self._closed = True
        self.flusher.forget(self)
        for segment in self._segments:
            self._delete_segment(segment)
        self._fail_waiters(LogClosed)

    def retire(self) -> None:
        """(Trio thread) Stop serving before the directory is removed (topic
        deletion): no flush, waiters fail with LogClosed. `close_files` then
        closes the files on any thread, and the directory goes as a whole."""
        self._closed = True
        self.flusher.forget(self)
        self._unsynced.clear()
        self._fail_waiters(LogClosed)

    def close_files(self) -> None:
        """Close every segment's files, without flushing (after `retire`; any thread)."""
        assert self._closed
        for segment in self._segments:
            segment.close()
