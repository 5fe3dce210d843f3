"""A partition's log: segments, offsets, durability, recovery and retention.

Directory `<topic>-<partition>/` holds:

- `<20-digit base offset>.log|.index|.timeindex`: the segments (see segment.py);
- `leader-epoch-checkpoint`: epoch -> start offset (see epoch_cache.py);
- `log-start-offset-checkpoint`: the log start offset set by DeleteRecords;
- `recovery-point-offset-checkpoint`: R such that every segment wholly below R
  was sealed and fsynced with its final indexes (written at each roll, at
  clean close and after recovery);
- `.clean-shutdown`: written by `close` after the last fsync, removed on open.

Offsets: `log_start_offset <= durable_end_offset <= log_end_offset`.
`durable_end_offset` is the high watermark on a single node; it advances only
after an fsync round returns (flusher.py, steps 1-5), except in relaxed mode.

Recovery (`PartitionLog.open`):

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

Checkpoints and segment creation are rare and written synchronously; batch
appends never fsync on the caller's thread. All methods run on the Trio thread.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    BATCH_HEADER_SIZE,
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    InvalidBatch,
    decode_records,
    parse_batch_header,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
    verify_crc,
)
from weir.log.checkpoint import fsync_directory, read_checkpoint, write_checkpoint
from weir.log.compaction import finish_interrupted_compaction, read_cleaned_offset
from weir.log.config import LogConfig
from weir.log.descriptors import SEGMENT_FILES_COUNT, SyncedFile, shared_log_files
from weir.log.epoch_cache import LeaderEpochCache
from weir.log.errors import (
    LogClosed,
    LogCorrupt,
    LogDamaged,
    LogError,
    LogTruncated,
    OffsetOutOfRange,
    RecordErrors,
    record_errors_message,
)
from weir.log.flusher import CacheDrop, FlushJob, GroupFlusher
from weir.log.producer_snapshots import (
    delete_all_snapshots,
    load_latest_snapshot,
    write_snapshot,
)
from weir.log.segment import (
    LOG_SUFFIX,
    NO_TIMESTAMP,
    AppendedBatch,
    Segment,
    parse_segment_file_name,
    segment_file_name,
)
from weir.log.settings import BATCH_INFLATE_BYTES_MAX
from weir.txn.producer_state import (
    NO_PRODUCER_ID,
    PendingBatch,
    ProducerBatch,
    ProducerStateError,
    ProducerStateTable,
)

# The active segment's synced bytes are evicted from the page cache in steps this large.
PAGE_CACHE_EVICT_BYTES_MIN = 1024 * 1024
# Page cache evictions one partition adds to a round (each holds a descriptor).
CACHE_DROPS_PER_ROUND_MAX = 16
# Write errors about the process's own limits, not the disk: the append is
# refused (nothing of it stays written) and the log stays writable. Any other
# failed write (ENOSPC, EROFS, EIO, EDQUOT, ...) takes the log offline.
PROCESS_LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})

log = logging.getLogger(__name__)

LOG_START_CHECKPOINT_FILE_NAME = "log-start-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT_FILE_NAME = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_FILE_NAME = ".clean-shutdown"
# Every offset below it was fsynced when it was written (every
# DURABLE_CHECKPOINT_INTERVAL_MS, itself unsynced: it can only be older than
# the truth). Recovery never cuts below it.
DURABLE_OFFSET_CHECKPOINT_FILE_NAME = "durable-offset-checkpoint"
DURABLE_CHECKPOINT_INTERVAL_MS = 1000
# Written by `weir repair`: below this offset segments may end short of the next
# one (a damaged range it skipped, offsets never reused).
REPAIRED_OFFSET_CHECKPOINT_FILE_NAME = "repaired-offset-checkpoint"
COMPRESSION_CODEC_MAX = 4  # none, gzip, snappy, lz4, zstd


# Not frozen: a frozen dataclass costs about 7x more to construct (1.4 µs against
# 0.2 µs for a 13-field one), and this is built on the produce path. Never mutated.
@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False  # a producer's retry of batches already in the log


@dataclass(frozen=True, slots=True)
class TruncationPoint:
    """Where a follower cuts its log after one OffsetForLeaderEpoch answer
    (`PartitionLog.truncation_point`)."""

    offset: int
    complete: bool  # False: truncate there, then ask the leader again (KIP-279)


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: bytes | bytearray  # whole batches, b"" when there is nothing to return
    next_offset: int  # the offset after the last returned batch (`offset` when empty)


@dataclass(slots=True)
class _EvictionCursor:
    """Where the page cache eviction walk starts: every segment before `index`
    (`bytes_before` bytes in all) is evicted whole."""

    index: int = 0
    bytes_before: int = 0


@dataclass(eq=False)
class _Waiter:
    offset: int
    event: trio.Event = field(default_factory=trio.Event)
    error: LogError | None = None


@dataclass(frozen=True)
class DurableCheckpoint:
    """A log's fsynced end to record in its `durable-offset-checkpoint`, taken on
    the Trio thread in the log's truncation `generation`."""

    log: PartitionLog
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


def _check_replicated_batch(view: memoryview, position: int, header: BatchHeader) -> None:
    """A replicated batch's structural checks (the leader applied the topic's
    limits): at least one record and no more than its offsets span (compaction
    removes records but keeps the span), a known codec, its CRC32C."""
    if not 1 <= header.records_count <= header.last_offset_delta + 1:
        raise LogError(
            ErrorCode.INVALID_RECORD,
            f"replicated batch at offset {header.base_offset}: {header.records_count} records "
            f"for {header.last_offset_delta + 1} offsets",
        )
    if header.compression > COMPRESSION_CODEC_MAX:
        raise LogError(ErrorCode.CORRUPT_MESSAGE, f"unknown codec {header.compression}")
    if not verify_crc(view, position, header):
        raise LogError(
            ErrorCode.CORRUPT_MESSAGE,
            f"replicated batch at offset {header.base_offset}: CRC32C mismatch",
        )


def _timestamp_errors(batch: memoryview | bytes | bytearray, low_ms: int, high_ms: int) -> LogError:
    """INVALID_TIMESTAMP listing each record of `batch` outside [low_ms, high_ms], as
    Kafka's LogValidator words them; without the list when the records cannot be
    decoded within the bound or none is outside (the header lied)."""
    try:
        errors = [
            (index, f"Timestamp {record.timestamp_ms} of message with offset {record.offset} "
                    f"is out of range. The timestamp should be within [{low_ms}, {high_ms}]")
            for index, record in enumerate(
                decode_records(batch, uncompressed_bytes_max=BATCH_INFLATE_BYTES_MAX)
            )
            if not low_ms <= record.timestamp_ms <= high_ms
        ]  # fmt: skip
    except InvalidBatch:
        errors = []
    if not errors:
        return LogError(
            ErrorCode.INVALID_TIMESTAMP,
            f"the batch's timestamps are outside [{low_ms}, {high_ms}]",
        )
    return RecordErrors(
        ErrorCode.INVALID_TIMESTAMP,
        record_errors_message(ErrorCode.INVALID_TIMESTAMP, errors),
        errors,
    )


class PartitionLog:
    """Use `PartitionLog.open`. Offsets: `log_start_offset <= durable_end_offset
    <= log_end_offset`; `log_end_offset` is the next offset to assign."""

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
        self._eviction_cursor: _EvictionCursor | None = None
        self._snapshot_offsets: list[int] | None = None
        self._end_offset_at_idle_check = -1
        self._roll_postponed = False
        self._directory_unsynced = False
        self._inflight: FlushJob | None = None
        self._generation = 0
        self._waiters: list[_Waiter] = []
        self._failure: OSError | None = None
        # Called once when the log goes offline (the broker takes the replica offline).
        self.on_failure: Callable[[OSError], None] | None = None
        self._closed = False
        self._recovery_point = self.log_end_offset
        self._durable_checkpoint = self.log_end_offset
        self._roll_jitter_ms = self._draw_roll_jitter_ms()
        self.producer_state = ProducerStateTable()
        # Batches that failed their CRC (or did not parse) when read back.
        self.corrupt_batches_read = 0
        self._check_invariants()

    # -- opening -------------------------------------------------------------

    @classmethod
    def open(
        cls, directory: Path, config: LogConfig, flusher: GroupFlusher, *, fresh: bool = False
    ) -> PartitionLog:
        """Open (creating if needed) and recover the log in `directory`; `fresh`:
        the caller just created the directory for a new partition."""
        created = _ensure_directory(directory) or fresh
        clean = _consume_clean_shutdown_marker(directory) or created
        finish_interrupted_compaction(directory)
        _remove_stray_files(directory)
        epoch_cache = LeaderEpochCache(directory)
        recovery_point = read_single_checkpoint(directory / RECOVERY_POINT_CHECKPOINT_FILE_NAME, 0)
        loader = _SegmentLoader(directory, config, trust_below=None if clean else recovery_point)
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
        partition._load_producer_state()
        return partition

    def _finish_recovery(self, loader: _SegmentLoader, clean: bool, created: bool) -> None:
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

    # -- appending -----------------------------------------------------------

    def append(
        self,
        records: memoryview | bytes | bytearray,
        *,
        leader_epoch: int,
        now_ms: int,
        allow_control_batches: bool = False,
    ) -> AppendResult:
        """Validate every batch, assign offsets, stamp the leader epoch (and the
        append time under LogAppendTime) and write them, without fsync."""
        self._check_writable()
        view = memoryview(records).cast("B") if isinstance(records, memoryview) else records
        headers = self._validate(view, now_ms, allow_control_batches)
        if len(view) > self.config.segment_bytes:
            raise LogError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"{len(view)} bytes of batches exceed segment.bytes {self.config.segment_bytes}",
            )
        pending = self._check_producers(headers)
        if isinstance(pending, ProducerBatch):
            return AppendResult(
                pending.first_offset, pending.last_offset, -1, self.log_start_offset, True
            )
        base_offset = self.log_end_offset
        last_offset = base_offset + sum(h.last_offset_delta + 1 for _, h in headers) - 1
        data, batches = self._assign(view, headers, base_offset, leader_epoch, now_ms)
        self._write(data, batches, now_ms)
        assert self.log_end_offset == last_offset + 1, (self.log_end_offset, last_offset)
        self._commit_producers(pending, batches, base_offset, now_ms)
        self._after_write()
        if leader_epoch >= 0:
            self._assign_epoch(leader_epoch, base_offset)
        append_time_ms = now_ms if self.config.log_append_time else -1
        return AppendResult(base_offset, last_offset, append_time_ms, self.log_start_offset)

    def append_replicated(
        self, records: memoryview | bytes | bytearray, *, now_ms: int
    ) -> AppendResult | None:
        """A follower's append of a Fetch response's records: the leader's batches
        stored byte for byte, with the leader's offsets and leader epochs.

        Batches wholly below the log end are skipped (already here); a partial
        batch at the end (a fetch cuts the last one) is left for the next fetch.
        The first batch kept must start at the log end and each next one where
        the previous ends: a gap or an overlap is LogError(INVALID_RECORD), and
        so is a leader epoch older than the latest one here; a batch that fails
        its structural checks (magic, length, record count, codec, CRC32C) is
        LogError(CORRUPT_MESSAGE or INVALID_RECORD). On any error nothing of the
        call is written. The leader alone applied the topic's limits (timestamps,
        max.message.bytes) and the producers' sequence checks: producer state
        only records the batches, so a follower promoted to leader recognises a
        producer's retry. Control batches are stored like any other.

        Returns the offsets written (`base_offset` is the old log end), or None
        when there was no complete batch at or past the log end. Rolling, index
        entries, the flusher and `wait_durable` work as for `append`."""
        self._check_writable()
        view = memoryview(records).cast("B")
        headers = self._replicated_headers(view)
        if not headers:
            return None
        self._check_replicated_epochs(headers)
        base_offset = self.log_end_offset
        first_position = headers[0][0]
        last_position, last_header = headers[-1]
        batches = [
            AppendedBatch(position - first_position, h.last_offset, h.max_timestamp, h.size)
            for position, h in headers
        ]
        self._write(view[first_position : last_position + last_header.size], batches, now_ms)
        self._record_replicated_producers(headers, now_ms)
        self._after_write()
        for _, header in headers:
            if header.partition_leader_epoch >= 0:
                self._assign_epoch(header.partition_leader_epoch, header.base_offset)
        assert self.log_end_offset == last_header.last_offset + 1
        return AppendResult(base_offset, last_header.last_offset, -1, self.log_start_offset)

    def _replicated_headers(self, view: memoryview) -> list[tuple[int, BatchHeader]]:
        """(position, header) of each complete batch of `view` from the log end on,
        checked; batches before it and a trailing partial batch are left out."""
        headers: list[tuple[int, BatchHeader]] = []
        expected = self.log_end_offset
        position = 0
        total = len(view)
        while total - position >= BATCH_HEADER_SIZE:
            try:
                header = parse_batch_header(view, position)
            except InvalidBatch as exc:
                message = f"replicated batch at byte {position}: {exc}"
                raise LogError(exc.error_code, message) from exc
            if header.size > total - position:
                break  # the fetch cut the last batch
            if not headers and header.last_offset < expected:
                position += header.size  # already in this log
                continue
            if header.base_offset < expected:
                # A gap is a compacted leader's (whole batches removed), as Kafka's
                # followers accept it; an overlap never happens to a sound log.
                raise LogError(
                    ErrorCode.INVALID_RECORD,
                    f"replicated batch of offsets {header.base_offset}..{header.last_offset} "
                    f"overlaps offsets below {expected}",
                )
            _check_replicated_batch(view, position, header)
            headers.append((position, header))
            expected = header.last_offset + 1
            position += header.size
        return headers

    def _check_replicated_epochs(self, headers: list[tuple[int, BatchHeader]]) -> None:
        """Leader epochs never go back. A batch without one (-1) is stored as it is
        and leaves the epoch cache alone."""
        latest = self.epoch_cache.latest_epoch
        for _, header in headers:
            epoch = header.partition_leader_epoch
            if epoch < 0:
                continue
            if latest is not None and epoch < latest:
                raise LogError(
                    ErrorCode.INVALID_RECORD,
                    f"replicated batch at offset {header.base_offset} has leader epoch "
                    f"{epoch}, older than epoch {latest}",
                )
            latest = epoch

    def _record_replicated_producers(
        self, headers: list[tuple[int, BatchHeader]], now_ms: int
    ) -> None:
        """Producer state learns each written batch as the leader accepted it: no
        sequence or epoch check (the same as rebuilding it from the log)."""
        for _, header in headers:
            if not header.is_control:
                self.producer_state.replay(
                    header.producer_id, header.producer_epoch, header.base_sequence,
                    header.base_offset, header.last_offset, now_ms,
                )  # fmt: skip

    def truncation_point(self, leader_epoch: int, leader_end_offset: int) -> TruncationPoint:
        """KIP-279: where a follower cuts its log, given the leader's answer to
        OffsetForLeaderEpoch for the follower's latest epoch: `leader_epoch`, the
        largest epoch at or below it that the leader has, and `leader_end_offset`,
        where that epoch ends on the leader. Kafka's rule (AbstractFetcherThread.
        getOffsetTruncationState), with F(e) = this log's (epoch, end offset) for
        its largest epoch <= e (`end_offset_for_epoch`):

        - the follower has `leader_epoch` (F's epoch equals it): cut at
          min(leader_end_offset, its own end of that epoch), complete;
        - it lacks that epoch: cut at its own end of the largest epoch below it,
          NOT complete: the caller truncates there and asks again with its new
          latest epoch (each round removes at least one epoch, so this ends);
        - it has no epoch at or below `leader_epoch` (an empty cache), or the
          leader gave no epoch (-1) with an offset: min(leader_end_offset, log
          end), complete, as Kafka;
        - the leader has no such epoch (`leader_end_offset` -1, UNDEFINED): Kafka
          falls back to the follower's fetch offset (the high watermark for a log
          without epochs), which KIP-101 showed can keep diverged records. Here
          nothing of this log is known to match the leader's, so it is cut to its
          log start and fetched again: safe, at the cost of a refetch.

        Never above the log end. It can be below the log start (the leader's
        epoch ended before this log starts): `truncate_to` then empties the log
        and restarts it there."""
        end = self.log_end_offset
        if leader_end_offset < 0:
            return TruncationPoint(self.log_start_offset, complete=True)
        if leader_epoch < 0:
            return TruncationPoint(min(leader_end_offset, end), complete=True)
        own_epoch, own_end = self.epoch_cache.end_offset_for(leader_epoch, end)
        if own_epoch < 0:
            return TruncationPoint(min(leader_end_offset, end), complete=True)
        if own_epoch != leader_epoch:
            return TruncationPoint(min(own_end, end), complete=False)
        return TruncationPoint(min(own_end, leader_end_offset, end), complete=True)

    def truncation_offset(self, leader_epoch: int, leader_end_offset: int) -> int:
        """The offset of `truncation_point` (see there; when it is not complete the
        caller must truncate and ask the leader again)."""
        return self.truncation_point(leader_epoch, leader_end_offset).offset

    def _check_producers(
        self, headers: list[tuple[int, BatchHeader]]
    ) -> list[PendingBatch | None] | ProducerBatch:
        """Sequence and epoch checks of idempotent batches (weir.txn.producer_state):
        per batch a PendingBatch (None without a producer id), or the batch
        already in the log when this is a producer's retry of it."""
        pending: list[PendingBatch | None] = []
        earlier: list[PendingBatch] = []
        for _, header in headers:
            if header.producer_id == NO_PRODUCER_ID or header.is_control:
                pending.append(None)
                continue
            try:
                checked = self.producer_state.check(
                    header.producer_id, header.producer_epoch, header.base_sequence,
                    header.last_offset_delta, earlier,
                )  # fmt: skip
            except ProducerStateError as exc:
                raise LogError(exc.error_code, str(exc)) from exc
            if isinstance(checked, ProducerBatch):
                if len(headers) > 1:
                    raise LogError(
                        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                        "a retried batch arrived together with other batches",
                    )
                return checked
            pending.append(checked)
            earlier.append(checked)
        return pending

    def _commit_producers(
        self,
        pending: list[PendingBatch | None],
        batches: list[AppendedBatch],
        base_offset: int,
        now_ms: int,
    ) -> None:
        first_offset = base_offset
        for checked, batch in zip(pending, batches, strict=True):
            if checked is not None:
                self.producer_state.commit(checked, first_offset, batch.last_offset, now_ms)
            first_offset = batch.last_offset + 1

    def _write(
        self, data: bytes | bytearray | memoryview, batches: list[AppendedBatch], now_ms: int
    ) -> None:
        """Write whole batches (offsets final, contiguous from the log end) to the
        active segment, rolling first when due, and advance the log end; unsynced."""
        last_offset = batches[-1].last_offset
        assert last_offset >= self.log_end_offset, (last_offset, self.log_end_offset)
        try:
            self._maybe_roll(len(data), last_offset, len(batches), now_ms)
            segment = self._segments[-1]
            if not segment.pinned:  # the partition was idle: reopen its files
                segment.pin()
            segment.append(data, batches, self.config.index_interval_bytes)
        except OSError as exc:
            log.error("append to %s failed: %s", self.directory, exc)
            if exc.errno not in PROCESS_LIMIT_ERRNOS:
                self._fail(exc)  # what the disk holds past the log end is unknown
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc
        self.log_end_offset = last_offset + 1
        self._unsynced[segment.log_file] = None

    def _assign_epoch(self, leader_epoch: int, base_offset: int) -> None:
        latest = self.epoch_cache.latest_epoch
        if latest is not None and leader_epoch < latest:
            log.warning("%s: append with epoch %d after epoch %d",
                        self.directory.name, leader_epoch, latest)  # fmt: skip
            return
        try:
            self.epoch_cache.assign(leader_epoch, base_offset)
        except OSError as exc:
            self._fail(exc)
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc

    def _check_writable(self) -> None:
        if self._closed:
            raise LogClosed()
        if self._failure is not None:
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, f"log is offline: {self._failure}")

    def _validate(
        self, view: memoryview | bytes | bytearray, now_ms: int, allow_control: bool
    ) -> list[tuple[int, BatchHeader]]:
        total = len(view)
        if total == 0:
            raise LogError(ErrorCode.INVALID_RECORD, "no record batches")
        headers = []
        position = 0
        while position < total:
            header = self._validate_batch(view, position, total - position, now_ms)
            if header.is_control and not allow_control:
                raise LogError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
            headers.append((position, header))
            position += header.size
        return headers

    def _validate_batch(
        self, view: memoryview | bytes | bytearray, position: int, remaining: int, now_ms: int
    ) -> BatchHeader:
        if remaining < BATCH_HEADER_SIZE:
            raise LogError(ErrorCode.CORRUPT_MESSAGE, f"{remaining} trailing bytes after batches")
        try:
            header = parse_batch_header(view, position)
        except InvalidBatch as exc:
            raise LogError(exc.error_code, str(exc)) from exc
        if header.size > remaining:
            raise LogError(ErrorCode.CORRUPT_MESSAGE, "record batch is truncated")
        if header.size > self.config.max_message_bytes:
            raise LogError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {header.size} bytes exceeds max.message.bytes "
                f"{self.config.max_message_bytes}",
            )
        if header.records_count < 1 or header.last_offset_delta != header.records_count - 1:
            raise LogError(
                ErrorCode.INVALID_RECORD,
                f"records_count {header.records_count} does not match last_offset_delta "
                f"{header.last_offset_delta}",
            )
        if header.compression > COMPRESSION_CODEC_MAX:
            raise LogError(ErrorCode.CORRUPT_MESSAGE, f"unknown codec {header.compression}")
        if not verify_crc(view, position, header):
            raise LogError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC32C mismatch")
        if not self.config.log_append_time:
            self._check_timestamps(view, position, header, now_ms)
        return header

    def _check_timestamps(
        self, view: memoryview | bytes | bytearray, position: int, header: BatchHeader, now_ms: int
    ) -> None:
        """The batch's timestamp range (its base and max timestamps) must lie in the
        topic's window; only when it does not are its records decoded, to name
        the ones outside it (KIP-467)."""
        config = self.config
        before_max = min(config.message_timestamp_before_max_ms,
                         config.message_timestamp_difference_max_ms)  # fmt: skip
        after_max = min(config.message_timestamp_after_max_ms,
                        config.message_timestamp_difference_max_ms)  # fmt: skip
        low_ms, high_ms = now_ms - before_max, now_ms + after_max
        for timestamp_ms in (header.base_timestamp, header.max_timestamp):
            if not low_ms <= timestamp_ms <= high_ms:
                raise _timestamp_errors(view[position : position + header.size], low_ms, high_ms)

    def _assign(
        self,
        view: memoryview | bytes | bytearray,
        headers: list[tuple[int, BatchHeader]],
        base_offset: int,
        leader_epoch: int,
        now_ms: int,
    ) -> tuple[bytearray | memoryview, list[AppendedBatch]]:
        """Patch base offsets and epochs (and LogAppendTime): in place when the
        caller's buffer is writable (a request frame of its own), else in a copy."""
        data = view if isinstance(view, memoryview) and not view.readonly else bytearray(view)
        log_append_time = self.config.log_append_time
        batches = []
        next_offset = base_offset
        for position, header in headers:
            patch_base_offset(data, position, next_offset)
            patch_leader_epoch(data, position, leader_epoch)
            max_timestamp_ms = header.max_timestamp
            if log_append_time:
                set_log_append_time(data, position, now_ms)
                max_timestamp_ms = now_ms
            last_offset = next_offset + header.last_offset_delta
            batches.append(AppendedBatch(position, last_offset, max_timestamp_ms, header.size))
            next_offset = last_offset + 1
        return data, batches

    def _after_write(self) -> None:
        if not self.flusher.fsync_enabled:
            # Relaxed mode: acknowledged once written; synced in the background.
            self.durable_end_offset = self.log_end_offset
            self._wake_waiters()
        self.flusher.request(self)
        assert self.log_start_offset <= self.durable_end_offset <= self.log_end_offset

    # -- rolling -------------------------------------------------------------

    def _maybe_roll(
        self, size_bytes: int, last_offset: int, batches_count: int, now_ms: int
    ) -> None:
        active = self._segments[-1]
        if active.is_empty:
            return
        full = not active.can_hold(last_offset, batches_count)  # must roll
        oversize = active.size_bytes + size_bytes > self.config.segment_bytes
        due = oversize or self._segment_expired(active, now_ms)
        if full or (due and self._descriptors_for_roll(active)):
            self.roll()

    def _descriptors_for_roll(self, active: Segment) -> bool:
        """Whether the descriptor cache has room for a roll (the new segment's files,
        and the sealed one's if the partition was idle). When every descriptor is
        pinned by segments awaiting their sync or held by a round, the roll waits
        and the active segment grows past segment.bytes until a round releases them."""
        needed = SEGMENT_FILES_COUNT if active.pinned else 2 * SEGMENT_FILES_COUNT
        if shared_log_files().has_room_for(needed):
            self._roll_postponed = False
            return True
        if not self._roll_postponed:
            log.warning("%s: segment roll postponed: every log file descriptor is in use",
                        self.directory.name)  # fmt: skip
            self._roll_postponed = True
        return False

    def _segment_expired(self, segment: Segment, now_ms: int) -> bool:
        started_ms = segment.rolling_timestamp_ms
        if started_ms is None:
            return False
        return now_ms - started_ms > self.config.segment_ms - self._roll_jitter_ms

    def _draw_roll_jitter_ms(self) -> int:
        jitter_ms = min(self.config.segment_jitter_ms, self.config.segment_ms)
        return random.randrange(jitter_ms) if jitter_ms > 0 else 0

    def roll(self) -> Segment:
        """Seal the active segment and start a new one at the log end offset."""
        self._check_writable()
        active = self._segments[-1]
        if active.is_empty:
            return active
        # Open the new segment first: if that fails, nothing has changed.
        segment = Segment(self.directory, self.log_end_offset, self.config.segment_index_bytes)
        try:
            active.pin()  # until the round that syncs it (an idle partition's is not)
        except OSError:
            segment.delete()
            raise
        active.seal()
        self._unsynced.update(dict.fromkeys(active.files))
        self._sealed_with_open_indexes.append(active)
        if self._sealed_bytes is not None:
            self._sealed_bytes += active.size_bytes
        self._segments.append(segment)
        self._directory_unsynced = True
        self._write_producer_snapshot()
        self._roll_jitter_ms = self._draw_roll_jitter_ms()
        # Segments wholly below this point are fsynced with their final indexes.
        # Written without fsync (the roll runs on the event loop): the round
        # requested below makes it durable, and one lost only lags (recovery
        # then scans more), the safe side.
        self._write_recovery_point(
            min(self._fsynced_end_offset, self._sealed_synced_below), sync=False
        )
        self.flusher.request(self)
        return segment

    def _write_recovery_point(self, offset: int, *, sync: bool = True) -> None:
        if offset != self._recovery_point:
            path = self.directory / RECOVERY_POINT_CHECKPOINT_FILE_NAME
            write_checkpoint(path, [[offset]], sync=sync)
            self._recovery_point = offset

    # -- durability ----------------------------------------------------------

    async def wait_durable(self, offset: int) -> None:
        """Return once every byte of every batch before `offset` is fsynced.
        Raises LogClosed, LogTruncated, or LogError(KAFKA_STORAGE_ERROR)."""
        while offset > self.durable_end_offset:
            self._check_waitable(offset)
            waiter = _Waiter(offset)
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
        cursor = self._eviction_cursor or _EvictionCursor()
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

    # -- reading -------------------------------------------------------------

    def read(
        self, offset: int, *, bytes_max: int, end_offset: int, cached_only: bool = False
    ) -> ReadResult:
        """Whole batches from the one holding `offset`, none reaching
        `end_offset` (the high watermark), within `bytes_max` unless the first
        batch alone is larger (KIP-74). Raises OffsetOutOfRange; with
        `cached_only`, ReadNotCached when the records are not in the page cache."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.log_end_offset)
        end_offset = min(end_offset, self.log_end_offset)
        if offset >= end_offset:
            return ReadResult(b"", offset)
        try:
            for segment in self._segments[self._segment_index(offset) :]:
                found = segment.read(offset, bytes_max, end_offset, cached_only=cached_only)
                if found is not None:
                    data, next_offset = found
                    return ReadResult(data, next_offset if data else offset)
        except LogCorrupt as exc:
            self.corrupt_batches_read += 1
            log.error(
                "%s: a stored batch is damaged reading offset %d: %s. Readers of this "
                "offset get KAFKA_STORAGE_ERROR; with the broker stopped, `weir repair` "
                "skips the damaged range.",
                self.directory.name, offset, exc,
            )  # fmt: skip
            raise
        except OSError as exc:
            log.error("read from %s failed: %s", self.directory, exc)
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc
        return ReadResult(b"", offset)

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._segments, offset, key=lambda s: s.base_offset) - 1)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start whose
        timestamp is >= `timestamp_ms`, or None."""
        start = self._segment_index(self.log_start_offset)
        for segment in self._segments[start:]:
            for position, header in segment.batches_from_timestamp(timestamp_ms):
                if header.last_offset < self.log_start_offset:
                    continue
                located = self._record_at_or_after(segment, position, header, timestamp_ms)
                if located is not None:
                    return located
        return None

    def _record_at_or_after(
        self, segment: Segment, position: int, header: BatchHeader, timestamp_ms: int
    ) -> tuple[int, int] | None:
        """Refine a batch-level match to the first record (from the log start)."""
        first_offset = max(header.base_offset, self.log_start_offset)
        if header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME:  # every record: max_timestamp
            return first_offset, header.max_timestamp
        try:
            batch = segment.read_batch(position, header)
            for record in decode_records(
                batch, uncompressed_bytes_max=BATCH_INFLATE_BYTES_MAX,
                include_control=True,
            ):  # fmt: skip
                if record.offset >= first_offset and record.timestamp_ms >= timestamp_ms:
                    return record.offset, record.timestamp_ms
        except InvalidBatch as exc:
            log.warning("%s: cannot decode batch at %d: %s", segment.log_path, position, exc)
            return first_offset, header.max_timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp
        (ListOffsets MAX_TIMESTAMP, KIP-734), or None for an empty log."""
        best: Segment | None = None
        for segment in self._segments:
            if segment.max_timestamp_ms == NO_TIMESTAMP or segment.is_empty:
                continue
            if best is None or segment.max_timestamp_ms > best.max_timestamp_ms:
                best = segment
        if best is None:
            return None
        found = best.find_batch(max(best.offset_of_max_timestamp, self.log_start_offset))
        if found is not None:
            position, header = found
            located = self._record_at_or_after(best, position, header, best.max_timestamp_ms)
            if located is not None:
                return located
        return max(best.offset_of_max_timestamp, self.log_start_offset), best.max_timestamp_ms

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= `epoch`, where it ends), or (-1, -1)."""
        return self.epoch_cache.end_offset_for(epoch, self.log_end_offset)

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

    # -- compaction (the work and its crash protocol: compaction.py) ---------

    def compaction_inputs(self) -> list[tuple[Segment, int]]:
        """The sealed segments wholly below the durable end offset, oldest first,
        each with the next segment's base offset (where its offset range ends).
        Never the active segment; empty while the log is closed or offline."""
        if self._closed or self._failure is not None:
            return []
        inputs = []
        for segment, following in zip(self._segments, self._segments[1:]):  # noqa: B905
            if following.base_offset > self.durable_end_offset:
                break
            inputs.append((segment, following.base_offset))
        return inputs

    def swap_cleaned_segments(self, old: list[Segment], new: list[Segment]) -> None:
        """Replace the sealed segments `old` by `new`: their cleaned copies, already
        renamed into place and fsynced (compaction.py). The old files were
        replaced or unlinked by name already, so the old segments are only closed."""
        old_ids = {id(segment) for segment in old}
        active = self._segments[-1]
        assert id(active) not in old_ids, "the active segment is never cleaned"
        kept = [segment for segment in self._segments if id(segment) not in old_ids]
        assert len(kept) == len(self._segments) - len(old_ids), "swapping unknown segments"
        self._segments = sorted(kept + new, key=lambda segment: segment.base_offset)
        assert self._segments[-1] is active
        for segment in old:
            for synced in segment.files:
                self._unsynced.pop(synced, None)
            segment.close()
        self._sealed_with_open_indexes = [
            segment for segment in self._sealed_with_open_indexes if id(segment) not in old_ids
        ]
        for segment in new:
            segment.release_index_files()
        self._segments_changed()
        self._check_invariants()

    # -- truncation, deletion, retention ------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= `offset` (a follower diverged).
        The new log end is the base of the first removed batch (<= `offset`).
        Below the log start, the log is emptied and restarts at `offset`.
        Raises LogError(KAFKA_STORAGE_ERROR), the log gone offline, when the disk fails."""
        self._check_writable()
        if offset >= self.log_end_offset:
            return
        with self._failing_on_disk_errors():
            self._generation += 1
            if offset < self.log_start_offset:
                self._restart_at(offset)
            else:
                while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
                    self._delete_segment(self._segments.pop())
                self._segments[-1].truncate_to(offset)
                self.log_end_offset = self._segments[-1].next_offset
            self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at `offset`, below or above its end (Kafka's
        truncateFullyAndStartAt): a follower whose log end is below the leader's log
        start (the leader answered OFFSET_OUT_OF_RANGE) starts over there.
        `truncate_to` cannot: it never moves the log end up."""
        self._check_writable()
        assert offset >= 0, offset
        with self._failing_on_disk_errors():
            self._generation += 1
            self._restart_at(offset)
            self._after_truncation()

    @contextlib.contextmanager
    def _failing_on_disk_errors(self) -> Iterator[None]:
        """A failed file operation takes the log offline (KAFKA_STORAGE_ERROR)."""
        try:
            yield
        except OSError as exc:
            self._fail(exc)
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc

    def begin_leader_epoch(self, leader_epoch: int) -> None:
        """A leader's term starts at the log end: the epoch cache records it there
        unless it already has this epoch or a newer one. Raises
        LogError(KAFKA_STORAGE_ERROR), the log gone offline, when that cannot be written."""
        if self._failure is not None:
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, f"log is offline: {self._failure}")
        latest = self.latest_epoch
        if latest is None or latest < leader_epoch:
            self._assign_epoch(leader_epoch, self.log_end_offset)

    def _after_truncation(self) -> None:
        """Bookkeeping once the log end moved down, or the log restarted."""
        self._segments_changed()
        self._segments[-1].pin()
        self._unsynced[self._segments[-1].log_file] = None
        self.durable_end_offset = min(self.durable_end_offset, self.log_end_offset)
        self._fsynced_end_offset = min(self._fsynced_end_offset, self.log_end_offset)
        self._sealed_synced_below = min(self._sealed_synced_below, self._segments[-1].base_offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self._write_recovery_point(min(self._recovery_point, self.log_end_offset))
        self._lower_durable_checkpoint()
        self._load_producer_state()
        self._fail_waiters(LogTruncated, offset_above=self.log_end_offset)
        self.flush()
        self._check_invariants()

    def _restart_at(self, offset: int) -> None:
        for segment in self._segments:
            self._delete_segment(segment)
        self._segments = [Segment(self.directory, offset, self.config.segment_index_bytes)]
        self._directory_unsynced = True
        self.log_start_offset = offset
        self.log_end_offset = offset
        self.durable_end_offset = offset
        self._fsynced_end_offset = offset
        self._sealed_synced_below = offset
        self.epoch_cache.clear()
        self.producer_state.clear()
        delete_all_snapshots(self.directory)
        self._snapshot_offsets = []
        write_checkpoint(self.directory / LOG_START_CHECKPOINT_FILE_NAME, [[offset]])

    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to `offset` (checkpointed) and delete
        the segments wholly below it. Returns the new log start offset."""
        self._check_writable()
        if offset > self.durable_end_offset or offset < 0:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.durable_end_offset)
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        write_checkpoint(self.directory / LOG_START_CHECKPOINT_FILE_NAME, [[offset]])
        self.epoch_cache.truncate_from_start(offset)
        self._delete_oldest_while(lambda segment, next_base: next_base <= offset)
        self._check_invariants()
        return self.log_start_offset

    def enforce_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms (by their largest timestamp)
        or while the log exceeds retention.bytes. Only committed (durable)
        segments go; an expired active segment is rolled first. Returns the
        number of segments deleted."""
        if self._closed or self._failure is not None or not self.config.deletes_by_retention:
            return 0
        deleted = self._enforce_retention_ms(now_ms) + self._enforce_retention_bytes()
        if deleted:
            self._advance_log_start(self._segments[0].base_offset)
        return deleted

    def _enforce_retention_ms(self, now_ms: int) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0

        def expired(segment: Segment, next_base: int) -> bool:
            return now_ms - segment.max_timestamp_ms > retention_ms

        deleted = self._delete_oldest_while(expired)
        active = self._segments[-1]
        if (
            len(self._segments) == 1
            and not active.is_empty
            and expired(active, active.next_offset)
            and active.next_offset <= self.durable_end_offset
        ):
            self.roll()
            deleted += self._delete_oldest_while(expired)
        return deleted

    def _enforce_retention_bytes(self) -> int:
        retention_bytes = self.config.retention_bytes
        if retention_bytes < 0:
            return 0
        excess_bytes = self.size_bytes - retention_bytes

        def over(segment: Segment, next_base: int) -> bool:
            nonlocal excess_bytes
            if excess_bytes - segment.size_bytes < 0:
                return False
            excess_bytes -= segment.size_bytes
            return True

        return self._delete_oldest_while(over)

    def _delete_oldest_while(self, predicate: Callable[[Segment, int], bool]) -> int:
        """Delete non-active, durable segments from the oldest while `predicate`
        (segment, next segment's base offset) holds."""
        deleted = 0
        while len(self._segments) > 1:
            segment, next_base = self._segments[0], self._segments[1].base_offset
            if next_base > self.durable_end_offset or not predicate(segment, next_base):
                break
            self._segments.pop(0)
            self._delete_segment(segment)
            deleted += 1
        if deleted:
            self._advance_log_start(self._segments[0].base_offset)
        return deleted

    def _advance_log_start(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.epoch_cache.truncate_from_start(offset)

    def _delete_segment(self, segment: Segment) -> None:
        for synced in segment.files:
            self._unsynced.pop(synced, None)
        segment.delete()
        self._segments_changed()

    # -- producer state ------------------------------------------------------

    def _load_producer_state(self) -> None:
        """Rebuild the idempotent-producer table: the newest snapshot at or below
        the log end, then the headers of every batch after it."""
        snapshot_offset, table = load_latest_snapshot(self.directory, self.log_end_offset)
        self._snapshot_offsets = None  # some may have been deleted: list them at the next write
        replay_ms = time.time_ns() // 1_000_000
        start = max(snapshot_offset, self._segments[0].base_offset)
        try:
            for header in self._headers_from(start):
                if not header.is_control:
                    table.replay(
                        header.producer_id, header.producer_epoch, header.base_sequence,
                        header.base_offset, header.last_offset, replay_ms,
                    )  # fmt: skip
        except (LogCorrupt, OSError) as exc:
            log.warning("%s: producer state rebuilt only up to a bad batch: %s",
                        self.directory.name, exc)  # fmt: skip
        self.producer_state = table

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        for segment in self._segments[self._segment_index(offset) :]:
            if segment.base_offset >= offset:
                position = 0
            else:
                found = segment.find_batch(offset)
                if found is None:
                    continue
                position = found[0]
            for _, header in segment.headers(position):
                yield header

    def _write_producer_snapshot(self) -> None:
        try:
            self._snapshot_offsets = write_snapshot(
                self.directory, self.producer_state, self.log_end_offset, self._snapshot_offsets
            )
        except OSError as exc:  # only costs a longer scan at the next open
            log.warning("%s: producer snapshot not written: %s", self.directory.name, exc)

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget idempotent producers idle for longer than `expiration_ms`."""
        return self.producer_state.expire(now_ms, expiration_ms)

    # -- closing -------------------------------------------------------------

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
                _write_clean_shutdown_marker(self.directory)
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


class _SegmentLoader:
    """Opens a partition's segments, trusting or scanning each (see `open`)."""

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


def _ensure_directory(directory: Path) -> bool:
    """Create `directory` (durably) unless it exists; True when it was created."""
    if directory.is_dir():
        return False
    directory.mkdir(parents=True)
    fsync_directory(directory.parent)
    return True


def _consume_clean_shutdown_marker(directory: Path) -> bool:
    marker = directory / CLEAN_SHUTDOWN_FILE_NAME
    if not marker.exists():
        return False
    marker.unlink()
    # Durable removal: a crash from now on must not look like a clean shutdown.
    fsync_directory(directory)
    return True


def _write_clean_shutdown_marker(directory: Path) -> None:
    fd = os.open(directory / CLEAN_SHUTDOWN_FILE_NAME, os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    fsync_directory(directory)


def _remove_stray_files(directory: Path) -> None:
    """Temporary checkpoint files, and index files whose log file is gone."""
    names = set(os.listdir(directory))
    for name in names:
        stem, _, suffix = name.rpartition(".")
        orphan_index = suffix in ("index", "timeindex") and f"{stem}.log" not in names
        if name.endswith(".tmp") or orphan_index:
            os.unlink(directory / name)


def read_single_checkpoint(path: Path, default: int) -> int:
    """The one non-negative offset a checkpoint holds, else `default`."""
    entries = read_checkpoint(path, width=1)
    if not entries or entries[0][0] < 0:
        return default
    return entries[0][0]
