"""Static membership (KIP-345) and cooperative rebalancing (KIP-429)."""

from __future__ import annotations

from weir.format.errors import ErrorCode
from weir.groupcoord.classic_group import GroupState
from weir.groupcoord.classic_messages import LeavingMember

from .classic_harness import GROUP, REBALANCE_TIMEOUT_MS, SESSION_TIMEOUT_MS, Harness, subscription


def test_static_member_rejoining_with_new_id_replaces_the_old_one_without_rebalance() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b", "instance_id": "ib"})
    records_before = len(h.log)
    again = h.join(client_id="b", instance_id="ib")  # restarted: no member id
    assert again.done
    result = again.result
    assert result.error is ErrorCode.NONE
    assert result.member_id != b.member_id
    assert result.generation_id == b.generation_id
    assert not result.skip_assignment and not result.members
    assert h.coord.group_state(GROUP) is GroupState.STABLE
    assert len(h.log) == records_before + 1  # the new member id is persisted
    sync = h.sync(result.member_id, result.generation_id, instance_id="ib")
    assert sync.result.assignment == f"to:{b.member_id}".encode()  # keeps its partitions


def test_replaced_static_member_id_is_fenced() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a", "instance_id": "ia"})
    h.join(client_id="a", instance_id="ia")
    assert h.heartbeat(a.member_id, a.generation_id, "ia") is ErrorCode.FENCED_INSTANCE_ID
    old_sync = h.sync(a.member_id, a.generation_id, instance_id="ia")
    assert old_sync.result.error is ErrorCode.FENCED_INSTANCE_ID
    old_join = h.join(a.member_id, client_id="a", instance_id="ia")
    assert old_join.result.error is ErrorCode.FENCED_INSTANCE_ID
    commit = h.commit([("t", 0, 5)], generation_id=1, member_id=a.member_id, instance_id="ia")
    assert [p.error for p in commit] == [ErrorCode.FENCED_INSTANCE_ID]


def test_static_member_rejoining_with_changed_metadata_triggers_rebalance() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b", "instance_id": "ib"})
    again = h.join(client_id="b", instance_id="ib", topics=["t", "new-topic"])
    assert not again.done
    assert h.coord.group_state(GROUP) is GroupState.PREPARING_REBALANCE
    a2 = h.join(a.member_id, client_id="a")
    assert again.result.generation_id == a2.result.generation_id == 2
    leader_view = {m.member_id: m.metadata for m in a2.result.members}
    assert leader_view[again.result.member_id] == subscription("t", "new-topic")


def test_static_leader_rejoining_gets_the_members_and_skip_assignment() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a", "instance_id": "ia"}, {"client_id": "b"})
    again = h.join(client_id="a", instance_id="ia")
    result = again.result
    assert result.error is ErrorCode.NONE
    assert result.leader == result.member_id != a.member_id
    assert result.skip_assignment
    assert {m.member_id for m in result.members} == {result.member_id, b.member_id}
    assert h.coord.group_state(GROUP) is GroupState.STABLE


def test_old_static_member_waiting_in_join_is_fenced_when_replaced() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b", "instance_id": "ib"})
    old = h.join(b.member_id, client_id="b", instance_id="ib", topics=["x"])
    assert not old.done  # a rebalance, waiting for a
    new = h.join(client_id="b", instance_id="ib", topics=["x"])  # b restarted
    assert old.result.error is ErrorCode.FENCED_INSTANCE_ID
    assert not new.done
    h.join(a.member_id, client_id="a")
    assert new.result.error is ErrorCode.NONE and new.result.generation_id == 2


def test_static_member_is_not_dropped_for_missing_a_rejoin_only_by_session_timeout() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b", "instance_id": "ib"})
    a2 = h.join(a.member_id, client_id="a", topics=["t", "u"])
    for _ in range(REBALANCE_TIMEOUT_MS // 5_000):
        h.tick(5_000)
        h.heartbeat(b.member_id, b.generation_id, "ib")
    assert a2.done
    members = {m.member_id for m in a2.result.members}
    assert members == {a.member_id, b.member_id}
    h.tick(SESSION_TIMEOUT_MS)
    assert h.heartbeat(b.member_id, a2.result.generation_id, "ib") is ErrorCode.UNKNOWN_MEMBER_ID


def test_static_member_leaves_by_instance_id() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a", "instance_id": "ia"})
    result = h.leave(LeavingMember("", "ia"))
    assert [m.error for m in result.members] == [ErrorCode.NONE]
    assert h.coord.group_state(GROUP) is GroupState.EMPTY


def test_two_consecutive_cooperative_rebalances_relay_the_leaders_assignments() -> None:
    """Cooperative-sticky: revoke in one rebalance, reassign in the next; members keep
    what they own between them and the coordinator forces nothing."""
    h = Harness()
    protos_a = [("cooperative-sticky", subscription("t", owned=[("t", 0), ("t", 1)]))]
    (a,) = h.stable_group({"client_id": "a", "protos": protos_a})
    # b joins: rebalance 1. a rejoins still owning both partitions.
    b = h.join_new(client_id="b", protos=[("cooperative-sticky", subscription("t"))])
    assert h.heartbeat(a.member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    a1 = h.join(a.member_id, client_id="a", protos=protos_a)
    assert a1.done and b.done
    assert a1.result.generation_id == 2
    b_id = b.result.member_id
    # The leader keeps t-0, revokes t-1 (assigned to nobody yet).
    sync_b = h.sync(b_id, 2)
    sync_a = h.sync(a.member_id, 2, [(a.member_id, b"t-0"), (b_id, b"")])
    assert sync_a.result.assignment == b"t-0" and sync_b.result.assignment == b""
    # a revoked t-1 and rejoins with its new owned partitions: rebalance 2.
    protos_a2 = [("cooperative-sticky", subscription("t", owned=[("t", 0)]))]
    a2 = h.join(a.member_id, client_id="a", protos=protos_a2)
    assert not a2.done
    assert h.heartbeat(b_id, 2) is ErrorCode.REBALANCE_IN_PROGRESS
    # a keeps consuming t-0 meanwhile: its commits are accepted during the rebalance.
    commit = h.commit([("t", 0, 42)], generation_id=2, member_id=a.member_id)
    assert [p.error for p in commit] == [ErrorCode.NONE]
    b2 = h.join(b_id, client_id="b", protos=[("cooperative-sticky", subscription("t"))])
    assert a2.result.generation_id == b2.result.generation_id == 3
    owned = {m.member_id: m.metadata for m in a2.result.members}
    assert owned[a.member_id] == subscription("t", owned=[("t", 0)])
    sync_b = h.sync(b_id, 3)
    sync_a = h.sync(a.member_id, 3, [(a.member_id, b"t-0"), (b_id, b"t-1")])
    assert sync_b.result.assignment == b"t-1" and sync_a.result.assignment == b"t-0"
    assert h.coord.group_state(GROUP) is GroupState.STABLE
