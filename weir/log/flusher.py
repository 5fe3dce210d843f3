"""Group commit: one worker-thread fsync round serves every append waiting on it.

Protocol (numbered as in ARCHITECTURE.md, "fsync and recovery"):

1. `PartitionLog.append` writes batches to the active segment with `os.write`
   (page cache only) and records the segment's file as unsynced.
2. `wait_durable(offset)` parks the caller and asks the flusher for a round.
3. A round takes a `FlushJob` from every partition that asked: the files
   written since its previous job (held, so nobody closes them), the
   directories that gained a file, and the log end offset at that moment.
   A partition has at most one job in flight. A round starts at once unless
   appends arrived during the previous one; then it waits
   `group_commit_delay_ms` first, so that more appends share it.
4. Every file and directory of the round is made durable off the event loop:
   with the `syncfs` method, one `syncfs` on the data directory's filesystem
   (`filesystem_sync.py`), run by the helper process when every file of the
   round is on that filesystem and no directory is, else by the flusher's
   worker thread (`SyncWorker`), which also `fdatasync`s any file elsewhere;
   with `fdatasync`, the worker thread runs `fdatasync` on every file, then
   `fsync` on every directory. Synced bytes behind the page cache window are
   then evicted.
5. Back on the Trio thread, each partition advances `durable_end_offset` to
   its job's end offset and wakes the waiters it now covers. Appends that
   arrived during the round are served by the next round.

A failed fsync leaves the page cache in an unknown state: the partition goes
offline (KAFKA_STORAGE_ERROR) rather than guess.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import outcome
import trio

from weir.log.descriptors import SyncedFile
from weir.log.filesystem_sync import FilesystemWatch, SyncfsHelper

log = logging.getLogger(__name__)

RELAXED_FLUSH_INTERVAL_MS = 1000
# Upper bounds of the round duration histogram (`RoundTimes`), in seconds.
ROUND_SECONDS_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
T = TypeVar("T")
_Call = tuple[Callable[[], object], Callable[["outcome.Outcome[Any]"], None]]


@dataclass
class CacheDrop:
    """A byte range of a log file to evict from the page cache once it is synced."""

    file: SyncedFile
    offset: int
    length: int


@dataclass
class FlushJob:
    """What one partition needs synced in one round."""

    files: list[SyncedFile]
    directories: list[Path]
    end_offset: int  # everything before it is durable once the job's files are synced
    generation: int  # the target's truncation count when the job was taken
    sealed_below_offset: int = 0  # target-specific: segments below it are sealed, in the job
    cache_drops: list[CacheDrop] = field(default_factory=list)  # files held like `files`
    released: bool = field(default=False)

    def release(self) -> None:
        if not self.released:
            self.released = True
            for synced in self.files:
                synced.release()
            for drop in self.cache_drops:
                drop.file.release()


class RoundTimes:
    """How long fsync rounds take: a cumulative histogram, for operators (the
    disk's flush tail is what sets produce p99)."""

    def __init__(self) -> None:
        self.bucket_counts = [0] * len(ROUND_SECONDS_BUCKETS)  # rounds <= each bound
        self.seconds_total = 0.0
        self.count = 0

    def record(self, seconds: float) -> None:
        self.count += 1
        self.seconds_total += seconds
        for i, bound in enumerate(ROUND_SECONDS_BUCKETS):
            if seconds <= bound:
                self.bucket_counts[i] += 1


class FlushTarget(Protocol):
    def begin_flush(self, *, overlap: bool = False) -> FlushJob | None:
        """The next job; None when clean. A target has at most one round job in
        flight (None while it has one) unless `overlap`, which also covers the
        in-flight job's files (synchronous flushes)."""
        ...

    def end_flush(self, job: FlushJob, error: OSError | None) -> None: ...


class SyncWorker:
    """One long-lived thread that runs blocking calls for the Trio thread.

    A round trip costs about 80 µs of CPU here, against about 130 µs for
    `trio.to_thread.run_sync` (which hands each call to a cached thread); the
    flusher makes one per fsync round, so it is on the produce path."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        assert self._thread is None
        self._thread = threading.Thread(target=self._serve, name="weir-fsync", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to exit after the call it is running (never blocks)."""
        if self._thread is not None:
            self._calls.put(None)
            self._thread = None

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            function, deliver = call
            deliver(outcome.capture(function))  # an exception travels back too

    async def run(self, function: Callable[[], T]) -> T:
        """Run `function` on the thread and return its result. Not cancellable:
        once handed over, the call completes before this returns."""
        assert self._thread is not None, "SyncWorker.start() was not called"
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()
        results: list[outcome.Outcome[Any]] = []

        def deliver(result: outcome.Outcome[Any]) -> None:
            results.append(result)
            token.run_sync_soon(done.set)

        self._calls.put((function, deliver))
        with trio.CancelScope(shield=True):
            await done.wait()
        return cast(T, results[0].unwrap())


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class GroupFlusher:
    """One per broker: runs fsync rounds on a worker thread, one round at a time.

    `fsync_enabled=False` is the opt-in relaxed mode (`unsafe_skip_fsync`):
    appends count as durable as soon as they are written, and rounds run at
    most every `relaxed_interval_ms` in the background. A crash or power loss
    can then lose acknowledged records."""

    def __init__(
        self,
        *,
        fsync_enabled: bool = True,
        relaxed_interval_ms: int = RELAXED_FLUSH_INTERVAL_MS,
        sync_file: Callable[[int], None] = os.fdatasync,
        sync_directory: Callable[[Path], None] = fsync_directory,
        filesystem: FilesystemWatch | None = None,
        syncfs_helper: SyncfsHelper | None = None,
        page_cache_window_bytes: int | None = None,
        group_commit_delay_ms: int = 0,
    ) -> None:
        """`filesystem`, when given, is synced once per round with `syncfs` in
        place of `fdatasync` on each file and directory it holds.

        `syncfs_helper`, when given, runs that `syncfs` in a child process for
        rounds whose files are all on that filesystem (see `SyncfsHelper`); rounds
        with directories or other filesystems use the worker thread.

        `group_commit_delay_ms`: when appends arrived while a round ran (the
        flusher is busy), the next round waits this long so that more appends
        share it. An idle flusher starts a round at once, so a lone produce
        never waits for it. See ARCHITECTURE.md, "Fsync protocol", step 3.

        `page_cache_window_bytes`, when not None, is how much of each
        partition's newest log data stays in the page cache: after a round,
        older synced bytes are evicted with `POSIX_FADV_DONTNEED` (see
        `evict_synced_ranges`)."""
        self.fsync_enabled = fsync_enabled
        self.group_commit_delay_s = group_commit_delay_ms / 1000
        self.filesystem = filesystem
        self.syncfs_helper = syncfs_helper if filesystem is not None else None
        self.page_cache_window_bytes = (
            page_cache_window_bytes if hasattr(os, "posix_fadvise") else None
        )
        self.page_cache_dropped_bytes = 0
        self.relaxed_interval_ms = relaxed_interval_ms
        self.sync_file = sync_file
        self.sync_directory = sync_directory
        self._requested: dict[FlushTarget, None] = {}
        self._wakeup = trio.Event()
        self._worker = SyncWorker()
        self.rounds_count = 0
        self.round_times = RoundTimes()
        self.files_synced_count = 0
        self.filesystem_syncs_count = 0
        self.running = False

    @property
    def method(self) -> str:
        """How rounds make appends durable, for logs and operators."""
        if not self.fsync_enabled:
            return "none (unsafe_skip_fsync: acknowledged before fsync)"
        return "syncfs" if self.filesystem is not None else "fdatasync"

    def request(self, target: FlushTarget) -> None:
        """Ask for `target` to be included in the next round."""
        self._requested[target] = None
        self._wakeup.set()

    def forget(self, target: FlushTarget) -> None:
        self._requested.pop(target, None)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve rounds until cancelled."""
        self.running = True
        if self._requested:
            self._wakeup.set()
        self._worker.start()
        self._start_helper()
        task_status.started()
        try:
            while True:
                await self._wakeup.wait()
                self._wakeup = trio.Event()
                if not self.fsync_enabled:
                    await trio.sleep(self.relaxed_interval_ms / 1000)
                await self._run_round()
                if self._requested and self.group_commit_delay_s > 0 and self.fsync_enabled:
                    # Busy: appends arrived during that round. Let more join the
                    # next one: fewer, larger rounds cost less CPU per append.
                    await trio.sleep(self.group_commit_delay_s)
        finally:
            self._worker.stop()
            if self.syncfs_helper is not None:
                self.syncfs_helper.close()
            self.running = False

    def _start_helper(self) -> None:
        if self.syncfs_helper is None:
            return
        try:
            self.syncfs_helper.start()
        except OSError as exc:
            log.warning("cannot start the syncfs helper (%s); syncing on a thread", exc)
            self.syncfs_helper = None

    async def _run_round(self) -> None:
        jobs = self._take_jobs()
        if not jobs:
            return
        # Until the round reports, count it as failed: nothing becomes durable
        # on an exception nobody expected.
        unfinished = OSError("the fsync round did not complete")
        errors: list[OSError | None] = [unfinished] * len(jobs)
        started_s = time.perf_counter()
        try:
            # Not abandoned on cancel: the round finishes before its files are
            # released, so nobody closes an fd this thread is syncing.
            round_jobs = [job for _, job in jobs]
            if self.syncfs_helper is not None and self._helper_covers(round_jobs):
                errors = await self._sync_with_helper(self.syncfs_helper, round_jobs)
            else:
                errors = await self._worker.run(lambda: self._sync(round_jobs))
        finally:
            self.round_times.record(time.perf_counter() - started_s)
            self._finish(jobs, errors)

    def _helper_covers(self, jobs: Sequence[FlushJob]) -> bool:
        """Whether one syncfs covers the round: every file on the watched
        filesystem and no directory (rare; the thread path checks those)."""
        assert self.filesystem is not None
        device = self.filesystem.device
        return all(
            not job.directories and all(synced.device == device for synced in job.files)
            for job in jobs
        )

    async def _sync_with_helper(
        self, helper: SyncfsHelper, jobs: Sequence[FlushJob]
    ) -> list[OSError | None]:
        try:
            await helper.sync()
        except OSError as exc:
            log.error("fsync failed: %s", exc)
            return [exc] * len(jobs)
        self.filesystem_syncs_count += 1
        self.files_synced_count += sum(len(job.files) for job in jobs)
        errors: list[OSError | None] = [None] * len(jobs)
        self._evict_synced(jobs, errors)  # clean pages only: no waiting on the disk
        return errors

    def _take_jobs(self) -> list[tuple[FlushTarget, FlushJob]]:
        targets = list(self._requested)
        self._requested.clear()
        jobs = []
        for target in targets:
            job = target.begin_flush()
            if job is not None:
                jobs.append((target, job))
        return jobs

    def _finish(
        self, jobs: Sequence[tuple[FlushTarget, FlushJob]], errors: Sequence[OSError | None]
    ) -> None:
        self.rounds_count += 1
        for (target, job), error in zip(jobs, errors, strict=True):
            job.release()
            target.end_flush(job, error)

    def _sync(self, jobs: Sequence[FlushJob]) -> list[OSError | None]:
        """Worker thread: make every job's files and directories durable.
        Returns each job's first error (one failing partition fails alone, except
        that a failed syncfs fails every job it covered)."""
        if self.filesystem is not None:
            errors = self._sync_through_filesystem(jobs, self.filesystem)
        else:
            errors = [self._sync_files(job.files) for job in jobs]
            for i, job in enumerate(jobs):
                if errors[i] is None:
                    errors[i] = self._sync_directories(job.directories)
        for error in errors:
            if error is not None:
                log.error("fsync failed: %s", error)
        self._evict_synced(jobs, errors)
        return errors

    def _evict_synced(self, jobs: Sequence[FlushJob], errors: Sequence[OSError | None]) -> None:
        """Evict the page cache ranges of every job whose sync succeeded."""
        for job, error in zip(jobs, errors, strict=True):
            if error is None and job.cache_drops:
                self.page_cache_dropped_bytes += evict_synced_ranges(job.cache_drops)

    def _sync_through_filesystem(
        self, jobs: Sequence[FlushJob], watch: FilesystemWatch
    ) -> list[OSError | None]:
        errors: list[OSError | None] = [None] * len(jobs)
        covered = [False] * len(jobs)  # whether the job needs the syncfs
        covered_files = 0
        for i, job in enumerate(jobs):
            elsewhere = [synced for synced in job.files if synced.device != watch.device]
            covered_files += len(job.files) - len(elsewhere)
            covered[i] = len(elsewhere) < len(job.files)
            errors[i] = self._sync_files(elsewhere)
            directories_elsewhere = []
            for directory in job.directories:
                if _device_of(directory) == watch.device:
                    covered[i] = True
                else:
                    directories_elsewhere.append(directory)
            if errors[i] is None:
                errors[i] = self._sync_directories(directories_elsewhere)
        if any(covered):
            try:
                watch.sync()
            except OSError as exc:
                for i in range(len(jobs)):
                    if covered[i] and errors[i] is None:
                        errors[i] = exc
            else:
                self.filesystem_syncs_count += 1
                self.files_synced_count += covered_files
        return errors

    def _sync_files(self, files: Sequence[SyncedFile]) -> OSError | None:
        try:
            for synced in files:
                self.sync_file(synced.fd)
                self.files_synced_count += 1
        except OSError as exc:
            return exc
        return None

    def _sync_directories(self, directories: Sequence[Path]) -> OSError | None:
        try:
            for directory in directories:
                with contextlib.suppress(FileNotFoundError):  # deleted meanwhile
                    self.sync_directory(directory)
        except OSError as exc:
            return exc
        return None

    def flush_now(self, target: FlushTarget) -> None:
        """Synchronously sync one target on the calling thread (close, truncation).
        Raises the OSError of a failed fsync (the target has gone offline)."""
        self.forget(target)
        job = target.begin_flush(overlap=True)
        if job is None:
            return
        errors: list[OSError | None] = [OSError("the fsync did not complete")]
        try:
            errors = self._sync([job])
        finally:
            self._finish([(target, job)], errors)
        if errors[0] is not None:
            raise errors[0]

    def close(self) -> None:
        """Release the filesystem descriptor (after the last round)."""
        if self.filesystem is not None:
            self.filesystem.close()


def evict_synced_ranges(drops: Sequence[CacheDrop]) -> int:
    """Evict synced log bytes from the page cache; returns the bytes asked for.
    Runs after a round: on the worker thread, or on the Trio thread after the
    helper process synced (the pages are clean then, so nothing waits on I/O).

    Why: the kernel otherwise keeps every byte ever written cached until memory
    runs out, and a page it has to take from free memory costs far more than one
    it just freed. In a VM whose memory the host backs lazily (Firecracker, here)
    the first write to a fresh page costs about 2.3 ns/byte against 0.2 ns/byte
    for a recycled one, measured with 128 KiB appends (BENCHMARKS.md, "Page
    cache window"). Consumers within the window still read from memory; ones
    further behind read from disk, as with any broker that bypasses the cache.
    Advisory only: a failure changes nothing but memory use."""
    asked = 0
    for drop in drops:
        try:
            os.posix_fadvise(drop.file.fd, drop.offset, drop.length, os.POSIX_FADV_DONTNEED)
        except OSError as exc:
            log.debug("page cache eviction of %s failed: %s", drop.file.path, exc)
            continue
        asked += drop.length
    return asked


def _device_of(directory: Path) -> int | None:
    """The filesystem a directory is on; None once it is gone (nothing to sync)."""
    try:
        return os.stat(directory).st_dev
    except FileNotFoundError:
        return None
