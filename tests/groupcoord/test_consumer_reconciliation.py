"""KIP-848 target assignment and reconciliation: members converge on the target
without a partition ever owned twice, as membership, subscriptions and topics change."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import pytest

from tests.groupcoord.consumer_harness import (
    GROUP,
    T1,
    T2,
    Client,
    World,
    all_partitions,
    converge,
    no_partition_twice,
)
from weir.format.errors import ErrorCode
from weir.groupcoord.consumer_group import GroupState, TopicInfo


def test_single_member_gets_everything_and_group_is_stable() -> None:
    world = World()
    a = Client(world, "a", ["t1", "t2"])
    result = a.heartbeat()
    assert result.error_code == ErrorCode.NONE
    assert result.member_id == "a"
    assert result.member_epoch == 1
    assert result.heartbeat_interval_ms == 5_000
    assert a.partitions() == all_partitions(world, ["t1", "t2"])
    assert world.coordinator.group_state(GROUP) == GroupState.STABLE
    # Steady heartbeats carry no assignment.
    assert a.heartbeat().assignment is None


def test_two_members_converge_without_sharing_a_partition() -> None:
    world = World()
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    assert len(a.partitions()) == 6
    b.heartbeat()
    # b joined at epoch 2 but a still owns everything: b gets nothing yet.
    assert b.epoch == 2
    assert b.partitions() == set()
    no_partition_twice([a, b])
    # a is asked to revoke three partitions, keeping epoch 1 until it has.
    a.heartbeat()
    assert a.epoch == 1 and len(a.partitions()) == 3
    no_partition_twice([a, b])
    converge(world, [a, b])
    assert len(a.partitions()) == len(b.partitions()) == 3
    assert a.partitions() | b.partitions() == all_partitions(world, ["t1"])
    assert a.epoch == b.epoch == 2
    assert world.coordinator.group_state(GROUP) == GroupState.STABLE


def test_three_members_converge_and_a_leaver_frees_partitions() -> None:
    world = World()
    clients = [Client(world, m, ["t1", "t2"]) for m in ("a", "b", "c")]
    for c in clients:
        c.heartbeat()
        no_partition_twice(clients)
    converge(world, clients)
    assert sorted(len(c.partitions()) for c in clients) == [3, 3, 4]
    union = set().union(*(c.partitions() for c in clients))
    assert union == all_partitions(world, ["t1", "t2"])
    before = {c.member_id: c.partitions() for c in clients}

    a, b, c = clients
    result = world.coordinator.heartbeat(GROUP, "a", -1, now_ms=world.now_ms, topics=world.topics)
    assert result.error_code == ErrorCode.NONE and result.member_epoch == -1
    a.owned = {}
    converge(world, [b, c])
    assert len(b.partitions()) == len(c.partitions()) == 5
    assert b.partitions() | c.partitions() == all_partitions(world, ["t1", "t2"])
    # Sticky: the stayers kept what they had.
    assert before["b"] <= b.partitions() and before["c"] <= c.partitions()
    # The leaver is gone: its heartbeats are unknown.
    assert a.heartbeat().error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_partition_count_increase_bumps_group_epoch_and_assigns_new_partitions() -> None:
    world = World()
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    epoch = world.coordinator.groups[GROUP].group_epoch
    world.topics["t1"] = TopicInfo(T1, 8)
    converge(world, [a, b])
    assert world.coordinator.groups[GROUP].group_epoch == epoch + 1
    assert len(a.partitions()) == len(b.partitions()) == 4
    assert a.epoch == b.epoch == epoch + 1


def test_subscribing_to_a_topic_created_later() -> None:
    world = World()
    a = Client(world, "a", ["t1", "t3"])
    a.heartbeat()
    assert a.partitions() == all_partitions(world, ["t1"])
    world.topics["t3"] = TopicInfo(uuid.UUID(int=3), 2)
    converge(world, [a])
    assert a.partitions() == all_partitions(world, ["t1", "t3"])


def test_subscription_change_moves_partitions() -> None:
    world = World()
    a, b = Client(world, "a", ["t1", "t2"]), Client(world, "b", ["t1", "t2"])
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    b.heartbeat(subscribed_topic_names=["t2"])
    converge(world, [a, b])
    assert all(t == T2 for t, _ in b.partitions())
    assert a.partitions() | b.partitions() == all_partitions(world, ["t1", "t2"])


def test_range_assignor_is_chosen_by_members() -> None:
    world = World()
    a = Client(world, "a", ["t1", "t2"], assignor="range")
    b = Client(world, "b", ["t1", "t2"], assignor="range")
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    assert a.partitions() == {(T1, 0), (T1, 1), (T1, 2), (T2, 0), (T2, 1)}
    assert b.partitions() == {(T1, 3), (T1, 4), (T1, 5), (T2, 2), (T2, 3)}
    [described] = world.coordinator.describe([GROUP], lambda t: {T1: "t1", T2: "t2"}.get(t))
    assert described["assignor_name"] == "range"


def live(world: World, clients: Iterable[Client]) -> list[Client]:
    """Clients the coordinator still counts as members.

    A member the coordinator fenced is a zombie until its next heartbeat tells it so
    (its offset commits are refused from then on); exclusivity holds among live members.
    """
    group = world.coordinator.groups.get(GROUP)
    return [c for c in clients if group is not None and c.member_id in group.members]


@pytest.mark.parametrize("seed", range(8))
def test_random_churn_never_gives_a_partition_to_two_members(seed: int) -> None:
    import random

    rng = random.Random(seed)
    world = World()
    clients: dict[str, Client] = {}
    for step in range(300):
        action = rng.random()
        if action < 0.08 and len(clients) < 6:
            name = f"m{step}"
            clients[name] = Client(world, name, rng.choice([["t1"], ["t1", "t2"], ["t2"]]))
        elif action < 0.12 and clients:
            name = rng.choice(sorted(clients))
            world.coordinator.heartbeat(GROUP, name, -1, now_ms=world.now_ms, topics=world.topics)
            del clients[name]
        elif action < 0.14:
            name = rng.choice(["t1", "t2"])
            info = world.topics[name]
            world.topics[name] = TopicInfo(info.topic_id, info.partition_count + 1)
        elif action < 0.16 and clients:
            # A client crashes: it stops heartbeating and its partitions are lost with it.
            del clients[rng.choice(sorted(clients))]
        elif clients:
            client = clients[rng.choice(sorted(clients))]
            client.stuck = rng.random() < 0.05
            result = client.heartbeat()
            if result.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
                client.epoch, client.owned, client.stuck = 0, {}, False
                client.heartbeat()
            else:
                assert result.error_code == ErrorCode.NONE, result
        world.tick(rng.choice([10, 500, 3_000]))
        no_partition_twice(live(world, clients.values()))
        alive = live(world, clients.values())
        for zombie in (c for c in clients.values() if c not in alive):
            refused = world.coordinator.validate_offset_commit(
                GROUP, zombie.member_id, zombie.epoch
            )
            assert refused == ErrorCode.UNKNOWN_MEMBER_ID
    # Let everyone settle: all subscribed partitions are owned, once.
    for client in clients.values():
        client.stuck = False
    # (long enough for crashed members' sessions to expire)
    for _ in range(60):
        for client in list(clients.values()):
            result = client.heartbeat()
            if result.error_code != ErrorCode.NONE:
                client.epoch, client.owned = 0, {}
                client.heartbeat()
            no_partition_twice(live(world, clients.values()))
        world.tick(1_000)
    if clients:
        subscribed = {n for c in clients.values() for n in c.topics}
        owned = set().union(*(c.partitions() for c in clients.values()))
        assert owned == all_partitions(world, subscribed)
        assert world.coordinator.group_state(GROUP) == GroupState.STABLE
