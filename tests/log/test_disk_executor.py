"""The disk executor runs file work on bounded worker threads, never on the caller's."""

from __future__ import annotations

import threading

import pytest
import trio

from weir.log.disk_executor import DiskExecutor, DiskJob


async def test_runs_work_on_a_worker_thread_and_returns_its_result() -> None:
    executor = DiskExecutor()
    loop_thread = threading.get_ident()
    ran_on = await executor.run(DiskJob.METADATA_SAVE, threading.get_ident)
    assert ran_on != loop_thread
    assert executor.jobs_count[DiskJob.METADATA_SAVE] == 1
    assert executor.running_count == 0


async def test_the_work_s_exception_reaches_the_caller() -> None:
    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        await DiskExecutor().run(DiskJob.PARTITIONS_CREATE, full_disk)


async def test_runs_at_most_threads_max_jobs_at_once() -> None:
    executor = DiskExecutor(threads_max=2)
    lock = threading.Lock()
    running = {"now": 0, "most": 0}
    release = threading.Event()

    def job() -> None:
        with lock:
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
        release.wait(5)
        with lock:
            running["now"] -= 1

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(executor.run, DiskJob.COLD_READ, job)
        await trio.sleep(0.2)
        assert executor.running_count == 5  # queued ones count as running
        release.set()
    assert running["most"] == 2


async def test_a_cancelled_caller_still_waits_for_its_job_to_end() -> None:
    """The Trio thread must learn how a file change ended before it moves on."""
    executor = DiskExecutor()
    finished = threading.Event()

    def slow() -> None:
        threading.Event().wait(0.2)
        finished.set()

    with trio.move_on_after(0.01):
        await executor.run(DiskJob.PARTITIONS_REMOVE, slow)
    assert finished.is_set()
