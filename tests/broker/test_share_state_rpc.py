"""The share coordinator's internal APIs (ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState, ReadShareGroupStateSummary) through their handlers, on a real
Broker with its share service running, and the fencing that keeps a deposed share
partition leader's late write from overwriting its successor's state."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.share_service import ShareService, attach_share_service
from weir.broker.coordinators.share_state_service import (
    ShareKey,
    ShareStateFencedError,
    ShareStateService,
    fencing_error,
)
from weir.broker.handlers.share_state import (
    handle_delete_share_group_state,
    handle_read_share_group_state,
    handle_read_share_group_state_summary,
    handle_write_share_group_state,
)
from weir.format.errors import ErrorCode
from weir.sharecoord.share_state import RecordState, ShareState, StateBatch
from weir.wire.protocol import ApiKey

from .handler_calls import call

GROUP = "queue-g"
ACKNOWLEDGED, AVAILABLE = int(RecordState.ACKNOWLEDGED), int(RecordState.AVAILABLE)


@pytest.fixture
async def broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    service = attach_share_service(broker)
    await nursery.start(broker.flusher.run)
    await nursery.start(service.run)
    broker.create_topic(broker.controller.plan_topic("t", 2, 1))
    yield broker
    broker.close()


def store_of(broker: Broker) -> ShareStateService:
    assert isinstance(broker.shares, ShareService)
    return broker.shares.store


def topic_id(broker: Broker) -> uuid.UUID:
    record = broker.controller.topic("t")
    assert record is not None
    return record.topic_id


def _topics(broker: Broker, partition: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"topic_id": topic_id(broker), "partitions": [partition]}]


async def write(
    broker: Broker,
    *,
    leader_epoch: int,
    state_epoch: int = 0,
    start_offset: int = 10,
    batches: list[tuple[int, int, int, int]] = (),  # type: ignore[assignment]
) -> Any:
    partition = {
        "partition": 0,
        "state_epoch": state_epoch,
        "leader_epoch": leader_epoch,
        "start_offset": start_offset,
        "state_batches": [
            {"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
            for f, la, s, c in batches
        ],
    }
    body = {"group_id": GROUP, "topics": _topics(broker, partition)}
    response = await call(
        broker, handle_write_share_group_state, ApiKey.WRITE_SHARE_GROUP_STATE, 1, body
    )
    return response.results[0].partitions[0]


async def read(broker: Broker, *, leader_epoch: int) -> Any:
    body = {
        "group_id": GROUP,
        "topics": _topics(broker, {"partition": 0, "leader_epoch": leader_epoch}),
    }
    response = await call(
        broker, handle_read_share_group_state, ApiKey.READ_SHARE_GROUP_STATE, 0, body
    )
    return response.results[0].partitions[0]


def test_kafkas_fencing_rule_refuses_an_older_leader_epoch_then_an_older_state_epoch() -> None:
    assert fencing_error(None, None, 0, 0) is None
    assert fencing_error(3, 1, 3, 1) is None
    assert fencing_error(3, 1, 4, 2) is None
    assert fencing_error(3, 1, 2, 0) == ErrorCode.FENCED_LEADER_EPOCH
    assert fencing_error(3, 1, 3, 0) == ErrorCode.FENCED_STATE_EPOCH
    assert fencing_error(3, 1, -1, -1) is None  # -1: not checked


async def test_a_read_of_a_key_never_written_answers_start_offset_minus_one(
    broker: Broker,
) -> None:
    answer = await read(broker, leader_epoch=0)
    assert (answer.error_code, answer.start_offset, answer.state_epoch) == (0, -1, 0)
    assert answer.state_batches == []


async def test_a_written_state_is_read_back_whole(broker: Broker) -> None:
    batches = [(10, 12, ACKNOWLEDGED, 1), (13, 13, AVAILABLE, 2)]
    assert (await write(broker, leader_epoch=0, batches=batches)).error_code == 0
    answer = await read(broker, leader_epoch=0)
    assert (answer.error_code, answer.start_offset) == (0, 10)
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in answer.state_batches
    ] == batches


async def test_a_new_leaders_read_fences_the_previous_leaders_late_write(broker: Broker) -> None:
    """The failover case: the new data leader (epoch 1) reads the state; a write the
    old leader (epoch 0) sends afterwards is refused and the new leader's state kept."""
    await write(broker, leader_epoch=0, batches=[(10, 10, ACKNOWLEDGED, 1)])
    assert (await read(broker, leader_epoch=1)).error_code == 0
    late = await write(broker, leader_epoch=0, batches=[(10, 10, AVAILABLE, 1)])
    assert late.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (await read(broker, leader_epoch=0)).error_code == ErrorCode.FENCED_LEADER_EPOCH
    answer = await read(broker, leader_epoch=1)
    assert [(b.first_offset, b.delivery_state) for b in answer.state_batches] == [
        (10, ACKNOWLEDGED)
    ]


async def test_the_fence_a_read_set_survives_the_coordinator_loading_again(
    broker: Broker,
) -> None:
    """The new leader epoch is stored before the read is answered, so the coordinator
    that loads the partition next (a failover of the state partition) fences too."""
    await write(broker, leader_epoch=0)
    await read(broker, leader_epoch=2)
    store = store_of(broker)
    store.latest.clear()
    store._leader_epochs.clear()
    store._load_all()
    assert (await write(broker, leader_epoch=1)).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (await write(broker, leader_epoch=2)).error_code == 0


async def test_a_write_of_an_older_state_epoch_is_fenced(broker: Broker) -> None:
    await write(broker, leader_epoch=0, state_epoch=1)
    stale = await write(broker, leader_epoch=0, state_epoch=0)
    assert stale.error_code == ErrorCode.FENCED_STATE_EPOCH


async def test_a_write_that_is_not_a_state_is_an_invalid_request(broker: Broker) -> None:
    overlapping = [(10, 12, ACKNOWLEDGED, 1), (12, 13, AVAILABLE, 1)]
    answer = await write(broker, leader_epoch=0, batches=overlapping)
    assert answer.error_code == ErrorCode.INVALID_REQUEST
    acquired = await write(broker, leader_epoch=0, batches=[(10, 10, 1, 1)])
    assert acquired.error_code == ErrorCode.INVALID_REQUEST


async def test_an_unknown_topic_is_refused(broker: Broker) -> None:
    body = {
        "group_id": GROUP,
        "topics": [{"topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "leader_epoch": 0}]}],
    }
    response = await call(
        broker, handle_read_share_group_state, ApiKey.READ_SHARE_GROUP_STATE, 0, body
    )
    assert response.results[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_delete_and_summary(broker: Broker) -> None:
    await write(broker, leader_epoch=3, state_epoch=1, batches=[(10, 11, ACKNOWLEDGED, 1)])
    body = {"group_id": GROUP, "topics": _topics(broker, {"partition": 0, "leader_epoch": -1})}
    summary = await call(
        broker,
        handle_read_share_group_state_summary,
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        1,
        body,
    )
    answer = summary.results[0].partitions[0]
    assert (answer.start_offset, answer.state_epoch, answer.leader_epoch) == (10, 1, 3)
    assert answer.delivery_complete_count == 2
    body = {"group_id": GROUP, "topics": _topics(broker, {"partition": 0})}
    deleted = await call(
        broker, handle_delete_share_group_state, ApiKey.DELETE_SHARE_GROUP_STATE, 0, body
    )
    assert deleted.results[0].partitions[0].error_code == 0
    assert (await read(broker, leader_epoch=3)).start_offset == -1


async def test_a_deposed_share_partitions_change_is_refused_before_it_leaves_the_broker(
    broker: Broker,
) -> None:
    """The leader's side: once a newer leader epoch's state was written from this
    broker, an older one's (a share partition not yet forgotten) is fenced at once,
    so it can never be sent after the newer one."""
    store = store_of(broker)
    key = ShareKey(GROUP, topic_id(broker), 1)
    newer = ShareState(0, 0, 2, (StateBatch(0, 0, RecordState.ACKNOWLEDGED, 1),))
    older = ShareState(0, 0, 1, (StateBatch(0, 0, RecordState.AVAILABLE, 1),))
    await store.write(key, newer)
    # The newer write is done and its entry gone: the coordinator fences the older one.
    with pytest.raises(ShareStateFencedError) as refused:
        await store.write(key, older)
    assert refused.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert await store.read(key, 2) == newer


async def test_concurrent_writes_of_a_key_store_the_newest_state_last(broker: Broker) -> None:
    """Writes of one key are stored in the order they were made: the last one made
    is the state left, in memory and in the log."""
    store = store_of(broker)
    key = ShareKey(GROUP, topic_id(broker), 1)
    states = [
        ShareState(0, 0, 0, (StateBatch(0, n, RecordState.ACKNOWLEDGED, 1),)) for n in range(5)
    ]
    called: list[ShareState] = []

    async def write(state: ShareState) -> None:
        called.append(state)  # write's first step runs before it yields: its order
        await store.write(key, state)

    async with trio.open_nursery() as nursery:
        for state in states:
            nursery.start_soon(write, state)
    assert store.latest[key] == called[-1]
    store.latest.clear()
    store._load_all()
    assert store.latest[key] == called[-1]


def test_weirs_own_parts_of_a_state_cross_brokers_in_tagged_fields() -> None:
    """A release backoff's end and the dead-letter mark have no field in Kafka's share
    state: between Weir brokers they ride in Weir's tagged fields, and survive."""
    from weir.broker.coordinators.share_state_rpc import state_from_wire, wire_batches
    from weir.sharecoord.share_state import RecordState, ShareState, StateBatch
    from weir.wire.messages.share_state import (
        WriteShareGroupStateRequest,
        WriteShareGroupStateRequestPartition,
        WriteShareGroupStateRequestStateBatch,
        WriteShareGroupStateRequestTopic,
    )
    from weir.wire.protocol import ApiKey, decode_request, encode_request, parse_request_header

    state = ShareState(
        10, 3, 7,
        (StateBatch(10, 12, RecordState.AVAILABLE, 2, 1_900_000_000_000),
         StateBatch(13, 13, RecordState.ARCHIVING, 5)),
        dead_letter_mark=42,
    )  # fmt: skip
    partition = WriteShareGroupStateRequestPartition(
        partition=0, state_epoch=3, leader_epoch=7, start_offset=10,
        state_batches=wire_batches(state, WriteShareGroupStateRequestStateBatch),
        dead_letter_mark=state.dead_letter_mark,
    )  # fmt: skip
    request = WriteShareGroupStateRequest(
        "g", [WriteShareGroupStateRequestTopic(uuid.uuid4(), [partition])]
    )
    frame = encode_request(ApiKey.WRITE_SHARE_GROUP_STATE, 1, 5, "t", request)
    body = memoryview(frame)[4:]
    decoded = decode_request(parse_request_header(body), body)
    (topic,) = decoded.topics
    (got,) = topic.partitions
    assert state_from_wire(10, 3, 7, got.state_batches, got.dead_letter_mark) == state
