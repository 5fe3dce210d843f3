"""The log's file descriptors: a bounded LRU cache of open log files.

A broker may hold thousands of partitions with tens of thousands of segments,
but its process has a fixed number of descriptors (RLIMIT_NOFILE), shared with
client connections and its own fsync work. So log files are opened through a
`DescriptorCache` of named `capacity`: a file is open only while it is used,
and opening one when the cache is full closes the least recently used file
nobody needs open instead of failing.

Every `SyncedFile` belongs to a cache and is in one of these states:

- held: a flush round holds it (`hold`/`release`). Never closed or evicted under
  the round; `close` is deferred until the last hold is released. Its `fd` is
  stable, so the flusher's worker thread may read it.
- pinned: its owner needs it open (`pin`/`unpin`): writes not yet synced, or the
  active segment of a partition being written (the append path then never
  reopens anything). Never evicted.
- evictable: open, neither held nor pinned; the cache may close it whenever
  another file is opened. `fd` reopens it (without O_CREAT: a file
  unlinked meanwhile is an error, never a new empty file).
- closed by its owner (`close`): for good.

What a partition needs, and so what the broker admits (weir/broker/descriptor_budget.py):
`DESCRIPTORS_PER_PARTITION` while it is written (the active segment's log and
two indexes, pinned), none while idle; a sealed segment's log file is open only
while read, and pinned from its roll until the round that syncs it.
`LOG_FILES_HEADROOM_FRACTION` of the cache (at least `LOG_FILES_HEADROOM_MIN`)
is kept for those: reads of sealed segments and segments awaiting their sync.

A cache's lock makes every change of state atomic, so logs may also be closed
on worker threads at shutdown. A descriptor handed out for an evictable file is
only safe to use until another file is opened: the Trio thread uses it at once
(reads), and code on other threads uses only files it holds or pinned (the
flusher's worker thread reads `fd` of held files only). A compaction pass
writing its output on a worker thread uses a private cache.
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path

# The active segment's .log, .index and .timeindex, pinned while a partition is written.
DESCRIPTORS_PER_PARTITION = 3
# The files of one segment: a private cache this large never evicts anything.
SEGMENT_FILES_COUNT = 3
# Part of the cache kept for sealed segments' reads and for segments awaiting the
# round that syncs them after a roll (see module docstring).
LOG_FILES_HEADROOM_FRACTION = 0.1
LOG_FILES_HEADROOM_MIN = 48
# Flags a reopened file must not repeat: it exists already, or it must not come back.
_CREATION_FLAGS = os.O_CREAT | os.O_EXCL | os.O_TRUNC


class DescriptorsExhaustedError(OSError):
    """Every descriptor of the cache is held or pinned: nothing can be evicted."""

    def __init__(self, capacity: int, path: Path) -> None:
        super().__init__(
            errno.EMFILE,
            f"all {capacity} log file descriptors are in use (held by fsync rounds or "
            "pinned with unsynced writes); raise `ulimit -n`",
            str(path),
        )


class DescriptorCache:
    """At most `capacity` log files open at once; the least recently used
    evictable one is closed to make room (see module docstring)."""

    def __init__(self, capacity: int) -> None:
        assert capacity >= 1, capacity
        self.capacity = capacity
        self.open_count = 0  # descriptors open through this cache, held and pinned included
        self.opens_count = 0
        self.evictions_count = 0
        # Open files neither held nor pinned, least recently used first.
        self._evictable: OrderedDict[SyncedFile, None] = OrderedDict()
        # Held by every change of state of the cache and its files; the methods
        # whose names start with `_` expect it held.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DescriptorCache({self.open_count}/{self.capacity} open)"

    @property
    def evictable_count(self) -> int:
        return len(self._evictable)

    def has_room_for(self, count: int) -> bool:
        """Whether `count` more files can be opened (free or evictable descriptors)."""
        with self._lock:
            return self.capacity - self.open_count + len(self._evictable) >= count

    def resize(self, capacity: int) -> None:
        """Change the capacity; closes evictable files down to it where it can."""
        assert capacity >= 1, capacity
        with self._lock:
            self.capacity = capacity
            while self.open_count > capacity and self._evictable:
                self._evict_oldest()

    def _open(self, path: Path, flags: int, mode: int) -> int:
        """Open a descriptor, first closing the least recently used evictable
        file when the cache is full. Raises DescriptorsExhaustedError when none is."""
        while self.open_count >= self.capacity:
            if not self._evictable:
                raise DescriptorsExhaustedError(self.capacity, path)
            self._evict_oldest()
        fd = os.open(path, flags, mode)
        self.open_count += 1
        self.opens_count += 1
        return fd

    def _evict_oldest(self) -> None:
        synced, _ = self._evictable.popitem(last=False)
        synced._close_descriptor()
        self.evictions_count += 1

    def _closed(self) -> None:
        self.open_count -= 1
        assert self.open_count >= 0

    def _make_evictable(self, synced: SyncedFile) -> None:
        self._evictable[synced] = None

    def _make_unevictable(self, synced: SyncedFile) -> None:
        self._evictable.pop(synced, None)

    def _touch(self, synced: SyncedFile) -> None:
        self._evictable.move_to_end(synced)


def default_log_files_capacity() -> int:
    """The shared cache's capacity until a broker sets it from its budget: half of
    the soft RLIMIT_NOFILE (tools and tests that open logs without a broker)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 16
    return max(SEGMENT_FILES_COUNT, soft // 2)


# The process's log files: RLIMIT_NOFILE is per process, so is this cache. The
# broker resizes it to its budget's log-file share at start.
LOG_FILES = DescriptorCache(default_log_files_capacity())


def shared_log_files() -> DescriptorCache:
    """The process's log file cache (looked up when called: tests install their own)."""
    return LOG_FILES


class SyncedFile:
    """A log file descriptor, opened through a `DescriptorCache`, that the
    flusher's worker thread may sync while a round holds it.

    `close` is deferred while a flush round holds the descriptor, so a roll,
    truncation or deletion never closes an fd under an in-flight fsync. See the
    module docstring for which thread may use what."""

    __slots__ = ("path", "device", "_flags", "_mode", "_cache", "_fd", "_holds", "_pins",
                 "_close_requested")  # fmt: skip

    def __init__(self, path: Path, flags: int, cache: DescriptorCache, mode: int = 0o644) -> None:
        self.path = path
        self._flags = flags
        self._mode = mode
        self._cache = cache
        self._holds = 0
        self._pins = 0
        self._close_requested = False
        with cache._lock:
            self._fd = cache._open(path, flags, mode)
            try:
                self.device = os.fstat(self._fd).st_dev  # which filesystem a syncfs must cover
            except OSError:
                self._close_descriptor()
                raise
            cache._make_evictable(self)

    @classmethod
    def open(
        cls, path: Path, flags: int, cache: DescriptorCache | None = None, mode: int = 0o644
    ) -> SyncedFile:
        return cls(path, flags, shared_log_files() if cache is None else cache, mode)

    def __repr__(self) -> str:
        state = "closed" if self._close_requested else f"fd {self._fd}"
        return f"SyncedFile({self.path.name}, {state}, holds {self._holds}, pins {self._pins})"

    @property
    def fd(self) -> int:
        """The descriptor, reopened if the cache closed it; marks it recently used."""
        if self._holds or self._pins:  # open, and not in the LRU order
            return self._fd
        with self._cache._lock:
            if self._holds or self._pins:
                return self._fd
            if self._close_requested:
                raise OSError(errno.EBADF, "log file is closed", str(self.path))
            if self._fd < 0:
                self._reopen()
                self._cache._make_evictable(self)
            else:
                self._cache._touch(self)
            return self._fd

    @property
    def closed(self) -> bool:
        """Closed by its owner (a file the cache closed is only evicted: see `is_open`)."""
        return self._close_requested

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    @property
    def pinned(self) -> bool:
        return self._pins > 0

    def _reopen(self) -> None:
        self._fd = self._cache._open(self.path, self._flags & ~_CREATION_FLAGS, self._mode)

    def _close_descriptor(self) -> None:
        os.close(self._fd)
        self._fd = -1
        self._cache._closed()

    def _ensure_open(self) -> None:
        """Reopen an evicted file and take it out of the LRU order."""
        if self._fd < 0:
            self._reopen()
        else:
            self._cache._make_unevictable(self)

    def _settle(self) -> None:
        """Back in the LRU order once neither held nor pinned."""
        if self._holds == 0 and self._pins == 0 and self._fd >= 0:
            if self._close_requested:
                self._close_descriptor()
            else:
                self._cache._make_evictable(self)

    def hold(self) -> None:
        """A flush round uses the descriptor (reopened if it was evicted)."""
        with self._cache._lock:
            assert not self._close_requested, f"{self.path} is closed"
            if self._holds == 0 and self._pins == 0:
                self._ensure_open()
            self._holds += 1

    def try_hold(self) -> bool:
        """`hold`, unless its owner closed it meanwhile (then False, nothing held)."""
        with self._cache._lock:
            if self._close_requested:
                return False
            if self._holds == 0 and self._pins == 0:
                self._ensure_open()
            self._holds += 1
            return True

    def release(self) -> None:
        with self._cache._lock:
            assert self._holds > 0
            self._holds -= 1
            self._settle()

    def pin(self) -> None:
        """Keep the descriptor open until `unpin` (reopened if it was evicted)."""
        with self._cache._lock:
            assert not self._close_requested, f"{self.path} is closed"
            if self._holds == 0 and self._pins == 0:
                self._ensure_open()
            self._pins += 1

    def unpin(self) -> None:
        with self._cache._lock:
            if self._close_requested:
                return
            assert self._pins > 0, self
            self._pins -= 1
            self._settle()

    def close(self) -> None:
        with self._cache._lock:
            if self._close_requested:
                return
            self._close_requested = True
            self._pins = 0
            self._cache._make_unevictable(self)
            if self._holds == 0 and self._fd >= 0:
                self._close_descriptor()
