"""The share groups' simple assignor: coverage, sharing, balance, stickiness, determinism."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping

import pytest

from weir.sharecoord.share_assignor import assign

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
T3 = uuid.UUID(int=3)

Target = dict[str, dict[uuid.UUID, frozenset[int]]]


def holders(target: Target, topic_id: uuid.UUID, partition: int) -> set[str]:
    return {m for m, parts in target.items() if partition in parts.get(topic_id, ())}


def check_properties(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    counts: Mapping[uuid.UUID, int],
    target: Target,
) -> None:
    """Coverage, sharing, per-topic balance, and nothing a member does not subscribe to."""
    assert set(target) == set(subscriptions)
    for member, parts in target.items():
        for topic_id, partitions in parts.items():
            assert topic_id in subscriptions[member]
            assert partitions and all(0 <= p < counts[topic_id] for p in partitions)
    for topic_id, count in counts.items():
        subscribers = [m for m, ts in subscriptions.items() if topic_id in ts]
        if not subscribers:
            assert all(topic_id not in parts for parts in target.values())
            continue
        sharing = -(-len(subscribers) // count)
        for p in range(count):
            assert len(holders(target, topic_id, p)) == sharing, (topic_id, p)
        sizes = [len(target[m].get(topic_id, ())) for m in subscribers]
        assert max(sizes) - min(sizes) <= 1, sizes


def total_sizes(target: Target) -> list[int]:
    return [sum(len(ps) for ps in parts.values()) for parts in target.values()]


@pytest.mark.parametrize("members", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
def test_every_partition_is_covered_and_members_balance_within_one(
    members: int, partitions: int
) -> None:
    subscriptions = {f"m{i}": frozenset({T1}) for i in range(members)}
    target = assign(subscriptions, {T1: partitions}, {})
    check_properties(subscriptions, {T1: partitions}, target)
    sizes = total_sizes(target)
    assert max(sizes) - min(sizes) <= 1


def test_more_members_than_partitions_share_each_partition() -> None:
    subscriptions = {f"m{i}": frozenset({T1}) for i in range(5)}
    target = assign(subscriptions, {T1: 2}, {})
    # ceil(5 / 2) = 3 members per partition: 6 slots over 5 members.
    assert [len(holders(target, T1, p)) for p in range(2)] == [3, 3]
    assert sorted(total_sizes(target)) == [1, 1, 1, 1, 2]


def test_many_members_on_one_partition_all_get_it() -> None:
    subscriptions = {f"m{i}": frozenset({T1}) for i in range(16)}
    target = assign(subscriptions, {T1: 1}, {})
    assert all(parts == {T1: frozenset({0})} for parts in target.values())


def test_totals_balance_within_one_across_several_topics() -> None:
    subscriptions = {m: frozenset({T1, T2, T3}) for m in ("a", "b")}
    previous = {
        "a": {T1: frozenset({0, 1}), T2: frozenset({0, 1}), T3: frozenset({0, 1})},
        "b": {T1: frozenset({2}), T2: frozenset({2}), T3: frozenset({2})},
    }
    target = assign(subscriptions, {T1: 3, T2: 3, T3: 3}, previous)
    assert sorted(total_sizes(target)) == [4, 5]


def test_the_assignor_applied_to_its_own_answer_changes_nothing() -> None:
    rng = random.Random(7)
    for _ in range(200):
        counts = {t: rng.randint(1, 6) for t in (T1, T2, T3)}
        subscriptions = {
            f"m{i}": frozenset(rng.sample([T1, T2, T3], rng.randint(1, 3)))
            for i in range(rng.randint(1, 9))
        }
        first = assign(subscriptions, counts, {})
        assert assign(subscriptions, counts, first) == first


def test_a_member_joining_another_topic_moves_nothing() -> None:
    subscriptions = {f"m{i}": frozenset({T1}) for i in range(3)}
    before = assign(subscriptions, {T1: 7, T2: 4}, {})
    after = assign({**subscriptions, "z": frozenset({T2})}, {T1: 7, T2: 4}, before)
    assert {m: after[m] for m in before} == before
    assert after["z"] == {T2: frozenset(range(4))}


def test_a_join_moves_only_what_balance_requires() -> None:
    subscriptions = {"a": frozenset({T1}), "b": frozenset({T1})}
    before = assign(subscriptions, {T1: 6}, {})
    after = assign({**subscriptions, "c": frozenset({T1})}, {T1: 6}, before)
    moved = sum(len(before[m][T1] - after[m][T1]) for m in ("a", "b"))
    assert moved == 2 and len(after["c"][T1]) == 2
    assert all(after[m][T1] <= before[m][T1] for m in ("a", "b"))


def test_the_answer_depends_only_on_the_inputs_not_their_order() -> None:
    subscriptions = {f"m{i}": frozenset({T1, T2}) for i in range(6)}
    reordered = dict(reversed(list(subscriptions.items())))
    counts = {T1: 4, T2: 3}
    assert assign(subscriptions, counts, {}) == assign(
        reordered, dict(reversed(counts.items())), {}
    )


def test_previous_partitions_beyond_the_count_are_dropped() -> None:
    target = assign({"a": frozenset({T1})}, {T1: 2}, {"a": {T1: frozenset({0, 1, 5})}})
    assert target == {"a": {T1: frozenset({0, 1})}}


def test_a_member_subscribed_to_no_existing_topic_gets_nothing() -> None:
    target = assign({"a": frozenset(), "b": frozenset({T1})}, {T1: 2}, {})
    assert target == {"a": {}, "b": {T1: frozenset({0, 1})}}


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6, 7, 8])
def test_random_churn_keeps_coverage_balance_and_stability(seed: int) -> None:
    """Members join, leave and change subscriptions, topics grow: after every step every
    partition is covered with its sharing, each topic balances within one, and members
    whose subscription did not change keep what the balance lets them keep."""
    rng = random.Random(seed)
    topics = [T1, T2, T3]
    counts = {t: rng.randint(1, 5) for t in topics}
    subscriptions: dict[str, frozenset[uuid.UUID]] = {}
    target: Target = {}
    for step in range(150):
        action = rng.random()
        if action < 0.4 or not subscriptions:
            subscriptions[f"m{step}"] = frozenset(rng.sample(topics, rng.randint(1, 3)))
        elif action < 0.7:
            gone = rng.choice(sorted(subscriptions))
            del subscriptions[gone]
        elif action < 0.9:
            member = rng.choice(sorted(subscriptions))
            subscriptions[member] = frozenset(rng.sample(topics, rng.randint(1, 3)))
        else:
            grown = rng.choice(topics)
            counts[grown] += rng.randint(1, 3)
        previous = {m: parts for m, parts in target.items() if m in subscriptions}
        target = assign(subscriptions, counts, previous)
        check_properties(subscriptions, counts, target)
        assert assign(subscriptions, counts, target) == target
        if len(set(subscriptions.values())) == 1:  # one subscription: totals balance too
            sizes = total_sizes(target)
            assert max(sizes) - min(sizes) <= 1
