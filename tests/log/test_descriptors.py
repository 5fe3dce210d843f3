"""The descriptor cache: log files are open only while used, within a capacity."""

from __future__ import annotations

import errno
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from weir.log.descriptors import DescriptorCache, DescriptorsExhaustedError, SyncedFile

FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND


def open_files(tmp_path: Path, cache: DescriptorCache, count: int) -> list[SyncedFile]:
    files = []
    for i in range(count):
        synced = SyncedFile.open(tmp_path / f"f{i}", FLAGS, cache)
        os.write(synced.fd, f"file {i}".encode())
        files.append(synced)
    return files


def fd_is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_opening_past_capacity_evicts_the_least_recently_used_file(tmp_path: Path) -> None:
    cache = DescriptorCache(3)
    first, second, third = open_files(tmp_path, cache, 3)
    first.fd  # noqa: B018 - a use: `second` is now the least recently used
    fourth = SyncedFile.open(tmp_path / "f3", FLAGS, cache)
    assert not second.is_open
    assert first.is_open and third.is_open and fourth.is_open
    assert cache.open_count == 3
    assert cache.evictions_count == 1


def test_an_evicted_file_reopens_on_read(tmp_path: Path) -> None:
    cache = DescriptorCache(2)
    files = open_files(tmp_path, cache, 5)
    assert not files[0].is_open
    for i, synced in enumerate(files):
        assert os.pread(synced.fd, 100, 0) == f"file {i}".encode()
        assert cache.open_count <= 2


def test_a_held_file_is_never_closed_under_a_flush_round(tmp_path: Path) -> None:
    cache = DescriptorCache(2)
    held = SyncedFile.open(tmp_path / "held", FLAGS, cache)
    held.hold()
    fd = held.fd
    open_files(tmp_path, cache, 10)  # pressure: every other file is evicted in turn
    held.close()  # a roll or a deletion: deferred while the round holds it
    assert held.fd == fd and fd_is_open(fd)
    held.release()
    assert not fd_is_open(fd)
    assert cache.open_count == 1


def test_a_pinned_file_with_unsynced_writes_is_never_evicted(tmp_path: Path) -> None:
    cache = DescriptorCache(2)
    pinned = SyncedFile.open(tmp_path / "pinned", FLAGS, cache)
    pinned.pin()
    fd = pinned.fd
    open_files(tmp_path, cache, 10)
    assert pinned.fd == fd and fd_is_open(fd)
    pinned.unpin()
    SyncedFile.open(tmp_path / "next", FLAGS, cache)
    SyncedFile.open(tmp_path / "after", FLAGS, cache)
    assert not pinned.is_open


def test_a_full_cache_of_held_and_pinned_files_refuses_with_emfile(tmp_path: Path) -> None:
    cache = DescriptorCache(2)
    held, pinned = open_files(tmp_path, cache, 2)
    held.hold()
    pinned.pin()
    with pytest.raises(DescriptorsExhaustedError) as raised:
        SyncedFile.open(tmp_path / "one-too-many", FLAGS, cache)
    assert raised.value.errno == errno.EMFILE
    assert cache.open_count == 2


def test_reopening_never_recreates_an_unlinked_file(tmp_path: Path) -> None:
    cache = DescriptorCache(1)
    first = SyncedFile.open(tmp_path / "gone", FLAGS, cache)
    SyncedFile.open(tmp_path / "other", FLAGS, cache)
    os.unlink(tmp_path / "gone")
    with pytest.raises(FileNotFoundError):
        first.fd  # noqa: B018
    assert not (tmp_path / "gone").exists()


def test_shrinking_the_cache_closes_evictable_files(tmp_path: Path) -> None:
    cache = DescriptorCache(10)
    files = open_files(tmp_path, cache, 10)
    files[0].pin()
    cache.resize(4)
    assert cache.open_count == 4
    assert files[0].is_open and files[-1].is_open


def test_open_descriptors_never_exceed_the_capacity(tmp_path: Path) -> None:
    """Random opens, reads, holds, pins and closes: the count stays within the
    capacity, matches the descriptors really open, and held or pinned files stay open."""
    rng = random.Random(8)
    cache = DescriptorCache(5)
    files = open_files(tmp_path, cache, 5)
    held: list[SyncedFile] = []
    pinned: list[SyncedFile] = []
    for step in range(2000):
        action = rng.choice(["open", "read", "hold", "release", "pin", "unpin", "close"])
        live = [f for f in files if not f.closed]
        try:
            if action == "open":
                files.append(SyncedFile.open(tmp_path / f"g{step}", FLAGS, cache))
            elif action == "read" and live:
                os.pread(rng.choice(live).fd, 10, 0)
            elif action == "hold" and live and len(held) + len(pinned) < 4:
                synced = rng.choice(live)
                synced.hold()
                held.append(synced)
            elif action == "release" and held:
                held.pop(rng.randrange(len(held))).release()
            elif action == "pin" and live and len(held) + len(pinned) < 4:
                synced = rng.choice([f for f in live if f not in pinned] or live)
                if synced not in pinned:
                    synced.pin()
                    pinned.append(synced)
            elif action == "unpin" and pinned:
                pinned.pop(rng.randrange(len(pinned))).unpin()
            elif action == "close" and live:
                synced = rng.choice(live)
                synced.close()
                if synced in pinned:
                    pinned.remove(synced)
        except DescriptorsExhaustedError:
            assert cache.evictable_count == 0
        assert cache.open_count <= cache.capacity
        really_open = [f for f in files if f.is_open]
        assert cache.open_count == len(really_open)
        assert all(f.is_open and fd_is_open(f._fd) for f in held + pinned)


def test_threads_using_their_own_files_share_one_cache_safely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logs may be closed on worker threads at shutdown: each thread pins, holds
    and closes its own files while the others' opens evict from the same cache.
    Opening yields to the other threads, so unlocked checks would interleave."""
    cache = DescriptorCache(16)
    open_fds: set[int] = set()
    most_open = 0
    real_open, real_close = os.open, os.close

    def slow_open(path: Any, flags: int, mode: int = 0o777) -> int:
        nonlocal most_open
        fd = real_open(path, flags, mode)
        open_fds.add(fd)
        most_open = max(most_open, len(open_fds))
        # Not synchronisation: a real sleep that hands the GIL to another thread in
        # the middle of an open, the interleaving this test provokes.
        time.sleep(0.0002)
        return fd

    def counted_close(fd: int) -> None:
        open_fds.discard(fd)
        real_close(fd)

    monkeypatch.setattr(os, "open", slow_open)
    monkeypatch.setattr(os, "close", counted_close)
    errors: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            for step in range(40):
                synced = SyncedFile.open(tmp_path / f"t{thread}-{step}", FLAGS, cache)
                synced.pin()
                synced.hold()
                os.fsync(synced.fd)
                synced.unpin()
                synced.release()
                if step % 3 == 0:
                    synced.close()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert most_open <= cache.capacity
    assert cache.open_count == cache.evictable_count == len(open_fds) <= cache.capacity
