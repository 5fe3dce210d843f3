"""A ShareFetch answers only records whose lock is still the member's when the answer
goes out, and their locks run from the answer: the share state is stored before the
answer, and a share coordinator that moves can hold that store for seconds, as long
as a short lock (found by compat_tests/queue_fault_run.py: a consumer was handed
records another consumer got while it still worked on them)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import attach_group_service
from weir.broker.coordinators.share_service import ShareService, attach_share_service
from weir.broker.coordinators.share_state_service import ShareKey
from weir.broker.handlers import share_fetch
from weir.broker.handlers.share_fetch import handle_share_fetch
from weir.broker.handlers.share_groups import handle_share_group_heartbeat
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.sharecoord.share_state import RecordState, ShareState
from weir.wire.protocol import ApiKey

from ..handler_calls import call

MEMBER = "AAAAAAAAAAAAAAAAAAAAAA"
GROUP = "sg"
RECORDS = 10


@pytest.fixture
async def broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    """Share groups served; topic `t` (1 partition, empty)."""
    broker = Broker(BrokerConfig(data_dir=tmp_path, offsets_topic_partition_count=1))
    broker.open_logs()
    groups = attach_group_service(broker)
    shares = attach_share_service(broker)
    await nursery.start(broker.flusher.run)
    await groups.prepare()
    await nursery.start(shares.run)
    broker.create_topic(broker.controller.plan_topic("t", 1, 1))
    yield broker
    broker.close()


def shares_of(broker: Broker) -> ShareService:
    assert isinstance(broker.shares, ShareService)
    return broker.shares


def topic_id(broker: Broker) -> uuid.UUID:
    record = broker.controller.topic("t")
    assert record is not None
    return record.topic_id


def append_records(broker: Broker) -> None:
    replica = broker.partition("t", 0)
    assert replica is not None
    batch = build_batch([(b"k", b"v", [])] * RECORDS, timestamp_ms=wall_clock_ms())
    replica.log.append(batch, leader_epoch=0, now_ms=wall_clock_ms())
    replica.log.flush()


async def join(broker: Broker) -> None:
    """A member joins; its first share fetch starts the group at the log's end (the
    default `share.auto.offset.reset`); then 10 records are appended."""
    body = {
        "group_id": GROUP,
        "member_id": MEMBER,
        "member_epoch": 0,
        "rack_id": None,
        "subscribed_topic_names": ["t"],
    }
    response = await call(
        broker, handle_share_group_heartbeat, ApiKey.SHARE_GROUP_HEARTBEAT, 1, body
    )
    assert response.error_code == ErrorCode.NONE, response
    assert acquired_of(await share_fetch_of(broker, 0)) == []
    append_records(broker)


async def share_fetch_of(broker: Broker, epoch: int) -> Any:
    """A ShareFetch of the member's share session at `epoch` (0 opens it)."""
    body = {
        "group_id": GROUP,
        "member_id": MEMBER,
        "share_session_epoch": epoch,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 500,
        "batch_size": 500,
        "topics": [{"topic_id": topic_id(broker), "partitions": [{"partition_index": 0}]}],
        "forgotten_topics_data": [],
    }
    return await call(broker, handle_share_fetch, ApiKey.SHARE_FETCH, 1, body)


def acquired_of(response: Any) -> list[tuple[int, int, int]]:
    assert response.error_code == ErrorCode.NONE, response
    return [
        (r.first_offset, r.last_offset, r.delivery_count)
        for topic in response.responses
        for partition in topic.partitions
        for r in partition.acquired_records
    ]


async def test_records_acquired_are_answered_when_the_store_is_quick(broker: Broker) -> None:
    await join(broker)
    assert acquired_of(await share_fetch_of(broker, 1)) == [(0, RECORDS - 1, 1)]


async def test_records_whose_lock_expired_while_the_state_was_stored_are_left_out(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await join(broker)
    shares = shares_of(broker)
    lock_ms = shares.partitions.config(GROUP).record_lock_duration_ms
    clock = [wall_clock_ms()]
    monkeypatch.setattr(share_fetch, "wall_clock_ms", lambda: clock[0])
    store = shares.partitions.store
    write = store.write

    async def slow_write(key: ShareKey, state: ShareState | None) -> None:
        # the coordinator moves: the store takes longer than the lock, which expires
        clock[0] += lock_ms + 1
        for leader in shares.partitions.leaders.values():
            leader.partition.expire_locks(clock[0])
        await write(key, state)

    monkeypatch.setattr(store, "write", slow_write)
    assert acquired_of(await share_fetch_of(broker, 1)) == []
    monkeypatch.setattr(store, "write", write)
    # the records are available again, their counts going on
    assert acquired_of(await share_fetch_of(broker, 2)) == [(0, RECORDS - 1, 2)]


async def test_locks_restart_at_the_answer_when_the_state_took_long_to_store(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await join(broker)
    shares = shares_of(broker)
    lock_ms = shares.partitions.config(GROUP).record_lock_duration_ms
    clock = [wall_clock_ms()]
    monkeypatch.setattr(share_fetch, "wall_clock_ms", lambda: clock[0])
    store = shares.partitions.store
    write = store.write

    async def slow_write(key: ShareKey, state: ShareState | None) -> None:
        clock[0] += lock_ms // 2  # half the lock gone before the answer
        await write(key, state)

    monkeypatch.setattr(store, "write", slow_write)
    assert acquired_of(await share_fetch_of(broker, 1)) == [(0, RECORDS - 1, 1)]
    answered_ms = clock[0]
    (leader,) = shares.partitions.leaders.values()
    assert leader.partition.expire_locks(answered_ms + lock_ms - 1) == []
    assert leader.partition.record_state(0) == (RecordState.ACQUIRED, 1, MEMBER)
    leader.partition.expire_locks(answered_ms + lock_ms)
    assert leader.partition.record_state(0) == (RecordState.AVAILABLE, 1, None)
