"""KIP-848 membership: request checks, epoch fencing, static members, leaving, the
group size bound, and members fenced by their session or rebalance timeout."""

from __future__ import annotations

import uuid

import pytest

from tests.groupcoord.consumer_harness import (
    GROUP,
    REBALANCE_TIMEOUT_MS,
    T1,
    Client,
    World,
    all_partitions,
    converge,
    no_partition_twice,
)
from weir.format.errors import ErrorCode
from weir.groupcoord.consumer_group import MemberState


def test_member_that_stops_heartbeating_is_fenced_after_session_timeout() -> None:
    world = World()
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    assert world.coordinator.next_deadline_ms() is not None
    # b keeps heartbeating; a goes silent.
    for _ in range(8):
        world.tick(5_000)
        assert b.heartbeat().error_code == ErrorCode.NONE
    assert "a" in world.coordinator.groups[GROUP].members
    world.tick(5_000)
    assert "a" not in world.coordinator.groups[GROUP].members
    converge(world, [b])
    assert b.partitions() == all_partitions(world, ["t1"])
    result = a.heartbeat()
    assert result.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_member_that_does_not_revoke_in_time_is_fenced() -> None:
    world = World()
    a = Client(world, "a", ["t1"], stuck=True)
    a.heartbeat()
    b = Client(world, "b", ["t1"])
    b.heartbeat()
    a.heartbeat()
    member = world.coordinator.groups[GROUP].members["a"]
    assert member.state == MemberState.UNREVOKED_PARTITIONS
    # Revocation pending but a keeps reporting all six partitions.
    for _ in range(5):
        world.tick(5_000)
        a.heartbeat()
        b.heartbeat()
        assert b.partitions() == set()
        no_partition_twice([a, b])
    world.tick(REBALANCE_TIMEOUT_MS)
    assert "a" not in world.coordinator.groups[GROUP].members
    converge(world, [b])
    assert b.partitions() == all_partitions(world, ["t1"])
    assert a.heartbeat().error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_member_rejoins_with_new_member_id_and_keeps_its_partitions() -> None:
    world = World()
    a = Client(world, "a", ["t1"], instance_id="i-a")
    b = Client(world, "b", ["t1"], instance_id="i-b")
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    mine = a.partitions()
    group_epoch = world.coordinator.groups[GROUP].group_epoch
    result = world.coordinator.heartbeat(
        GROUP, "a", -2, now_ms=world.now_ms, topics=world.topics, instance_id="i-a"
    )
    assert result.error_code == ErrorCode.NONE and result.member_epoch == -2
    # While away, the instance keeps its partitions; nobody else gets them.
    converge(world, [b])
    assert not (b.partitions() & mine)
    # The restarted process comes back under a new member id.
    a2 = Client(world, "a2", ["t1"], instance_id="i-a")
    result = a2.heartbeat()
    assert result.error_code == ErrorCode.NONE
    assert a2.partitions() == mine
    assert world.coordinator.groups[GROUP].group_epoch == group_epoch
    assert "a" not in world.coordinator.groups[GROUP].members


def test_static_instance_in_use_is_unreleased() -> None:
    world = World()
    a = Client(world, "a", ["t1"], instance_id="i-a")
    a.heartbeat()
    imposter = Client(world, "x", ["t1"], instance_id="i-a")
    assert imposter.heartbeat().error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    # A static member's session expiring frees the instance id.
    world.tick(45_000)
    assert imposter.heartbeat().error_code == ErrorCode.NONE


def test_static_member_fenced_by_a_replacement() -> None:
    world = World()
    a = Client(world, "a", ["t1"], instance_id="i-a")
    a.heartbeat()
    world.coordinator.heartbeat(
        GROUP, "a", -2, now_ms=world.now_ms, topics=world.topics, instance_id="i-a"
    )
    Client(world, "a2", ["t1"], instance_id="i-a").heartbeat()
    result = world.coordinator.heartbeat(
        GROUP, "a", -1, now_ms=world.now_ms, topics=world.topics, instance_id="i-a"
    )
    assert result.error_code == ErrorCode.FENCED_INSTANCE_ID


def test_epoch_fencing() -> None:
    world = World()
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    assert a.epoch == 2
    hb = world.coordinator.heartbeat
    ahead = hb(GROUP, "a", 3, now_ms=world.now_ms, topics=world.topics, topic_partitions=[])
    assert ahead.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    # The previous epoch is accepted when the owned partitions are a subset (lost response)...
    owned = a.owned_list()
    ok = hb(GROUP, "a", 1, now_ms=world.now_ms, topics=world.topics, topic_partitions=owned)
    assert ok.error_code == ErrorCode.NONE and ok.member_epoch == 2
    # ...but not when the member claims partitions it does not have.
    others = b.owned_list()
    bad = hb(GROUP, "a", 1, now_ms=world.now_ms, topics=world.topics, topic_partitions=others)
    assert bad.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    rejoin = hb(GROUP, "a", 0, now_ms=world.now_ms, topics=world.topics)
    assert rejoin.error_code == ErrorCode.INVALID_REQUEST  # a join must carry its subscription
    unknown = hb(GROUP, "zzz", 2, now_ms=world.now_ms, topics=world.topics)
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    no_group = hb("nope", "a", 2, now_ms=world.now_ms, topics=world.topics)
    assert no_group.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_fenced_member_may_rejoin_with_epoch_zero() -> None:
    world = World()
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    a.epoch, a.owned = 0, {}
    result = a.heartbeat()
    assert result.error_code == ErrorCode.NONE and result.member_epoch == 2
    assert len(a.partitions()) == 3
    no_partition_twice([a, b])


def test_errors_change_nothing() -> None:
    world = World()
    a = Client(world, "a", ["t1"])
    a.heartbeat()
    n = len(world.records)
    epoch = world.coordinator.groups[GROUP].group_epoch
    result = Client(world, "b", ["t1"], assignor="sticky").heartbeat()
    assert result.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert result.records == [] and len(world.records) == n
    assert world.coordinator.groups[GROUP].group_epoch == epoch
    assert set(world.coordinator.groups[GROUP].members) == {"a"}


@pytest.mark.parametrize(
    ("member_id", "epoch", "kwargs", "api_version"),
    [
        ("", 0, {}, 1),  # v1: the client names itself
        ("m", 0, {"rebalance_timeout_ms": -1}, 1),
        ("m", 0, {"topic_partitions": None}, 1),
        ("m", 0, {"topic_partitions": [(T1, [0])]}, 1),
        ("m", 0, {"subscribed_topic_names": None}, 1),
        ("m", -2, {}, 1),  # static leave without instance id
        ("m", -3, {}, 1),
        ("m", 0, {"instance_id": ""}, 1),
        ("", 5, {}, 0),
    ],
)
def test_invalid_requests(
    member_id: str, epoch: int, kwargs: dict[str, object], api_version: int
) -> None:
    world = World()
    args: dict[str, object] = {
        "now_ms": world.now_ms,
        "topics": world.topics,
        "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": ["t1"],
        "topic_partitions": [],
        "api_version": api_version,
    }
    args.update(kwargs)
    result = world.coordinator.heartbeat(GROUP, member_id, epoch, **args)  # type: ignore[arg-type]
    assert result.error_code == ErrorCode.INVALID_REQUEST


def test_v0_join_gets_a_member_id_from_the_coordinator() -> None:
    world = World()
    result = world.coordinator.heartbeat(
        GROUP,
        "",
        0,
        now_ms=world.now_ms,
        topics=world.topics,
        rebalance_timeout_ms=1000,
        subscribed_topic_names=["t1"],
        topic_partitions=[],
        api_version=0,
    )
    assert result.error_code == ErrorCode.NONE
    assert result.member_id and uuid.UUID(result.member_id)


def test_group_max_size() -> None:
    world = World(group_max_size=2)
    Client(world, "a", ["t1"]).heartbeat()
    Client(world, "b", ["t1"]).heartbeat()
    assert Client(world, "c", ["t1"]).heartbeat().error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
