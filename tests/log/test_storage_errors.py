"""A partition log on a disk that fails (full, read-only, I/O errors): a failed
write or fsync takes it offline once, tells its owner, and nothing it holds
becomes durable after that. The system calls are made to fail here; the broker's
reaction in a cluster is proven against real processes in
compat_tests/test_cluster_disk_failure.py."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from weir.format.errors import ErrorCode
from weir.log import segment as segment_module
from weir.log.config import LogConfig
from weir.log.errors import LogError
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]


class FailingWrites:
    """The `os` module as the segment module sees it, whose `write` fails with
    `error_number` while that is set."""

    def __init__(self) -> None:
        self.error_number: int | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if self.error_number is not None:
            raise OSError(self.error_number, os.strerror(self.error_number))
        return os.write(fd, data)


@pytest.fixture
def failing_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[FailingWrites]:
    writes = FailingWrites()
    monkeypatch.setattr(segment_module, "os", writes)
    yield writes


class FailingSyncs:
    """fdatasync that fails with EIO while `failing` is set."""

    def __init__(self) -> None:
        self.failing = False

    def __call__(self, fd: int) -> None:
        if self.failing:
            raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)


def open_log(tmp_path: Path, flusher: GroupFlusher) -> tuple[PartitionLog, list[OSError]]:
    partition_log = PartitionLog.open(tmp_path / "t-0", LogConfig.from_overrides({}), flusher)
    failures: list[OSError] = []
    partition_log.on_failure = failures.append
    return partition_log, failures


@pytest.mark.parametrize("error_number", [errno.ENOSPC, errno.EROFS, errno.EIO, errno.EDQUOT])
def test_a_failed_write_takes_the_log_offline_once_and_tells_its_owner(
    tmp_path: Path,
    flusher: GroupFlusher,
    failing_writes: FailingWrites,
    batch: MakeBatch,
    now_ms: int,
    error_number: int,
) -> None:
    partition_log, failures = open_log(tmp_path, flusher)
    partition_log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    failing_writes.error_number = error_number
    with pytest.raises(LogError) as refused:
        partition_log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert partition_log.offline and partition_log.log_end_offset == 2
    failing_writes.error_number = None  # the disk has room again: still offline
    with pytest.raises(LogError):
        partition_log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    assert [f.errno for f in failures] == [error_number]


def test_a_write_refused_for_the_process_limits_keeps_the_log_writable(
    tmp_path: Path,
    flusher: GroupFlusher,
    failing_writes: FailingWrites,
    batch: MakeBatch,
    now_ms: int,
) -> None:
    partition_log, failures = open_log(tmp_path, flusher)
    failing_writes.error_number = errno.EMFILE
    with pytest.raises(LogError):
        partition_log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    failing_writes.error_number = None
    assert partition_log.append(batch(1), leader_epoch=0, now_ms=now_ms).base_offset == 0
    assert not partition_log.offline and failures == []


async def test_nothing_becomes_durable_after_a_failed_fsync(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    """fsyncgate: after a failed fsync the kernel may have dropped the dirty pages,
    so a later fsync that succeeds proves nothing about them."""
    syncs = FailingSyncs()
    syncs.failing = True
    flusher = GroupFlusher(sync_file=syncs)
    await nursery.start(flusher.run)
    partition_log, failures = open_log(tmp_path, flusher)
    partition_log.append(batch(3), leader_epoch=0, now_ms=now_ms)
    with pytest.raises(LogError):
        await partition_log.wait_durable(3)
    syncs.failing = False
    partition_log.flush()
    assert partition_log.durable_end_offset == 0
    assert partition_log.offline and len(failures) == 1


def test_a_truncation_on_a_failing_disk_is_a_storage_error(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    """A follower truncating to its leader on a failing disk: LogError (which the
    fetcher handles), not a bare OSError out of the replica fetcher."""
    syncs = FailingSyncs()
    partition_log, failures = open_log(tmp_path, GroupFlusher(sync_file=syncs))
    for _ in range(3):
        partition_log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    partition_log.flush()
    syncs.failing = True
    with pytest.raises(LogError) as refused:
        partition_log.truncate_to(1)
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert partition_log.offline and len(failures) == 1


def test_a_new_leader_epoch_that_cannot_be_recorded_is_a_storage_error(
    tmp_path: Path, flusher: GroupFlusher, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition_log, failures = open_log(tmp_path, flusher)

    def full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(partition_log.epoch_cache, "flush", full)
    with pytest.raises(LogError) as refused:
        partition_log.begin_leader_epoch(3)
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert partition_log.offline and len(failures) == 1
