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
import errno
import logging
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import trio

log = logging.getLogger(__name__)

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
        self.fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        self.device = os.fstat(self.fd).st_dev

    def sync(self) -> None:
        self._syncfs(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# The helper process: waits for a byte, calls syncfs on the inherited descriptor,
# answers with the errno (0 for success) as 4 big-endian bytes; exits at EOF or
# when the broker's end of a pipe is gone.
# It runs with `python -I -c`, so it imports nothing of Weir.
HELPER_SOURCE = """
import ctypes, os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C and service managers signal
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the whole group: the broker stops us
libc = ctypes.CDLL(None, use_errno=True)
libc.syncfs.argtypes = [ctypes.c_int]
watch_fd, request_fd, response_fd = (int(arg) for arg in sys.argv[1:4])
try:
    while os.read(request_fd, 1):
        failed = libc.syncfs(watch_fd) != 0
        os.write(response_fd, (ctypes.get_errno() if failed else 0).to_bytes(4, "big"))
except OSError:  # the broker is gone (broken pipe): nothing to answer
    pass
"""
RESPONSE_BYTES = 4


class SyncfsHelper:
    """Runs each round's `syncfs` in a small child process instead of a thread.

    A thread needs the GIL after every blocking call it makes, so each round
    made the event loop and the thread take turns for the GIL, with a wake-up
    and a context switch per turn. The child has its own interpreter: the loop
    writes one byte to a pipe, waits for the answer like any other socket, and
    never shares its GIL. It inherits the `FilesystemWatch` descriptor, the same
    open file, so the writeback errors `syncfs` reports are the same ones.

    If the child dies (killed by an operator, out of memory) the round is not
    known to be durable: `sync` starts a new child and syncs again, once."""

    def __init__(self, watch: FilesystemWatch, source: str = HELPER_SOURCE) -> None:
        """`source` is the child's program (tests replace it to fake failures)."""
        self._watch = watch
        self._source = source
        self._process: subprocess.Popen[bytes] | None = None
        self._request_fd = -1
        self._response_fd = -1
        self.starts_count = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        assert self._process is None
        request_read_fd, self._request_fd = os.pipe()
        self._response_fd, response_write_fd = os.pipe()
        inherited = (self._watch.fd, request_read_fd, response_write_fd)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-c", self._source, *map(str, inherited)],
                pass_fds=inherited,
                stdin=subprocess.DEVNULL,
            )
        except OSError:
            os.close(self._request_fd)
            os.close(self._response_fd)
            raise
        finally:
            os.close(request_read_fd)
            os.close(response_write_fd)
        self.starts_count += 1

    async def sync(self) -> None:
        """One `syncfs` of the watched filesystem; raises OSError if it failed.
        Not cancellable once started: the answer is always collected."""
        with trio.CancelScope(shield=True):
            try:
                return await self._sync_once()
            except _HelperGoneError:
                log.warning("the syncfs helper process exited; starting a new one")
                self.close()
                self.start()
            try:
                return await self._sync_once()
            except _HelperGoneError:
                raise OSError(errno.EIO, "the syncfs helper process exited twice") from None

    async def _sync_once(self) -> None:
        try:
            os.write(self._request_fd, b"\0")
        except BrokenPipeError:
            raise _HelperGoneError() from None
        answer = b""
        while len(answer) < RESPONSE_BYTES:
            await trio.lowlevel.wait_readable(self._response_fd)
            chunk = os.read(self._response_fd, RESPONSE_BYTES - len(answer))
            if not chunk:
                raise _HelperGoneError()
            answer += chunk
        error = int.from_bytes(answer, "big")
        if error:
            raise OSError(error, f"syncfs: {os.strerror(error)}")

    def close(self) -> None:
        """Stop the child (it exits when its request pipe closes)."""
        if self._process is None:
            return
        os.close(self._request_fd)
        os.close(self._response_fd)
        try:
            self._process.wait(timeout=HELPER_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # stuck in syncfs on a dead disk
            self._process.kill()
        self._process = None


HELPER_EXIT_TIMEOUT_S = 5.0


class _HelperGoneError(Exception):
    """The helper closed its end: it exited or was killed."""
