"""How a partition log's writes become durable: its side of the flusher protocol
(`begin_flush`/`end_flush`, flusher.py steps 1-5), `wait_durable` and its waiters,
the durable-offset checkpoint, the page cache eviction behind the window, the
release of synced and idle files, and going offline when a write or fsync fails."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from weir.format.errors import ErrorCode
from weir.log.checkpoint import write_checkpoint
from weir.log.errors import LogClosed, LogError, LogTruncated
from weir.log.flusher import CacheDrop, FlushJob
from weir.log.partition_base import (
    DURABLE_OFFSET_CHECKPOINT_FILE_NAME,
    EvictionCursor,
    PartitionLogState,
    Waiter,
    log,
)

# The active segment's synced bytes are evicted from the page cache in steps this large.
PAGE_CACHE_EVICT_BYTES_MIN = 1024 * 1024
# Page cache evictions one partition adds to a round (each holds a descriptor).
CACHE_DROPS_PER_ROUND_MAX = 16
# How often LogManager records each log's fsynced end (DURABLE_OFFSET_CHECKPOINT_FILE_NAME).
DURABLE_CHECKPOINT_INTERVAL_MS = 1000


@dataclass(frozen=True)
class DurableCheckpoint:
    """A log's fsynced end to record in its `durable-offset-checkpoint`, taken on
    the Trio thread in the log's truncation `generation`."""

    log: DurabilityMixin
    path: Path
    offset: int
    generation: int


def write_durable_checkpoints(due: Sequence[DurableCheckpoint]) -> list[DurableCheckpoint]:
    """Write each checkpoint, unsynced (a lost write only leaves the record older,
    which is safe); on the disk executor. Returns those written."""
    written = []
    for checkpoint in due:
        try:
            write_checkpoint(checkpoint.path, [[checkpoint.offset]], sync=False)
        except FileNotFoundError:  # the topic was deleted meanwhile
            continue
        except OSError as exc:  # only weakens what recovery can tell
            log.warning("%s: durable offset not recorded: %s", checkpoint.path.parent.name, exc)
            continue
        written.append(checkpoint)
    return written


class DurabilityMixin(PartitionLogState):
    """The flusher's target (`FlushTarget`) and everything that waits on it."""

    async def wait_durable(self, offset: int) -> None:
        """Return once every byte of every batch before `offset` is fsynced.
        Raises LogClosed, LogTruncated, or LogError(KAFKA_STORAGE_ERROR)."""
        while offset > self.durable_end_offset:
            self._check_waitable(offset)
            waiter = Waiter(offset)
            self._waiters.append(waiter)
            self.flusher.request(self)
            await waiter.event.wait()
            if waiter.error is not None:
                raise waiter.error

    def _check_waitable(self, offset: int) -> None:
        if self._failure is not None:
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, f"log is offline: {self._failure}")
        if self._closed:
            raise LogClosed()
        if offset > self.log_end_offset:
            raise LogTruncated(offset, self.log_end_offset)

    def begin_flush(self, *, overlap: bool = False) -> FlushJob | None:
        """Flusher protocol: the files to sync and the offset they make durable
        (none once the log is offline: a later sync proves nothing)."""
        if self._closed or self._failure is not None:
            return None
        if self._inflight is not None and not overlap:
            return None
        files = dict(self._unsynced)
        if overlap and self._inflight is not None:
            files.update(dict.fromkeys(self._inflight.files))
        files_list = [f for f in files if not f.closed]
        if not files_list and not self._directory_unsynced:
            return None
        for synced in files_list:
            synced.hold()
        directories = [self.directory] if self._directory_unsynced else []
        job = FlushJob(
            files_list,
            directories,
            self.log_end_offset,
            self._generation,
            sealed_below_offset=self._segments[-1].base_offset,
            cache_drops=self._cache_drops(),
        )
        self._unsynced.clear()
        self._directory_unsynced = False
        if not overlap:
            self._inflight = job
        return job

    def _cache_drops(self) -> list[CacheDrop]:
        """Log bytes behind the page cache window (the log's newest `window_bytes`),
        to evict once this round has synced them: from the active segment in steps
        of at least PAGE_CACHE_EVICT_BYTES_MIN (each is a system call after the
        round), from sealed ones whatever is left, at most
        CACHE_DROPS_PER_ROUND_MAX. Walks forward from the first segment not yet
        evicted whole (`_eviction_cursor`), so a round costs the same however many
        segments the log has. A sealed segment whose descriptor the cache closed
        is skipped: reopening it only to advise the kernel is not worth a
        descriptor, and the kernel reclaims clean pages anyway."""
        window_bytes = self.flusher.page_cache_window_bytes
        if window_bytes is None:
            return []
        behind_bytes = self.size_bytes - window_bytes
        cursor = self._eviction_cursor or EvictionCursor()
        self._eviction_cursor = cursor
        last = len(self._segments) - 1
        drops: list[CacheDrop] = []
        while cursor.bytes_before < behind_bytes and len(drops) < CACHE_DROPS_PER_ROUND_MAX:
            segment = self._segments[cursor.index]
            size = segment.size_bytes
            evict_below = min(size, behind_bytes - cursor.bytes_before)
            start = min(segment.page_cache_evicted_below, size)
            sealed = cursor.index < last
            step_bytes = evict_below - start
            if step_bytes >= PAGE_CACHE_EVICT_BYTES_MIN or (sealed and step_bytes > 0):
                log_file = segment.log_file
                if log_file.is_open and not log_file.closed:
                    log_file.hold()
                    drops.append(CacheDrop(log_file, start, step_bytes))
                segment.page_cache_evicted_below = evict_below
            if not sealed or segment.page_cache_evicted_below < size:
                break
            cursor.index += 1
            cursor.bytes_before += size
        return drops

    def end_flush(self, job: FlushJob, error: OSError | None) -> None:
        if job is self._inflight:
            self._inflight = None
        if error is not None:
            self._fail(error)
            return
        if self._failure is not None:
            return  # an earlier round failed: nothing after it counts as durable
        if job.generation == self._generation:
            self._fsynced_end_offset = max(self._fsynced_end_offset, job.end_offset)
            self._sealed_synced_below = max(self._sealed_synced_below, job.sealed_below_offset)
            self._release_synced_indexes()
            if job.end_offset > self.durable_end_offset:
                self.durable_end_offset = job.end_offset
                self._durable_end_moved()
                self._wake_waiters()
        if not self._closed and (self._unsynced or self._directory_unsynced or self._waiters):
            self.flusher.request(self)

    def durable_checkpoint_due(self) -> DurableCheckpoint | None:
        """How far the log is fsynced, when that moved since it was last recorded
        (LogManager collects these every DURABLE_CHECKPOINT_INTERVAL_MS and writes
        them on the disk executor: `write_durable_checkpoints`)."""
        if self._closed or self._failure is not None:
            return None
        if self._fsynced_end_offset <= self._durable_checkpoint:
            return None
        path = self.directory / DURABLE_OFFSET_CHECKPOINT_FILE_NAME
        return DurableCheckpoint(self, path, self._fsynced_end_offset, self._generation)

    def durable_checkpoint_written(self, checkpoint: DurableCheckpoint) -> None:
        """On the Trio thread, once `checkpoint` is written. A truncation in the
        meantime (a new generation) wrote a lower value that this write may have
        replaced: that lower value is written again."""
        self._durable_checkpoint = max(self._durable_checkpoint, checkpoint.offset)
        if checkpoint.generation != self._generation:
            self._lower_durable_checkpoint()

    def _lower_durable_checkpoint(self) -> None:
        """After a truncation: recovery must not take the cut for lost records."""
        if self._durable_checkpoint > self.log_end_offset:
            path = self.directory / DURABLE_OFFSET_CHECKPOINT_FILE_NAME
            write_checkpoint(path, [[self.log_end_offset]])
            self._durable_checkpoint = self.log_end_offset

    def _release_synced_indexes(self) -> None:
        """Once a round synced sealed segments, close their index files and unpin
        their log files (the descriptor cache closes them when it needs room)."""
        if not self._sealed_with_open_indexes:
            return
        active = self._segments[-1]
        still_open = []
        for segment in self._sealed_with_open_indexes:
            if segment is active:
                continue
            if segment.base_offset < self._sealed_synced_below:
                segment.unpin()
                segment.release_index_files()
            else:
                still_open.append(segment)
        self._sealed_with_open_indexes = still_open

    def release_idle_files(self) -> bool:
        """Unpin the active segment's files when nothing was appended since the
        previous call and everything written is synced: the descriptor cache may
        then close them, and the next append or read reopens them. Called every
        few seconds (LogManager); True when it released them.

        Its index files may hold entries written but not synced: nothing trusts
        them before the round that syncs them at the roll (recovery rebuilds an
        active segment's indexes), and that round's descriptor, reopened, still
        reports a writeback error nobody has seen (Linux 4.16+; syncfs always)."""
        end_offset = self._end_offset_at_idle_check
        self._end_offset_at_idle_check = self.log_end_offset
        active = self._segments[-1]
        idle = (
            end_offset == self.log_end_offset
            and active.pinned
            and not self._closed
            and not self._unsynced
            and self._inflight is None
            and not self._waiters
        )
        if idle:
            active.unpin()
        return idle

    def _wake_waiters(self) -> None:
        if not self._waiters:
            return
        durable = self.durable_end_offset
        still_waiting = []
        for waiter in self._waiters:
            if waiter.offset <= durable:
                waiter.event.set()
            else:
                still_waiting.append(waiter)
        self._waiters = still_waiting

    def _fail_waiters(self, make_error: type[LogError] | None, offset_above: int = -1) -> None:
        still_waiting = []
        for waiter in self._waiters:
            if waiter.offset > offset_above:
                if make_error is LogTruncated:
                    waiter.error = LogTruncated(waiter.offset, self.log_end_offset)
                elif make_error is LogClosed:
                    waiter.error = LogClosed()
                else:
                    waiter.error = LogError(
                        ErrorCode.KAFKA_STORAGE_ERROR, f"log is offline: {self._failure}"
                    )
                waiter.event.set()
            else:
                still_waiting.append(waiter)
        self._waiters = still_waiting

    def _fail(self, error: OSError) -> None:
        """A write or fsync failed: what is on disk is unknown, so stop accepting
        writes, and nothing becomes durable any more."""
        if self._failure is not None:
            return
        log.error("%s goes offline after a failed write or fsync: %s", self.directory, error)
        self._failure = error
        self._fail_waiters(None)
        if self.on_failure is not None:
            self.on_failure(error)

    @property
    def offline(self) -> bool:
        """A write or fsync failed: the log takes no more writes until reopened."""
        return self._failure is not None

    def flush(self) -> None:
        """Synchronously fsync everything written so far (shutdown, tests)."""
        if self._closed:
            return
        self.flusher.flush_now(self)
        self._wake_waiters()
