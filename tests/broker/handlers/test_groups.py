"""FindCoordinator, OffsetCommit and OffsetFetch through the handlers, on a real Broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import attach_group_service
from weir.broker.coordinators.offsets_topic import OFFSETS_TOPIC_NAME
from weir.broker.handlers.classic_groups import handle_join_group, handle_sync_group
from weir.broker.handlers.consumer_groups import (
    handle_consumer_group_describe,
    handle_consumer_group_heartbeat,
)
from weir.broker.handlers.find_coordinator import handle_find_coordinator
from weir.broker.handlers.group_offsets import handle_offset_commit, handle_offset_fetch
from weir.format.errors import ErrorCode
from weir.log.filesystem_sync import FilesystemWatch
from weir.wire.protocol import (
    ApiKey,
)

from ..handler_calls import call


def open_broker(data_dir: Path) -> Broker:
    broker = Broker(BrokerConfig(data_dir=data_dir, offsets_topic_partition_count=4))
    broker.open_logs()
    attach_group_service(broker)
    return broker


@pytest.fixture
async def fresh_broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    """No group request seen yet: no offsets topic."""
    broker = open_broker(tmp_path)
    await nursery.start(broker.flusher.run)
    broker.create_topic(broker.controller.plan_topic("t", 2, 1))
    yield broker
    broker.close()


@pytest.fixture
async def broker(fresh_broker: Broker) -> Broker:
    """Groups served: the offsets topic created and loaded."""
    await groups_ready(fresh_broker)
    return fresh_broker


def commit_body(
    group_id: str, *offsets: tuple[int, int], generation: int = -1, **extra: Any
) -> Any:
    return {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation,
        "member_id": "",
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_metadata": extra.get("metadata", ""),
                    }
                    for p, o in offsets
                ],
            }
        ],
    }


async def groups_ready(broker: Broker) -> None:
    """What the server's background task does after the first group request:
    create the offsets topic and load group state (until then groups are not
    available and clients retry)."""
    assert broker.groups is not None
    if not broker.groups.loaded:
        await broker.groups.prepare()


async def commit(broker: Broker, body: Any, version: int = 8) -> list[tuple[int, int]]:
    response = await call(broker, handle_offset_commit, ApiKey.OFFSET_COMMIT, version, body)
    return [(p.partition_index, p.error_code) for p in response.topics[0].partitions]


@pytest.mark.parametrize("version", range(0, 5))
async def test_first_find_coordinator_waits_for_the_offsets_topic_created_in_background(
    fresh_broker: Broker, version: int, nursery: trio.Nursery
) -> None:
    """As Kafka: the first FindCoordinator starts creating the offsets topic and
    answers COORDINATOR_NOT_AVAILABLE (clients retry) instead of waiting for it."""
    broker = fresh_broker
    assert broker.groups is not None
    broker.groups.background = nursery
    body = {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]}
    first = await call(broker, handle_find_coordinator, ApiKey.FIND_COORDINATOR, version, body)
    waiting = first.coordinators if version >= 4 else [first]
    assert {(c.error_code, c.node_id) for c in waiting} == {
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    }
    assert broker.controller.topic(OFFSETS_TOPIC_NAME) is None  # not created on the loop
    await broker.groups.loaded_event.wait()
    response = await call(broker, handle_find_coordinator, ApiKey.FIND_COORDINATOR, version, body)
    found = response.coordinators if version >= 4 else [response]
    assert {(c.error_code, c.node_id, c.port) for c in found} == {
        (ErrorCode.NONE, 1, broker.config.advertised.port)
    }
    topic = broker.controller.topic(OFFSETS_TOPIC_NAME)
    assert topic is not None and topic.is_internal and topic.partition_count == 4


async def test_find_coordinator_refuses_empty_keys_and_unknown_key_types(broker: Broker) -> None:
    empty = {"key_type": 0, "coordinator_keys": [""]}
    unknown = {"key_type": 7, "coordinator_keys": ["g"]}
    for body in (empty, unknown):
        response = await call(broker, handle_find_coordinator, ApiKey.FIND_COORDINATOR, 4, body)
        assert response.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", range(2, 10))
async def test_commit_then_fetch_every_version(broker: Broker, version: int) -> None:
    assert await commit(broker, commit_body("g", (0, 11), (1, 12)), version) == [
        (0, ErrorCode.NONE),
        (1, ErrorCode.NONE),
    ]
    fetch_version = min(version, 9)
    if fetch_version >= 8:
        body: dict[str, Any] = {
            "groups": [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]}]
        }
    else:
        body = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
    response = await call(broker, handle_offset_fetch, ApiKey.OFFSET_FETCH, fetch_version, body)
    topics = response.groups[0].topics if fetch_version >= 8 else response.topics
    assert [(p.partition_index, p.committed_offset) for p in topics[0].partitions] == [
        (0, 11),
        (1, 12),
    ]


async def test_fetch_with_null_topics_returns_every_committed_offset(broker: Broker) -> None:
    await commit(broker, commit_body("g", (1, 3)))
    body = {"groups": [{"group_id": "g", "topics": None}]}
    response = await call(broker, handle_offset_fetch, ApiKey.OFFSET_FETCH, 8, body)
    [topic] = response.groups[0].topics
    assert (topic.name, [(p.partition_index, p.committed_offset) for p in topic.partitions]) == (
        "t",
        [(1, 3)],
    )


async def test_uncommitted_partition_reads_as_minus_one(broker: Broker) -> None:
    body = {"group_id": "nobody", "topics": [{"name": "t", "partition_indexes": [0]}]}
    response = await call(broker, handle_offset_fetch, ApiKey.OFFSET_FETCH, 7, body)
    assert response.topics[0].partitions[0].committed_offset == -1


async def test_commit_refusals(broker: Broker) -> None:
    assert await commit(broker, commit_body("", (0, 1))) == [(0, ErrorCode.INVALID_GROUP_ID)]
    assert await commit(broker, commit_body("g", (0, 1), generation=3)) == [
        (0, ErrorCode.ILLEGAL_GENERATION)
    ]
    assert await commit(broker, commit_body("g", (0, 1), metadata="x" * 5000)) == [
        (0, ErrorCode.OFFSET_METADATA_TOO_LARGE)
    ]
    assert await commit(broker, commit_body("g", (7, 1))) == [
        (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    ]


async def test_commits_are_loaded_after_a_restart(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        broker = open_broker(tmp_path)
        await nursery.start(broker.flusher.run)
        broker.create_topic(broker.controller.plan_topic("t", 2, 1))
        await groups_ready(broker)
        await commit(broker, commit_body("g", (0, 99)))
        broker.close()
        nursery.cancel_scope.cancel()
    restarted = open_broker(tmp_path)
    assert restarted.groups is not None and restarted.groups.loaded
    committed = restarted.groups.offsets.fetch("g", "t", 0)
    assert committed is not None and committed.offset == 99
    restarted.close()


async def test_oversized_join_metadata_and_sync_assignments_are_refused(broker: Broker) -> None:

    huge = b"x" * (1024 * 1024 + 1)
    join = {
        "group_id": "big",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": huge}],
    }
    response = await call(broker, handle_join_group, ApiKey.JOIN_GROUP, 9, join)
    assert response.error_code == ErrorCode.INVALID_REQUEST
    sync = {
        "group_id": "big",
        "generation_id": 1,
        "member_id": "m",
        "assignments": [{"member_id": "m", "assignment": huge}],
    }
    response = await call(broker, handle_sync_group, ApiKey.SYNC_GROUP, 5, sync)
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert broker.groups is not None and not broker.groups.classic.has_group("big")


async def test_groups_of_a_partition_that_failed_a_write_are_not_served(broker: Broker) -> None:
    """After a failed fsync the coordinator's memory may be ahead of the log: the
    group's partition answers NOT_COORDINATOR (and FindCoordinator
    COORDINATOR_NOT_AVAILABLE) instead of serving state a restart would not have."""
    await commit(broker, commit_body("g", (0, 5)))

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    broker.flusher.sync_file = failing_fsync
    if broker.flusher.filesystem is not None:  # the syncfs method
        broker.flusher.filesystem = FilesystemWatch(broker.config.data_dir, failing_fsync)
        if broker.flusher.syncfs_helper is not None:  # rounds go to the thread now
            broker.flusher.syncfs_helper.close()
            broker.flusher.syncfs_helper = None
    assert await commit(broker, commit_body("g", (0, 6))) == [
        (0, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    ]
    body = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}
    response = await call(broker, handle_offset_fetch, ApiKey.OFFSET_FETCH, 7, body)
    assert response.error_code == ErrorCode.NOT_COORDINATOR
    assert await commit(broker, commit_body("g", (0, 7))) == [(0, ErrorCode.NOT_COORDINATOR)]
    found = await call(
        broker, handle_find_coordinator, ApiKey.FIND_COORDINATOR, 4,
        {"key_type": 0, "coordinator_keys": ["g"]},
    )  # fmt: skip
    assert found.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


async def test_group_timer_sleeps_while_no_group_state_is_loaded(
    fresh_broker: Broker, nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    """A broker nobody used for groups must not wake its group timer every
    millisecond (it did, costing CPU on every produce-only broker)."""
    broker = fresh_broker
    assert broker.groups is not None and not broker.groups.loaded
    clock_calls = 0

    def clock_ms() -> int:
        nonlocal clock_calls
        clock_calls += 1
        return int(trio.current_time() * 1000)

    nursery.start_soon(broker.groups.run, clock_ms)
    for _ in range(300):  # 300 ms of Trio time, 1 ms at a time: every wake-up is seen
        mock_clock.jump(0.001)
        await trio.testing.wait_all_tasks_blocked()
    assert clock_calls <= 2
    await commit(broker, commit_body("g", (0, 5)))  # starts creating the topic
    await groups_ready(broker)  # what the background task does, awaited here
    await trio.testing.wait_all_tasks_blocked()
    assert broker.groups.loaded
    assert clock_calls >= 2  # poked after loading


async def test_consumer_group_describe_answers_a_group_with_assigned_members(
    broker: Broker,
) -> None:
    """ConsumerGroupDescribe of a KIP-848 group with an assignment encodes (franz-go's
    kadm found it failing: the coordinator's assignment carried fields the v0
    response does not have)."""
    joined = await call(
        broker,
        handle_consumer_group_heartbeat,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        {
            "group_id": "g848",
            "member_id": "m1",
            "member_epoch": 0,
            "rebalance_timeout_ms": 30_000,
            "subscribed_topic_names": ["t"],
            "server_assignor": "range",
            "topic_partitions": [],
        },
    )
    assert joined.error_code == ErrorCode.NONE
    body = {"group_ids": ["g848"], "include_authorized_operations": False}
    response = await call(
        broker, handle_consumer_group_describe, ApiKey.CONSUMER_GROUP_DESCRIBE, 0, body
    )
    [group] = response.groups
    assert (group.error_code, group.assignor_name) == (ErrorCode.NONE, "range")
    [member] = group.members
    [target] = member.target_assignment.topic_partitions
    assert (member.member_id, target.topic_name, sorted(target.partitions)) == ("m1", "t", [0, 1])
