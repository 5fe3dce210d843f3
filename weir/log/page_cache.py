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

`preadv` needs a buffer, and a new `bytearray` is zero-filled before the read
fills it (a pass over every byte, for nothing). So the page cache is asked
first whether it holds the whole range: `is_cached`, the `cachestat` system
call (Linux 6.5+; through ctypes, which `os` does not expose). When it does,
`os.pread` reads into a new `bytes` that is not filled first; a page evicted
between the two calls makes that read wait on the disk, a window of
microseconds. Where cachestat is missing, every read takes the preadv path.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

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


# cachestat(2)'s number in the generic system call table (x86-64 and arm64 alike).
_CACHESTAT_SYSCALL = 451
_CACHESTAT_MACHINES = ("x86_64", "aarch64")


class _CachestatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [
        ("nr_cache", ctypes.c_uint64),
        ("nr_dirty", ctypes.c_uint64),
        ("nr_writeback", ctypes.c_uint64),
        ("nr_evicted", ctypes.c_uint64),
        ("nr_recently_evicted", ctypes.c_uint64),
    ]


def _load_syscall() -> Callable[..., int] | None:
    if platform.system() != "Linux" or platform.machine() not in _CACHESTAT_MACHINES:
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_long  # arguments: ints and prebuilt byref()s, no argtypes
    return cast("Callable[..., int]", function)


class _CachestatCall(threading.local):
    """The system call and its argument structures, reused by each thread."""

    syscall = _load_syscall()

    def __init__(self) -> None:
        self.span = _CachestatRange()
        self.found = _Cachestat()
        self.span_ref = ctypes.byref(self.span)
        self.found_ref = ctypes.byref(self.found)


_cachestat = _CachestatCall()


def is_cached_supported() -> bool:
    return _CachestatCall.syscall is not None


def is_cached(fd: int, start: int, size: int) -> bool:
    """Whether the page cache holds every page of `size` bytes at `start` of the
    file (False where the kernel cannot tell: no cachestat)."""
    call = _cachestat
    if call.syscall is None or size <= 0:
        return False
    span = call.span
    span.off, span.len = start, size
    if call.syscall(_CACHESTAT_SYSCALL, fd, call.span_ref, call.found_ref, 0) != 0:
        if ctypes.get_errno() in (errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP):
            _CachestatCall.syscall = None  # not this kernel (or a seccomp filter)
        return False
    pages = (start + size - 1) // mmap.PAGESIZE - start // mmap.PAGESIZE + 1
    return bool(call.found.nr_cache >= pages)


def pread_cached(synced: SyncedFile, size: int, start: int) -> bytes | bytearray:
    """`size` bytes at `start` if the page cache holds them all; otherwise raises
    ReadNotCached. A short result means the file ends there (as `pread`)."""
    fd = synced.fd
    if not _NowaitSupport.enabled or size == 0 or is_cached(fd, start, size):
        return os.pread(fd, size, start)  # bytes: not zero-filled first
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
