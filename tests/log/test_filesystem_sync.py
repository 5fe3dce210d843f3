"""The syncfs fsync method: one syncfs per round on the data directory's
filesystem, errors failing every partition it covered, safe-kernel detection."""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from weir.broker.broker import build_flusher
from weir.broker.config import BrokerConfig, ConfigError, load_config
from weir.format.errors import ErrorCode
from weir.log import filesystem_sync
from weir.log.config import LogConfig
from weir.log.errors import LogError
from weir.log.filesystem_sync import (
    HELPER_SOURCE,
    FilesystemWatch,
    FsyncMethodUnavailableError,
    SyncfsHelper,
    kernel_release_at_least,
    load_syncfs,
    resolve_fsync_method,
)
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]
SAFE_HERE = kernel_release_at_least(platform.release(), (5, 8)) and load_syncfs() is not None


class RecordingSyncfs:
    """Stands in for libc's syncfs: counts calls, then really syncs (or fails)."""

    def __init__(self, error: OSError | None = None) -> None:
        self.calls = 0
        self.error = error

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.error is not None:
            raise self.error
        os.fsync(fd)


def failing_fdatasync(fd: int) -> None:
    raise AssertionError("fdatasync was called for a file the syncfs covers")


@contextlib.contextmanager
def started_helper(tmp_path: Path, source: str = HELPER_SOURCE) -> Iterator[SyncfsHelper]:
    """A running helper for `tmp_path`'s filesystem, closed on the way out."""
    helper = SyncfsHelper(FilesystemWatch(tmp_path, failing_fdatasync), source=source)
    helper.start()
    try:
        yield helper
    finally:
        helper.close()


def open_partition(tmp_path: Path, flusher: GroupFlusher, name: str) -> PartitionLog:
    return PartitionLog.open(tmp_path / name, LogConfig.from_overrides({}), flusher)


async def test_one_syncfs_makes_every_partition_of_a_round_durable(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    syncfs = RecordingSyncfs()
    flusher = GroupFlusher(
        sync_file=failing_fdatasync, filesystem=FilesystemWatch(tmp_path, syncfs)
    )
    logs = [open_partition(tmp_path, flusher, f"t-{i}") for i in range(5)]
    await nursery.start(flusher.run)
    calls_after_open = syncfs.calls
    for log in logs:
        log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    with trio.fail_after(5):
        async with trio.open_nursery() as inner:
            for log in logs:
                inner.start_soon(log.wait_durable, 2)
    assert [log.durable_end_offset for log in logs] == [2] * 5
    assert syncfs.calls - calls_after_open == 1
    assert flusher.filesystem_syncs_count >= 1


async def test_a_file_on_another_filesystem_is_still_fdatasynced(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    fdatasynced: list[int] = []

    def fdatasync(fd: int) -> None:
        fdatasynced.append(fd)
        os.fdatasync(fd)

    syncfs = RecordingSyncfs()
    flusher = GroupFlusher(sync_file=fdatasync, filesystem=FilesystemWatch(tmp_path, syncfs))
    log = open_partition(tmp_path, flusher, "t-0")
    await nursery.start(flusher.run)
    active = log.segments[-1].log_file
    active.device = -1  # as if the partition directory were a mount of its own
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    with trio.fail_after(5):
        await log.wait_durable(1)
    assert active.fd in fdatasynced
    assert log.durable_end_offset == 1


async def test_a_failed_syncfs_takes_every_partition_it_covered_offline(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    syncfs = RecordingSyncfs()
    flusher = GroupFlusher(filesystem=FilesystemWatch(tmp_path, syncfs))
    logs = [open_partition(tmp_path, flusher, f"t-{i}") for i in range(3)]
    await nursery.start(flusher.run)
    syncfs.error = OSError(errno.EIO, "syncfs: Input/output error")
    for log in logs:
        log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    for log in logs:
        with pytest.raises(LogError) as raised:
            with trio.fail_after(5):
                await log.wait_durable(1)
        assert raised.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert log.durable_end_offset == 0
        with pytest.raises(LogError):
            log.append(batch(1), leader_epoch=0, now_ms=now_ms)


@pytest.mark.skipif(not SAFE_HERE, reason="needs Linux 5.8+ with syncfs in libc")
async def test_real_syncfs_round_completes(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    syncfs = load_syncfs()
    assert syncfs is not None
    flusher = GroupFlusher(
        sync_file=failing_fdatasync, filesystem=FilesystemWatch(tmp_path, syncfs)
    )
    log = open_partition(tmp_path, flusher, "t-0")
    await nursery.start(flusher.run)
    log.append(batch(3), leader_epoch=0, now_ms=now_ms)
    with trio.fail_after(5):
        await log.wait_durable(3)
    assert log.durable_end_offset == 3


@pytest.mark.skipif(load_syncfs() is None, reason="no syncfs in this libc")
def test_syncfs_reports_a_failure_as_oserror() -> None:
    syncfs = load_syncfs()
    assert syncfs is not None
    with pytest.raises(OSError) as raised:
        syncfs(-1)
    assert raised.value.errno == errno.EBADF


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        ("5.8.0", True),
        ("5.10.0-28-amd64", True),
        ("6.18.44", True),
        ("5.7.19", False),
        ("4.19.0-rc1", False),
        ("garbage", False),
    ],
)
def test_kernel_release_parsing(release: str, expected: bool) -> None:
    assert kernel_release_at_least(release, (5, 8)) is expected


def test_auto_falls_back_to_fdatasync_on_a_kernel_whose_syncfs_hides_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(filesystem_sync.platform, "release", lambda: "5.4.0-150-generic")
    assert resolve_fsync_method("auto") == "fdatasync"
    with pytest.raises(FsyncMethodUnavailableError):
        resolve_fsync_method("syncfs")
    with pytest.raises(ConfigError, match="fsync_method: syncfs needs Linux 5.8"):
        config_file_with(tmp_path, 'fsync_method = "syncfs"')


def config_file_with(directory: Path, line: str) -> BrokerConfig:
    path = directory / f"weir-test-{os.getpid()}.toml"
    path.write_text(line + "\n")
    try:
        return load_config(["--config", str(path)], {})
    finally:
        path.unlink()


def test_unknown_fsync_method_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="fsync_method: expected one of auto, syncfs, fdatasync"):
        config_file_with(tmp_path, 'fsync_method = "O_DIRECT"')


def test_fsync_method_is_read_from_the_config_file(tmp_path: Path) -> None:
    assert config_file_with(tmp_path, 'fsync_method = "fdatasync"').fsync_method == "fdatasync"


def test_fdatasync_method_is_always_available() -> None:
    assert resolve_fsync_method("fdatasync") == "fdatasync"


@pytest.mark.skipif(not SAFE_HERE, reason="needs Linux 5.8+ with syncfs in libc")
def test_broker_uses_syncfs_by_default_where_it_is_safe(tmp_path: Path) -> None:
    flusher = build_flusher(BrokerConfig(data_dir=tmp_path))
    try:
        assert flusher.filesystem is not None
        assert flusher.method == "syncfs"
        assert flusher.filesystem.device == os.stat(tmp_path).st_dev
    finally:
        flusher.close()


def test_broker_uses_fdatasync_when_configured(tmp_path: Path) -> None:
    flusher = build_flusher(BrokerConfig(data_dir=tmp_path, fsync_method="fdatasync"))
    assert flusher.filesystem is None
    assert flusher.method == "fdatasync"


@pytest.mark.skipif(not SAFE_HERE, reason="needs Linux 5.8+ with syncfs in libc")
async def test_helper_process_makes_every_partition_durable_without_the_thread(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    syncfs = RecordingSyncfs()  # the thread path's syncfs: must stay unused
    watch = FilesystemWatch(tmp_path, syncfs)
    flusher = GroupFlusher(
        sync_file=failing_fdatasync, filesystem=watch, syncfs_helper=SyncfsHelper(watch)
    )
    logs = [open_partition(tmp_path, flusher, f"t-{i}") for i in range(3)]
    await nursery.start(flusher.run)
    calls_after_open = syncfs.calls  # opening new directories used the thread
    for _ in range(3):
        for log in logs:
            log.append(batch(1), leader_epoch=0, now_ms=now_ms)
        with trio.fail_after(10):
            for log in logs:
                await log.wait_durable(log.log_end_offset)
    assert syncfs.calls == calls_after_open
    assert flusher.filesystem_syncs_count >= 3


async def test_helper_reports_the_errno_its_syncfs_failed_with(tmp_path: Path) -> None:
    failing_child = HELPER_SOURCE.replace(
        "failed = libc.syncfs(watch_fd) != 0", "failed = True; ctypes.set_errno(5)"
    )
    assert failing_child != HELPER_SOURCE
    with started_helper(tmp_path, source=failing_child) as helper:
        with pytest.raises(OSError) as raised, trio.fail_after(10):
            await helper.sync()
        assert raised.value.errno == errno.EIO


@pytest.mark.skipif(not SAFE_HERE, reason="needs Linux 5.8+ with syncfs in libc")
async def test_a_killed_helper_is_replaced_and_the_round_synced_again(tmp_path: Path) -> None:
    with started_helper(tmp_path) as helper, trio.fail_after(10):
        await helper.sync()
        first_pid = helper.pid
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)
        # Until it has died (WNOWAIT: left for the helper to reap).
        await trio.to_thread.run_sync(os.waitid, os.P_PID, first_pid, os.WEXITED | os.WNOWAIT)
        await helper.sync()
        assert helper.pid != first_pid
        assert helper.starts_count == 2


@pytest.mark.skipif(not SAFE_HERE, reason="needs Linux 5.8+ with syncfs in libc")
async def test_closing_the_helper_ends_its_process(tmp_path: Path) -> None:
    with started_helper(tmp_path) as helper:
        pid = helper.pid
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # exited and reaped
