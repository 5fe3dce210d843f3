"""Share-group administration through the handlers, on a real Broker: ListGroups and
DeleteGroups with share groups, and DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets (90-92), answered as Kafka 4.4 answers them (observed on
Kafka 4.4: see weir/broker/handlers/share_admin.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import GroupService, attach_group_service
from weir.broker.coordinators.share_service import ShareService, attach_share_service
from weir.broker.coordinators.share_state_service import ShareKey
from weir.broker.handlers.group_admin import (
    handle_delete_groups,
    handle_describe_groups,
    handle_list_groups,
)
from weir.broker.handlers.group_offsets import handle_offset_commit
from weir.broker.handlers.share_admin import (
    handle_alter_share_group_offsets,
    handle_delete_share_group_offsets,
    handle_describe_share_group_offsets,
)
from weir.broker.handlers.share_groups import handle_share_group_heartbeat
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.sharecoord.share_partition import SharePartition
from weir.sharecoord.share_state import RecordState, ShareState, StateBatch
from weir.wire.protocol import ApiKey

from ..handler_calls import call

ZERO_UUID = uuid.UUID(int=0)
MEMBER = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture
async def broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    """Groups and share state served; topic `t` (2 partitions, 10 records in each)."""
    broker = Broker(BrokerConfig(data_dir=tmp_path, offsets_topic_partition_count=2))
    broker.open_logs()
    groups = attach_group_service(broker)
    shares = attach_share_service(broker)
    await nursery.start(broker.flusher.run)
    await groups.prepare()
    await nursery.start(shares.run)
    broker.create_topic(broker.controller.plan_topic("t", 2, 1))
    for partition in (0, 1):
        replica = broker.partition("t", partition)
        assert replica is not None
        batch = build_batch([(b"k", b"v", [])] * 10, timestamp_ms=wall_clock_ms())
        replica.log.append(batch, leader_epoch=0, now_ms=wall_clock_ms())
        replica.log.flush()
    yield broker
    broker.close()


def group_service_of(broker: Broker) -> GroupService:
    assert isinstance(broker.groups, GroupService)
    return broker.groups


def shares_of(broker: Broker) -> ShareService:
    assert isinstance(broker.shares, ShareService)
    return broker.shares


def topic_id(broker: Broker, name: str = "t") -> uuid.UUID:
    record = broker.controller.topic(name)
    assert record is not None
    return record.topic_id


async def heartbeat(broker: Broker, group_id: str, epoch: int) -> Any:
    body = {
        "group_id": group_id,
        "member_id": MEMBER,
        "member_epoch": epoch,
        "rack_id": None,
        "subscribed_topic_names": ["t"] if epoch == 0 else None,
    }
    response = await call(
        broker, handle_share_group_heartbeat, ApiKey.SHARE_GROUP_HEARTBEAT, 1, body
    )
    assert response.error_code == ErrorCode.NONE, response
    return response


async def empty_share_group(broker: Broker, group_id: str) -> None:
    """A share group whose one member joined and left."""
    await heartbeat(broker, group_id, 0)
    await heartbeat(broker, group_id, -1)


async def store_state(
    broker: Broker, group_id: str, partition: int, state: ShareState, topic: str = "t"
) -> None:
    key = ShareKey(group_id, topic_id(broker, topic), partition)
    await shares_of(broker).store.ready()
    await shares_of(broker).store.write(key, state)


def stored(broker: Broker, group_id: str, partition: int) -> ShareState | None:
    return shares_of(broker).store.latest.get(ShareKey(group_id, topic_id(broker), partition))


# Start 3, offsets 4-5 acknowledged, 6 archived, 7 available after a delivery: three
# records complete, so the lag at high watermark 10 is 10 - 3 - 3 = 4.
IN_FLIGHT = ShareState(
    3,
    0,
    0,
    (
        StateBatch(4, 5, RecordState.ACKNOWLEDGED, 1),
        StateBatch(6, 6, RecordState.ARCHIVED, 5),
        StateBatch(7, 7, RecordState.AVAILABLE, 1),
    ),
)


async def describe_offsets(broker: Broker, *groups: Any, version: int = 1) -> Any:
    body = {"groups": [{"group_id": g, "topics": topics} for g, topics in groups]}
    return await call(
        broker,
        handle_describe_share_group_offsets,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        version,
        body,
    )


def rows(group: Any) -> list[tuple[str, int, int, int, int, int]]:
    return [
        (t.topic_name, p.partition_index, p.start_offset, p.leader_epoch, p.lag, p.error_code)
        for t in group.topics
        for p in t.partitions
    ]


async def alter(broker: Broker, group_id: str, *topics: tuple[str, dict[int, int]]) -> Any:
    body = {
        "group_id": group_id,
        "topics": [
            {
                "topic_name": name,
                "partitions": [
                    {"partition_index": p, "start_offset": o} for p, o in offsets.items()
                ],
            }
            for name, offsets in topics
        ],
    }
    return await call(
        broker, handle_alter_share_group_offsets, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body
    )


async def delete_offsets(broker: Broker, group_id: str, *topics: str) -> Any:
    body = {"group_id": group_id, "topics": [{"topic_name": name} for name in topics]}
    return await call(
        broker, handle_delete_share_group_offsets, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, body
    )


# -- ListGroups, DescribeGroups, DeleteGroups -------------------------------------------


async def list_groups(broker: Broker, states: list[str], types: list[str]) -> list[Any]:
    body = {"states_filter": states, "types_filter": types}
    response = await call(broker, handle_list_groups, ApiKey.LIST_GROUPS, 5, body)
    return [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in response.groups]


async def test_list_groups_lists_share_groups_with_the_share_type_and_filters_them(
    broker: Broker,
) -> None:
    await heartbeat(broker, "busy", 0)
    await empty_share_group(broker, "idle")
    commit = {
        "group_id": "classic",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
    }
    await call(broker, handle_offset_commit, ApiKey.OFFSET_COMMIT, 8, commit)
    assert await list_groups(broker, [], []) == [
        ("busy", "share", "Stable", "share"),
        ("classic", "", "Empty", "classic"),
        ("idle", "share", "Empty", "share"),
    ]
    # Kafka matches types and states case-insensitively.
    assert await list_groups(broker, [], ["Share"]) == [
        ("busy", "share", "Stable", "share"),
        ("idle", "share", "Empty", "share"),
    ]
    assert await list_groups(broker, ["EMPTY"], ["share"]) == [("idle", "share", "Empty", "share")]
    assert await list_groups(broker, [], ["consumer"]) == []


async def test_describe_groups_answers_a_share_group_as_kafka_does_an_unknown_group(
    broker: Broker,
) -> None:
    await heartbeat(broker, "sg", 0)
    body = {"groups": ["sg"], "include_authorized_operations": False}
    response = await call(broker, handle_describe_groups, ApiKey.DESCRIBE_GROUPS, 5, body)
    (group,) = response.groups
    assert (group.error_code, group.group_state, group.protocol_type, group.members) == (
        ErrorCode.NONE,
        "Dead",
        "",
        [],
    )


async def delete_groups(broker: Broker, *group_ids: str) -> dict[str, int]:
    body = {"groups_names": list(group_ids)}
    response = await call(broker, handle_delete_groups, ApiKey.DELETE_GROUPS, 2, body)
    return {r.group_id: r.error_code for r in response.results}


async def test_delete_groups_deletes_an_empty_share_group_and_its_share_state(
    broker: Broker,
) -> None:
    await empty_share_group(broker, "sg")
    await store_state(broker, "sg", 0, IN_FLIGHT)
    await store_state(broker, "sg", 1, ShareState(10, 0, 0))
    await store_state(broker, "other", 0, IN_FLIGHT)
    assert await delete_groups(broker, "sg", "never") == {
        "sg": ErrorCode.NONE,
        "never": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    service = group_service_of(broker)
    assert not service.share_groups.has_group("sg")
    assert stored(broker, "sg", 0) is None and stored(broker, "sg", 1) is None
    assert stored(broker, "other", 0) == IN_FLIGHT
    assert await list_groups(broker, [], []) == []
    # The deletion is durable: a reload of both topics finds neither.
    service.share_groups.groups.clear()
    service._load(wall_clock_ms())
    shares_of(broker).store._load_all()
    assert not service.share_groups.has_group("sg")
    assert stored(broker, "sg", 0) is None and stored(broker, "other", 0) == IN_FLIGHT


async def test_delete_groups_refuses_a_share_group_with_members(broker: Broker) -> None:
    await heartbeat(broker, "sg", 0)
    await store_state(broker, "sg", 0, IN_FLIGHT)
    assert await delete_groups(broker, "sg") == {"sg": ErrorCode.NON_EMPTY_GROUP}
    assert group_service_of(broker).share_groups.has_group("sg")
    assert stored(broker, "sg", 0) == IN_FLIGHT


# -- DescribeShareGroupOffsets -----------------------------------------------------------


async def test_describe_offsets_reports_the_start_offset_and_kafkas_lag(broker: Broker) -> None:
    await empty_share_group(broker, "sg")
    await store_state(broker, "sg", 0, IN_FLIGHT)
    response = await describe_offsets(broker, ("sg", None))
    (group,) = response.groups
    assert group.error_code == ErrorCode.NONE
    assert [t.topic_id for t in group.topics] == [topic_id(broker)]
    # Only the partitions with state; lag = high watermark - start - delivery complete.
    assert rows(group) == [("t", 0, 3, 0, 4, 0)]
    v0 = await describe_offsets(broker, ("sg", None), version=0)
    assert rows(v0.groups[0]) == [("t", 0, 3, 0, -1, 0)]


async def test_describe_offsets_of_named_partitions_without_state_is_minus_one(
    broker: Broker,
) -> None:
    await store_state(broker, "sg", 0, IN_FLIGHT)
    named = [
        {"topic_name": "missing", "partitions": [0]},
        {"topic_name": "t", "partitions": [1, 0]},
    ]
    response = await describe_offsets(broker, ("sg", named), ("unknown", None), ("", None))
    sg, unknown, empty = response.groups
    # Kafka answers the known topics first, then the unknown ones (topic id zero).
    assert rows(sg) == [("t", 1, -1, 0, -1, 0), ("t", 0, 3, 0, 4, 0), ("missing", 0, -1, 0, -1, 0)]
    assert [t.topic_id for t in sg.topics] == [topic_id(broker), ZERO_UUID]
    assert (unknown.error_code, unknown.topics) == (ErrorCode.NONE, [])
    assert (empty.error_code, empty.topics) == (ErrorCode.NONE, [])


# -- AlterShareGroupOffsets --------------------------------------------------------------


def partition_errors(response: Any) -> list[tuple[str, int, int]]:
    return [
        (t.topic_name, p.partition_index, p.error_code)
        for t in response.responses
        for p in t.partitions
    ]


async def test_alter_offsets_replaces_the_state_of_an_empty_group(broker: Broker) -> None:
    await empty_share_group(broker, "sg")
    await store_state(broker, "sg", 0, IN_FLIGHT)
    response = await alter(broker, "sg", ("t", {0: 8, 1: 2, 5: 0}), ("missing", {0: 1}))
    assert response.error_code == ErrorCode.NONE
    assert partition_errors(response) == [
        ("missing", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 0, ErrorCode.NONE),
        ("t", 1, ErrorCode.NONE),
        ("t", 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert [t.topic_id for t in response.responses] == [ZERO_UUID, topic_id(broker)]
    # The whole state goes: nothing in flight, the state epoch moved.
    assert stored(broker, "sg", 0) == ShareState(8, 1, 0)
    assert stored(broker, "sg", 1) == ShareState(2, 0, 0)
    described = await describe_offsets(broker, ("sg", None))
    assert rows(described.groups[0]) == [("t", 0, 8, 0, 2, 0), ("t", 1, 2, 0, 8, 0)]


async def test_alter_offsets_replaces_what_the_partition_leader_holds(broker: Broker) -> None:
    """A share partition loaded here before the alter serves the new start offset."""
    await empty_share_group(broker, "sg")
    shares = shares_of(broker)
    replica = broker.partition("t", 0)
    assert replica is not None
    key = ShareKey("sg", topic_id(broker), 0)
    await store_state(broker, "sg", 0, IN_FLIGHT)
    before = await shares.partitions.leader(key, replica)
    assert before.partition.start_offset == 3
    await alter(broker, "sg", ("t", {0: 9}))
    after = await shares.partitions.leader(key, replica)
    assert isinstance(after.partition, SharePartition)
    assert after.partition.start_offset == 9


async def test_alter_offsets_creates_an_unknown_group_as_an_empty_share_group(
    broker: Broker,
) -> None:
    response = await alter(broker, "new", ("t", {0: 4}))
    assert (response.error_code, partition_errors(response)) == (
        ErrorCode.NONE,
        [("t", 0, ErrorCode.NONE)],
    )
    assert await list_groups(broker, [], []) == [("new", "share", "Empty", "share")]
    service = group_service_of(broker)
    (described,) = service.share_groups.describe(["new"])
    assert (described["group_epoch"], described["assignment_epoch"]) == (1, 1)
    # Its records are durable: a reload finds the group.
    service.share_groups.groups.clear()
    service._load(wall_clock_ms())
    assert service.share_groups.has_group("new")
    # The first member joins it as any new group: epoch 2, the partitions assigned.
    joined = await heartbeat(broker, "new", 0)
    assert joined.member_epoch == 2 and joined.assignment is not None


@pytest.mark.parametrize(
    ("setup", "group_id", "error", "message"),
    [
        ("member", "sg", ErrorCode.NON_EMPTY_GROUP, "The group is not empty."),
        ("classic", "classic", ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a share group."),
        ("none", "", ErrorCode.INVALID_GROUP_ID, "The group id is invalid."),
    ],
)
async def test_alter_and_delete_offsets_refuse_as_kafka_does(
    broker: Broker, setup: str, group_id: str, error: ErrorCode, message: str
) -> None:
    if setup == "member":
        await heartbeat(broker, "sg", 0)
        await store_state(broker, "sg", 0, IN_FLIGHT)
    elif setup == "classic":
        commit = {
            "group_id": "classic",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}
            ],
        }
        await call(broker, handle_offset_commit, ApiKey.OFFSET_COMMIT, 8, commit)
    altered = await alter(broker, group_id, ("t", {0: 0}))
    deleted = await delete_offsets(broker, group_id, "t")
    for response in (altered, deleted):
        assert (response.error_code, response.error_message, response.responses) == (
            error,
            message,
            [],
        )
    if setup == "member":
        assert stored(broker, "sg", 0) == IN_FLIGHT


async def test_alter_offsets_to_a_negative_offset_deletes_the_state(broker: Broker) -> None:
    await empty_share_group(broker, "sg")
    await store_state(broker, "sg", 0, IN_FLIGHT)
    response = await alter(broker, "sg", ("t", {0: -1}))
    assert partition_errors(response) == [("t", 0, ErrorCode.NONE)]
    assert stored(broker, "sg", 0) is None


# -- DeleteShareGroupOffsets ---------------------------------------------------------------


async def test_delete_offsets_removes_a_topics_state_for_the_group(broker: Broker) -> None:
    await empty_share_group(broker, "sg")
    await store_state(broker, "sg", 0, IN_FLIGHT)
    await store_state(broker, "sg", 1, IN_FLIGHT)
    await store_state(broker, "other", 0, IN_FLIGHT)
    response = await delete_offsets(broker, "sg", "missing", "t")
    assert response.error_code == ErrorCode.NONE
    # Kafka's order: the deleted topics first.
    assert [
        (r.topic_name, r.topic_id, r.error_code, r.error_message) for r in response.responses
    ] == [
        ("t", topic_id(broker), ErrorCode.NONE, None),
        (
            "missing",
            ZERO_UUID,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        ),
    ]
    assert stored(broker, "sg", 0) is None and stored(broker, "sg", 1) is None
    assert stored(broker, "other", 0) == IN_FLIGHT
    again = await delete_offsets(broker, "sg", "t")
    assert [(r.topic_id, r.error_code, r.error_message) for r in again.responses] == [
        (
            ZERO_UUID,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "There is no offset information to delete.",
        )
    ]


async def test_delete_offsets_of_an_unknown_group_is_group_id_not_found(broker: Broker) -> None:
    response = await delete_offsets(broker, "nobody", "t")
    assert (response.error_code, response.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group nobody not found.",
    )
