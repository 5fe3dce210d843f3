"""One `syncfs(2)` per flush round instead of one `fdatasync(2)` per file.

A round that covers 8 partitions costs 8 `fdatasync` calls, each with its own
writeback, metadata writes and device cache flush. `syncfs` writes back every
dirty file of the filesystem and flushes the device once. On this project's
test machine (ext4, virtio disk) a round over 8 files took 140 µs of CPU and
470 µs of wall time with `syncfs`, against 590–810 µs of CPU and 1.4–2.1 ms with
`fdatasync` (see BENCHMARKS.md, "fsync method").

Two conditions make it safe, and `resolve_fsync_method` checks both:

- Linux 5.8 or later. Before 5.8, `syncfs` returned 0 even when writeback
  failed. Since 5.8 it reports every writeback error on the filesystem that
  happened after the descriptor it is called on was opened.
- That descriptor (`FilesystemWatch`) is opened on the data directory before
  any log file is written, so no error on a file Weir wrote can predate it.

It also writes back other programs' dirty files on the same filesystem, so a
busy neighbour makes rounds slower (never less safe). Files on another
filesystem than the data directory are still synced with `fdatasync`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import re
import sys
from collections.abc import Callable
from pathlib import Path

FSYNC_METHODS = ("auto", "syncfs", "fdatasync")
SYNCFS_REPORTS_ERRORS_SINCE = (5, 8)

SyncFilesystem = Callable[[int], None]


class FsyncMethodUnavailableError(Exception):
    """`syncfs` was asked for where it would not report writeback errors."""


def kernel_release_at_least(release: str, wanted: tuple[int, int]) -> bool:
    """Whether a Linux release string such as '6.1.0-18-amd64' is `wanted` or newer."""
    match = re.match(r"(\d+)\.(\d+)", release)
    if match is None:
        return False
    return (int(match[1]), int(match[2])) >= wanted


def load_syncfs() -> SyncFilesystem | None:
    """libc's `syncfs` as a callable that raises OSError, or None where missing."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        function = libc.syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int

    def syncfs(fd: int) -> None:
        if function(fd) != 0:  # ctypes releases the GIL for the call
            errno = ctypes.get_errno()
            raise OSError(errno, f"syncfs: {os.strerror(errno)}")

    return syncfs


def resolve_fsync_method(requested: str) -> str:
    """'auto' becomes 'syncfs' where that is safe (see the module docstring),
    else 'fdatasync'. Raises FsyncMethodUnavailableError for an unsafe 'syncfs'."""
    if requested not in FSYNC_METHODS:
        raise ValueError(f"unknown fsync method {requested!r}")
    if requested == "fdatasync":
        return requested
    safe = (
        sys.platform.startswith("linux")
        and kernel_release_at_least(platform.release(), SYNCFS_REPORTS_ERRORS_SINCE)
        and load_syncfs() is not None
    )
    if safe:
        return "syncfs"
    if requested == "syncfs":
        raise FsyncMethodUnavailableError(
            "syncfs needs Linux 5.8 or later (older kernels do not report its errors)"
        )
    return "fdatasync"


class FilesystemWatch:
    """A descriptor on the data directory's filesystem, opened before any log
    file is written: `syncfs` on it reports every writeback error since then."""

    def __init__(self, directory: Path, syncfs: SyncFilesystem) -> None:
        self._syncfs = syncfs
        self._fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        self.device = os.fstat(self._fd).st_dev

    def sync(self) -> None:
        self._syncfs(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
