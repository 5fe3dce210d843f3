"""A partition's directory, and the state every part of `PartitionLog` shares.

Directory `<topic>-<partition>/` holds:

- `<20-digit base offset>.log|.index|.timeindex`: the segments (see segment.py),
  and `.txnindex`, a segment's aborted transactions (transaction_index.py);
- `leader-epoch-checkpoint`: epoch -> start offset (see epoch_cache.py);
- `log-start-offset-checkpoint`: the log start offset set by DeleteRecords;
- `recovery-point-offset-checkpoint`: R such that every segment wholly below R
  was sealed and fsynced with its final indexes (written at each roll, at
  clean close and after recovery);
- `durable-offset-checkpoint`: how far the log was fsynced (partition_durability.py);
- `.clean-shutdown`: written by `close` after the last fsync, removed on open.

Offsets: `log_start_offset <= durable_end_offset <= log_end_offset`.
`durable_end_offset` is the high watermark on a single node; it advances only
after an fsync round returns (flusher.py, steps 1-5), except in relaxed mode.
In a cluster the replication reports the partition's high watermark
(`update_high_watermark`); either way `high_watermark` is the log's view of it,
and the last stable offset (partition_producers.py) never exceeds it.

`PartitionLog` (partition.py) is this state plus one mixin per part, each in
its own module: partition_durability, partition_producers, partition_read,
partition_roll, partition_append, partition_truncation, partition_retention;
recovery is partition_recovery. A part calls the parts it builds on directly
(`self._fail(...)`), as one class did: no delegation on the append path.
"""

from __future__ import annotations

import logging
import random
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from weir.format.errors import ErrorCode
from weir.log.checkpoint import write_checkpoint
from weir.log.config import LogConfig
from weir.log.descriptors import SyncedFile
from weir.log.epoch_cache import LeaderEpochCache
from weir.log.errors import LogClosed, LogError
from weir.log.flusher import FlushJob, GroupFlusher
from weir.log.segment import Segment
from weir.txn.producer_state import ProducerStateTable

# One logger for every module of the partition log: its lines read as they always did.
log = logging.getLogger("weir.log.partition")

LOG_START_CHECKPOINT_FILE_NAME = "log-start-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT_FILE_NAME = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_FILE_NAME = ".clean-shutdown"
# Every offset below it was fsynced when it was written (every
# DURABLE_CHECKPOINT_INTERVAL_MS, itself unsynced: it can only be older than
# the truth). Recovery never cuts below it.
DURABLE_OFFSET_CHECKPOINT_FILE_NAME = "durable-offset-checkpoint"
# Written by `weir repair`: below this offset segments may end short of the next
# one (a damaged range it skipped, offsets never reused).
REPAIRED_OFFSET_CHECKPOINT_FILE_NAME = "repaired-offset-checkpoint"


@dataclass(slots=True)
class EvictionCursor:
    """Where the page cache eviction walk starts: every segment before `index`
    (`bytes_before` bytes in all) is evicted whole."""

    index: int = 0
    bytes_before: int = 0


@dataclass(eq=False)
class Waiter:
    offset: int
    event: trio.Event = field(default_factory=trio.Event)
    error: LogError | None = None


class PartitionLogState:
    """The fields of a partition log and what every part of it uses: the
    segments and their sums, the writable check, the recovery point, the
    invariants. Use `PartitionLog.open`."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        flusher: GroupFlusher,
        segments: list[Segment],
        epoch_cache: LeaderEpochCache,
        log_start_offset: int,
    ) -> None:
        assert segments
        self.directory = directory
        self.config = config
        self.flusher = flusher
        self._segments = segments
        self.epoch_cache = epoch_cache
        self.log_start_offset = log_start_offset
        self.log_end_offset = segments[-1].next_offset
        self.durable_end_offset = self.log_end_offset
        # What fsync covers; ahead of it durable_end_offset only in relaxed mode.
        self._fsynced_end_offset = self.log_end_offset
        # Segments below it were sealed and then fsynced with their indexes.
        self._sealed_synced_below = segments[-1].base_offset
        self._sealed_with_open_indexes: list[Segment] = []  # pinned until synced
        self._unsynced: dict[SyncedFile, None] = {}  # written since their last round: pinned
        # Sums over the segments that appends do not change (None: recompute).
        self._sealed_bytes: int | None = None
        self._eviction_cursor: EvictionCursor | None = None
        self._snapshot_offsets: list[int] | None = None
        self._end_offset_at_idle_check = -1
        self._roll_postponed = False
        self._directory_unsynced = False
        self._inflight: FlushJob | None = None
        self._generation = 0
        self._waiters: list[Waiter] = []
        self._failure: OSError | None = None
        # Called once when the log goes offline (the broker takes the replica offline).
        self.on_failure: Callable[[OSError], None] | None = None
        self._closed = False
        self._recovery_point = self.log_end_offset
        self._durable_checkpoint = self.log_end_offset
        self._roll_jitter_ms = self._draw_roll_jitter_ms()
        self.producer_state = ProducerStateTable()
        # The partition's high watermark as a cluster's replication reports it;
        # None on a single node (the high watermark is the durable end).
        self._replicated_high_watermark: int | None = None
        # Batches that failed their CRC (or did not parse) when read back.
        self.corrupt_batches_read = 0
        self._check_invariants()

    def _check_writable(self) -> None:
        if self._closed:
            raise LogClosed()
        if self._failure is not None:
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, f"log is offline: {self._failure}")

    def _draw_roll_jitter_ms(self) -> int:
        jitter_ms = min(self.config.segment_jitter_ms, self.config.segment_ms)
        return random.randrange(jitter_ms) if jitter_ms > 0 else 0

    def _write_recovery_point(self, offset: int, *, sync: bool = True) -> None:
        if offset != self._recovery_point:
            path = self.directory / RECOVERY_POINT_CHECKPOINT_FILE_NAME
            write_checkpoint(path, [[offset]], sync=sync)
            self._recovery_point = offset

    @property
    def high_watermark(self) -> int:
        """The durable end on a single node; the replication's in a cluster."""
        replicated = self._replicated_high_watermark
        if replicated is None:
            return self.durable_end_offset
        return min(replicated, self.log_end_offset)

    def update_high_watermark(self, high_watermark: int) -> None:
        """A cluster's replication reports the partition's high watermark (from
        then on it, not the durable end, is this log's): transactions whose
        marker it passed become stable."""
        self._replicated_high_watermark = high_watermark
        self.producer_state.on_high_watermark(high_watermark)

    def _durable_end_moved(self) -> None:
        """On a single node the high watermark moved with the durable end."""
        if self._replicated_high_watermark is None:
            self.producer_state.on_high_watermark(self.durable_end_offset)

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._segments, offset, key=lambda s: s.base_offset) - 1)

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    @property
    def size_bytes(self) -> int:
        if self._sealed_bytes is None:
            self._sealed_bytes = sum(segment.size_bytes for segment in self._segments[:-1])
        return self._sealed_bytes + self._segments[-1].size_bytes

    def _segments_changed(self) -> None:
        """Segments were removed or replaced: forget the sums kept over them."""
        self._sealed_bytes = None
        self._eviction_cursor = None

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    def _delete_segment(self, segment: Segment) -> None:
        for synced in segment.files:
            self._unsynced.pop(synced, None)
        segment.delete()
        self._segments_changed()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_invariants(self) -> None:
        assert self.log_start_offset <= self.durable_end_offset <= self.log_end_offset, (
            self.log_start_offset, self.durable_end_offset, self.log_end_offset,
        )  # fmt: skip
        for earlier, later in zip(self._segments, self._segments[1:]):  # noqa: B905
            assert earlier.base_offset < later.base_offset
            assert earlier.next_offset <= later.base_offset, (earlier, later)
        assert self._segments[-1].next_offset == self.log_end_offset
