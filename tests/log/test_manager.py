"""LogManager: partition directories under the data dir."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from weir.log.config import LogConfig
from weir.log.disk_executor import DiskExecutor, DiskJob
from weir.log.errors import LogClosed
from weir.log.flusher import GroupFlusher
from weir.log.manager import LogManager, parse_partition_directory_name
from weir.log.partition_base import DURABLE_OFFSET_CHECKPOINT_FILE_NAME
from weir.log.partition_metadata import read_partition_metadata
from weir.log.partition_recovery import read_single_checkpoint
from weir.log.settings import LogSettings

from .conftest import new_partition

MakeBatch = Callable[..., bytes]


def test_parses_partition_directory_names() -> None:
    assert parse_partition_directory_name("orders-3") == ("orders", 3)
    assert parse_partition_directory_name("my-topic-12") == ("my-topic", 12)
    assert parse_partition_directory_name("orders-3.abc.deleted") is None
    assert parse_partition_directory_name("cluster-metadata.json") is None
    assert parse_partition_directory_name("-1") is None


def test_creates_opens_and_reopens_partitions(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    manager = LogManager(tmp_path, GroupFlusher())
    orders = new_partition(manager, "orders", 0)
    identity = read_partition_metadata(orders.directory)
    assert identity is not None
    assert manager.open_existing("orders", 0, LogConfig(), identity) is orders
    new_partition(manager, "my-topic", 1).append(batch(3), leader_epoch=0, now_ms=now_ms)
    assert (tmp_path / "orders-0").is_dir() and (tmp_path / "my-topic-1").is_dir()
    manager.close_all()
    assert len(manager) == 0

    reopened = LogManager(tmp_path, GroupFlusher())
    assert reopened.on_disk() == [("my-topic", 1), ("orders", 0)]
    for topic, index in reopened.on_disk():
        found = read_partition_metadata(reopened.directory_of(topic, index))
        assert found is not None
        reopened.open_existing(topic, index, LogConfig(), found)
    log = reopened.get("my-topic", 1)
    assert log is not None and log.log_end_offset == 3


async def test_delete_removes_directory_and_releases_waiters(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    manager = LogManager(tmp_path, GroupFlusher())  # flusher not running
    log = new_partition(manager, "orders", 0)
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    failures: list[BaseException] = []

    async def wait() -> None:
        try:
            await log.wait_durable(1)
        except LogClosed as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()  # the waiter is parked
        manager.delete("orders", 0)
    assert len(failures) == 1
    assert not any(name.startswith("orders-0") for name in os.listdir(tmp_path))
    assert manager.get("orders", 0) is None
    assert new_partition(manager, "orders", 0).log_end_offset == 0


async def test_deleting_one_partition_mid_round_does_not_fail_others(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    gate = threading.Event()
    round_started = threading.Event()

    def gated_sync(fd: int) -> None:
        if threading.current_thread() is not threading.main_thread():
            round_started.set()
            gate.wait(5)
        os.fdatasync(fd)

    flusher = GroupFlusher(sync_file=gated_sync)
    manager = LogManager(tmp_path, flusher)
    doomed = new_partition(manager, "a", 0)
    kept = new_partition(manager, "b", 0)
    await nursery.start(flusher.run)
    doomed.append(batch(1), leader_epoch=0, now_ms=now_ms)
    doomed.roll()  # the round will fsync a.0's directory too
    doomed.append(batch(1), leader_epoch=0, now_ms=now_ms)
    kept.append(batch(1), leader_epoch=0, now_ms=now_ms)
    # The round is in flight, holding both partitions' files.
    assert await trio.to_thread.run_sync(round_started.wait, 5)
    manager.delete("a", 0)
    gate.set()
    with trio.fail_after(5):
        await kept.wait_durable(1)
    assert kept.durable_end_offset == 1


def test_sweeps_interrupted_deletions(tmp_path: Path) -> None:
    leftover = tmp_path / "orders-0.1234.deleted"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"x")
    LogManager(tmp_path, GroupFlusher()).sweep_unknown({}, [])
    assert not leftover.exists()


def test_enforces_retention_on_every_partition(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    manager = LogManager(tmp_path, GroupFlusher())
    config = LogConfig.from_overrides({"segment.bytes": "1024", "retention.ms": "1000"})
    logs = [new_partition(manager, "t", i, config) for i in range(3)]
    for log in logs:
        for _ in range(5):
            log.append(batch(1, value_bytes=400), leader_epoch=0, now_ms=now_ms)
        log.flush()
    assert manager.enforce_retention(now_ms + 10_000) > 0
    assert all(log.log_start_offset == 5 for log in logs)


@pytest.mark.parametrize("name", ["t-0"])
async def test_run_retention_uses_the_clock(
    tmp_path: Path, name: str, batch: MakeBatch, now_ms: int
) -> None:
    manager = LogManager(tmp_path, GroupFlusher(), LogSettings(retention_check_interval_ms=10))
    log = new_partition(manager, "t", 0, LogConfig.from_overrides({"retention.ms": "1000"}))
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    log.flush()
    with trio.move_on_after(0.2):
        await manager.run_retention(clock_ms=lambda: now_ms + 5000)
    assert log.log_start_offset == 1
    assert (tmp_path / name).is_dir()


@pytest.mark.parametrize("topic", ["..", ".", "a/b", "", "x" * 250])
def test_refuses_topic_names_kafka_forbids(tmp_path: Path, topic: str) -> None:
    manager = LogManager(tmp_path, GroupFlusher())
    with pytest.raises(ValueError):
        new_partition(manager, topic, 0)


async def test_durable_offsets_are_written_by_one_disk_executor_job_for_the_logs_that_moved(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    manager = LogManager(tmp_path, GroupFlusher())
    moved, idle = new_partition(manager, "moved", 0), new_partition(manager, "idle", 0)
    moved.append(batch(3), leader_epoch=0, now_ms=now_ms)
    moved.flush()
    disk = DiskExecutor()

    await manager.write_durable_checkpoints(disk)
    assert disk.jobs_count[DiskJob.DURABLE_CHECKPOINTS] == 1
    assert read_single_checkpoint(moved.directory / DURABLE_OFFSET_CHECKPOINT_FILE_NAME, -1) == 3
    assert not (idle.directory / DURABLE_OFFSET_CHECKPOINT_FILE_NAME).exists()
    await manager.write_durable_checkpoints(disk)  # nothing moved since: no job
    assert disk.jobs_count[DiskJob.DURABLE_CHECKPOINTS] == 1
    manager.close_all()
