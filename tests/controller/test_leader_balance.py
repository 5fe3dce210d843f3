"""Automatic preferred-leader rebalancing (Kafka's auto.leader.rebalance.enable):
which brokers are imbalanced, and which preferred-leader elections the controller
makes for them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from weir.controller.partition_state import (
    NO_LEADER,
    PartitionLeadership,
    PartitionState,
    PreferredImbalance,
    preferred_imbalance,
    preferred_leader_rebalance,
)

ALL_ALIVE = frozenset({1, 2, 3})


def led_by(
    leader: int, replicas: tuple[int, ...], isr: tuple[int, ...] | None = None
) -> PartitionLeadership:
    state = PartitionState(leader=leader, leader_epoch=2, isr=isr or replicas, partition_epoch=5)
    return PartitionLeadership(replicas=replicas, state=state)


def after_failover_of_broker_1() -> dict[str, PartitionLeadership]:
    """Six partitions, each broker preferred for two; broker 1 returned and is in
    every ISR again, but brokers 2 and 3 still lead its partitions."""
    return {
        "p0": led_by(2, (1, 2, 3)),
        "p1": led_by(2, (2, 3, 1)),
        "p2": led_by(3, (3, 1, 2)),
        "p3": led_by(3, (1, 3, 2)),
        "p4": led_by(2, (2, 1, 3)),
        "p5": led_by(3, (3, 2, 1)),
    }


def test_a_returned_broker_gets_back_the_partitions_it_is_preferred_for() -> None:
    partitions = after_failover_of_broker_1()
    elections = preferred_leader_rebalance(partitions, ALL_ALIVE, 10)
    assert [key for key, _ in elections] == ["p0", "p3"]
    for key, state in elections:
        before = partitions[key].state
        assert state == PartitionState(
            leader=1,
            leader_epoch=before.leader_epoch + 1,
            isr=before.isr,
            partition_epoch=before.partition_epoch + 1,
        )


def test_the_imbalance_ratio_counts_partitions_a_broker_is_preferred_for_but_does_not_lead() -> (
    None
):
    assert preferred_imbalance(after_failover_of_broker_1().values()) == {
        1: PreferredImbalance(not_led=2, preferred=2),
        2: PreferredImbalance(not_led=0, preferred=2),
        3: PreferredImbalance(not_led=0, preferred=2),
    }


def partitions_of_broker_1(count: int, not_led: int) -> dict[int, PartitionLeadership]:
    """`count` partitions preferring broker 1, the first `not_led` of them led by 2."""
    return {i: led_by(2 if i < not_led else 1, (1, 2, 3)) for i in range(count)}


def test_a_broker_at_or_below_the_threshold_keeps_its_leaders_where_they_are() -> None:
    # One partition in ten not led: 10 %, not over the default 10 %.
    assert preferred_leader_rebalance(partitions_of_broker_1(10, 1), ALL_ALIVE, 10) == []
    # Two in ten is over it: both move.
    moved = preferred_leader_rebalance(partitions_of_broker_1(10, 2), ALL_ALIVE, 10)
    assert [key for key, _ in moved] == [0, 1]


def test_a_zero_percentage_rebalances_any_imbalance_and_a_hundred_none() -> None:
    partitions = partitions_of_broker_1(20, 1)
    assert [key for key, _ in preferred_leader_rebalance(partitions, ALL_ALIVE, 0)] == [0]
    every_one_moved = partitions_of_broker_1(4, 4)
    assert preferred_leader_rebalance(every_one_moved, ALL_ALIVE, 100) == []


def test_a_preferred_replica_that_is_not_in_sync_yet_does_not_lead() -> None:
    # Broker 1 came back but is still catching up: outside the ISR, it waits.
    catching_up = {0: led_by(2, (1, 2, 3), isr=(2, 3))}
    assert preferred_leader_rebalance(catching_up, ALL_ALIVE, 10) == []


def test_a_dead_preferred_replica_does_not_lead() -> None:
    # Still in the ISR (the controller has not dropped it yet), but not registered.
    assert preferred_leader_rebalance({0: led_by(2, (1, 2, 3))}, frozenset({2, 3}), 10) == []


def test_a_partition_being_reassigned_counts_in_the_ratio_but_keeps_its_leader() -> None:
    moving = PartitionLeadership(replicas=(1, 2, 3), state=led_by(2, (1, 2, 3)).state, moving=True)
    partitions = {"moving": moving, "settled": led_by(1, (1, 2, 3))}
    # One of two not led (50 %): broker 1 is imbalanced, yet the moving one stays.
    assert preferred_imbalance(partitions.values())[1] == PreferredImbalance(1, 2)
    assert preferred_leader_rebalance(partitions, ALL_ALIVE, 10) == []


def test_only_imbalanced_brokers_partitions_move() -> None:
    partitions = {
        # Broker 1: one of one not led, imbalanced.
        "a": led_by(3, (1, 2, 3)),
        # Broker 2: one of twenty not led (5 %), balanced enough.
        **{f"b{i}": led_by(3 if i == 0 else 2, (2, 3, 1)) for i in range(20)},
    }
    assert [key for key, _ in preferred_leader_rebalance(partitions, ALL_ALIVE, 10)] == ["a"]


def test_an_offline_partition_counts_as_not_led() -> None:
    offline = {0: led_by(NO_LEADER, (1, 2, 3), isr=(1,))}
    assert preferred_imbalance(offline.values()) == {1: PreferredImbalance(1, 1)}


BROKERS = (1, 2, 3, 4)


@st.composite
def leaderships(draw: st.DrawFn) -> PartitionLeadership:
    replicas = tuple(draw(st.permutations(BROKERS))[: draw(st.integers(1, 3))])
    isr = tuple(r for r in replicas if draw(st.booleans()))
    leader = draw(st.sampled_from((*isr, NO_LEADER)))
    state = PartitionState(leader=leader, leader_epoch=draw(st.integers(0, 9)), isr=isr)
    return PartitionLeadership(replicas=replicas, state=state, moving=draw(st.booleans()))


@given(
    partitions=st.lists(leaderships(), max_size=30),
    alive=st.frozensets(st.sampled_from(BROKERS)),
    percentage=st.integers(0, 100),
)
def test_elections_pick_live_in_sync_preferred_replicas_and_settle_in_one_round(
    partitions: list[PartitionLeadership], alive: frozenset[int], percentage: int
) -> None:
    by_key = dict(enumerate(partitions))
    elections = preferred_leader_rebalance(by_key, alive, percentage)
    imbalanced = {b for b, i in preferred_imbalance(partitions).items() if i.exceeds(percentage)}
    for key, state in elections:
        partition = by_key[key]
        assert not partition.moving
        assert state.leader == partition.replicas[0] != partition.state.leader
        assert state.leader in alive and state.leader in partition.state.isr
        assert state.leader in imbalanced
        assert state.isr == partition.state.isr
        assert state.leader_epoch == partition.state.leader_epoch + 1
    # Applied, they leave nothing for the next check (no leader moves back and forth).
    applied = dict(by_key)
    for key, state in elections:
        applied[key] = PartitionLeadership(by_key[key].replicas, state, by_key[key].moving)
    assert preferred_leader_rebalance(applied, alive, percentage) == []
