"""Reads that never wait on the disk on the event loop.

A read of stored records is tried with `preadv(..., RWF_NOWAIT)`: the kernel
copies what is in the page cache and refuses (EAGAIN) or stops short instead
of waiting for the disk. Such a read raises `ReadNotCached`, naming the byte
range; the broker then warms that range on the disk executor (`warm`, a plain
read that waits, into a reusable buffer, so the pages land in the page cache)
and tries again on the loop. A read the page cache serves costs one syscall
and one copy, as the plain `pread` it replaces.

Where RWF_NOWAIT is not supported (another OS, an old kernel, a filesystem
that refuses it with EOPNOTSUPP), reads fall back to `pread`, once noticed.
"""

from __future__ import annotations

import errno
import os
import threading
from dataclasses import dataclass

from weir.log.descriptors import SyncedFile

_RWF_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)
# Pages warmed per read call on the worker (its buffer is reused).
WARM_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class ColdRange:
    """Bytes of a log file the page cache did not hold."""

    file: SyncedFile
    start: int
    size: int


class ReadNotCached(Exception):  # noqa: N818 (a signal, not a failure)
    """The read would have waited on the disk: warm `cold` and try again."""

    def __init__(self, cold: ColdRange) -> None:
        super().__init__(f"{cold.file.path.name}: {cold.size} bytes at {cold.start} not cached")
        self.cold = cold


class _NowaitSupport:
    enabled = _RWF_NOWAIT is not None


def pread_cached(synced: SyncedFile, size: int, start: int) -> bytes | bytearray:
    """`size` bytes at `start` if the page cache holds them all; otherwise raises
    ReadNotCached. A short result means the file ends there (as `pread`)."""
    fd = synced.fd
    if not _NowaitSupport.enabled or size == 0:
        return os.pread(fd, size, start)
    assert _RWF_NOWAIT is not None
    buffer = bytearray(size)
    try:
        count = os.preadv(fd, [buffer], start, _RWF_NOWAIT)
    except BlockingIOError:
        raise ReadNotCached(ColdRange(synced, start, size)) from None
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        _NowaitSupport.enabled = False
        return os.pread(fd, size, start)
    if count < size:
        if start + count < os.fstat(fd).st_size:
            raise ReadNotCached(ColdRange(synced, start + count, size - count))
        del buffer[count:]
    return buffer


_buffers = threading.local()


def warm(ranges: list[ColdRange]) -> int:
    """(Disk executor) Read `ranges` so that the page cache holds them; each
    file was `try_hold`-ed by the caller and is released here. Returns the bytes read."""
    buffer: bytearray | None = getattr(_buffers, "buffer", None)
    if buffer is None:
        buffer = _buffers.buffer = bytearray(WARM_CHUNK_BYTES)
    total = 0
    for cold in ranges:
        try:
            fd = cold.file.fd
            position, end = cold.start, cold.start + cold.size
            while position < end:
                view = memoryview(buffer)[: min(WARM_CHUNK_BYTES, end - position)]
                count = os.preadv(fd, [view], position)
                if count <= 0:
                    break
                position += count
                total += count
        except OSError:
            pass  # the read on the loop meets the error again and reports it
        finally:
            cold.file.release()
    return total
