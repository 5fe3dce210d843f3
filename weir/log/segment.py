"""One segment of a partition log: `<base offset>.log`, its two indexes, and its
aborted-transaction index `.txnindex` (transaction_index.py), which exists only
once an aborted transaction's marker is written in the segment.

The log file holds RecordBatch v2 batches back to back, byte-for-byte as
appended. All file access is `os.write` (appends, O_APPEND) and `os.pread`.

Descriptors come from a `DescriptorCache` (weir/log/descriptors.py): the files
are open only while used, unless the segment is pinned (`pin`): the partition
pins its active segment while it is written, and a sealed segment from its roll
until the round that syncs it. Loading a log pins nothing, so recovery opens
its segments one at a time through the cache.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from weir.format.record_batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    InvalidBatch,
    iter_batch_headers,
    parse_batch_header,
    verify_crc,
)
from weir.log.descriptors import DescriptorCache, SyncedFile, shared_log_files
from weir.log.errors import LogCorrupt
from weir.log.index import (
    OFFSET_ENTRY_BYTES,
    RELATIVE_OFFSET_MAX,
    TIME_ENTRY_BYTES,
    OffsetIndex,
    TimeIndex,
)
from weir.log.page_cache import pread_cached
from weir.log.transaction_index import TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
OFFSET_DIGITS = 20

HEADER_SCAN_CHUNK_BYTES = 64 * 1024
RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024
# Where a batch may start: a base offset below 2**40, then at byte 16 magic 2.
BATCH_START_PATTERN = re.compile(rb"(?=\x00\x00\x00[\s\S]{13}\x02)")
# Candidate positions checked when searching for intact batches after damage;
# past it the search gives up and the damage is treated as not a torn tail.
RESYNC_CANDIDATES_MAX = 100_000
NO_TIMESTAMP = -1


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's naming: the base offset zero-padded to 20 digits."""
    return f"{base_offset:0{OFFSET_DIGITS}d}{suffix}"


def parse_segment_file_name(name: str, suffix: str = LOG_SUFFIX) -> int | None:
    stem = name.removesuffix(suffix)
    if stem == name or len(stem) != OFFSET_DIGITS or not stem.isdigit():
        return None
    return int(stem)


def offsets_fit(header: BatchHeader, offset_min: int, base_offset: int) -> bool:
    """The batch's offsets start at `offset_min` or later and fit a segment
    based at `base_offset` (relative offsets are stored in 4 bytes)."""
    return (
        header.base_offset >= offset_min
        and header.records_count >= 1
        and header.last_offset - base_offset <= RELATIVE_OFFSET_MAX // 2
    )


def intact_batch_at(
    fd: int, position: int, file_size: int, offset_min: int, base_offset: int
) -> BatchHeader | None:
    """The batch at `position` if it parses, fits the file, has offsets from
    `offset_min` that fit a segment based at `base_offset`, and passes its CRC."""
    head = os.pread(fd, BATCH_HEADER_SIZE, position)
    try:
        header = parse_batch_header(head, 0)
    except InvalidBatch:
        return None
    if header.size > file_size - position or not offsets_fit(header, offset_min, base_offset):
        return None
    data = os.pread(fd, header.size, position)
    if len(data) != header.size or not verify_crc(data, 0, header):
        return None
    return header


def find_intact_batch(
    fd: int, start: int, offset_min: int, base_offset: int, path: Path
) -> tuple[int, int] | None:
    """(position, base offset) of the first intact batch (`intact_batch_at`) at or
    after `start`. Candidates come from a C-speed pattern search; after
    RESYNC_CANDIDATES_MAX of them it gives up with LogCorrupt."""
    file_size = os.fstat(fd).st_size
    chunk_start = start
    candidates_left = RESYNC_CANDIDATES_MAX
    while chunk_start + BATCH_HEADER_SIZE <= file_size:
        chunk = os.pread(fd, RECOVERY_CHUNK_BYTES + BATCH_HEADER_SIZE, chunk_start)
        for match in BATCH_START_PATTERN.finditer(chunk):
            if match.start() >= RECOVERY_CHUNK_BYTES:
                break  # the next chunk starts there
            candidates_left -= 1
            if candidates_left < 0:
                raise LogCorrupt(f"{path}: too many damaged bytes to search")
            candidate = chunk_start + match.start()
            header = intact_batch_at(fd, candidate, file_size, offset_min, base_offset)
            if header is not None:
                return candidate, header.base_offset
        chunk_start += RECOVERY_CHUNK_BYTES
    return None


# Not frozen: a frozen dataclass costs about 7x more to construct (1.4 µs against
# 0.2 µs for a 13-field one), and this is built on the produce path. Never mutated.
@dataclass(slots=True)
class AppendedBatch:
    """Where one batch of an append landed: position relative to the append's start."""

    position: int
    last_offset: int
    max_timestamp_ms: int
    size: int


class Segment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_bytes_max: int,
        descriptors: DescriptorCache | None = None,
    ) -> None:
        """`descriptors`: the cache the files are opened through (default: the
        process's shared one)."""
        if descriptors is None:
            descriptors = shared_log_files()
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        offset_index_path = directory / segment_file_name(base_offset, INDEX_SUFFIX)
        time_index_path = directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
        self.indexes_existed = offset_index_path.exists() and time_index_path.exists()
        self.log_file = SyncedFile.open(
            self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, descriptors
        )
        try:
            self.offset_index = OffsetIndex(
                offset_index_path, base_offset, index_bytes_max // OFFSET_ENTRY_BYTES, descriptors
            )
            self.time_index = TimeIndex(
                time_index_path, base_offset, index_bytes_max // TIME_ENTRY_BYTES, descriptors
            )
        except OSError:
            self.log_file.close()
            raise
        self.txn_index = TransactionIndex(
            directory / segment_file_name(base_offset, TXN_INDEX_SUFFIX), base_offset
        )
        # The descriptor a flush round syncs the aborted-transaction index through:
        # opened by the first entry appended here, released with the other indexes.
        self._txn_index_file: SyncedFile | None = None
        self._descriptors = descriptors
        # Whether the files are pinned open (see the module docstring).
        self.pinned = False
        self.size_bytes = 0
        # Bytes below this were synced and evicted from the page cache (flusher).
        self.page_cache_evicted_below = 0
        self.next_offset = base_offset
        self.max_timestamp_ms = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        # segment.ms counts from here: the first batch's append time (its max
        # timestamp after a restart); None while the segment is empty.
        self.rolling_timestamp_ms: int | None = None
        self._bytes_since_index_entry = 0

    def __repr__(self) -> str:
        return f"Segment({self.log_path.name}, {self.base_offset}..{self.next_offset})"

    @property
    def is_empty(self) -> bool:
        return self.size_bytes == 0

    @property
    def files(self) -> list[SyncedFile]:
        """The open files: the log, and the indexes unless released."""
        files = [self.log_file, self.offset_index.file, self.time_index.file, self._txn_index_file]
        return [f for f in files if f is not None]

    def release_index_files(self) -> None:
        """A sealed segment whose indexes are synced needs only its log file."""
        self.offset_index.release()
        self.time_index.release()
        self._release_txn_index_file()

    def _release_txn_index_file(self) -> None:
        if self._txn_index_file is not None:
            self._txn_index_file.close()
            self._txn_index_file = None

    def append_aborted_txn(self, entry: AbortedTxn) -> SyncedFile:
        """Add an aborted transaction whose marker is in this segment to its
        index (page cache only). Returns the file for the flush round to sync
        (pinned while the segment is)."""
        self.txn_index.append(entry)
        if self._txn_index_file is None:
            self._txn_index_file = SyncedFile.open(
                self.txn_index.path, os.O_RDWR | os.O_APPEND, self._descriptors
            )
            if self.pinned:
                self._txn_index_file.pin()
        return self._txn_index_file

    def pin(self) -> None:
        """Keep every file of the segment open (reopened if evicted or released)
        until `unpin`: it is being written, or holds writes not yet synced."""
        if self.pinned:
            return
        self.log_file.pin()
        try:
            self.offset_index.pin()
            try:
                self.time_index.pin()
            except OSError:
                self.offset_index.unpin()
                raise
        except OSError:
            self.log_file.unpin()
            raise
        if self._txn_index_file is not None and not self._txn_index_file.pinned:
            self._txn_index_file.pin()
        self.pinned = True

    def unpin(self) -> None:
        """The files may be closed by the cache until used again."""
        if not self.pinned:
            return
        self.pinned = False
        self.log_file.unpin()
        self.offset_index.unpin()
        self.time_index.unpin()
        if self._txn_index_file is not None and self._txn_index_file.pinned:
            self._txn_index_file.unpin()

    def can_hold(self, last_offset: int, batches_count: int) -> bool:
        """Whether offsets up to `last_offset` and that many index entries still fit."""
        return (
            last_offset - self.base_offset <= RELATIVE_OFFSET_MAX // 2
            and len(self.offset_index) + batches_count <= self.offset_index.entries_max
            and len(self.time_index) + batches_count <= self.time_index.entries_max
        )

    # -- appending ---------------------------------------------------------

    def append(
        self,
        data: bytes | bytearray | memoryview,
        batches: list[AppendedBatch],
        index_interval_bytes: int,
    ) -> None:
        """Write `data` (whole batches, offsets assigned) at the end of the log file."""
        start = self.size_bytes
        view = memoryview(data)
        fd = self.log_file.fd
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            os.ftruncate(fd, start)
            raise
        self.size_bytes = start + len(data)
        for batch in batches:
            self._track(
                start + batch.position,
                batch.last_offset,
                batch.max_timestamp_ms,
                batch.size,
                index_interval_bytes,
            )

    def _track(
        self,
        position: int,
        last_offset: int,
        max_timestamp_ms: int,
        size: int,
        index_interval_bytes: int,
    ) -> None:
        """Kafka's LogSegment bookkeeping for one batch at `position`."""
        assert last_offset >= self.next_offset, (last_offset, self.next_offset)
        if self.rolling_timestamp_ms is None:
            self.rolling_timestamp_ms = max_timestamp_ms
        if max_timestamp_ms > self.max_timestamp_ms:
            self.max_timestamp_ms = max_timestamp_ms
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index_entry > index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp_ms, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size
        self.next_offset = last_offset + 1

    def seal(self) -> None:
        """The segment stops being active: record its max timestamp in the time
        index and write both indexes out, ready to be synced."""
        if self.max_timestamp_ms != NO_TIMESTAMP:
            self.time_index.maybe_append(self.max_timestamp_ms, self.offset_of_max_timestamp)
        self.write_index_entries()

    def write_index_entries(self) -> None:
        """Write the buffered index entries to their files (page cache only)."""
        self.offset_index.write_pending()
        self.time_index.write_pending()

    # -- opening -----------------------------------------------------------

    def recover(self, index_interval_bytes: int, on_batch: Callable[[BatchHeader], None]) -> int:
        """Scan, then truncate the file at the first batch that fails. Returns the
        bytes truncated. Only for files whose damage is known to be a torn tail
        (compaction's own output); partition recovery decides with `scan`."""
        file_size = os.fstat(self.log_file.fd).st_size
        valid_end = self.scan(index_interval_bytes, on_batch)
        if valid_end < file_size:
            self.truncate_file(valid_end)
        return file_size - valid_end

    def scan(self, index_interval_bytes: int, on_batch: Callable[[BatchHeader], None]) -> int:
        """Walk every batch (header, offsets, CRC) from the start, rebuilding both
        indexes, up to the first batch that fails. Changes nothing in the log
        file. Returns the position where the valid batches end."""
        self._reset_state()
        file_size = os.fstat(self.log_file.fd).st_size
        position = 0
        for header in self._valid_batches(file_size):
            self._track(
                position, header.last_offset, header.max_timestamp, header.size,
                index_interval_bytes,
            )  # fmt: skip
            on_batch(header)
            position += header.size
        self.size_bytes = position
        self.write_index_entries()  # recovery's fsync covers the rebuilt indexes
        return position

    @property
    def file_size_bytes(self) -> int:
        """The log file's size on disk (recovery: may exceed the valid bytes)."""
        return os.fstat(self.log_file.fd).st_size

    def truncate_file(self, position: int) -> None:
        """Cut the log file at `position`, the end of the valid batches."""
        assert position == self.size_bytes, (position, self.size_bytes)
        os.ftruncate(self.log_file.fd, position)

    def find_valid_batch_after(self, position: int, offset_min: int) -> tuple[int, int] | None:
        """(position, base offset) of the first intact batch after `position` whose
        offsets are at least `offset_min` and fit this segment, or None. Tells
        damage followed by intact data (never a torn tail) from a torn tail."""
        return find_intact_batch(
            self.log_file.fd, position + 1, offset_min, self.base_offset, self.log_path
        )

    def _reset_state(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self.size_bytes = 0
        self.next_offset = self.base_offset
        self.max_timestamp_ms = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.rolling_timestamp_ms = None
        self._bytes_since_index_entry = 0

    def _valid_batches(self, file_size: int) -> Iterator[BatchHeader]:
        """Batches from the start of the file up to the first torn or corrupt one."""
        chunk = b""
        chunk_start = 0
        position = 0
        next_offset = self.base_offset
        while file_size - position >= BATCH_HEADER_SIZE:
            if position + BATCH_HEADER_SIZE > chunk_start + len(chunk):
                chunk, chunk_start = self._pread(RECOVERY_CHUNK_BYTES, position), position
            try:
                header = parse_batch_header(chunk, position - chunk_start)
            except InvalidBatch:
                return
            fits = offsets_fit(header, next_offset, self.base_offset)
            if header.size > file_size - position or not fits:
                return
            if position + header.size > chunk_start + len(chunk):
                chunk_bytes = max(RECOVERY_CHUNK_BYTES, header.size)
                chunk, chunk_start = self._pread(chunk_bytes, position), position
            if not verify_crc(chunk, position - chunk_start, header):
                return
            yield header
            position += header.size
            next_offset = header.last_offset + 1

    def _pread(self, size: int, position: int) -> bytes:
        return os.pread(self.log_file.fd, size, position)

    def load(self, next_segment_base: int | None) -> bool:
        """Trust the file and its indexes if the indexes are sane and the batches
        after the last index entry parse up to the end of the file. False when
        the caller must `recover` instead."""
        self.size_bytes = os.fstat(self.log_file.fd).st_size
        if not self.indexes_existed:
            return False
        offset_limit = next_segment_base if next_segment_base is not None else 2**63 - 1
        try:
            if not self.offset_index.load(self.size_bytes, offset_limit):
                return False
            self._load_tail()
            if next_segment_base is not None and self.next_offset > next_segment_base:
                return False
            if not self.time_index.load(self.next_offset):
                return False
            self._merge_time_index_max()
            self.rolling_timestamp_ms = self._first_batch_timestamp()
        except LogCorrupt:
            return False
        return True

    def _load_tail(self) -> None:
        """Walk the batches after the last offset index entry (at most about one
        index interval) to learn the next offset and their timestamps."""
        last = self.offset_index.last_entry()
        start = last[1] if last is not None else 0
        self.next_offset = last[0] + 1 if last is not None else self.base_offset
        self.max_timestamp_ms = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        first = True
        for position, header in self.headers(start):
            if first and last is not None and header.last_offset != last[0]:
                raise LogCorrupt(f"{self.log_path}: index entry does not match batch at {position}")
            if not first and header.base_offset < self.next_offset:
                raise LogCorrupt(f"{self.log_path}: offsets go backwards at {position}")
            first = False
            if header.max_timestamp > self.max_timestamp_ms:
                self.max_timestamp_ms = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            self.next_offset = header.last_offset + 1
        self._bytes_since_index_entry = self.size_bytes - start

    def _merge_time_index_max(self) -> None:
        last = self.time_index.last_entry()
        if last is not None and last[0] >= self.max_timestamp_ms:
            self.max_timestamp_ms, self.offset_of_max_timestamp = last

    def _first_batch_timestamp(self) -> int | None:
        if self.size_bytes == 0:
            return None
        for _, header in self.headers(0):
            return header.max_timestamp
        return None

    # -- reading -----------------------------------------------------------

    def headers(
        self, position: int, end_position: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of consecutive batches from `position` (a batch
        boundary) to the end of the file; raises LogCorrupt on a malformed one."""
        end = self.size_bytes if end_position is None else end_position
        chunk = b""
        chunk_start = position
        while position < end:
            if position + BATCH_HEADER_SIZE > chunk_start + len(chunk):
                chunk_bytes = max(BATCH_HEADER_SIZE, min(HEADER_SCAN_CHUNK_BYTES, end - position))
                chunk, chunk_start = self._pread(chunk_bytes, position), position
            try:
                header = parse_batch_header(chunk, position - chunk_start)
            except InvalidBatch as exc:
                raise LogCorrupt(f"{self.log_path} at {position}: {exc}") from exc
            if header.size > end - position:
                raise LogCorrupt(f"{self.log_path} at {position}: batch overruns the segment")
            yield position, header
            position += header.size

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= `offset`, or None."""
        if offset >= self.next_offset:
            return None
        for position, header in self.headers(self.offset_index.lookup(offset)):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(
        self, offset: int, bytes_max: int, end_offset: int, *, cached_only: bool = False
    ) -> tuple[bytes | bytearray, int] | None:
        """Whole batches from the one holding `offset`, none reaching `end_offset`,
        at most `bytes_max` bytes unless the first batch alone is larger.
        Returns (bytes, next offset), or None when no batch here holds `offset`.
        `cached_only`: raise ReadNotCached rather than wait for the disk to read
        the records (the event loop's reads, see page_cache.py)."""
        found = self.find_batch(offset)
        if found is None:
            return None
        start, first = found
        if first.last_offset >= end_offset:
            return b"", first.base_offset
        end_limit = self.size_bytes
        if end_offset < self.next_offset:
            bound = self.find_batch(end_offset)
            assert bound is not None
            end_limit = bound[0]
        limit = min(end_limit, start + max(bytes_max, first.size))
        stop = self._last_boundary(start + first.size, limit)
        if cached_only:
            data = pread_cached(self.log_file, stop - start, start)
        else:
            data = self._pread(stop - start, start)
        if len(data) != stop - start:
            raise LogCorrupt(f"{self.log_path}: short read at {start}")
        self._verify_read(data, start)
        return data, self._offset_at(stop)

    def _verify_read(self, data: bytes | bytearray, start: int) -> None:
        """CRC32C of every batch read back (bit rot, files changed under us):
        a corrupt batch is never served."""
        try:
            for position, header in iter_batch_headers(data):
                if not verify_crc(data, position, header):
                    raise LogCorrupt(f"{self.log_path}: CRC32C mismatch at {start + position}")
        except InvalidBatch as exc:
            raise LogCorrupt(f"{self.log_path} at {start}: {exc}") from exc

    def _last_boundary(self, first_end: int, limit: int) -> int:
        """The largest batch boundary <= `limit`, given one at `first_end` <= `limit`."""
        boundary = max(first_end, self.offset_index.floor_position(limit))
        for position, header in self.headers(boundary):
            if position + header.size > limit:
                break
            boundary = position + header.size
        return boundary

    def _offset_at(self, position: int) -> int:
        """The base offset of the batch at `position` (the next offset at the end)."""
        if position >= self.size_bytes:
            return self.next_offset
        for _, header in self.headers(position):
            return header.base_offset
        raise AssertionError("unreachable")

    def batches_from_timestamp(self, timestamp_ms: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the batches whose max timestamp is >= `timestamp_ms`,
        starting from the first (found through the time and offset indexes)."""
        if self.max_timestamp_ms < timestamp_ms:
            return
        start = self.offset_index.lookup(self.time_index.lookup(timestamp_ms))
        for position, header in self.headers(start):
            if header.max_timestamp >= timestamp_ms:
                yield position, header

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return self._pread(header.size, position)

    # -- truncation and removal ---------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= `offset`."""
        found = self.find_batch(offset)
        if found is None:
            return
        position, header = found
        os.ftruncate(self.log_file.fd, position)
        self.size_bytes = position
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        self._load_tail()
        self._merge_time_index_max()
        if self.size_bytes == 0:
            self.rolling_timestamp_ms = None

    def close(self) -> None:
        self.pinned = False
        self.log_file.close()
        self.offset_index.close()
        self.time_index.close()
        self._release_txn_index_file()

    def delete(self) -> None:
        """Close (deferred while a flush holds the files) and unlink every file."""
        self.close()
        for suffix in SEGMENT_SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.directory / segment_file_name(self.base_offset, suffix))
