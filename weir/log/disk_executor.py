"""The one place where the broker waits on the disk: a bounded pool of worker threads.

The event loop serves every connection; a call that waits on the disk there
(an fsync, a directory removal, a read the page cache cannot answer) stalls
them all. So everything that touches the filesystem, other than appending to
the page cache (`os.write` of a produce) and the group-commit fsyncs (the
flusher's own `SyncWorker`), runs here:

- metadata-store saves (the JSON document: write, fsync, rename, fsync);
- creating partition directories, their `partition.metadata` and their first
  segment files, and the data directory fsync (CreateTopics, CreatePartitions,
  the offsets topic);
- renaming and removing the directories of deleted topics (DeleteTopics);
- reads that miss the page cache (Fetch's cold reads, see `PartitionLog.read`).

The Trio thread decides and applies; the worker only does the file work it
was handed, on objects no Trio task reaches while it runs (or that are safe
to share: the descriptor cache takes its own lock). `run` waits for the work
even when its caller is cancelled (`trio.to_thread.run_sync`'s default), so
the Trio thread always learns how a job ended before it changes memory.

The pool is bounded (`threads_max`): a burst of work queues here, in arrival
order, instead of growing threads without limit.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TypeVar

import trio

T = TypeVar("T")

# Enough that a cold read is not queued behind a long topic deletion, few
# enough that the disk is not flooded with concurrent requests.
DISK_THREADS_MAX = 4


class DiskJob(enum.Enum):
    """What a job is for (the label of `weir_disk_executor_jobs_total`)."""

    METADATA_SAVE = "metadata_save"
    PARTITIONS_CREATE = "partitions_create"
    PARTITIONS_REMOVE = "partitions_remove"
    COLD_READ = "cold_read"
    DURABLE_CHECKPOINTS = "durable_checkpoints"


class DiskExecutor:
    """Runs blocking file work on at most `threads_max` worker threads."""

    def __init__(self, threads_max: int = DISK_THREADS_MAX) -> None:
        assert threads_max > 0
        self._limiter = trio.CapacityLimiter(threads_max)
        self.jobs_count: dict[DiskJob, int] = dict.fromkeys(DiskJob, 0)
        self.running_count = 0

    @property
    def threads_max(self) -> int:
        return int(self._limiter.total_tokens)

    async def run(self, job: DiskJob, work: Callable[[], T]) -> T:
        """`work()` on a worker thread; its result or exception comes back here."""
        self.jobs_count[job] += 1
        self.running_count += 1
        try:
            return await trio.to_thread.run_sync(work, limiter=self._limiter)
        finally:
            self.running_count -= 1
