"""All partition logs of one data directory: `<data_dir>/<topic>-<partition>/`."""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import trio

from weir.log.checkpoint import fsync_directory
from weir.log.compaction import LogCleaner, compacts
from weir.log.config import LogConfig
from weir.log.disk_executor import DiskExecutor, DiskJob
from weir.log.errors import LogDamaged, LogError
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog
from weir.log.partition_durability import (
    DURABLE_CHECKPOINT_INTERVAL_MS,
    write_durable_checkpoints,
)
from weir.log.partition_metadata import (
    PARTITION_METADATA_FILE_NAME,
    PartitionIdentity,
    PartitionMetadataError,
    encode_topic_id,
    read_partition_metadata,
    read_partition_metadata_or_none,
    write_partition_metadata,
)
from weir.log.segment import parse_segment_file_name
from weir.log.settings import LogSettings

log = logging.getLogger(__name__)

DELETED_SUFFIX = ".deleted"
# Partition directories no topic owns are moved here, never deleted.
STRAY_DIRECTORY_NAME = "stray"


LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def partition_directory_name(topic: str, partition: int) -> str:
    """`<topic>-<partition>`; raises ValueError for a name Kafka would not allow
    (which could also step outside the data dir, like `..`)."""
    if not LEGAL_TOPIC_NAME.fullmatch(topic) or topic in (".", "..") or partition < 0:
        raise ValueError(f"illegal topic partition {topic!r}-{partition}")
    return f"{topic}-{partition}"


def parse_partition_directory_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) for `<topic>-<partition>`, else None (e.g. `*.deleted`)."""
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit() or name.endswith(DELETED_SUFFIX):
        return None
    return topic, int(number)


def _holds_records(directory: Path) -> bool:
    """Whether any segment log file in `directory` is non-empty."""
    for entry in os.scandir(directory):
        if parse_segment_file_name(entry.name) is not None and entry.stat().st_size > 0:
            return True
    return (directory / "cleaning").exists()


def partition_directories(data_dir: Path) -> list[str]:
    """Names of the partition directories directly under `data_dir`."""
    if not data_dir.is_dir():
        return []
    return sorted(
        entry.name
        for entry in os.scandir(data_dir)
        if parse_partition_directory_name(entry.name) is not None and entry.is_dir()
    )


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogManager:
    """Opens, creates, deletes and retains the partition logs under `data_dir`.
    Everything runs on the Trio thread; the flusher is shared by all logs."""

    def __init__(
        self, data_dir: Path, flusher: GroupFlusher, settings: LogSettings | None = None
    ) -> None:
        self.data_dir = data_dir
        self.flusher = flusher
        self.settings = settings or LogSettings()
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self.cleaner = LogCleaner()

    def __iter__(self) -> Iterator[tuple[tuple[str, int], PartitionLog]]:
        return iter(list(self._logs.items()))

    def __len__(self) -> int:
        return len(self._logs)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def directory_of(self, topic: str, partition: int) -> Path:
        return self.data_dir / partition_directory_name(topic, partition)

    def on_disk(self) -> list[tuple[str, int]]:
        """Every (topic, partition) with a directory under the data dir."""
        found = []
        for name in partition_directories(self.data_dir):
            parsed = parse_partition_directory_name(name)
            assert parsed is not None
            found.append(parsed)
        return sorted(found)

    def create(
        self, topic: str, partition: int, config: LogConfig, identity: PartitionIdentity
    ) -> PartitionLog:
        """A new, empty partition: its directory must not exist (the caller set
        aside or removed anything there). Writes `partition.metadata` first."""
        assert (topic, partition) not in self._logs
        directory = self.directory_of(topic, partition)
        if directory.exists():
            raise FileExistsError(f"{directory} already exists")
        directory.mkdir()
        try:
            write_partition_metadata(directory, identity)
            fsync_directory(self.data_dir)
            partition_log = PartitionLog.open(directory, config, self.flusher, fresh=True)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        self._logs[(topic, partition)] = partition_log
        return partition_log

    def build_log(
        self, topic: str, partition: int, config: LogConfig, identity: PartitionIdentity
    ) -> PartitionLog:
        """The file work of `create`, without registering the log or syncing the
        data directory: safe on a worker thread (the disk executor) while no
        one else knows the partition. The caller syncs the data directory
        (`sync_data_directory`) and then `adopt`s the log on the Trio thread."""
        directory = self.directory_of(topic, partition)
        if directory.exists():
            raise FileExistsError(f"{directory} already exists")
        directory.mkdir()
        try:
            write_partition_metadata(directory, identity)
            return PartitionLog.open(directory, config, self.flusher, fresh=True)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise

    def sync_data_directory(self) -> None:
        fsync_directory(self.data_dir)

    def adopt(self, topic: str, partition: int, partition_log: PartitionLog) -> None:
        """(Trio thread) Serve a log `build_log` made."""
        assert (topic, partition) not in self._logs
        self._logs[(topic, partition)] = partition_log

    def retire(self, topic: str, partition: int) -> PartitionLog | None:
        """(Trio thread) Stop serving a partition whose directory goes next
        (`remove_retired`, on a worker thread)."""
        partition_log = self._logs.pop((topic, partition), None)
        if partition_log is not None:
            partition_log.retire()
        return partition_log

    def remove_retired(
        self, directories: list[Path], logs: list[PartitionLog]
    ) -> list[tuple[Path, OSError]]:
        """(Any thread) Close the retired logs' files, rename every directory to
        `<random>.deleted`, sync the data directory once, remove them. Returns
        the directories that could not be renamed, with why (the next start
        removes them)."""
        for partition_log in logs:
            partition_log.close_files()
        doomed = []
        failed = []
        for directory in directories:
            if not directory.exists():
                continue
            target = self.data_dir / f"{uuid.uuid4().hex}{DELETED_SUFFIX}"
            try:
                os.rename(directory, target)
            except OSError as exc:
                failed.append((directory, exc))
                continue
            doomed.append(target)
        if doomed:
            fsync_directory(self.data_dir)
        for target in doomed:
            shutil.rmtree(target, ignore_errors=True)
        return failed

    def remove_directory(self, directory: Path) -> None:
        """Rename to `<random>.deleted`, sync, remove (any thread)."""
        self._remove_directory(directory)

    def open_existing(
        self, topic: str, partition: int, config: LogConfig, identity: PartitionIdentity
    ) -> PartitionLog:
        """Open and recover a partition the metadata names. A missing directory,
        or one of another topic, is damage (LogDamaged): never replaced by an
        empty log, which would hand out its offsets again."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            existing.config = config
            return existing
        directory = self.directory_of(topic, partition)
        name = directory.name
        if not directory.is_dir():
            raise LogDamaged(name, f"its directory {directory} is missing")
        try:
            found = read_partition_metadata(directory)
        except PartitionMetadataError as exc:
            raise LogDamaged(name, str(exc)) from exc
        if found is None:
            write_partition_metadata(directory, identity)  # a directory from an older Weir
        elif found != identity:
            raise LogDamaged(
                name,
                f"its {PARTITION_METADATA_FILE_NAME} names topic {found.topic_name!r} with id "
                f"{encode_topic_id(found.topic_id)}, not {identity.topic_name!r} with id "
                f"{encode_topic_id(identity.topic_id)}",
            )
        partition_log = PartitionLog.open(directory, config, self.flusher)
        self._logs[(topic, partition)] = partition_log
        return partition_log

    def delete(self, topic: str, partition: int) -> None:
        """Close the log (no flush), rename its directory to `<random>.deleted`
        (a short name: `<topic>-<partition>` plus a suffix could pass the
        filesystem's 255-byte limit), remove it."""
        partition_log = self._logs.pop((topic, partition), None)
        if partition_log is not None:
            partition_log.delete_files()
        directory = self.directory_of(topic, partition)
        if directory.exists():
            self._remove_directory(directory)

    def _remove_directory(self, directory: Path) -> None:
        doomed = self.data_dir / f"{uuid.uuid4().hex}{DELETED_SUFFIX}"
        os.rename(directory, doomed)
        fsync_directory(self.data_dir)
        shutil.rmtree(doomed, ignore_errors=True)

    def sweep_unknown(
        self, known: Mapping[tuple[str, int], uuid.UUID], deleting: Collection[uuid.UUID]
    ) -> list[str]:
        """At start, before any log opens: every partition directory the metadata
        does not name (or names for another topic id) is removed when it belongs
        to a topic whose deletion a crash interrupted (`deleting`) or holds no
        record; otherwise it is moved, untouched, under `stray/` with a warning.
        Returns the names of the directories set aside."""
        self._sweep_deleted()
        set_aside = []
        for topic, index in self.on_disk():
            directory = self.directory_of(topic, index)
            identity = read_partition_metadata_or_none(directory)
            expected_id = known.get((topic, index))
            if expected_id is not None and (identity is None or identity.topic_id == expected_id):
                continue
            if identity is not None and identity.topic_id in deleting:
                log.info("finishing the deletion of %s", directory.name)
                self._remove_directory(directory)
            elif not _holds_records(directory):
                log.info("removing %s: no topic owns it and it holds no record", directory.name)
                self._remove_directory(directory)
            else:
                self.set_aside(directory, "no topic in the cluster metadata owns it")
                set_aside.append(directory.name)
        return set_aside

    def set_aside(self, directory: Path, reason: str) -> Path:
        """Move a partition directory, untouched, to `stray/<name>.<n>`; never deletes."""
        stray = self.data_dir / STRAY_DIRECTORY_NAME
        stray.mkdir(exist_ok=True)
        counter = 0
        while (target := stray / f"{directory.name}.{counter}").exists():
            counter += 1
        os.rename(directory, target)
        fsync_directory(stray)
        fsync_directory(self.data_dir)
        log.warning(
            "moved %s to %s (%s); its records are kept there, untouched: "
            "move it back or delete it yourself",
            directory.name, target, reason,
        )  # fmt: skip
        return target

    def _sweep_deleted(self) -> None:
        """Finish deletions a crash interrupted."""
        if not self.data_dir.is_dir():
            return
        for entry in os.scandir(self.data_dir):
            if entry.name.endswith(DELETED_SUFFIX) and entry.is_dir():
                shutil.rmtree(entry.path, ignore_errors=True)

    def enforce_retention(self, now_ms: int) -> int:
        """Run retention on every open log; returns the segments deleted."""
        deleted = 0
        for (topic, index), partition_log in self:
            try:
                deleted += partition_log.enforce_retention(now_ms)
                partition_log.expire_producers(now_ms, self.settings.producer_id_expiration_ms)
            except OSError:
                log.exception("retention failed for %s-%d", topic, index)
        return deleted

    async def compact(self, now_ms: int) -> int:
        """One compaction pass, where due, on every log whose cleanup.policy
        includes `compact` (the work runs on a worker thread). Returns the
        number of logs compacted."""
        compacted = 0
        for (topic, index), partition_log in self:
            if not compacts(partition_log) or partition_log.closed:
                continue
            try:
                result = await self.cleaner.clean_in_background(partition_log, now_ms)
            except (OSError, LogError, ValueError) as exc:
                log.warning("compaction of %s-%d failed: %s", topic, index, exc)
                continue
            compacted += result is not None
        return compacted

    def release_idle_files(self) -> int:
        """Let the descriptor cache close the active segment files of partitions
        not written since the previous call; returns how many were released."""
        return sum(partition_log.release_idle_files() for _, partition_log in self)

    async def run_retention(self, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        """Enforce retention every `retention_check_interval_ms`, and compact at
        most every `log_cleaner_backoff_ms`, until cancelled. Also releases the
        descriptors of partitions idle for a whole interval."""
        next_compaction_ms = 0
        while True:
            await trio.sleep(self.settings.retention_check_interval_ms / 1000)
            now_ms = clock_ms()
            self.release_idle_files()
            self.enforce_retention(now_ms)
            if now_ms >= next_compaction_ms:
                await self.compact(now_ms)
                next_compaction_ms = clock_ms() + self.settings.log_cleaner_backoff_ms

    async def run_durable_checkpoints(
        self, disk: DiskExecutor, interval_ms: int = DURABLE_CHECKPOINT_INTERVAL_MS
    ) -> None:
        """Record each log's fsynced end every `interval_ms` (the files written on
        the disk executor, one job for every log that moved), until cancelled."""
        while True:
            await trio.sleep(interval_ms / 1000)
            await self.write_durable_checkpoints(disk)

    async def write_durable_checkpoints(self, disk: DiskExecutor) -> None:
        due = [c for _, log in self if (c := log.durable_checkpoint_due()) is not None]
        if not due:
            return
        written = await disk.run(
            DiskJob.DURABLE_CHECKPOINTS, partial(write_durable_checkpoints, due)
        )
        for checkpoint in written:
            checkpoint.log.durable_checkpoint_written(checkpoint)

    def close_all(
        self,
        timeout_s: float | None = None,
        *,
        threads_count: int = 1,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> int:
        """fsync and close every log (clean shutdown); keeps going past failures.
        Returns how many logs were left unclosed (see `timeout_s`).

        Each close costs a few fsyncs (about 1 ms on an idle disk, several on a
        busy one), so thousands of partitions take seconds. `threads_count` > 1
        closes that many logs at once on worker threads, whose fsyncs the
        filesystem commits together (5,000 partitions: about half the time).
        Only for a broker's last act: no Trio task may be left that waits on a
        log, since each close wakes its waiters; one close touches only its own
        log plus the flusher's request dict (single operations, atomic under the
        GIL) and statistics.

        With `timeout_s`, logs not closed once it has passed are left as they
        are: they keep no clean-shutdown marker, so the next start recovers them
        (what was acknowledged is durable already); exiting closes their files."""
        deadline_s = math.inf if timeout_s is None else clock_s() + timeout_s
        logs = list(self._logs.items())
        self._logs.clear()

        def close(item: tuple[tuple[str, int], PartitionLog]) -> bool:
            if clock_s() >= deadline_s:
                return False
            (topic, index), partition_log = item
            try:
                partition_log.close()
            except OSError as exc:  # a failed disk: no clean-shutdown marker, recovered
                log.error("closing %s-%d failed (the next start recovers it): %s",
                          topic, index, exc)  # fmt: skip
            return True

        if threads_count > 1:
            with ThreadPoolExecutor(threads_count, thread_name_prefix="weir-close") as pool:
                closed = list(pool.map(close, logs))
        else:
            closed = [close(item) for item in logs]
        left = closed.count(False)
        if left:
            log.warning(
                "shutdown timeout: %d of %d logs not closed cleanly; "
                "they will be recovered at the next start", left, len(logs),
            )  # fmt: skip
        return left
