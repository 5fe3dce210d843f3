"""Server-side assignors of the KIP-848 consumer group protocol: "uniform" and "range".

An assignor maps the group's members (their subscriptions and their previous target
assignment) and the subscribed topics' partition counts to a new target assignment.
Both assignors are pure and deterministic: the same input gives the same output,
whatever the iteration order of the mappings handed in.

- "uniform" spreads all subscribed partitions so that member counts differ by at most
  one when subscriptions are identical (a best effort when they differ), and keeps
  every partition where it was whenever that does not break the balance.
- "range" hands each topic's partitions out in contiguous ranges over that topic's
  subscribers, ordered by instance id (static members) or member id. Topics with the
  same partition count and the same subscribers get the same ranges
  (co-partitioned), which is what joins across topics need; co-partitioning wins
  over stickiness.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

# topic id -> partitions of that topic
Assignment = Mapping[uuid.UUID, frozenset[int]]
TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class MemberSpec:
    """What an assignor knows of one member."""

    member_id: str
    subscribed_topic_ids: frozenset[uuid.UUID]
    instance_id: str | None = None
    rack_id: str | None = None
    # The member's previous target assignment (for stickiness).
    previous: Assignment = field(default_factory=dict)


class Assignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """The target assignment of every member in `members` (members may get nothing)."""
        ...


def _freeze(owned: Mapping[str, set[TopicPartition]]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    result: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    for member_id, partitions in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, partition in partitions:
            by_topic.setdefault(topic_id, set()).add(partition)
        result[member_id] = {t: frozenset(p) for t, p in by_topic.items()}
    return result


class UniformAssignor:
    """Balanced and sticky (Kafka's server-side "uniform" assignor's contract)."""

    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        member_ids = sorted(members)
        owned: dict[str, set[TopicPartition]] = {m: set() for m in member_ids}
        previous: dict[str, set[TopicPartition]] = {m: set() for m in member_ids}
        owner: dict[TopicPartition, str] = {}

        # 1. Keep every still-valid partition of the previous target (first claim wins).
        for member_id in member_ids:
            spec = members[member_id]
            for topic_id in sorted(spec.previous):
                if topic_id not in spec.subscribed_topic_ids:
                    continue
                count = partition_counts.get(topic_id, 0)
                for partition in sorted(spec.previous[topic_id]):
                    tp = (topic_id, partition)
                    if partition < count and tp not in owner:
                        owner[tp] = member_id
                        owned[member_id].add(tp)
                        previous[member_id].add(tp)

        # 2. Every free partition goes to the least loaded member subscribed to its topic.
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member_id in member_ids:
            for topic_id in members[member_id].subscribed_topic_ids:
                if topic_id in partition_counts:
                    subscribers.setdefault(topic_id, []).append(member_id)
        for topic_id in sorted(subscribers):
            candidates = subscribers[topic_id]  # already in member id order
            for partition in range(partition_counts[topic_id]):
                tp = (topic_id, partition)
                if tp in owner:
                    continue
                chosen = min(candidates, key=lambda m: (len(owned[m]), m))
                owner[tp] = chosen
                owned[chosen].add(tp)

        # 3. Balance: move partitions from the most to the least loaded eligible member while
        # that narrows the gap. Each move lowers the sum of squared loads, so this ends.
        while True:
            moved = False
            for donor in sorted(member_ids, key=lambda m: (-len(owned[m]), m)):
                # Partitions the donor did not hold before move first, then the highest.
                movable = sorted(owned[donor], reverse=True)
                movable.sort(key=lambda tp: tp in previous[donor])
                for tp in movable:
                    eligible = [
                        m
                        for m in subscribers.get(tp[0], [])
                        if m != donor and len(owned[m]) + 1 < len(owned[donor])
                    ]
                    if not eligible:
                        continue
                    taker = min(eligible, key=lambda m: (len(owned[m]), m))
                    owned[donor].discard(tp)
                    owned[taker].add(tp)
                    owner[tp] = taker
                    moved = True
                    break
                if moved:
                    break
            if not moved:
                break
        return _freeze(owned)


class RangeAssignor:
    """Per-topic contiguous ranges over the topic's subscribers; co-partitioned."""

    name = "range"

    def assign(
        self, members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        def order(member_id: str) -> tuple[int, str]:
            instance_id = members[member_id].instance_id
            return (0, instance_id) if instance_id is not None else (1, member_id)

        owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
        for topic_id in sorted(partition_counts):
            subscribers = sorted(
                (m for m in members if topic_id in members[m].subscribed_topic_ids), key=order
            )
            if not subscribers:
                continue
            count = partition_counts[topic_id]
            quota, extra = divmod(count, len(subscribers))
            start = 0
            for index, member_id in enumerate(subscribers):
                size = quota + (1 if index < extra else 0)
                owned[member_id].update((topic_id, p) for p in range(start, start + size))
                start += size
        return _freeze(owned)


ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
DEFAULT_ASSIGNOR = "uniform"
