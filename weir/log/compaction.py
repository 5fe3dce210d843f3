"""Log compaction for topics whose cleanup.policy includes `compact` (Kafka semantics).

A pass keeps, for every key, only its latest record; offsets never change.

- Range: only sealed segments wholly below the durable end offset and the
  last stable offset (`PartitionLog.compaction_inputs`: nothing of a
  transaction still open or not yet decided is cleaned), from the log's first
  segment up to the
  first segment holding a record younger than `min.compaction.lag.ms`. The
  active segment is never touched.
- Dirty section: from the cleaned offset (`cleaner-offset-checkpoint`: every
  record below it was compacted by an earlier pass) to the end of the range. A
  pass runs when dirty bytes / (clean + dirty bytes) reach
  `min.cleanable.dirty.ratio`, when the first dirty segment is older than
  `max.compaction.lag.ms`, or when a tombstone's delete horizon has passed.
- Offset map: key -> latest offset over the dirty section, at most `keys_max`
  keys (`COMPACTION_KEYS_MAX`); past it, only the prefix of the dirty section
  whose keys fit is compacted (the map ends at a batch boundary) and the next
  pass continues from there.
- Rewrite: every segment from the log start up to the map's end is read batch
  by batch. A record is dropped when the map holds a later offset for its key,
  or when it is a tombstone (null value) whose batch's delete horizon has
  passed. Records without a key are kept. A batch that needs decompressing beyond
  `BATCH_INFLATE_BYTES_MAX` is kept as it is and its keys are not mapped.
- Rewritten batches (`weir.format.record_batch.rebuild_batch`) keep their base
  offset, last offset delta, leader epoch, producer id/epoch/sequence and
  codec; each record keeps its offset and timestamp. A batch losing every
  record disappears: v2 batches here always hold a record, and no offset needs
  preserving, because the log end offset lives in the active segment (never
  cleaned) and a segment's base offset in its file name. A segment that ends
  short of the next one is legal below the cleaned offset (recovery accepts
  the gap there, and nowhere else); a reader at a removed offset gets the next
  retained batch. A segment left with no batch is deleted, except the log's
  first one, which stays (empty) so the log start offset does not move.
- Tombstones: the first pass that keeps a tombstone stamps its batch with
  KIP-534's delete horizon (now + `delete.retention.ms`, in the batch's base
  timestamp, attribute bit 6), so the horizon survives restarts; a later pass
  after the horizon removes it.
- Transactions (Kafka's rules, KIP-98 and KIP-534), from the log's
  aborted-transaction indexes (`TransactionsInRange`): a transactional batch of an
  aborted transaction is removed and its keys are never mapped (a key keeps
  its last committed value); a committed transaction's batches are compacted
  like any. A marker stays while any batch of its transaction remains in
  the log (a pass that still read one keeps it); once none does, the first
  pass stamps the marker with a delete horizon (now + `delete.retention.ms`)
  and a pass after that removes it. A kept ABORT marker keeps its entry in
  the cleaned segment's `.txnindex`; a segment that had one gets one, even
  empty, so the move replaces the old file.
- A segment where nothing changes is not rewritten.

The heavy work (`build_cleaned_segments`: reading, decompressing, rewriting,
fsyncing) touches no PartitionLog state and reads segments through its own
file descriptors, so it runs on a worker thread (`trio.to_thread`); planning, the
checks, the renames and the in-memory swap run on the Trio thread.

Compaction protocol (crash safety). `<dir>` is the partition directory; new
segment files are written under `<dir>/cleaning/` with their final names:

1. (worker) Remove any leftover `<dir>/cleaning/`, create it, write each
   cleaned segment there (log, offset index, time index; indexes built while
   writing), fsync every file.
2. (Trio) Check the log still holds every input segment unchanged (not
   truncated, deleted or closed meanwhile); otherwise remove `cleaning/` and
   stop: nothing changed.
3. (worker) fsync `cleaning/`, then write `cleaning/manifest` atomically
   (temporary file, fsync, rename, fsync `cleaning/`): which segment bases are
   replaced, which are written, and the new cleaned offset. The manifest is the
   commit point: before it exists a crash rolls back, after it a crash rolls
   forward.
4. (Trio) Check again, since step 3 ran concurrently with the log; if the log
   changed, unlink the manifest and fsync `cleaning/` (so a crash rolls back)
   and stop. Otherwise, without awaiting anything: move each written file into
   `<dir>` with `rename` (atomically replacing the old file of the same name),
   unlink the files of replaced segments that were not rewritten (emptied),
   then open the new segments and swap them into the log in memory
   (`PartitionLog.swap_cleaned_segments`); the old ones are closed (their
   inodes stayed readable until then, so no read ever sees a mix).
5. (worker) fsync `<dir>` and `cleaning/`; raise `cleaner-offset-checkpoint` to
   the new cleaned offset (atomic write); unlink the manifest, fsync
   `cleaning/`, remove `cleaning/`, fsync `<dir>`.

So the event loop never waits on the disk for compaction. `LogCleaner.clean`
(tests) runs the same steps in order on the calling thread.

Recovery (`finish_interrupted_compaction`, the first thing `PartitionLog.open`
does after the clean-shutdown marker): if `cleaning/` exists without a
readable manifest, remove it (the old segments are intact: roll back);
with a manifest, redo the renames of step 4 and step 5 (roll forward). Either way the directory then
holds exactly the old segments or exactly the new ones, and the segment
loader runs on that.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import trio

from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    InvalidBatch,
    Record,
    decode_records,
    iter_batch_headers,
    parse_batch_header,
    rebuild_batch,
    verify_crc,
)
from weir.log.checkpoint import fsync_directory, read_checkpoint, write_checkpoint
from weir.log.compaction_transactions import (
    TransactionsInRange,
    keep_txn_index_file,
    retain_control,
)
from weir.log.config import INT64_MAX, LogConfig
from weir.log.descriptors import SEGMENT_FILES_COUNT, DescriptorCache
from weir.log.errors import LogError, RecordErrors, record_errors_message
from weir.log.segment import SEGMENT_SUFFIXES, AppendedBatch, Segment, segment_file_name
from weir.log.settings import BATCH_INFLATE_BYTES_MAX
from weir.log.transaction_index import AbortedTxn

log = logging.getLogger(__name__)


class CleanablePartition(Protocol):
    """What the cleaner needs of a partition log (`PartitionLog` is one): compaction
    depends on this, not on partition.py and partition_recovery.py, which import
    compaction for recovery."""

    directory: Path
    config: LogConfig

    @property
    def closed(self) -> bool: ...

    def compaction_inputs(self) -> list[tuple[Segment, int]]: ...

    def aborted_txns_between(self, start_offset: int, end_offset: int) -> list[AbortedTxn]: ...

    def swap_cleaned_segments(self, old: list[Segment], new: list[Segment]) -> None: ...


CLEANER_CHECKPOINT_FILE_NAME = "cleaner-offset-checkpoint"
CLEANING_DIRECTORY_NAME = "cleaning"
MANIFEST_FILE_NAME = "manifest"
# Keys in one pass's offset map (about 100 bytes each with short keys).
COMPACTION_KEYS_MAX = 1_000_000
# Bytes read from a segment file at a time (more when one batch is larger).
COMPACTION_READ_CHUNK_BYTES = 1024 * 1024

_MANIFEST_REPLACED = 0  # (0, base): an input segment whose files go away or are replaced
_MANIFEST_WRITTEN = 1  # (1, base): a cleaned segment written under cleaning/
_MANIFEST_CLEANED_OFFSET = 2  # (2, offset): the cleaned offset after this pass


class CompactionAborted(LogError):  # noqa: N818
    """A segment could not be read back during a pass (the pass is dropped)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


# -- the cleaned offset checkpoint ----------------------------------------------


def read_cleaned_offset(directory: Path) -> int:
    """Every record below this offset has been compacted (0: nothing yet)."""
    entries = read_checkpoint(directory / CLEANER_CHECKPOINT_FILE_NAME, width=1)
    if not entries or entries[0][0] < 0:
        return 0
    return entries[0][0]


def _raise_cleaned_offset(directory: Path, offset: int) -> None:
    if offset > read_cleaned_offset(directory):
        write_checkpoint(directory / CLEANER_CHECKPOINT_FILE_NAME, [[offset]])


# -- planning (Trio thread) -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Input:
    segment: Segment  # compared by identity on the Trio thread; never used by the worker
    base_offset: int
    end_offset: int  # the next segment's base offset
    log_path: Path
    size_bytes: int


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    """What one pass cleans; everything the worker thread needs, copied."""

    directory: Path
    inputs: list[_Input]  # consecutive, from the log's first segment
    first_dirty_offset: int
    end_offset: int  # the end of the cleanable range (a segment boundary)
    now_ms: int
    delete_retention_ms: int
    keys_max: int
    index_bytes_max: int
    index_interval_bytes: int
    # The aborted transactions overlapping the inputs, from every segment's index.
    aborted: tuple[AbortedTxn, ...] = ()


@dataclass
class CleaningResult:
    plan: CleaningPlan
    cleaned_offset: int = 0  # the offset map's end: below it every key is compacted
    replaced: list[_Input] = field(default_factory=list)  # rewritten or emptied
    written_bases: list[int] = field(default_factory=list)  # new segments under cleaning/
    records_removed: int = 0
    earliest_delete_horizon_ms: int | None = None

    def note_horizon(self, horizon_ms: int) -> None:
        if self.earliest_delete_horizon_ms is None or horizon_ms < self.earliest_delete_horizon_ms:
            self.earliest_delete_horizon_ms = horizon_ms


def compacts(partition: CleanablePartition) -> bool:
    return "compact" in partition.config.cleanup_policy


def require_keys(batches: memoryview | bytes | bytearray, partition_name: str) -> None:
    """Producers may not write keyless records to a compacted topic (Kafka answers
    INVALID_RECORD): compaction keeps the latest record per key. The produce path
    calls this for compacted topics only, where a client's records are decoded
    within a bound. The first batch holding keyless records is refused with each
    of them listed (KIP-467, RecordErrors: its index in that batch). Raises LogError."""
    try:
        for position, header in iter_batch_headers(batches):
            batch = memoryview(batches)[position : position + header.size]
            records = decode_records(batch, uncompressed_bytes_max=BATCH_INFLATE_BYTES_MAX)
            keyless = [
                (index, f"Compacted topic cannot accept message without key in topic "
                        f"partition {partition_name}")
                for index, record in enumerate(records) if record.key is None
            ]  # fmt: skip
            if keyless:
                raise RecordErrors(
                    ErrorCode.INVALID_RECORD,
                    record_errors_message(ErrorCode.INVALID_RECORD, keyless),
                    keyless,
                )
    except InvalidBatch as exc:
        raise LogError(exc.error_code, str(exc)) from exc


class LogCleaner:
    """Plans, runs and swaps in compaction passes; one pass per log at a time.

    `clean` runs a pass synchronously (tests, tools); `clean_in_background`
    runs the heavy part on a worker thread."""

    def __init__(self, keys_max: int = COMPACTION_KEYS_MAX) -> None:
        assert keys_max >= 1
        self.keys_max = keys_max
        self._busy: set[Path] = set()
        # Earliest tombstone delete horizon seen per log: a pass is due then
        # even when nothing is dirty (in memory: a restart waits for new writes).
        self._delete_horizons_ms: dict[Path, int] = {}

    def clean(self, partition: CleanablePartition, now_ms: int) -> CleaningResult | None:
        """One pass, now, on the calling thread; None when no pass was due."""
        plan = self._begin(partition, now_ms)
        if plan is None:
            return None
        try:
            return self._finish(partition, build_cleaned_segments(plan))
        finally:
            self._end(plan)

    async def clean_in_background(
        self, partition: CleanablePartition, now_ms: int
    ) -> CleaningResult | None:
        """One pass with the reading and rewriting on a worker thread."""
        plan = self._begin(partition, now_ms)
        if plan is None:
            return None
        try:
            result = await trio.to_thread.run_sync(build_cleaned_segments, plan)
            if not result.replaced or not _still_current(partition, result):
                return self._finish(partition, result)
            # Steps 2-7 with every fsync on worker threads; only the renames and
            # the in-memory swap (no disk waits) run on the Trio thread, together.
            entries = _manifest_entries(result)
            await trio.to_thread.run_sync(_commit_manifest, plan.directory, entries)
            if not _still_current(partition, result):
                log.info("%s: the log changed during compaction; pass dropped",
                         plan.directory.name)  # fmt: skip
                _abandon_manifest(plan.directory)  # no file moved yet: roll back
                return None
            self._record_horizon(result)
            _move_files(plan.directory, entries)
            self._swap(partition, result)
            await trio.to_thread.run_sync(_complete_swap, plan.directory, entries)
            return result
        finally:
            self._end(plan)

    def _begin(self, partition: CleanablePartition, now_ms: int) -> CleaningPlan | None:
        if partition.directory in self._busy or not compacts(partition):
            return None
        plan = self.plan(partition, now_ms)
        if plan is not None:
            self._busy.add(plan.directory)
        return plan

    def _end(self, plan: CleaningPlan) -> None:
        self._busy.discard(plan.directory)
        _remove_cleaning_directory(plan.directory)

    def plan(self, partition: CleanablePartition, now_ms: int) -> CleaningPlan | None:
        """The pass due on `partition` now, or None."""
        plan = self._plan_without_transactions(partition, now_ms)
        if plan is None:
            return None
        start, end = plan.inputs[0].base_offset, plan.end_offset
        return replace(plan, aborted=tuple(partition.aborted_txns_between(start, end)))

    def _plan_without_transactions(
        self, partition: CleanablePartition, now_ms: int
    ) -> CleaningPlan | None:
        config = partition.config
        inputs = _cleanable_inputs(partition, now_ms)
        if not inputs:
            return None
        end_offset = inputs[-1].end_offset
        first_dirty = read_cleaned_offset(partition.directory)
        first_dirty = min(max(first_dirty, inputs[0].base_offset), end_offset)
        if not self._due(partition, inputs, first_dirty, now_ms):
            return None
        return CleaningPlan(
            partition.directory, inputs, first_dirty, end_offset, now_ms,
            config.delete_retention_ms, self.keys_max, config.segment_index_bytes,
            config.index_interval_bytes,
        )  # fmt: skip

    def _due(
        self, partition: CleanablePartition, inputs: list[_Input], first_dirty: int, now_ms: int
    ) -> bool:
        config = partition.config
        total_bytes = sum(item.size_bytes for item in inputs)
        dirty = [item for item in inputs if item.end_offset > first_dirty]
        dirty_bytes = sum(item.size_bytes for item in dirty)
        if dirty_bytes and dirty_bytes / total_bytes >= config.min_cleanable_dirty_ratio:
            return True
        horizon_ms = self._delete_horizons_ms.get(partition.directory)
        if horizon_ms is not None and now_ms >= horizon_ms:
            return True
        first_ms = dirty[0].segment.rolling_timestamp_ms if dirty else None
        max_lag_ms = config.max_compaction_lag_ms
        return first_ms is not None and max_lag_ms < INT64_MAX and now_ms - first_ms > max_lag_ms

    def _finish(
        self, partition: CleanablePartition, result: CleaningResult
    ) -> CleaningResult | None:
        """Trio thread: steps 2-7 of the protocol."""
        directory = result.plan.directory
        if not _still_current(partition, result):
            log.info("%s: the log changed during compaction; pass dropped", directory.name)
            _remove_cleaning_directory(directory)
            return None
        self._record_horizon(result)
        if not result.replaced:
            _raise_cleaned_offset(directory, result.cleaned_offset)
            return result
        entries = _manifest_entries(result)
        _commit_manifest(directory, entries)
        _move_files(directory, entries)
        self._swap(partition, result)
        _complete_swap(directory, entries)
        return result

    def _record_horizon(self, result: CleaningResult) -> None:
        directory = result.plan.directory
        if result.earliest_delete_horizon_ms is None:
            self._delete_horizons_ms.pop(directory, None)
        else:
            self._delete_horizons_ms[directory] = result.earliest_delete_horizon_ms

    @staticmethod
    def _swap(partition: CleanablePartition, result: CleaningResult) -> None:
        """Trio thread, no disk waits: open the moved-in segments and swap them in."""
        directory = result.plan.directory
        new_segments = [_open_cleaned(partition, result, base) for base in result.written_bases]
        partition.swap_cleaned_segments([item.segment for item in result.replaced], new_segments)
        log.info(
            "%s: compacted below offset %d: %d records removed, %d segments rewritten",
            directory.name, result.cleaned_offset, result.records_removed,
            len(result.replaced),
        )  # fmt: skip


def _cleanable_inputs(partition: CleanablePartition, now_ms: int) -> list[_Input]:
    """Sealed, durable segments from the log start, stopping at the first one
    holding a record younger than min.compaction.lag.ms."""
    lag_ms = partition.config.min_compaction_lag_ms
    inputs = []
    for segment, end_offset in partition.compaction_inputs():
        if lag_ms > 0 and now_ms - segment.max_timestamp_ms < lag_ms:
            break
        inputs.append(
            _Input(segment, segment.base_offset, end_offset, segment.log_path, segment.size_bytes)
        )
    return inputs


def _still_current(partition: CleanablePartition, result: CleaningResult) -> bool:
    if partition.closed:
        return False
    present = {id(segment): segment for segment, _ in partition.compaction_inputs()}
    for item in result.plan.inputs:
        segment = present.get(id(item.segment))
        if segment is None or segment.size_bytes != item.size_bytes:
            return False
    return True


def _open_cleaned(
    partition: CleanablePartition, result: CleaningResult, base_offset: int
) -> Segment:
    item = next(item for item in result.replaced if item.base_offset == base_offset)
    segment = Segment(partition.directory, base_offset, partition.config.segment_index_bytes)
    if not segment.load(item.end_offset):  # written and synced by us: should not happen
        log.warning("%s: cleaned segment's index not sane, rebuilding", segment.log_path)
        segment.recover(partition.config.index_interval_bytes, lambda header: None)
    return segment


# -- the swap and its recovery ---------------------------------------------------


def _manifest_entries(result: CleaningResult) -> list[tuple[int, int]]:
    entries = [(_MANIFEST_REPLACED, item.base_offset) for item in result.replaced]
    entries += [(_MANIFEST_WRITTEN, base) for base in result.written_bases]
    entries.append((_MANIFEST_CLEANED_OFFSET, result.cleaned_offset))
    return entries


def _commit_manifest(directory: Path, manifest: Sequence[tuple[int, ...]]) -> None:
    """Step 3: fsync `cleaning/`, then write the manifest (the commit point)."""
    cleaning = directory / CLEANING_DIRECTORY_NAME
    fsync_directory(cleaning)
    write_checkpoint(cleaning / MANIFEST_FILE_NAME, manifest)


def _abandon_manifest(directory: Path) -> None:
    """Durably take back a committed manifest whose pass must not happen (the log
    changed after it was written, before any file moved), so recovery rolls back."""
    cleaning = directory / CLEANING_DIRECTORY_NAME
    with contextlib.suppress(FileNotFoundError):
        os.unlink(cleaning / MANIFEST_FILE_NAME)
        fsync_directory(cleaning)


def _roll_forward(directory: Path, manifest: Sequence[tuple[int, ...]]) -> None:
    """Steps 4-6 of the protocol; safe to repeat after a crash at any point."""
    _move_files(directory, manifest)
    _complete_swap(directory, manifest)


def _move_files(directory: Path, manifest: Sequence[tuple[int, ...]]) -> None:
    """Step 4 without its fsyncs: rename the new files into place, unlink emptied
    segments. No disk waits, so it runs on the Trio thread next to the swap."""
    cleaning = directory / CLEANING_DIRECTORY_NAME
    written = {base for kind, base in manifest if kind == _MANIFEST_WRITTEN}
    replaced = {base for kind, base in manifest if kind == _MANIFEST_REPLACED}
    for base in sorted(written):
        for suffix in SEGMENT_SUFFIXES:
            name = segment_file_name(base, suffix)
            if (cleaning / name).exists():
                os.replace(cleaning / name, directory / name)
    for base in sorted(replaced - written):
        for suffix in SEGMENT_SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / segment_file_name(base, suffix))


def _complete_swap(directory: Path, manifest: Sequence[tuple[int, ...]]) -> None:
    """Steps 4 (fsyncs) to 6: make the moves durable, raise the cleaned offset,
    remove the manifest and `cleaning/`. Any thread; safe to repeat."""
    cleaning = directory / CLEANING_DIRECTORY_NAME
    cleaned_offsets = [offset for kind, offset in manifest if kind == _MANIFEST_CLEANED_OFFSET]
    fsync_directory(directory)
    fsync_directory(cleaning)
    if cleaned_offsets:
        _raise_cleaned_offset(directory, max(cleaned_offsets))
    os.unlink(cleaning / MANIFEST_FILE_NAME)
    fsync_directory(cleaning)
    _remove_cleaning_directory(directory)


def _remove_cleaning_directory(directory: Path) -> None:
    cleaning = directory / CLEANING_DIRECTORY_NAME
    if cleaning.is_dir():
        shutil.rmtree(cleaning, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            fsync_directory(directory)


def finish_interrupted_compaction(directory: Path) -> None:
    """Recovery: roll an interrupted pass back (no manifest) or forward (manifest)."""
    cleaning = directory / CLEANING_DIRECTORY_NAME
    if not cleaning.is_dir():
        return
    manifest = read_checkpoint(cleaning / MANIFEST_FILE_NAME, width=2)
    if manifest is None:
        log.info("%s: rolling back an interrupted compaction", directory.name)
        _remove_cleaning_directory(directory)
        return
    log.info("%s: finishing an interrupted compaction", directory.name)
    _roll_forward(directory, manifest)


# -- the pass itself (worker thread) --------------------------------------------


def build_cleaned_segments(plan: CleaningPlan) -> CleaningResult:
    """Step 1: build the offset map over the dirty section and write the cleaned
    segments under `cleaning/`, fsynced. Touches no PartitionLog state."""
    offsets, cleaned_offset = _build_offset_map(plan)
    result = CleaningResult(plan, cleaned_offset)
    cleaning = plan.directory / CLEANING_DIRECTORY_NAME
    if cleaning.exists():
        shutil.rmtree(cleaning)
    os.mkdir(cleaning)
    transactions = TransactionsInRange(plan.aborted)
    for index, item in enumerate(plan.inputs):
        if item.base_offset >= cleaned_offset:
            break
        _clean_segment(item, cleaning, offsets, result, transactions, keep_when_empty=index == 0)
    return result


def _build_offset_map(plan: CleaningPlan) -> tuple[dict[bytes, int], int]:
    """key -> latest offset over the dirty section, and where the map ends: the
    end of the range, or the base of the first batch whose keys did not fit."""
    offsets: dict[bytes, int] = {}
    transactions = TransactionsInRange(plan.aborted)
    for item in plan.inputs:
        if item.end_offset <= plan.first_dirty_offset:
            continue
        for header, data in _read_batches(item):
            if header.last_offset < plan.first_dirty_offset or header.is_control:
                continue
            if header.is_transactional and transactions.aborted(header):
                continue  # an aborted record never shadows a committed one
            records = _decode(header, data, item)
            if records is None:
                continue
            keyed = [(r.key, r.offset) for r in records if r.key is not None]
            new_keys = {key for key, _ in keyed if key not in offsets}
            if offsets and len(offsets) + len(new_keys) > plan.keys_max:
                return offsets, header.base_offset
            offsets.update(keyed)
    return offsets, plan.end_offset


def _clean_segment(
    item: _Input,
    cleaning: Path,
    offsets: dict[bytes, int],
    result: CleaningResult,
    transactions: TransactionsInRange,
    *,
    keep_when_empty: bool,
) -> None:
    """Write the cleaned copy of one segment under `cleaning/`, unless nothing changes."""
    plan = result.plan
    # A cache of its own: this runs on a worker thread, and the three files (four
    # with a kept ABORT marker's `.txnindex`) stay open until synced (from the
    # descriptors reserved for the broker's own work).
    own_files = DescriptorCache(SEGMENT_FILES_COUNT + 1)
    output = Segment(cleaning, item.base_offset, plan.index_bytes_max, own_files)
    try:
        changed = False
        for header, data in _read_batches(item):
            if header.is_control:
                retained, horizon_ms = retain_control(
                    header, data, transactions, now_ms=plan.now_ms,
                    delete_retention_ms=plan.delete_retention_ms,
                    cleaned_offset=result.cleaned_offset,
                )  # fmt: skip
                if horizon_ms is not None:
                    result.note_horizon(horizon_ms)
                if retained is None:
                    result.records_removed += header.records_count
            else:
                retained = _retain(header, data, offsets, result, item, transactions)
            changed = changed or retained is not data
            if retained is not None:
                kept = parse_batch_header(retained)
                batch = AppendedBatch(0, kept.last_offset, kept.max_timestamp, kept.size)
                output.append(retained, [batch], plan.index_interval_bytes)
                aborted = transactions.by_marker.get(kept.base_offset) if kept.is_control else None
                if aborted is not None:
                    output.append_aborted_txn(aborted)
        if not changed:
            output.delete()
            return
        result.replaced.append(item)
        if output.is_empty and not keep_when_empty:
            output.delete()
            return
        output.seal()
        keep_txn_index_file(item.log_path, item.base_offset, output)
        for synced in output.files:
            os.fsync(synced.fd)
        output.close()
        result.written_bases.append(item.base_offset)
    except BaseException:
        output.delete()
        raise


def _retain(
    header: BatchHeader,
    data: bytes,
    offsets: dict[bytes, int],
    result: CleaningResult,
    item: _Input,
    transactions: TransactionsInRange,
) -> bytes | None:
    """`data` itself when the batch stays as it is, a rebuilt batch holding the
    records kept, or None when no record is kept."""
    plan = result.plan
    transactions.read_data(header)
    if header.base_offset >= result.cleaned_offset:
        return data
    if header.is_transactional and transactions.aborted(header):
        result.records_removed += header.records_count
        return None
    records = _decode(header, data, item)
    if records is None:
        return data
    horizon_ms = header.delete_horizon_ms
    kept = [r for r in records if _keeps(r, offsets, horizon_ms, plan.now_ms)]
    tombstones = any(r.value is None for r in kept)
    if tombstones and horizon_ms is None:
        horizon_ms = min(INT64_MAX, plan.now_ms + plan.delete_retention_ms)
    new_horizon_ms = horizon_ms if tombstones else None
    if tombstones:
        assert new_horizon_ms is not None
        result.note_horizon(new_horizon_ms)
    if len(kept) == len(records) and new_horizon_ms == header.delete_horizon_ms:
        return data
    result.records_removed += len(records) - len(kept)
    if not kept:
        return None
    return rebuild_batch(header, kept, delete_horizon_ms=new_horizon_ms)


def _keeps(record: Record, offsets: dict[bytes, int], horizon_ms: int | None, now_ms: int) -> bool:
    if record.key is None:
        return True
    latest = offsets.get(record.key)
    if latest is not None and latest > record.offset:
        return False
    return not (record.value is None and horizon_ms is not None and now_ms >= horizon_ms)


def _decode(header: BatchHeader, data: bytes, item: _Input) -> list[Record] | None:
    """The batch's records, or None when they cannot be read within the bound
    (the batch is then kept as it is)."""
    try:
        return list(decode_records(data, uncompressed_bytes_max=BATCH_INFLATE_BYTES_MAX))
    except InvalidBatch as exc:
        log.warning("%s: batch at offset %d kept uncompacted: %s",
                    item.log_path, header.base_offset, exc)  # fmt: skip
        return None


def _read_batches(item: _Input) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of a sealed segment, CRC-checked, through our own descriptor
    (the log may close or unlink the segment meanwhile; the inode stays)."""
    fd = os.open(item.log_path, os.O_RDONLY)
    try:
        yield from _batches_in(fd, item)
    finally:
        os.close(fd)


def _batches_in(fd: int, item: _Input) -> Iterator[tuple[BatchHeader, bytes]]:
    chunk = b""
    chunk_start = 0
    position = 0
    while position < item.size_bytes:
        if position + BATCH_HEADER_SIZE > chunk_start + len(chunk):
            chunk, chunk_start = _pread(fd, COMPACTION_READ_CHUNK_BYTES, position, item), position
        try:
            header = parse_batch_header(chunk, position - chunk_start)
        except InvalidBatch as exc:
            raise CompactionAborted(f"{item.log_path} at {position}: {exc}") from exc
        if header.size > item.size_bytes - position:
            raise CompactionAborted(f"{item.log_path} at {position}: batch overruns the segment")
        if position + header.size > chunk_start + len(chunk):
            chunk_bytes = max(COMPACTION_READ_CHUNK_BYTES, header.size)
            chunk, chunk_start = _pread(fd, chunk_bytes, position, item), position
        start = position - chunk_start
        if not verify_crc(chunk, start, header):
            raise CompactionAborted(f"{item.log_path}: CRC32C mismatch at {position}")
        yield header, chunk[start : start + header.size]
        position += header.size


def _pread(fd: int, size: int, position: int, item: _Input) -> bytes:
    data = os.pread(fd, min(size, item.size_bytes - position), position)
    if len(data) < min(size, item.size_bytes - position, BATCH_HEADER_SIZE):
        raise CompactionAborted(f"{item.log_path}: short read at {position}")
    return data
