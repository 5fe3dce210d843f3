"""KIP-848 records in `__consumer_offsets`: Kafka's layout, and a coordinator rebuilt
from them (replay, compaction, loading one partition after another, deletion)."""

from __future__ import annotations

import pytest

from tests.groupcoord.consumer_harness import (
    GROUP,
    REBALANCE_TIMEOUT_MS,
    T1,
    T2,
    Client,
    World,
    converge,
)
from weir.format.errors import ErrorCode
from weir.groupcoord import consumer_group_records as rec
from weir.groupcoord.consumer_coordinator import ConsumerGroupCoordinator
from weir.groupcoord.consumer_group import MemberState, TopicInfo
from weir.groupcoord.settings import GroupSettings


def test_records_use_kafka_key_types_and_round_trip() -> None:
    world = World()
    a = Client(world, "a", ["t1"], instance_id="i")
    a.heartbeat()
    types = [rec.decode_key(k) for k, _ in world.records]
    assert (rec.MEMBER_METADATA, (GROUP, "a")) in types
    assert (rec.GROUP_METADATA, (GROUP,)) in types
    assert (rec.TARGET_ASSIGNMENT_METADATA, (GROUP,)) in types
    by_key = {rec.decode_key(k): v for k, v in world.records}
    value = by_key[(rec.CURRENT_MEMBER_ASSIGNMENT, (GROUP, "a"))]
    assert value is not None
    current = rec.decode_current_assignment(value)
    assert current.member_epoch == 1 and current.state == MemberState.STABLE
    assert current.assigned == {T1: frozenset(range(6))}
    meta_value = by_key[(rec.MEMBER_METADATA, (GROUP, "a"))]
    assert meta_value is not None
    meta = rec.decode_member_metadata(meta_value)
    assert meta.instance_id == "i" and meta.subscribed_topic_names == ("t1",)
    assert meta.rebalance_timeout_ms == REBALANCE_TIMEOUT_MS
    epoch_value = by_key[(rec.GROUP_METADATA, (GROUP,))]
    assert epoch_value is not None and rec.decode_epoch(epoch_value) == 1
    partitions_value = by_key[(rec.PARTITION_METADATA, (GROUP,))]
    assert partitions_value is not None
    assert rec.decode_partition_metadata(partitions_value) == {"t1": (T1, 6)}
    # Leaving writes tombstones for the member's three records.
    left = world.coordinator.heartbeat(GROUP, "a", -1, now_ms=world.now_ms, topics=world.topics)
    tombstones = {rec.decode_key(k) for k, v in left.records if v is None}
    assert {
        (rec.MEMBER_METADATA, (GROUP, "a")),
        (rec.TARGET_ASSIGNMENT_MEMBER, (GROUP, "a")),
        (rec.CURRENT_MEMBER_ASSIGNMENT, (GROUP, "a")),
    } <= tombstones


def test_group_epoch_value_bytes_match_kafka_layout() -> None:
    key, value = rec.group_epoch_record("g", 5)
    assert key == b"\x00\x03\x00\x01g"
    assert value == b"\x00\x00\x00\x00\x00\x05\x00"


def snapshot(coordinator: ConsumerGroupCoordinator) -> dict[str, object]:
    """What must survive a restart: epochs, members, targets, current assignments."""
    return {
        gid: (
            g.group_epoch,
            g.assignment_epoch,
            g.subscription_metadata,
            g.static_members,
            g.target,
            g.owners,
            g.assignor_name,
            {
                mid: (
                    m.instance_id,
                    m.subscribed_topic_names,
                    m.server_assignor,
                    m.rebalance_timeout_ms,
                    m.member_epoch,
                    m.previous_member_epoch,
                    m.state,
                    m.assigned,
                    m.pending_revocation,
                )
                for mid, m in g.members.items()
            },
        )
        for gid, g in coordinator.groups.items()
    }


def compacted(records: list[rec.GroupRecord]) -> list[rec.GroupRecord]:
    """What log compaction leaves: the last record per key, in offset order."""
    last = {key: index for index, (key, _) in enumerate(records)}
    return [r for index, r in enumerate(records) if last[r[0]] == index]


@pytest.mark.parametrize("compact", [False, True])
def test_replaying_the_records_rebuilds_the_groups(compact: bool) -> None:
    world = World()
    a = Client(world, "a", ["t1", "t2"], instance_id="i-a")
    b = Client(world, "b", ["t1"], assignor="range", stuck=True)
    c = Client(world, "c", ["t2"])
    for client in (a, b, c):
        client.heartbeat()
    converge(world, [a, c], rounds=2)
    world.coordinator.heartbeat(
        GROUP, "a", -2, now_ms=world.now_ms, topics=world.topics, instance_id="i-a"
    )
    world.records += Client(world, "a2", ["t1", "t2"], instance_id="i-a").heartbeat().records
    world.topics["t2"] = TopicInfo(T2, 5)
    converge(world, [c], rounds=2)
    Client(world, "d", ["t1"]).heartbeat()
    world.records += world.coordinator.heartbeat(
        GROUP, "d", -1, now_ms=world.now_ms, topics=world.topics
    ).records
    # A second, emptied and deleted group leaves nothing behind.
    other = world.coordinator.heartbeat(
        "gone",
        "x",
        0,
        now_ms=world.now_ms,
        topics=world.topics,
        rebalance_timeout_ms=1,
        subscribed_topic_names=["t1"],
        topic_partitions=[],
    )
    world.records += other.records
    world.records += world.coordinator.heartbeat(
        "gone", "x", -1, now_ms=world.now_ms, topics=world.topics
    ).records
    code, deleted = world.coordinator.delete_group("gone")
    assert code == ErrorCode.NONE
    world.records += deleted

    loaded = ConsumerGroupCoordinator()
    records = compacted(world.records) if compact else world.records
    for key, value in records:
        assert loaded.replay(key, value)
    loaded.finish_loading(world.now_ms)
    assert snapshot(loaded) == snapshot(world.coordinator)
    assert "gone" not in loaded.groups
    # Loaded members carry on where they were.
    world.coordinator = loaded
    assert c.heartbeat().error_code == ErrorCode.NONE


def test_loading_another_partitions_groups_keeps_the_loaded_members_timers() -> None:
    """A coordinator that gains offsets partitions one by one (failovers) must not
    restart the session timers of the groups it already serves: a member killed
    without leaving is fenced one session timeout after its group was loaded."""
    world = World()
    Client(world, "dead", ["t1"]).heartbeat()
    session_timeout_ms = GroupSettings().consumer_session_timeout_ms
    loaded = ConsumerGroupCoordinator()
    for key, value in world.records:
        loaded.replay(key, value)
    loaded_at_ms = world.now_ms
    loaded.finish_loading(loaded_at_ms)
    elsewhere = World()  # a group of another offsets partition, loaded later
    joined = elsewhere.coordinator.heartbeat(
        "other-group",
        "m",
        0,
        now_ms=elsewhere.now_ms,
        topics=elsewhere.topics,
        rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
        subscribed_topic_names=["t1"],
        topic_partitions=[],
    )
    for key, value in joined.records:
        loaded.replay(key, value)
    loaded.finish_loading(loaded_at_ms + session_timeout_ms // 2)  # a later partition
    loaded.advance(loaded_at_ms + session_timeout_ms)
    assert "dead" not in loaded.groups[GROUP].members


def test_replay_ignores_other_record_types() -> None:
    # An OffsetCommitKey (version 1) is not a consumer-group record.
    assert not ConsumerGroupCoordinator().replay(b"\x00\x01\x00\x01g", b"")


def test_delete_group_refuses_a_group_with_members() -> None:
    world = World()
    Client(world, "a", ["t1"]).heartbeat()
    assert world.coordinator.delete_group(GROUP) == (ErrorCode.NON_EMPTY_GROUP, [])
    assert world.coordinator.delete_group("nope") == (ErrorCode.GROUP_ID_NOT_FOUND, [])
