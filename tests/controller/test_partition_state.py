"""The controller's pure decisions: leader election from the ISR, preferred-leader
election, rack-aware replica placement, and the states' JSON in etcd."""

from __future__ import annotations

import uuid

import pytest

from weir.controller.errors import ControllerError
from weir.controller.partition_state import (
    NO_LEADER,
    BrokerInfo,
    PartitionState,
    abdicate,
    change_isr,
    check_assignment,
    elect_leader,
    elect_leader_without_offline,
    elect_preferred,
    initial_state,
    offline_replicas_from_json,
    offline_replicas_to_json,
    place_replicas,
)
from weir.format.errors import ErrorCode

REPLICAS = [1, 2, 3]


def test_a_new_partition_is_led_by_its_first_replica_with_every_replica_in_sync() -> None:
    assert initial_state(REPLICAS) == PartitionState(leader=1, leader_epoch=0, isr=(1, 2, 3))


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_in_replica_order() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(3, 1, 2), partition_epoch=7)
    elected = elect_leader(state, REPLICAS, frozenset({2, 3}))
    assert elected == PartitionState(leader=2, leader_epoch=5, isr=(3, 2), partition_epoch=8)


def test_dead_followers_leave_the_isr_without_a_new_leader_epoch() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 2, 3), partition_epoch=7)
    elected = elect_leader(state, REPLICAS, frozenset({1, 2}))
    assert elected == PartitionState(leader=1, leader_epoch=4, isr=(1, 2), partition_epoch=8)


def test_nothing_changes_while_the_leader_and_isr_are_alive() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 2))
    assert elect_leader(state, REPLICAS, frozenset({1, 2, 3})) is None


def test_no_live_isr_member_takes_the_partition_offline_keeping_its_isr() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1,), partition_epoch=2)
    offline = elect_leader(state, REPLICAS, frozenset({2, 3}))
    assert offline == PartitionState(leader=NO_LEADER, leader_epoch=5, isr=(1,), partition_epoch=3)
    assert offline is not None and elect_leader(offline, REPLICAS, frozenset({2, 3})) is None
    # When the last in-sync replica returns, it leads again.
    back = elect_leader(offline, REPLICAS, frozenset({1, 2, 3}))
    assert back is not None and back.leader == 1 and back.leader_epoch == 6


def test_unclean_election_picks_a_live_out_of_sync_replica_only_when_asked() -> None:
    state = PartitionState(leader=NO_LEADER, leader_epoch=5, isr=(1,))
    assert elect_leader(state, REPLICAS, frozenset({3})) is None
    unclean = elect_leader(state, REPLICAS, frozenset({3}), unclean=True)
    assert unclean is not None and (unclean.leader, unclean.isr) == (3, (3,))


def test_a_replica_no_longer_assigned_leaves_the_isr() -> None:
    state = PartitionState(leader=2, leader_epoch=1, isr=(2, 1, 3))
    elected = elect_leader(state, [2, 1], frozenset({1, 2, 3}))
    assert elected is not None and elected.isr == (2, 1)


def test_preferred_election_needs_the_first_replica_alive_and_in_sync() -> None:
    moved = PartitionState(leader=2, leader_epoch=3, isr=(2, 1))
    assert elect_preferred(moved, REPLICAS, frozenset({1, 2})) == PartitionState(
        leader=1, leader_epoch=4, isr=(2, 1), partition_epoch=1
    )
    assert elect_preferred(moved, REPLICAS, frozenset({2})) == (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    )
    led = PartitionState(leader=1, leader_epoch=3, isr=(1, 2))
    assert elect_preferred(led, REPLICAS, frozenset({1, 2})) == ErrorCode.ELECTION_NOT_NEEDED


def brokers(*racks: str | None) -> list[BrokerInfo]:
    return [BrokerInfo(node_id=i + 1, host="h", port=9092, rack=r) for i, r in enumerate(racks)]


def test_placement_spreads_leaders_and_never_repeats_a_broker() -> None:
    placed = place_replicas(6, 3, brokers(None, None, None))
    assert [r[0] for r in placed] == [1, 2, 3, 1, 2, 3]
    assert all(len(set(r)) == 3 for r in placed)


def test_placement_puts_replicas_on_other_racks_first() -> None:
    placed = place_replicas(4, 2, brokers("a", "a", "b", "b"))
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    assert all(racks[r[0]] != racks[r[1]] for r in placed), placed


def test_placement_starts_from_the_brokers_with_fewest_replicas() -> None:
    placed = place_replicas(1, 1, brokers(None, None, None), replica_counts={1: 5, 2: 0, 3: 3})
    assert placed == [[2]]


def test_placement_refuses_more_replicas_than_brokers() -> None:
    with pytest.raises(ControllerError) as refused:
        place_replicas(1, 3, brokers(None, None))
    assert refused.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


@pytest.mark.parametrize("replicas", [[], [1, 1], [1, 9]])
def test_explicit_assignments_must_name_distinct_live_brokers(replicas: list[int]) -> None:
    with pytest.raises(ControllerError) as refused:
        check_assignment(replicas, [1, 2, 3])
    assert refused.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_states_and_registrations_round_trip_through_json() -> None:
    state = PartitionState(leader=2, leader_epoch=9, isr=(2, 3), partition_epoch=11)
    assert PartitionState.from_json(state.to_json()) == state
    info = BrokerInfo(node_id=3, host="b3", port=9094, rack="r1", replication_token="t")
    assert BrokerInfo.from_json(info.to_json(), epoch=42) == BrokerInfo(
        node_id=3, host="b3", port=9094, rack="r1", replication_token="t", epoch=42
    )


@pytest.mark.parametrize(
    "value",
    [b"", b"[]", b'{"leader": "1", "leader_epoch": 0, "isr": [1], "partition_epoch": 0}',
     b'{"leader": 1}', b"x" * 70_000],
)  # fmt: skip
def test_unreadable_state_documents_are_refused(value: bytes) -> None:
    with pytest.raises((ValueError, KeyError)):
        PartitionState.from_json(value)


# -- replicas offline after a storage error (Kafka's failed log directory) ----------

ALL_ALIVE = frozenset({1, 2, 3})


def test_a_leader_whose_replica_is_offline_hands_over_to_the_next_isr_member() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 2, 3), partition_epoch=7)
    elected = elect_leader_without_offline(state, REPLICAS, ALL_ALIVE, frozenset({1}))
    assert elected == PartitionState(leader=2, leader_epoch=5, isr=(2, 3), partition_epoch=8)


def test_an_offline_follower_leaves_the_isr_at_once_without_a_new_leader_epoch() -> None:
    state = PartitionState(leader=2, leader_epoch=4, isr=(2, 1, 3), partition_epoch=7)
    elected = elect_leader_without_offline(state, REPLICAS, ALL_ALIVE, frozenset({1}))
    assert elected == PartitionState(leader=2, leader_epoch=4, isr=(2, 3), partition_epoch=8)


def test_an_offline_leader_with_no_other_isr_member_takes_the_partition_offline() -> None:
    """The out-of-sync live replicas never lead (clean election); the ISR is kept,
    so the offline replica leads again once its broker reports it back."""
    state = PartitionState(leader=1, leader_epoch=4, isr=(1,), partition_epoch=2)
    offline = elect_leader_without_offline(state, REPLICAS, ALL_ALIVE, frozenset({1}))
    assert offline == PartitionState(leader=NO_LEADER, leader_epoch=5, isr=(1,), partition_epoch=3)
    assert elect_leader_without_offline(offline, REPLICAS, ALL_ALIVE, frozenset({1})) is None
    back = elect_leader_without_offline(offline, REPLICAS, ALL_ALIVE, frozenset())
    assert back is not None and (back.leader, back.leader_epoch, back.isr) == (1, 6, (1,))


def test_an_unclean_election_never_picks_an_offline_replica() -> None:
    state = PartitionState(leader=NO_LEADER, leader_epoch=5, isr=(3,))
    elected = elect_leader_without_offline(
        state, REPLICAS, frozenset({1, 2}), frozenset({1}), unclean=True
    )
    assert elected is not None and (elected.leader, elected.isr) == (2, (2,))
    nobody = elect_leader_without_offline(
        state, [1, 3], frozenset({1}), frozenset({1}), unclean=True
    )
    assert nobody is None


def test_offline_replicas_of_other_brokers_change_nothing_while_all_are_in_sync() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 2, 3))
    assert elect_leader_without_offline(state, REPLICAS, ALL_ALIVE, frozenset()) is None


def test_offline_replica_documents_round_trip_and_bad_ones_are_refused() -> None:
    topic_a, topic_b = uuid.uuid4(), uuid.uuid4()
    keys = frozenset({(topic_a, 0), (topic_a, 7), (topic_b, 3)})
    assert offline_replicas_from_json(offline_replicas_to_json(keys)) == keys
    assert offline_replicas_from_json(offline_replicas_to_json(())) == frozenset()
    not_an_index = b'{"replicas": {"%s": ["1"]}}' % str(topic_a).encode()
    for bad in (b"[]", b'{"replicas": []}', b'{"replicas": {"x": [1]}}', not_an_index,
                b"x" * 2_000_000):  # fmt: skip
        with pytest.raises((ValueError, KeyError, TypeError)):
            offline_replicas_from_json(bad)


# -- eligible leader replicas (KIP-966) and a cut-off leader's abdication ------------


def test_states_with_eligible_leader_replicas_round_trip_and_older_documents_load() -> None:
    state = PartitionState(leader=1, leader_epoch=3, isr=(1,), partition_epoch=5, elr=(2, 3))
    assert PartitionState.from_json(state.to_json()) == state
    older = b'{"leader": 1, "leader_epoch": 3, "isr": [1], "partition_epoch": 5}'
    assert PartitionState.from_json(older).elr == ()
    assert b"elr" not in PartitionState(leader=1, leader_epoch=0, isr=(1,)).to_json()
    with pytest.raises(ValueError):
        PartitionState.from_json(older[:-1] + b', "elr": 2}')


def test_replicas_leaving_the_isr_below_min_isr_become_eligible_leaders() -> None:
    full = PartitionState(leader=1, leader_epoch=0, isr=(1, 2, 3))
    # Down to min.insync.replicas: the HW still advances without 3, so 3 is not eligible.
    at_min = change_isr(full, (1, 2), min_isr=2, replicas=REPLICAS)
    assert (at_min.isr, at_min.elr, at_min.partition_epoch) == ((1, 2), (), 1)
    # Below it nothing is committed any more: 2 keeps every committed record.
    below = change_isr(at_min, (1,), min_isr=2, replicas=REPLICAS)
    assert (below.isr, below.elr) == ((1,), (2,))
    both = change_isr(full, (1,), min_isr=2, replicas=REPLICAS)
    assert both.elr == (2, 3)


def test_the_elr_empties_once_the_isr_is_back_at_min_isr_and_rejoining_replicas_leave_it() -> None:
    below = PartitionState(leader=1, leader_epoch=0, isr=(1,), elr=(2, 3))
    assert change_isr(below, (1, 3), min_isr=2, replicas=REPLICAS).elr == ()
    still_below = change_isr(below, (1, 3), min_isr=3, replicas=REPLICAS)
    assert (still_below.isr, still_below.elr) == ((1, 3), (2,))
    # A replica a move removed is never eligible.
    assert change_isr(below, (1,), min_isr=2, replicas=[1, 3]).elr == (3,)


def test_the_controller_puts_dead_followers_in_the_elr_when_the_isr_falls_below_min() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 2), partition_epoch=7)
    elected = elect_leader(state, REPLICAS, frozenset({1, 3}), min_isr=2)
    assert elected == PartitionState(
        leader=1, leader_epoch=4, isr=(1,), partition_epoch=8, elr=(2,)
    )


def test_with_no_live_isr_member_a_live_eligible_replica_leads_cleanly() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1,), partition_epoch=7, elr=(3, 2))
    elected = elect_leader(state, REPLICAS, frozenset({2, 3}), min_isr=2)
    # Replica order (2 before 3), alone in the ISR; the dead leader keeps its records: eligible.
    assert elected == PartitionState(
        leader=2, leader_epoch=5, isr=(2,), partition_epoch=8, elr=(3, 1)
    )
    # None alive: offline, the ELR kept for when one returns.
    offline = elect_leader(state, REPLICAS, frozenset(), min_isr=2)
    assert offline is not None and (offline.leader, offline.isr, offline.elr) == (
        NO_LEADER,
        (1,),
        (3, 2),
    )
    back = elect_leader(offline, REPLICAS, frozenset({3}), min_isr=2)
    assert back is not None and (back.leader, back.isr, back.elr) == (3, (3,), (2, 1))


def test_unclean_election_prefers_an_eligible_replica_and_clears_the_elr_when_it_must() -> None:
    state = PartitionState(leader=NO_LEADER, leader_epoch=5, isr=(1,), elr=(2,))
    clean = elect_leader(state, REPLICAS, frozenset({2, 3}), unclean=True, min_isr=2)
    assert clean is not None and (clean.leader, clean.elr) == (2, (1,))
    unclean = elect_leader(state, REPLICAS, frozenset({3}), unclean=True, min_isr=2)
    assert unclean is not None and (unclean.leader, unclean.isr, unclean.elr) == (3, (3,), ())


def test_a_leader_below_min_isr_abdicates_to_a_live_eligible_replica() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1,), partition_epoch=9, elr=(2, 3))
    handed = abdicate(state, REPLICAS, frozenset({1, 2, 3}), min_isr=2)
    assert handed == PartitionState(
        leader=2, leader_epoch=5, isr=(2,), partition_epoch=10, elr=(3, 1)
    )
    # A dead eligible replica is skipped.
    skipped = abdicate(state, REPLICAS, frozenset({1, 3}), min_isr=2)
    assert skipped is None  # only one live replica besides the leader: no ISR of 2 elsewhere
    three = abdicate(state, [1, 2, 3, 4], frozenset({1, 3, 4}), min_isr=2)
    assert three is not None and three.leader == 3


def test_a_leader_at_min_isr_or_without_a_useful_successor_keeps_leading() -> None:
    at_min = PartitionState(leader=1, leader_epoch=4, isr=(1, 2), elr=())
    assert abdicate(at_min, REPLICAS, frozenset({1, 2, 3}), min_isr=2) is None
    alone = PartitionState(leader=1, leader_epoch=4, isr=(1,))
    assert abdicate(alone, REPLICAS, frozenset({1, 2, 3}), min_isr=1) is None
    # Nobody eligible (the followers left the ISR while it still met the minimum).
    assert abdicate(alone, REPLICAS, frozenset({1, 2, 3}), min_isr=2) is None
    # Replication factor 2 with min.insync.replicas=2: the other replica alone could
    # never commit either; leadership would only bounce.
    pair = PartitionState(leader=1, leader_epoch=4, isr=(1,), elr=(2,))
    assert abdicate(pair, [1, 2], frozenset({1, 2}), min_isr=2) is None


def test_successive_abdications_rotate_through_the_eligible_replicas() -> None:
    state: PartitionState | None = PartitionState(leader=1, leader_epoch=0, isr=(1,), elr=(2, 3))
    leaders = []
    for _ in range(4):
        assert state is not None
        state = abdicate(state, REPLICAS, frozenset(REPLICAS), min_isr=2)
        assert state is not None
        leaders.append(state.leader)
    assert leaders == [2, 3, 1, 2]
