"""Sparse per-segment indexes, in Kafka's on-disk formats.

- Offset index (`.index`): 8-byte entries (relative offset u32, file position
  u32), big-endian; an entry maps the *last* offset of a batch to the position
  where that batch starts, written every `index.interval.bytes` of batches.
- Time index (`.timeindex`): 12-byte entries (timestamp i64, relative offset
  u32): the largest timestamp so far in the segment and the last offset of the
  batch that carried it; only strictly increasing timestamps are added.

Both are kept in memory as arrays (bisect lookups). New entries are buffered
and appended to their files in one write per `PENDING_ENTRIES_BYTES_MAX`, and
always before the index is sealed, truncated or closed: the active segment's
indexes are not part of any fsync round anyway (recovery rebuilds them), and a
write per entry cost a system call for about every other appended batch.

Index files are never trusted blindly: `load` checks them and the segment
rebuilds them from the log when they are not sane.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from weir.log.descriptors import DescriptorCache, SyncedFile

OFFSET_ENTRY_BYTES = 8
TIME_ENTRY_BYTES = 12
RELATIVE_OFFSET_MAX = 2**32 - 1
INDEX_FILE_BYTES_MAX = 1 << 30
PENDING_ENTRIES_BYTES_MAX = 4096

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")


class _IndexFile:
    """The file behind an index: append-only writes and truncation, through the
    descriptor cache (weir/log/descriptors.py). The file is released once the
    index is final and synced (sealed segments need only their log file) and is
    reopened if needed."""

    def __init__(
        self, path: Path, base_offset: int, entries_max: int, cache: DescriptorCache
    ) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries_max = max(1, entries_max)
        self.file: SyncedFile | None = None
        self._cache = cache
        self._pending = bytearray()  # entries in memory, not yet written
        self._fd()

    def _fd(self) -> int:
        return self._open_file().fd

    def _open_file(self) -> SyncedFile:
        if self.file is None:
            self.file = SyncedFile.open(
                self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, self._cache
            )
        return self.file

    def pin(self) -> None:
        """Keep the descriptor open (reopened if released or evicted)."""
        self._open_file().pin()

    def unpin(self) -> None:
        if self.file is not None and self.file.pinned:  # not if released and reopened since
            self.file.unpin()

    def _read_all(self) -> bytes:
        fd = self._fd()
        size = os.fstat(fd).st_size
        if size > INDEX_FILE_BYTES_MAX:
            return b""
        return os.pread(fd, size, 0)

    def _write(self, entry: bytes) -> None:
        self._pending += entry
        if len(self._pending) >= PENDING_ENTRIES_BYTES_MAX:
            self.write_pending()

    def write_pending(self) -> None:
        """Append the buffered entries to the file (page cache only)."""
        if not self._pending:
            return
        fd = self._fd()
        view = memoryview(self._pending)
        try:
            while view:
                view = view[os.write(fd, view) :]
        finally:
            view.release()
        self._pending.clear()

    def _truncate_file(self, entries: int, entry_bytes: int) -> None:
        self.write_pending()
        os.ftruncate(self._fd(), entries * entry_bytes)

    def release(self) -> None:
        """Write what is buffered and close the descriptor (the close is deferred
        while a flush round holds it)."""
        if self.file is not None:
            self.write_pending()
            self.file.close()
            self.file = None

    def close(self) -> None:
        self.release()


class OffsetIndex(_IndexFile):
    def __init__(
        self, path: Path, base_offset: int, entries_max: int, cache: DescriptorCache
    ) -> None:
        super().__init__(path, base_offset, entries_max, cache)
        self._relative_offsets = array("I")
        self._positions = array("I")

    def __len__(self) -> int:
        return len(self._positions)

    def load(self, log_size_bytes: int, next_offset: int) -> bool:
        """Read the file; False (and an empty index) when it is not sane."""
        data = self._read_all()
        if len(data) % OFFSET_ENTRY_BYTES or len(data) // OFFSET_ENTRY_BYTES > self.entries_max:
            return self._reject()
        flat = array("I", data)
        if sys.byteorder == "little":
            flat.byteswap()
        relative_offsets, positions = flat[0::2], flat[1::2]
        if not (_strictly_increasing(relative_offsets) and _strictly_increasing(positions)):
            return self._reject()
        if positions and (
            positions[-1] >= log_size_bytes
            or self.base_offset + relative_offsets[-1] >= next_offset
        ):
            return self._reject()
        self._relative_offsets, self._positions = relative_offsets, positions
        return True

    def _reject(self) -> bool:
        self.reset()
        return False

    def append(self, last_offset: int, position: int) -> None:
        relative = last_offset - self.base_offset
        assert 0 <= relative <= RELATIVE_OFFSET_MAX, (last_offset, self.base_offset)
        if self._positions:
            assert relative > self._relative_offsets[-1] and position > self._positions[-1]
        self._write(_OFFSET_ENTRY.pack(relative, position))
        self._relative_offsets.append(relative)
        self._positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position of the indexed batch with the largest last offset <= `offset` (or 0)."""
        i = bisect_right(self._relative_offsets, offset - self.base_offset)
        return self._positions[i - 1] if i else 0

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= `position` (or 0)."""
        i = bisect_right(self._positions, position)
        return self._positions[i - 1] if i else 0

    def last_entry(self) -> tuple[int, int] | None:
        """(absolute last offset, position) of the last entry."""
        if not self._positions:
            return None
        return self.base_offset + self._relative_offsets[-1], self._positions[-1]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at or after `position`."""
        keep = bisect_right(self._positions, position - 1)
        if keep == len(self._positions):
            return
        del self._relative_offsets[keep:]
        del self._positions[keep:]
        self._truncate_file(keep, OFFSET_ENTRY_BYTES)

    def reset(self) -> None:
        self._relative_offsets = array("I")
        self._positions = array("I")
        self._truncate_file(0, OFFSET_ENTRY_BYTES)


class TimeIndex(_IndexFile):
    def __init__(
        self, path: Path, base_offset: int, entries_max: int, cache: DescriptorCache
    ) -> None:
        super().__init__(path, base_offset, entries_max, cache)
        self._timestamps: array[int] = array("q")
        self._relative_offsets = array("I")

    def __len__(self) -> int:
        return len(self._timestamps)

    def load(self, next_offset: int) -> bool:
        """Read the file; False (and an empty index) when it is not sane."""
        data = self._read_all()
        if len(data) % TIME_ENTRY_BYTES or len(data) // TIME_ENTRY_BYTES > self.entries_max:
            return self._reject()
        timestamps: array[int] = array("q")
        relative_offsets = array("I")
        for timestamp, relative in _TIME_ENTRY.iter_unpack(data):
            if timestamps and (timestamp <= timestamps[-1] or relative < relative_offsets[-1]):
                return self._reject()
            timestamps.append(timestamp)
            relative_offsets.append(relative)
        if relative_offsets and self.base_offset + relative_offsets[-1] >= next_offset:
            return self._reject()
        self._timestamps, self._relative_offsets = timestamps, relative_offsets
        return True

    def _reject(self) -> bool:
        self.reset()
        return False

    def maybe_append(self, timestamp_ms: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        if self._timestamps and timestamp_ms <= self._timestamps[-1]:
            return
        relative = offset - self.base_offset
        assert 0 <= relative <= RELATIVE_OFFSET_MAX, (offset, self.base_offset)
        assert not self._relative_offsets or relative >= self._relative_offsets[-1]
        self._write(_TIME_ENTRY.pack(timestamp_ms, relative))
        self._timestamps.append(timestamp_ms)
        self._relative_offsets.append(relative)

    def lookup(self, timestamp_ms: int) -> int:
        """Offset of the entry with the largest timestamp <= `timestamp_ms` (or the base)."""
        i = bisect_right(self._timestamps, timestamp_ms)
        return self.base_offset + (self._relative_offsets[i - 1] if i else 0)

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._relative_offsets[-1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset`."""
        keep = bisect_right(self._relative_offsets, offset - self.base_offset - 1)
        if keep == len(self._timestamps):
            return
        del self._timestamps[keep:]
        del self._relative_offsets[keep:]
        self._truncate_file(keep, TIME_ENTRY_BYTES)

    def reset(self) -> None:
        self._timestamps = array("q")
        self._relative_offsets = array("I")
        self._truncate_file(0, TIME_ENTRY_BYTES)


def _strictly_increasing(values: array[int]) -> bool:
    return all(a < b for a, b in zip(values, values[1:]))  # noqa: B905
