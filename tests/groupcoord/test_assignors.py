"""Server-side assignors: balance, stickiness across membership changes, co-partitioning."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping

import pytest

from weir.groupcoord.assignors import ASSIGNORS, MemberSpec, RangeAssignor, UniformAssignor

A = uuid.UUID(int=10)
B = uuid.UUID(int=11)
C = uuid.UUID(int=12)
Result = dict[str, dict[uuid.UUID, frozenset[int]]]


def specs(
    subscriptions: Mapping[str, set[uuid.UUID]], previous: Result | None = None
) -> dict[str, MemberSpec]:
    previous = previous or {}
    return {
        m: MemberSpec(m, frozenset(topics), previous=previous.get(m, {}))
        for m, topics in subscriptions.items()
    }


def flat(assignment: Mapping[uuid.UUID, frozenset[int]]) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def check_exact_cover(result: Result, counts: Mapping[uuid.UUID, int], subs: dict) -> None:
    seen: set[tuple[uuid.UUID, int]] = set()
    for member, assignment in result.items():
        for tp in flat(assignment):
            assert tp not in seen, f"{tp} given twice"
            assert tp[0] in subs[member], f"{member} got {tp} it does not subscribe to"
            seen.add(tp)
    subscribed = set().union(*subs.values())
    assert seen == {(t, p) for t in subscribed for p in range(counts[t])}


@pytest.mark.parametrize("members", [1, 2, 3, 5, 7, 16, 40])
def test_uniform_is_balanced_for_identical_subscriptions(members: int) -> None:
    counts = {A: 13, B: 7, C: 1}
    subs = {f"m{i:02}": {A, B, C} for i in range(members)}
    result = UniformAssignor().assign(specs(subs), counts)
    check_exact_cover(result, counts, subs)
    sizes = [len(flat(result.get(m, {}))) for m in subs]
    assert max(sizes) - min(sizes) <= 1


def test_uniform_is_sticky_when_a_member_joins() -> None:
    counts = {A: 12, B: 12}
    subs = {m: {A, B} for m in ("a", "b", "c")}
    first = UniformAssignor().assign(specs(subs), counts)
    subs["d"] = {A, B}
    second = UniformAssignor().assign(specs(subs, first), counts)
    check_exact_cover(second, counts, subs)
    assert sorted(len(flat(second[m])) for m in subs) == [6, 6, 6, 6]
    # Only what the newcomer needs moves: each old member keeps 6 of its 8.
    for m in ("a", "b", "c"):
        assert flat(second[m]) <= flat(first[m])


def test_uniform_is_sticky_when_a_member_leaves() -> None:
    counts = {A: 10, B: 5}
    subs = {m: {A, B} for m in ("a", "b", "c", "d")}
    first = UniformAssignor().assign(specs(subs), counts)
    del subs["b"]
    second = UniformAssignor().assign(specs(subs, first), counts)
    check_exact_cover(second, counts, subs)
    sizes = sorted(len(flat(second[m])) for m in subs)
    assert sizes == [5, 5, 5]
    for m in subs:
        assert flat(first[m]) <= flat(second[m])


def test_uniform_respects_different_subscriptions() -> None:
    counts = {A: 6, B: 6, C: 2}
    subs = {"a": {A}, "b": {A, B}, "c": {B, C}, "d": {C}}
    result = UniformAssignor().assign(specs(subs), counts)
    check_exact_cover(result, counts, subs)
    sizes = {m: len(flat(result[m])) for m in subs}
    assert max(sizes.values()) - min(sizes.values()) <= 3


def test_uniform_drops_partitions_of_topics_no_longer_subscribed_or_gone() -> None:
    counts = {A: 4, B: 4}
    subs = {"a": {A, B}, "b": {A, B}}
    first = UniformAssignor().assign(specs(subs), counts)
    subs = {"a": {A}, "b": {A}}
    second = UniformAssignor().assign(specs(subs, first), {A: 2})
    check_exact_cover(second, {A: 2}, subs)


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_assignors_are_deterministic_whatever_the_input_order(name: str) -> None:
    counts = {A: 9, B: 4, C: 3}
    subs = {f"m{i}": {A, B, C} if i % 2 else {A, C} for i in range(6)}
    expected = ASSIGNORS[name].assign(specs(subs), counts)
    rng = random.Random(7)
    for _ in range(5):
        members = list(specs(subs).items())
        rng.shuffle(members)
        topics = list(counts.items())
        rng.shuffle(topics)
        assert ASSIGNORS[name].assign(dict(members), dict(topics)) == expected


def test_uniform_converges_under_random_membership_churn() -> None:
    rng = random.Random(3)
    counts = {A: 20, B: 11}
    subs: dict[str, set[uuid.UUID]] = {}
    result: Result = {}
    for step in range(60):
        if subs and (rng.random() < 0.4 or len(subs) > 8):
            del subs[rng.choice(sorted(subs))]
        else:
            subs[f"m{step}"] = {A, B}
        if not subs:
            continue
        new = UniformAssignor().assign(specs(subs, result), counts)
        check_exact_cover(new, counts, subs)
        sizes = [len(flat(new[m])) for m in subs]
        assert max(sizes) - min(sizes) <= 1
        result = new


def test_range_gives_contiguous_co_partitioned_ranges() -> None:
    counts = {A: 7, B: 7, C: 3}
    subs = {"x": {A, B, C}, "y": {A, B, C}, "z": {A, B, C}}
    result = RangeAssignor().assign(specs(subs), counts)
    check_exact_cover(result, counts, subs)
    assert result["x"][A] == frozenset({0, 1, 2}) and result["y"][A] == frozenset({3, 4})
    assert result["z"][A] == frozenset({5, 6})
    for m in subs:
        assert result[m][A] == result[m][B]  # co-partitioned
        assert len(result[m][C]) == 1


def test_range_splits_each_topic_over_its_own_subscribers() -> None:
    counts = {A: 4, B: 4}
    subs = {"x": {A}, "y": {A, B}}
    result = RangeAssignor().assign(specs(subs), counts)
    check_exact_cover(result, counts, subs)
    assert result["x"] == {A: frozenset({0, 1})}
    assert result["y"] == {A: frozenset({2, 3}), B: frozenset({0, 1, 2, 3})}


def test_range_orders_static_members_by_instance_id() -> None:
    counts = {A: 4}
    members = {
        "zz": MemberSpec("zz", frozenset({A}), instance_id="i-1"),
        "aa": MemberSpec("aa", frozenset({A}), instance_id="i-2"),
    }
    result = RangeAssignor().assign(members, counts)
    assert result["zz"] == {A: frozenset({0, 1})}
    # The same instance under a new member id gets the same range.
    members["new"] = MemberSpec("new", frozenset({A}), instance_id="i-1")
    del members["zz"]
    assert RangeAssignor().assign(members, counts)["new"] == {A: frozenset({0, 1})}


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_more_members_than_partitions_leaves_some_members_empty(name: str) -> None:
    counts = {A: 2}
    subs = {f"m{i}": {A} for i in range(5)}
    result = ASSIGNORS[name].assign(specs(subs), counts)
    check_exact_cover(result, counts, subs)
    assert sum(1 for m in subs if flat(result.get(m, {}))) == 2
