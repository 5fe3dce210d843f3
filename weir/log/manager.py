"""All partition logs of one data directory: `<data_dir>/<topic>-<partition>/`."""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import trio

from weir.log.checkpoint import fsync_directory
from weir.log.compaction import COMPACTION_CHECK_INTERVAL_MS, LogCleaner, compacts
from weir.log.config import LogConfig
from weir.log.errors import LogError
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog

log = logging.getLogger(__name__)

DELETED_SUFFIX = ".deleted"
# Retention runs at least this often, so it is enforced within 30 s.
RETENTION_CHECK_INTERVAL_MS = 10_000
# Kafka's producer.id.expiration.ms: idempotent-producer state idle this long is dropped.
PRODUCER_ID_EXPIRATION_MS = 86_400_000


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


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogManager:
    """Opens, creates, deletes and retains the partition logs under `data_dir`.
    Everything runs on the Trio thread; the flusher is shared by all logs."""

    def __init__(self, data_dir: Path, flusher: GroupFlusher) -> None:
        self.data_dir = data_dir
        self.flusher = flusher
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._swept = False
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
        if not self.data_dir.is_dir():
            return []
        found = []
        for entry in os.scandir(self.data_dir):
            parsed = parse_partition_directory_name(entry.name)
            if parsed is not None and entry.is_dir():
                found.append(parsed)
        return sorted(found)

    def open(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """The open log of the partition, opened (and recovered) or created as needed."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            existing.config = config
            return existing
        self._sweep_deleted()
        partition_log = PartitionLog.open(self.directory_of(topic, partition), config, self.flusher)
        self._logs[(topic, partition)] = partition_log
        return partition_log

    create = open

    def open_all(self, config_for: Callable[[str, int], LogConfig]) -> list[PartitionLog]:
        """Open every partition directory found under the data dir."""
        found = self.on_disk()
        return [self.open(topic, index, config_for(topic, index)) for topic, index in found]

    def delete(self, topic: str, partition: int) -> None:
        """Close the log (no flush), rename its directory to `*.deleted`, remove it."""
        partition_log = self._logs.pop((topic, partition), None)
        if partition_log is not None:
            partition_log.delete_files()
        directory = self.directory_of(topic, partition)
        if not directory.exists():
            return
        doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETED_SUFFIX}")
        os.rename(directory, doomed)
        fsync_directory(self.data_dir)
        shutil.rmtree(doomed, ignore_errors=True)

    def _sweep_deleted(self) -> None:
        """Finish deletions a crash interrupted."""
        if self._swept or not self.data_dir.is_dir():
            return
        self._swept = True
        for entry in os.scandir(self.data_dir):
            if entry.name.endswith(DELETED_SUFFIX) and entry.is_dir():
                shutil.rmtree(entry.path, ignore_errors=True)

    def enforce_retention(self, now_ms: int) -> int:
        """Run retention on every open log; returns the segments deleted."""
        deleted = 0
        for (topic, index), partition_log in self:
            try:
                deleted += partition_log.enforce_retention(now_ms)
                partition_log.expire_producers(now_ms, PRODUCER_ID_EXPIRATION_MS)
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

    async def run_retention(
        self,
        interval_ms: int = RETENTION_CHECK_INTERVAL_MS,
        clock_ms: Callable[[], int] = wall_clock_ms,
        compaction_interval_ms: int = COMPACTION_CHECK_INTERVAL_MS,
    ) -> None:
        """Enforce retention every `interval_ms`, and compact at most every
        `compaction_interval_ms`, until cancelled. Also releases the descriptors of
        partitions idle for a whole interval."""
        next_compaction_ms = 0
        while True:
            await trio.sleep(interval_ms / 1000)
            now_ms = clock_ms()
            self.release_idle_files()
            self.enforce_retention(now_ms)
            if now_ms >= next_compaction_ms:
                await self.compact(now_ms)
                next_compaction_ms = clock_ms() + compaction_interval_ms

    def flush_all(self) -> None:
        for _, partition_log in self:
            partition_log.flush()

    def close_all(self) -> None:
        """fsync and close every log (clean shutdown); keeps going past failures."""
        for key, partition_log in self:
            try:
                partition_log.close()
            except OSError:
                log.exception("closing %s-%d failed", *key)
        self._logs.clear()
