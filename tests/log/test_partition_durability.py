"""Group commit: appends are durable only after an fsync round covers them."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from weir.format.errors import ErrorCode
from weir.log.config import LogConfig
from weir.log.errors import LogClosed, LogError, LogTruncated
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]


class SlowSync:
    """fdatasync that counts calls and, on the worker thread, can be held: a round
    in flight stays in flight until the test sets `release`."""

    def __init__(self) -> None:
        self.calls = 0
        self.fds_in_flight: set[int] = set()
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()  # a worker-thread round is syncing (or held)
        self.synced = threading.Event()  # at least one fdatasync returned

    def __call__(self, fd: int) -> None:
        self.fds_in_flight.add(fd)
        try:
            if threading.current_thread() is not threading.main_thread():
                self.entered.set()
                self.release.wait(5)  # only rounds on the worker thread are held
            os.fstat(fd)  # EBADF if someone closed it under us
            os.fdatasync(fd)
            self.calls += 1
            self.synced.set()
        finally:
            self.fds_in_flight.discard(fd)

    async def wait_entered(self) -> None:
        """Until a round is on the worker thread (holding its files)."""
        assert await trio.to_thread.run_sync(self.entered.wait, 5), "no round started"

    async def wait_synced(self) -> None:
        assert await trio.to_thread.run_sync(self.synced.wait, 5), "nothing was synced"


def open_partition(
    tmp_path: Path, flusher: GroupFlusher, name: str = "t-0", **configs: str
) -> PartitionLog:
    return PartitionLog.open(tmp_path / name, LogConfig.from_overrides(configs), flusher)


async def test_wait_durable_returns_after_fsync(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    sync = SlowSync()
    flusher = GroupFlusher(sync_file=sync)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher)
    log.append(batch(3), leader_epoch=0, now_ms=now_ms)
    assert log.durable_end_offset == 0
    await log.wait_durable(3)
    assert log.durable_end_offset == 3
    assert sync.calls >= 1


async def test_durable_end_advances_only_after_fsync_returns(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    sync = SlowSync()
    sync.release.clear()
    flusher = GroupFlusher(sync_file=sync)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher)
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    done = trio.Event()

    async def waiter() -> None:
        await log.wait_durable(1)
        done.set()

    nursery.start_soon(waiter)
    await sync.wait_entered()
    await trio.testing.wait_all_tasks_blocked()
    assert not done.is_set() and log.durable_end_offset == 0
    sync.release.set()
    with trio.fail_after(5):
        await done.wait()
    assert log.durable_end_offset == 1


async def test_group_commit_serves_many_waiters_with_few_fsyncs(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    sync = SlowSync()
    sync.release.clear()
    flusher = GroupFlusher(sync_file=sync)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher)
    producers = 100

    async def produce() -> None:
        result = log.append(batch(1), leader_epoch=0, now_ms=now_ms)
        await log.wait_durable(result.last_offset + 1)

    with trio.fail_after(10):
        async with trio.open_nursery() as inner:
            inner.start_soon(produce)
            await sync.wait_entered()  # the first round holds the first append
            for _ in range(producers - 1):
                inner.start_soon(produce)
            await trio.testing.wait_all_tasks_blocked()  # every append waits on a round
            sync.release.set()
    assert log.durable_end_offset == producers
    # 99 appends arrived during one fsync: a handful of rounds, not 100.
    assert flusher.rounds_count < producers / 4, flusher.rounds_count
    assert sync.calls < producers / 4


async def test_one_round_syncs_every_dirty_partition(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    sync = SlowSync()
    flusher = GroupFlusher(sync_file=sync)
    logs = [open_partition(tmp_path, flusher, f"t-{i}") for i in range(5)]
    await nursery.start(flusher.run)
    for log in logs:
        log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    async with trio.open_nursery() as inner:
        for log in logs:
            inner.start_soon(log.wait_durable, 1)
    assert flusher.rounds_count == 1
    assert sync.calls == 5


async def test_roll_and_delete_never_close_an_fd_under_fsync(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    sync = SlowSync()
    sync.release.clear()
    flusher = GroupFlusher(sync_file=sync)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher, **{"segment.bytes": "1024", "retention.bytes": "0"})
    log.append(batch(1, value_bytes=600), leader_epoch=0, now_ms=now_ms)
    nursery.start_soon(log.wait_durable, 1)
    await sync.wait_entered()  # the round now holds segment 0's fd
    first_fd = log.segments[0].log_file.fd
    assert first_fd in sync.fds_in_flight
    log.append(batch(1, value_bytes=600), leader_epoch=0, now_ms=now_ms)  # rolls
    assert len(log.segments) == 2
    log.truncate_to(1)  # deletes segment 1, syncs synchronously on this thread
    sync.release.set()
    with trio.fail_after(5):
        await log.wait_durable(1)
    assert log.segments[0].log_file.fd == first_fd


async def test_fsync_failure_takes_partition_offline(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    def failing_sync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    flusher = GroupFlusher(sync_file=failing_sync)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher)
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    with pytest.raises(LogError) as raised:
        await log.wait_durable(1)
    assert raised.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(LogError):
        log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    assert log.durable_end_offset == 0


async def test_close_flushes_and_releases_waiters(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    flusher = GroupFlusher()  # not running: only close can sync
    log = open_partition(tmp_path, flusher)
    log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    outcome: list[object] = []

    async def wait(offset: int) -> None:
        try:
            await log.wait_durable(offset)
            outcome.append(offset)
        except LogClosed as exc:
            outcome.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, 2)
        await trio.testing.wait_all_tasks_blocked()  # the waiter is parked
        log.close()
    assert outcome == [2]
    assert log.durable_end_offset == 2
    with pytest.raises(LogClosed):
        await log.wait_durable(3)


async def test_truncation_fails_waiters_beyond_the_new_end(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    flusher = GroupFlusher()  # not running
    log = open_partition(tmp_path, flusher)
    log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    errors: list[BaseException] = []

    async def wait() -> None:
        try:
            await log.wait_durable(4)
        except LogTruncated as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()  # the waiter is parked
        log.truncate_to(2)
    assert len(errors) == 1
    assert log.durable_end_offset == log.log_end_offset == 2


async def test_relaxed_mode_acknowledges_without_waiting_but_still_syncs(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    sync = SlowSync()
    flusher = GroupFlusher(fsync_enabled=False, relaxed_interval_ms=10, sync_file=sync)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher)
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    with trio.fail_after(0.001):
        await log.wait_durable(1)
    await sync.wait_synced()  # a background round, 10 ms later
    assert sync.calls >= 1


async def test_sealed_segments_keep_only_their_log_file_open(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    flusher = GroupFlusher()
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher, **{"segment.bytes": "1024"})
    for _ in range(10):
        result = log.append(batch(1, value_bytes=400), leader_epoch=0, now_ms=now_ms)
        await log.wait_durable(result.last_offset + 1)
    *sealed, active = log.segments
    assert len(sealed) >= 3
    assert all(len(segment.files) == 1 for segment in sealed[:-1])
    assert len(active.files) == 3
    log.close()
    reopened = open_partition(tmp_path, flusher, **{"segment.bytes": "1024"})
    assert [len(segment.files) for segment in reopened.segments] == [1] * len(sealed) + [3]


async def test_a_busy_flusher_waits_the_group_commit_delay_between_rounds(
    tmp_path: Path,
    nursery: trio.Nursery,
    batch: MakeBatch,
    now_ms: int,
    mock_clock: trio.testing.MockClock,
) -> None:
    """Trio's clock only moves when the test jumps it: the delay is seen exactly."""
    sync = SlowSync()
    sync.release.clear()
    flusher = GroupFlusher(sync_file=sync, group_commit_delay_ms=50)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher)
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)
    nursery.start_soon(log.wait_durable, 1)
    await sync.wait_entered()  # round 1 holds the first append
    log.append(batch(1), leader_epoch=0, now_ms=now_ms)  # arrives during it: busy
    nursery.start_soon(log.wait_durable, 2)
    sync.release.set()
    await log.wait_durable(1)
    await trio.testing.wait_all_tasks_blocked()
    # The flusher sleeps the delay: its wake-up is the next deadline, 50 ms away.
    next_deadline_s = trio.lowlevel.current_statistics().seconds_to_next_deadline
    assert next_deadline_s == pytest.approx(0.05)
    mock_clock.jump(0.049)
    await trio.testing.wait_all_tasks_blocked()
    assert (flusher.rounds_count, log.durable_end_offset) == (1, 1)  # still waiting
    mock_clock.jump(0.002)
    await log.wait_durable(2)
    assert 2 <= flusher.rounds_count <= 10, flusher.rounds_count


@pytest.mark.timeout(20)  # a flusher that waited the delay would hang: the clock is frozen
async def test_an_idle_flusher_syncs_at_once_despite_the_group_commit_delay(
    tmp_path: Path,
    nursery: trio.Nursery,
    batch: MakeBatch,
    now_ms: int,
    mock_clock: trio.testing.MockClock,
) -> None:
    flusher = GroupFlusher(sync_file=SlowSync(), group_commit_delay_ms=5_000)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher)
    started_s = trio.current_time()
    for expected_end in (1, 2, 3):
        log.append(batch(1), leader_epoch=0, now_ms=now_ms)
        with trio.fail_after(2):  # far below the delay: no round waited for it
            await log.wait_durable(expected_end)
        await trio.testing.wait_all_tasks_blocked()  # idle again before the next append
        # Not sleeping a delay: nothing in Trio waits on the clock.
        assert trio.lowlevel.current_statistics().seconds_to_next_deadline == float("inf")
    assert trio.current_time() == started_s
