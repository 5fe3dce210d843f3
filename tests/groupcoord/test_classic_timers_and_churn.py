"""Timers (`DeadlineIndex`, `next_deadline_ms`), unloading, and a randomized churn run."""

from __future__ import annotations

import random
from typing import Any

import pytest

from weir.format.errors import ErrorCode
from weir.groupcoord.classic_group import GroupState
from weir.groupcoord.classic_messages import JoinGroupResult, LeavingMember, SyncGroupResult
from weir.groupcoord.deadlines import DeadlineIndex
from weir.groupcoord.pending import Pending

from .classic_harness import GROUP, INITIAL_DELAY_MS, SESSION_TIMEOUT_MS, Harness


def test_deadline_index_keeps_the_latest_deadline_per_key_and_pops_due_in_order() -> None:
    index = DeadlineIndex()
    index.set("a", 50)
    index.set("b", 20)
    index.set("a", 10)
    index.set("c", 30)
    index.set("c", None)
    assert index.earliest_ms() == 10
    assert index.pop_due(20) == ["a", "b"]
    assert index.pop_due(100) == []
    assert index.earliest_ms() is None


def test_deadline_index_stays_small_under_many_updates() -> None:
    index = DeadlineIndex()
    for i in range(10_000):
        index.set("k", i + 1)
    assert len(index._heap) < 200
    assert index.earliest_ms() == 10_000


def test_next_deadline_is_the_earliest_timer_of_any_group() -> None:
    h = Harness()
    h.stable_group({"client_id": "a"})
    assert h.coord.next_deadline_ms() == h.now_ms + SESSION_TIMEOUT_MS
    h.tick(1_000)
    h.join_new(client_id="x", group_id="other")
    assert h.coord.next_deadline_ms() == h.now_ms + INITIAL_DELAY_MS


def test_heartbeat_moves_the_next_deadline_later() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    h.tick(4_000)
    h.heartbeat(a.member_id, a.generation_id)
    assert h.coord.next_deadline_ms() == h.now_ms + SESSION_TIMEOUT_MS


def test_member_id_awaiting_second_join_survives_the_empty_group_sweep() -> None:
    h = Harness()
    first = h.join()
    h.tick(h.config.offsets_retention_check_interval_ms - 1)  # sweep runs now
    h.coord.advance(h.now_ms + 1)
    # Session timeout passed too: the handed-out id expired, but nothing crashed.
    assert h.join(first.result.member_id).result.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_unload_answers_waiting_requests_not_coordinator() -> None:
    h = Harness()
    join = h.join_new()
    effects = h.coord.unload([GROUP])
    assert join.result.error is ErrorCode.NOT_COORDINATOR
    assert effects.completed == [join]
    assert not h.coord.has_group(GROUP)


def test_immediate_answers_are_listed_as_completed_by_their_own_call() -> None:
    h = Harness()
    first = h.join()
    assert first in h.completed


@pytest.mark.parametrize("seed", range(20))
def test_random_churn_keeps_the_group_consistent_and_answers_every_request(seed: int) -> None:
    rng = random.Random(seed)
    h = Harness()
    known: dict[str, dict[str, Any]] = {}  # member id -> join kwargs
    generation: dict[str, int] = {}
    handles: list[Pending[JoinGroupResult] | Pending[SyncGroupResult]] = []
    generations_seen = [0]
    last_group: list[object] = [None]

    def record_join(p: Pending[JoinGroupResult], kwargs: dict[str, Any]) -> None:
        handles.append(p)
        if p.done and p.result.error is ErrorCode.NONE:
            known[p.result.member_id] = kwargs
            generation[p.result.member_id] = p.result.generation_id

    for _ in range(400):
        action = rng.choice(["new", "static", "rejoin", "sync", "hb", "leave", "tick", "tick"])
        if action in ("new", "static"):
            kwargs: dict[str, Any] = {"client_id": f"c{rng.randrange(3)}"}
            if action == "static":
                kwargs["instance_id"] = f"i{rng.randrange(3)}"
            if rng.random() < 0.3:
                kwargs["topics"] = ["t", "u"]
            record_join(h.join_new(**kwargs), kwargs)
        elif action == "rejoin" and known:
            member_id = rng.choice(sorted(known))
            record_join(h.join(member_id, **known[member_id]), known[member_id])
        elif action == "sync" and known:
            member_id = rng.choice(sorted(known))
            group = h.coord.groups.get(GROUP)
            assignments = [(m, b"x") for m in group.members] if group else []
            handles.append(h.sync(member_id, generation.get(member_id, 0), assignments))
        elif action == "hb" and known:
            member_id = rng.choice(sorted(known))
            h.heartbeat(member_id, generation.get(member_id, 0))
        elif action == "leave" and known:
            h.leave(LeavingMember(rng.choice(sorted(known))))
        else:
            h.tick(rng.choice([100, 1_000, 5_000]))
        # Record the generations that waiting joins learned.
        for p in handles:
            joined = p.done and isinstance(p.result, JoinGroupResult)
            if joined and p.result.error is ErrorCode.NONE:
                assert isinstance(p.result, JoinGroupResult)
                generation[p.result.member_id] = p.result.generation_id
        group = h.coord.groups.get(GROUP)
        if group is None:
            continue
        if group is not last_group[0]:  # emptied, swept away and created again
            last_group[0] = group
            generations_seen.append(0)
        assert group.generation_id >= generations_seen[-1]
        generations_seen.append(group.generation_id)
        if group.members:
            assert group.leader_id in group.members
            assert group.state is not GroupState.EMPTY
        else:
            assert group.state in (GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
        for instance_id, member_id in group.static_members.items():
            assert group.members[member_id].group_instance_id == instance_id
        assert group.pending_sync_members <= set(group.members)

    h.tick(10 * 60 * 1000)  # everyone went quiet: all sessions end
    assert all(p.done for p in handles)
    assert h.coord.group_state(GROUP) in (GroupState.EMPTY, GroupState.DEAD)
