"""JoinGroup: member ids, the initial delay, protocols, leaders, limits, generations."""

from __future__ import annotations

from weir.format.errors import ErrorCode
from weir.groupcoord.classic_group import GroupState
from weir.groupcoord.settings import GroupSettings

from .classic_harness import (
    GROUP,
    INITIAL_DELAY_MS,
    REBALANCE_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    Harness,
    protocols,
    subscription,
)


def test_first_dynamic_join_from_v4_gets_member_id_required_then_joins_with_it() -> None:
    h = Harness()
    first = h.join()
    assert first.done
    assert first.result.error is ErrorCode.MEMBER_ID_REQUIRED
    assert first.result.member_id == "c-1"
    assert not h.coord.describe_group(GROUP).members

    second = h.join("c-1")
    assert not second.done
    h.tick(INITIAL_DELAY_MS)
    assert second.result.error is ErrorCode.NONE
    assert second.result.member_id == "c-1"
    assert second.result.generation_id == 1
    assert second.result.leader == "c-1"


def test_join_before_v4_gets_a_member_id_and_joins_at_once() -> None:
    h = Harness()
    join = h.join(require_known_member_id=False)
    h.tick(INITIAL_DELAY_MS)
    assert join.result.error is ErrorCode.NONE
    assert join.result.member_id == "c-1"


def test_first_rebalance_of_empty_group_waits_the_initial_delay() -> None:
    h = Harness()
    join = h.join_new()
    assert h.coord.group_state(GROUP) is GroupState.PREPARING_REBALANCE
    h.tick(INITIAL_DELAY_MS - 1)
    assert not join.done
    h.tick(1)
    assert join.done
    assert h.coord.group_state(GROUP) is GroupState.COMPLETING_REBALANCE


def test_initial_delay_extends_while_members_arrive_but_not_past_rebalance_timeout() -> None:
    h = Harness(config=GroupSettings(classic_initial_rebalance_delay_ms=INITIAL_DELAY_MS))
    first = h.join_new(rebalance_timeout_ms=7_000)
    h.tick(2_000)
    second = h.join_new(rebalance_timeout_ms=7_000)
    h.tick(1_000)  # first delay over, a member arrived: wait 3s more
    assert not first.done
    h.tick(2_000)
    third = h.join_new(rebalance_timeout_ms=7_000)
    h.tick(1_000)  # second delay over; only 1s of rebalance timeout left
    assert not first.done
    h.tick(1_000)
    assert first.done and second.done and third.done
    assert h.now_ms - 7_000 == 1_000_000
    assert len(first.result.members) == 3


def test_initial_delay_of_zero_completes_when_everyone_joined() -> None:
    h = Harness(config=GroupSettings(classic_initial_rebalance_delay_ms=0))
    join = h.join_new()
    h.tick(0)
    assert join.result.error is ErrorCode.NONE


def test_leader_alone_receives_the_members_metadata() -> None:
    h = Harness()
    a = h.join_new(client_id="a", topics=["t1"])
    b = h.join_new(client_id="b", topics=["t2"])
    h.await_joins([a, b])
    leader, follower = a.result, b.result
    assert leader.leader == follower.leader == leader.member_id
    assert [(m.member_id, m.metadata) for m in leader.members] == [
        (leader.member_id, subscription("t1")),
        (follower.member_id, subscription("t2")),
    ]
    assert not follower.members
    assert leader.generation_id == follower.generation_id == 1
    assert leader.protocol_type == "consumer" and leader.protocol_name == "range"


def test_protocol_is_chosen_by_votes_among_protocols_every_member_supports() -> None:
    h = Harness()
    h.join_new(client_id="a", protos=[("sticky", b"a"), ("range", b"a"), ("rr", b"a")])
    h.join_new(client_id="b", protos=[("rr", b"b"), ("range", b"b")])
    c = h.join_new(client_id="c", protos=[("range", b"c"), ("rr", b"c")])
    h.await_joins([c])
    # sticky: not supported by all; votes: a->range, b->rr, c->range.
    assert c.result.protocol_name == "range"


def test_join_with_no_protocol_in_common_is_inconsistent_group_protocol() -> None:
    h = Harness()
    h.join_new(client_id="a", protos=[("range", b"")])
    other = h.join(client_id="b", protos=[("roundrobin", b"")])
    assert other.result.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_join_with_another_protocol_type_is_inconsistent_group_protocol() -> None:
    h = Harness()
    h.join_new(client_id="a")
    other = h.join(client_id="b", protocol_type="connect")
    assert other.result.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_join_with_empty_protocol_list_is_inconsistent_group_protocol() -> None:
    h = Harness()
    assert h.join(protos=[]).result.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert not h.coord.has_group(GROUP)


def test_session_timeout_outside_bounds_is_invalid_session_timeout() -> None:
    h = Harness(
        config=GroupSettings(
            classic_session_timeout_min_ms=6_000, classic_session_timeout_max_ms=60_000
        )
    )
    assert h.join(session_timeout_ms=5_999).result.error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join(session_timeout_ms=60_001).result.error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join(session_timeout_ms=60_000).result.error is ErrorCode.MEMBER_ID_REQUIRED


def test_join_with_empty_group_id_is_invalid_group_id() -> None:
    h = Harness()
    assert h.join(group_id="").result.error is ErrorCode.INVALID_GROUP_ID


def test_join_beyond_group_max_size_is_group_max_size_reached() -> None:
    h = Harness(config=GroupSettings(group_max_size=2, classic_initial_rebalance_delay_ms=0))
    results = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    third = h.join(client_id="x", require_known_member_id=False)
    assert third.result.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert h.coord.group_state(GROUP) is GroupState.STABLE
    assert len(h.coord.describe_group(GROUP).members) == len(results)


def test_rejoin_with_unknown_member_id_is_unknown_member_id() -> None:
    h = Harness()
    assert h.join("nobody").result.error is ErrorCode.UNKNOWN_MEMBER_ID
    h.join_new()
    assert h.join("nobody").result.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_member_id_handed_out_expires_if_not_used_within_session_timeout() -> None:
    h = Harness()
    first = h.join()
    h.tick(SESSION_TIMEOUT_MS)
    assert h.join(first.result.member_id).result.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_second_member_joining_stable_group_starts_new_generation() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    b = h.join_new(client_id="b")
    assert h.coord.group_state(GROUP) is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a.member_id, a.generation_id) is ErrorCode.REBALANCE_IN_PROGRESS
    a2 = h.join(a.member_id, client_id="a")
    assert a2.done and b.done
    assert a2.result.generation_id == b.result.generation_id == 2
    assert a2.result.leader == a.member_id
    assert len(a2.result.members) == 2


def test_dynamic_member_that_does_not_rejoin_within_rebalance_timeout_is_removed() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    c = h.join_new(client_id="c")
    b2 = h.join(b.member_id, client_id="b")
    for _ in range(REBALANCE_TIMEOUT_MS // 5_000 - 1):  # a heartbeats but never rejoins
        h.tick(5_000)
        assert h.heartbeat(a.member_id, a.generation_id) is ErrorCode.REBALANCE_IN_PROGRESS
    h.tick(4_999)
    assert not c.done
    h.tick(1)
    assert c.result.error is ErrorCode.NONE and b2.result.error is ErrorCode.NONE
    assert {m.member_id for m in h.coord.describe_group(GROUP).members} == {
        b.member_id,
        c.result.member_id,
    }
    # The old leader did not rejoin: a rejoined member leads.
    assert b2.result.leader == b.member_id
    assert h.heartbeat(a.member_id, a.generation_id) is ErrorCode.UNKNOWN_MEMBER_ID


def test_stable_follower_rejoining_with_same_metadata_gets_current_generation() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    again = h.join(b.member_id, client_id="b")
    assert again.result.error is ErrorCode.NONE
    assert again.result.generation_id == b.generation_id
    assert h.coord.group_state(GROUP) is GroupState.STABLE


def test_stable_follower_rejoining_with_new_metadata_triggers_rebalance() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    again = h.join(b.member_id, client_id="b", topics=["t", "u"])
    assert not again.done
    assert h.coord.group_state(GROUP) is GroupState.PREPARING_REBALANCE
    a2 = h.join(a.member_id, client_id="a")
    assert a2.result.generation_id == again.result.generation_id == a.generation_id + 1


def test_leader_rejoining_stable_group_triggers_rebalance() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    again = h.join(a.member_id, client_id="a")
    assert not again.done
    assert h.coord.group_state(GROUP) is GroupState.PREPARING_REBALANCE


def test_member_that_lost_its_join_answer_gets_it_again_while_completing() -> None:
    h = Harness()
    a = h.join_new(client_id="a")
    h.tick(INITIAL_DELAY_MS)
    again = h.join(a.result.member_id, client_id="a")
    assert again.result == a.result


def test_new_member_joining_while_completing_rebalance_restarts_it() -> None:
    h = Harness()
    a = h.join_new(client_id="a")
    b = h.join_new(client_id="b")
    h.await_joins([a, b])
    follower_sync = h.sync(b.result.member_id, b.result.generation_id)
    assert not follower_sync.done
    c = h.join_new(client_id="c")
    assert h.coord.group_state(GROUP) is GroupState.PREPARING_REBALANCE
    assert follower_sync.result.error is ErrorCode.REBALANCE_IN_PROGRESS
    leader_sync = h.sync(a.result.member_id, a.result.generation_id)
    assert leader_sync.result.error is ErrorCode.REBALANCE_IN_PROGRESS
    a2 = h.join(a.result.member_id, client_id="a")
    b2 = h.join(b.result.member_id, client_id="b")
    assert a2.done and b2.done and c.done
    assert a2.result.generation_id == 2


def test_every_waiting_join_is_answered_when_the_rebalance_completes() -> None:
    h = Harness()
    joins = [h.join_new(client_id=f"m{i}", protos=protocols("t")) for i in range(5)]
    h.tick(INITIAL_DELAY_MS)
    assert not any(j.done for j in joins)  # members kept arriving: the delay extends
    h.tick(INITIAL_DELAY_MS)
    assert all(j.done for j in joins)
    assert {id(j) for j in joins} <= {id(p) for p in h.completed}


def test_member_silent_during_rebalance_is_removed_at_its_session_timeout() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    a2 = h.join(a.member_id, client_id="a")  # the leader rejoins: a rebalance
    h.tick(SESSION_TIMEOUT_MS - 1)
    assert not a2.done
    h.tick(1)
    assert a2.result.error is ErrorCode.NONE
    assert [m.member_id for m in a2.result.members] == [a.member_id]
    assert h.heartbeat(b.member_id, b.generation_id) is ErrorCode.UNKNOWN_MEMBER_ID
