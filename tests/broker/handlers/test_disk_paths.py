"""Handlers decide at once and leave the disk to the disk executor: their answers
are Deferreds, topic changes run one at a time and are checked again when their
turn comes, and a cold Fetch is served after its records are read in off the loop."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.handlers.admin_topics import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from weir.broker.handlers.fetch import handle_fetch
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.log.disk_executor import DiskJob
from weir.wire.protocol import ApiKey

from ..handler_calls import begin, call

NOW_MS = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    yield broker
    broker.close()


def create_body(name: str, partitions: int = 3) -> dict[str, Any]:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": 1,
             "assignments": [], "configs": []}  # fmt: skip
    return {"topics": [topic], "timeout_ms": 30_000, "validate_only": False}


def delete_body(name: str) -> dict[str, Any]:
    return {"topic_names": [name], "timeout_ms": 30_000}


def grow_body(name: str, count: int) -> dict[str, Any]:
    return {"topics": [{"name": name, "count": count, "assignments": None}],
            "timeout_ms": 30_000, "validate_only": False}  # fmt: skip


async def begin_create(broker: Broker, name: str, partitions: int = 3) -> Any:
    deferred, finish = await begin(
        broker, handle_create_topics, ApiKey.CREATE_TOPICS, 7, create_body(name, partitions)
    )
    return deferred, finish


async def begin_delete(broker: Broker, name: str) -> Any:
    return await begin(broker, handle_delete_topics, ApiKey.DELETE_TOPICS, 5, delete_body(name))


async def finish_together(*finishers: Any) -> list[Any]:
    results: list[Any] = [None] * len(finishers)

    async def run(index: int) -> None:
        results[index] = await finishers[index]()

    async with trio.open_nursery() as nursery:
        for index in range(len(finishers)):
            nursery.start_soon(run, index)
    return results


def partition_dirs(broker: Broker, name: str) -> list[str]:
    return sorted(p.name for p in broker.config.data_dir.iterdir() if p.name.startswith(f"{name}-"))


async def test_create_topics_is_decided_at_once_and_made_on_worker_threads(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: set[int] = set()
    build_log = broker.log_manager.build_log
    save = broker.controller.save

    def recording_build_log(*args: Any) -> Any:
        threads.add(threading.get_ident())
        return build_log(*args)

    def recording_save(*args: Any) -> None:
        threads.add(threading.get_ident())
        save(*args)

    monkeypatch.setattr(broker.log_manager, "build_log", recording_build_log)
    monkeypatch.setattr(broker.controller, "save", recording_save)
    deferred, finish = await begin_create(broker, "t", 3)
    assert deferred
    assert broker.controller.topic("t") is None and partition_dirs(broker, "t") == []
    response = await finish()
    assert response.topics[0].error_code == ErrorCode.NONE
    assert partition_dirs(broker, "t") == ["t-0", "t-1", "t-2"]
    assert broker.partition("t", 2) is not None
    assert threads and threading.get_ident() not in threads
    assert broker.disk.jobs_count[DiskJob.PARTITIONS_CREATE] == 1
    assert broker.disk.jobs_count[DiskJob.METADATA_SAVE] == 1


async def test_two_creates_of_one_name_in_flight_make_it_once(broker: Broker) -> None:
    _, first = await begin_create(broker, "t", 3)
    _, second = await begin_create(broker, "t", 5)
    answers = await finish_together(first, second)
    codes = sorted(a.topics[0].error_code for a in answers)
    assert codes == [ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS]
    record = broker.controller.topic("t")
    assert record is not None and record.partition_count in (3, 5)
    winner = next(a.topics[0] for a in answers if a.topics[0].error_code == ErrorCode.NONE)
    assert winner.num_partitions == record.partition_count
    # The loser touched nothing of the winner's.
    assert partition_dirs(broker, "t") == [f"t-{i}" for i in range(record.partition_count)]


async def test_a_delete_before_the_create_commits_finds_no_topic(broker: Broker) -> None:
    _, create = await begin_create(broker, "t")
    deferred, delete = await begin_delete(broker, "t")
    assert not deferred  # answered at once: the topic does not exist yet
    assert (await delete()).responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (await create()).topics[0].error_code == ErrorCode.NONE
    assert broker.controller.topic("t") is not None


async def test_a_create_while_the_delete_is_in_flight_finds_the_topic(broker: Broker) -> None:
    await call(broker, handle_create_topics, ApiKey.CREATE_TOPICS, 7, create_body("t"))
    _, delete = await begin_delete(broker, "t")
    deferred, create = await begin_create(broker, "t")
    assert not deferred
    assert (await create()).topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert (await delete()).responses[0].error_code == ErrorCode.NONE
    assert partition_dirs(broker, "t") == [] and broker.controller.topic("t") is None
    response = await call(broker, handle_create_topics, ApiKey.CREATE_TOPICS, 7, create_body("t"))
    assert response.topics[0].error_code == ErrorCode.NONE


async def test_two_deletes_in_flight_delete_once(broker: Broker) -> None:
    await call(broker, handle_create_topics, ApiKey.CREATE_TOPICS, 7, create_body("t"))
    _, first = await begin_delete(broker, "t")
    _, second = await begin_delete(broker, "t")
    answers = await finish_together(first, second)
    codes = sorted(a.responses[0].error_code for a in answers)
    assert codes == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert partition_dirs(broker, "t") == [] and not broker.controller.deleting_topic_ids


async def test_two_partition_increases_in_flight_apply_once(broker: Broker) -> None:
    await call(broker, handle_create_topics, ApiKey.CREATE_TOPICS, 7, create_body("t", 2))
    _, first = await begin(broker, handle_create_partitions, ApiKey.CREATE_PARTITIONS, 3,
                           grow_body("t", 4))  # fmt: skip
    _, second = await begin(broker, handle_create_partitions, ApiKey.CREATE_PARTITIONS, 3,
                            grow_body("t", 4))  # fmt: skip
    answers = await finish_together(first, second)
    codes = sorted(a.results[0].error_code for a in answers)
    assert codes == [ErrorCode.NONE, ErrorCode.INVALID_PARTITIONS]
    assert partition_dirs(broker, "t") == ["t-0", "t-1", "t-2", "t-3"]


def fetch_body(offset: int) -> dict[str, Any]:
    partition = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "partitions": [partition]}], "forgotten_topics_data": [],
            "rack_id": ""}  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="needs RWF_NOWAIT")
async def test_a_cold_fetch_is_deferred_and_served_after_a_warm_up_off_the_loop(
    broker: Broker,
) -> None:
    broker.create_topic(broker.controller.plan_topic("t", 1, 1))
    replica = broker.partition("t", 0)
    assert replica is not None
    for _ in range(32):
        batch = build_batch([(b"k", b"v" * 1000, [])] * 16, timestamp_ms=NOW_MS)
        replica.log.append(batch, leader_epoch=0, now_ms=NOW_MS)
    replica.log.flush()
    warm_answer = await call(broker, handle_fetch, ApiKey.FETCH, 12, fetch_body(0))
    expected = bytes(warm_answer.responses[0].partitions[0].records)
    assert broker.disk.jobs_count[DiskJob.COLD_READ] == 0  # served from the page cache
    for segment in replica.log.segments:
        os.posix_fadvise(segment.log_file.fd, 0, 0, os.POSIX_FADV_DONTNEED)
    deferred, finish = await begin(broker, handle_fetch, ApiKey.FETCH, 12, fetch_body(0))
    assert deferred
    answer = await finish()
    assert bytes(answer.responses[0].partitions[0].records) == expected
    assert broker.disk.jobs_count[DiskJob.COLD_READ] == 1
    assert broker.metrics.cold_read_bytes_total > 0 and broker.metrics.cold_reads_on_loop_total == 0
