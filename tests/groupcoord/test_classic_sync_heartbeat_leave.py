"""SyncGroup, Heartbeat and LeaveGroup: assignments, fencing, timeouts."""

from __future__ import annotations

from weir.format.errors import ErrorCode
from weir.groupcoord import classic_records as rec
from weir.groupcoord.classic_group import GroupState
from weir.groupcoord.classic_messages import LeavingMember, SyncGroupRequest

from .classic_harness import GROUP, REBALANCE_TIMEOUT_MS, SESSION_TIMEOUT_MS, Harness


def test_follower_sync_waits_for_the_leaders_assignment() -> None:
    h = Harness()
    a = h.join_new(client_id="a")
    b = h.join_new(client_id="b")
    h.await_joins([a, b])
    follower = h.sync(b.result.member_id, 1)
    assert not follower.done
    leader = h.sync(a.result.member_id, 1, [(b.result.member_id, b"B"), (a.result.member_id, b"A")])
    assert leader.result.assignment == b"A"
    assert follower.result.assignment == b"B"
    assert follower.result.protocol_type == "consumer"
    assert follower.result.protocol_name == "range"
    assert follower in h.completed
    assert h.coord.group_state(GROUP) is GroupState.STABLE


def test_leader_assignment_is_persisted_before_anyone_is_answered() -> None:
    h = Harness()
    a = h.join_new(client_id="a")
    h.await_joins([a])
    request = SyncGroupRequest(GROUP, 1, a.result.member_id, [(a.result.member_id, b"A")])
    reply = h.coord.sync_group(request, h.now_ms)
    assert len(reply.records) == 1
    assert reply.records[0][0][:2] == b"\x00\x02"  # GroupMetadataKey
    assert reply.pending in reply.completed


def test_member_left_out_of_the_assignment_gets_an_empty_one() -> None:
    h = Harness()
    a = h.join_new(client_id="a")
    b = h.join_new(client_id="b")
    h.await_joins([a, b])
    h.sync(a.result.member_id, 1, [(a.result.member_id, b"A")])
    assert h.sync(b.result.member_id, 1).result.assignment == b""


def test_sync_in_stable_group_returns_the_members_assignment() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    again = h.sync(b.member_id, b.generation_id)
    assert again.result.assignment == f"to:{b.member_id}".encode()


def test_sync_with_wrong_generation_is_illegal_generation() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    assert h.sync(a.member_id, a.generation_id + 1).result.error is ErrorCode.ILLEGAL_GENERATION


def test_sync_from_unknown_member_is_unknown_member_id() -> None:
    h = Harness()
    h.stable_group({"client_id": "a"})
    assert h.sync("ghost", 1).result.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_sync_with_other_protocol_type_or_name_is_inconsistent_group_protocol() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    wrong_type = h.sync(a.member_id, 1, protocol_type="connect")
    wrong_name = h.sync(a.member_id, 1, protocol_name="roundrobin")
    right = h.sync(a.member_id, 1, protocol_type="consumer", protocol_name="range")
    assert wrong_type.result.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert wrong_name.result.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert right.result.error is ErrorCode.NONE


def test_sync_during_preparing_rebalance_is_rebalance_in_progress() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    h.join(a.member_id, client_id="a")
    sync = h.sync(b.member_id, b.generation_id)
    assert sync.result.error is ErrorCode.REBALANCE_IN_PROGRESS


def test_heartbeat_answers_by_state_and_fences_by_generation_and_member() -> None:
    h = Harness()
    a = h.join_new(client_id="a")
    h.await_joins([a])
    member_id = a.result.member_id
    assert h.heartbeat(member_id, 1) is ErrorCode.NONE  # CompletingRebalance
    h.sync(member_id, 1, [(member_id, b"")])
    assert h.heartbeat(member_id, 1) is ErrorCode.NONE
    assert h.heartbeat(member_id, 0) is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("ghost", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("nogroup", 1, member_id, None, h.now_ms) is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    h.join_new(client_id="b")
    assert h.heartbeat(member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS


def test_member_removed_after_session_timeout_triggers_rebalance() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    h.tick(SESSION_TIMEOUT_MS // 2)
    assert h.heartbeat(a.member_id, a.generation_id) is ErrorCode.NONE
    h.tick(SESSION_TIMEOUT_MS // 2)  # b's session ends
    assert h.coord.group_state(GROUP) is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a.member_id, a.generation_id) is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.heartbeat(b.member_id, b.generation_id) is ErrorCode.UNKNOWN_MEMBER_ID
    a2 = h.join(a.member_id, client_id="a")
    assert a2.result.generation_id == a.generation_id + 1
    assert [m.member_id for m in a2.result.members] == [a.member_id]


def test_session_expiry_happens_exactly_at_the_deadline() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    h.tick(SESSION_TIMEOUT_MS - 1)
    assert h.coord.group_state(GROUP) is GroupState.STABLE
    assert h.coord.next_deadline_ms() == h.now_ms + 1
    h.tick(1)
    assert h.coord.group_state(GROUP) is GroupState.EMPTY


def test_heartbeats_keep_a_member_alive() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    for _ in range(10):
        h.tick(SESSION_TIMEOUT_MS - 1)
        assert h.heartbeat(a.member_id, a.generation_id) is ErrorCode.NONE
    assert h.coord.group_state(GROUP) is GroupState.STABLE


def test_member_that_never_syncs_is_removed_after_the_rebalance_timeout() -> None:
    h = Harness()
    a = h.join_new(client_id="a")
    b = h.join_new(client_id="b")
    h.await_joins([a, b])
    h.sync(a.result.member_id, 1, [(a.result.member_id, b"A"), (b.result.member_id, b"B")])
    for _ in range(REBALANCE_TIMEOUT_MS // 5_000):  # both heartbeat; b never syncs
        h.tick(5_000)
        h.heartbeat(a.result.member_id, 1)
        h.heartbeat(b.result.member_id, 1)
    assert h.coord.group_state(GROUP) is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(b.result.member_id, 1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_last_member_leaving_empties_the_group_and_bumps_the_generation() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    result = h.leave(LeavingMember(a.member_id))
    assert result.error is ErrorCode.NONE
    assert [m.error for m in result.members] == [ErrorCode.NONE]
    assert h.coord.group_state(GROUP) is GroupState.EMPTY
    description = h.coord.describe_group(GROUP)
    assert description.state == "Empty" and not description.members
    # The empty group was persisted with the next generation.
    value = h.log[-1][1]
    assert value is not None
    assert rec.decode_group_metadata_value(value).generation == a.generation_id + 1


def test_batched_leave_removes_members_and_reports_each() -> None:
    h = Harness()
    a, b, c = h.stable_group(
        {"client_id": "a"}, {"client_id": "b", "instance_id": "ib"}, {"client_id": "c"}
    )
    result = h.leave(
        LeavingMember(a.member_id),
        LeavingMember("", "ib"),
        LeavingMember("ghost"),
        LeavingMember("wrong-id", "ib"),
    )
    assert [m.error for m in result.members] == [
        ErrorCode.NONE,
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    assert [m.member_id for m in h.coord.describe_group(GROUP).members] == [c.member_id]
    assert h.coord.group_state(GROUP) is GroupState.PREPARING_REBALANCE
    c2 = h.join(c.member_id, client_id="c")
    assert c2.result.leader == c.member_id


def test_leave_with_fenced_instance_id_is_fenced_instance_id() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a", "instance_id": "i"})
    result = h.leave(LeavingMember("old-id", "i"))
    assert [m.error for m in result.members] == [ErrorCode.FENCED_INSTANCE_ID]
    assert h.coord.group_state(GROUP) is GroupState.STABLE


def test_leave_from_unknown_group_reports_unknown_member_per_member() -> None:
    h = Harness()
    result = h.leave(LeavingMember("x"))
    assert result.error is ErrorCode.NONE
    assert [m.error for m in result.members] == [ErrorCode.UNKNOWN_MEMBER_ID]


def test_leaving_while_others_wait_in_join_completes_the_rebalance() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    a2 = h.join(a.member_id, client_id="a")
    assert not a2.done
    h.leave(LeavingMember(b.member_id))
    assert a2.done and a2.result.generation_id == 2
    assert a2 in h.completed


def test_leaving_member_waiting_in_join_is_answered_unknown_member_id() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    a2 = h.join(a.member_id, client_id="a")
    h.leave(LeavingMember(a.member_id))
    assert a2.result.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_rebalance_completes_as_soon_as_every_member_rejoined() -> None:
    h = Harness()
    a, b = h.stable_group({"client_id": "a"}, {"client_id": "b"})
    h.join(a.member_id, client_id="a")
    h.join(b.member_id, client_id="b", topics=["other"])
    assert h.coord.group_state(GROUP) is GroupState.COMPLETING_REBALANCE


def test_leave_response_before_v3_carries_the_single_members_error() -> None:
    h = Harness()
    h.stable_group({"client_id": "a"})
    result = h.leave(LeavingMember("ghost"))
    assert result.response(2) == {"error_code": int(ErrorCode.UNKNOWN_MEMBER_ID)}
    assert result.response(3)["members"][0]["error_code"] == int(ErrorCode.UNKNOWN_MEMBER_ID)
    assert result.response(3)["error_code"] == 0


def test_join_error_response_has_empty_protocol_name_before_v7() -> None:
    h = Harness()
    result = h.join("ghost").result
    assert result.response(6)["protocol_name"] == ""
    assert result.response(7)["protocol_name"] is None
    assert result.response(7)["error_code"] == int(ErrorCode.UNKNOWN_MEMBER_ID)


def test_empty_group_id_is_invalid_group_id_for_sync_heartbeat_and_leave() -> None:
    h = Harness()
    sync = h.coord.sync_group(SyncGroupRequest("", 1, "m"), h.now_ms).pending
    assert sync.result.error is ErrorCode.INVALID_GROUP_ID
    assert h.coord.heartbeat("", 1, "m", None, h.now_ms) is ErrorCode.INVALID_GROUP_ID
    leave = h.coord.leave_group("", [LeavingMember("m")], h.now_ms).pending
    assert leave.result.error is ErrorCode.INVALID_GROUP_ID
