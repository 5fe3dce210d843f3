"""The aborted-transaction index of a segment (`<base offset>.txnindex`), in
Kafka's on-disk format.

Each entry is one aborted transaction whose ABORT marker was written in the
segment, 34 bytes, big-endian, appended in marker order:

    version int16 (0) | producer_id int64 | first_offset int64
    | last_offset int64 (the marker's offset) | last_stable_offset int64

`last_stable_offset` is the partition's LSO when the transaction completed:
the first offset of the oldest transaction of another producer still open
then, else the marker's offset + 1. A read_committed Fetch of [start, end)
lists every aborted transaction whose range overlaps it (`last_offset >=
start and first_offset < end`) so the client drops their records. A
transaction can start in an earlier segment than its marker, so the search
walks segments from the one holding `start` onwards and stops at the first
entry whose last stable offset is at or past `end` (no later entry can
overlap: Kafka's TransactionIndex.collectAbortedTxns).

The file is created by the first append (most segments never get one). Reads
go through the file in chunks of `READ_CHUNK_ENTRIES`, never by a length read
from the file; a trailing partial entry (a torn append) is cut when the index
is opened. `sanity_check` is Kafka's, for segments recovery trusts; an index
that fails it is rebuilt by the caller from the log (producer-state replay
reports each completed abort).

This module is the file format and a small wrapper; the segment owns when it is
written, synced, truncated and rebuilt.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
ABORTED_TXN_BYTES = 34
READ_CHUNK_ENTRIES = 1024
SEARCH_CHUNK_ENTRIES = 64

_ENTRY = struct.Struct(">hqqqq")
assert _ENTRY.size == ABORTED_TXN_BYTES


class TransactionIndexCorrupt(ValueError):  # noqa: N818 (reads as the condition)
    pass


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the ABORT marker
    last_stable_offset: int  # the partition's LSO when the transaction completed

    def encode(self) -> bytes:
        return _ENTRY.pack(
            ABORTED_TXN_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


def decode_aborted_txns(data: bytes | bytearray | memoryview) -> list[AbortedTxn]:
    """The entries of `data`, a whole number of them. Raises
    TransactionIndexCorrupt on a partial entry or an unknown version."""
    if len(data) % ABORTED_TXN_BYTES:
        raise TransactionIndexCorrupt(
            f"{len(data)} bytes is not a whole number of {ABORTED_TXN_BYTES}-byte entries"
        )
    entries = []
    for version, producer_id, first, last, stable in _ENTRY.iter_unpack(data):
        if version != ABORTED_TXN_VERSION:
            raise TransactionIndexCorrupt(f"aborted transaction entry version {version}")
        entries.append(AbortedTxn(producer_id, first, last, stable))
    return entries


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    aborted: list[AbortedTxn]
    complete: bool  # True: no later segment's index can hold an overlapping entry


def collect_aborted_txns(
    entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
) -> TxnIndexSearchResult:
    """The entries overlapping [fetch_offset, upper_bound_offset), and whether the
    search is complete (an entry's last stable offset reached the upper bound)."""
    aborted = []
    for entry in entries:
        if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
            aborted.append(entry)
        if entry.last_stable_offset >= upper_bound_offset:
            return TxnIndexSearchResult(aborted, True)
    return TxnIndexSearchResult(aborted, False)


class TransactionIndex:
    """One segment's `.txnindex`: appends, chunked reads, truncation. Opened per
    operation (plain `os` calls): aborted transactions are rare, and a segment
    without any never touches the disk here."""

    def __init__(self, path: Path, base_offset: int) -> None:
        """Open the index at `path` if the file exists, cutting a trailing partial
        entry (a torn append)."""
        self.path = path
        self.base_offset = base_offset
        self._size_bytes = 0
        self._last_offset: int | None = None
        # Each entry's marker offset, in order, read on the first search that needs
        # it and kept up to date by appends (8 bytes an entry): a search decodes only
        # the entries from the first one that can overlap.
        self._marker_offsets: array[int] | None = None
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            return
        whole = size - size % ABORTED_TXN_BYTES
        if whole != size:
            os.truncate(path, whole)
        self._size_bytes = whole
        if whole:  # the last marker, whatever the entry's version (`sanity_check` judges it)
            last = self._pread(ABORTED_TXN_BYTES, whole - ABORTED_TXN_BYTES)
            self._last_offset = _ENTRY.unpack(last)[3]

    def __len__(self) -> int:
        return self._size_bytes // ABORTED_TXN_BYTES

    @property
    def last_offset(self) -> int | None:
        """The marker offset of the last entry, None when empty."""
        return self._last_offset

    def append(self, entry: AbortedTxn) -> None:
        """Add an entry (page cache only; `sync` makes it durable). Marker offsets
        strictly increase; a marker below the segment's base is a bug."""
        if self._last_offset is not None and entry.last_offset <= self._last_offset:
            raise ValueError(
                f"aborted transaction ending at {entry.last_offset} is not after "
                f"{self._last_offset} in {self.path}"
            )
        if entry.last_offset < self.base_offset:
            raise ValueError(
                f"aborted transaction ending at {entry.last_offset} is below the "
                f"segment base {self.base_offset} of {self.path}"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            data = entry.encode()
            written = os.write(fd, data)
            if written != len(data):  # a short write of 34 bytes: the disk is failing
                os.ftruncate(fd, self._size_bytes)
                raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
        finally:
            os.close(fd)
        self._size_bytes += ABORTED_TXN_BYTES
        self._last_offset = entry.last_offset
        if self._marker_offsets is not None:
            self._marker_offsets.append(entry.last_offset)

    def entries(self) -> Iterator[AbortedTxn]:
        """Every entry, read `READ_CHUNK_ENTRIES` at a time."""
        for _, chunk in self._chunks():
            yield from chunk

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries overlapping [fetch_offset, upper_bound_offset): see
        `collect_aborted_txns`. Entries whose marker is below `fetch_offset` can
        neither overlap nor end the search (their LSO at completion is at most their
        marker + 1), so the scan starts at the first marker at or past it, found by
        bisection; an index whose last marker is below it is not read at all (a
        consumer at the log's end)."""
        if self._last_offset is None or self._last_offset < fetch_offset:
            return TxnIndexSearchResult([], False)
        first = bisect_left(self._markers(), fetch_offset)
        return collect_aborted_txns(
            self._entries_from(first * ABORTED_TXN_BYTES), fetch_offset, upper_bound_offset
        )

    def _entries_from(self, position: int) -> Iterator[AbortedTxn]:
        """Entries from byte `position` on, each decoded only when the search asks for
        it, read `SEARCH_CHUNK_ENTRIES` at a time (a search usually stops after a few:
        the fetch's range is small)."""
        chunk_bytes = SEARCH_CHUNK_ENTRIES * ABORTED_TXN_BYTES
        while position < self._size_bytes:
            wanted = min(chunk_bytes, self._size_bytes - position)
            for version, producer_id, first, last, stable in _ENTRY.iter_unpack(
                self._pread(wanted, position)
            ):
                if version != ABORTED_TXN_VERSION:
                    raise TransactionIndexCorrupt(f"aborted transaction entry version {version}")
                yield AbortedTxn(producer_id, first, last, stable)
            position += wanted

    def _markers(self) -> array[int]:
        if self._marker_offsets is None:
            self._marker_offsets = array("q", (e.last_offset for e in self.entries()))
        return self._marker_offsets

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (the log was
        truncated there)."""
        if self._last_offset is None or self._last_offset < offset:
            return
        last_kept: int | None = None
        for position, chunk in self._chunks():
            for i, entry in enumerate(chunk):
                if entry.last_offset >= offset:
                    self._truncate_file(position + i * ABORTED_TXN_BYTES, last_kept)
                    return
                last_kept = entry.last_offset

    def reset(self) -> None:
        """Remove every entry (the index is about to be rebuilt)."""
        if self._size_bytes or self.path.exists():
            self._truncate_file(0, None)

    def sanity_check(self) -> None:
        """Kafka's check of a trusted segment's index, plus the order appends keep:
        known version, every marker at or above the segment base, markers
        strictly increasing, each transaction starting at or before its marker.
        Raises TransactionIndexCorrupt."""
        previous: int | None = None
        for entry in self.entries():
            if entry.last_offset < self.base_offset:
                raise TransactionIndexCorrupt(
                    f"{self.path}: aborted transaction {entry} ends below the "
                    f"segment base {self.base_offset}"
                )
            if previous is not None and entry.last_offset <= previous:
                raise TransactionIndexCorrupt(
                    f"{self.path}: aborted transaction {entry} is out of order"
                )
            if entry.first_offset > entry.last_offset:
                raise TransactionIndexCorrupt(
                    f"{self.path}: aborted transaction {entry} starts after its marker"
                )
            previous = entry.last_offset

    def sync(self) -> None:
        """fsync the file, if there is one."""
        if not self._size_bytes and not self.path.exists():
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._size_bytes = 0
        self._last_offset = None
        self._marker_offsets = None

    # -- internals -------------------------------------------------------

    def _chunks(self, position: int = 0) -> Iterator[tuple[int, list[AbortedTxn]]]:
        """(byte position, entries) of each chunk of the file from `position` up to
        its known size; no descriptor is held between chunks (a caller may stop
        early)."""
        chunk_bytes = READ_CHUNK_ENTRIES * ABORTED_TXN_BYTES
        while position < self._size_bytes:
            wanted = min(chunk_bytes, self._size_bytes - position)
            data = self._pread(wanted, position)
            yield position, decode_aborted_txns(data)
            position += wanted

    def _pread(self, size_bytes: int, position: int) -> bytes:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, size_bytes, position)
        finally:
            os.close(fd)
        if len(data) != size_bytes:  # the file shrank under us
            raise TransactionIndexCorrupt(
                f"{self.path}: {len(data)} bytes at {position}, expected {size_bytes}"
            )
        return data

    def _truncate_file(self, size_bytes: int, last_offset: int | None) -> None:
        os.truncate(self.path, size_bytes)
        self._size_bytes = size_bytes
        self._last_offset = last_offset
        self._marker_offsets = None
