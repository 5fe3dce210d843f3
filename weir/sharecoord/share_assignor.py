"""The share groups' "simple" assignor: which member fetches from which partition.

Share groups have no exclusive ownership: several members may fetch from one partition
(the share partition hands each record to one of them under a lock), and a partition
may move between members at once (no revocation protocol). So the assignor's rules, as
Kafka's `SimpleAssignor` states them (Kafka 4.4), are:

1. Coverage: every partition of every subscribed topic is assigned to at least one of
   the members subscribed to its topic.
2. Sharing: with more members than partitions, each partition of a topic is shared by
   `ceil(members / partitions)` members; otherwise by exactly one.
3. Balance: per topic, members' counts differ by at most one; the extra slots go first
   to the members with the fewest partitions of topics assigned before it (in topic-id
   order), so with one subscription for all members totals differ by at most one too.
4. Stickiness: a member keeps what it had (within its count and each partition's
   sharing) before it receives anything new; so the assignor applied to its own output
   returns it unchanged, and a member joining another topic moves nothing here.
5. Determinism: the answer depends only on the arguments (sorted iteration, no hashing).

Kafka's exact choices differ in ties (its homogeneous builder takes slots from overfilled
members in its own order): the rules above hold for both, member-by-member answers may
not be the same. Pure: no state, no clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

Assignment = dict[uuid.UUID, frozenset[int]]

ASSIGNOR_NAME = "simple"


def assign(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partition_counts: Mapping[uuid.UUID, int],
    previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
) -> dict[str, Assignment]:
    """The target assignment of every member of `subscriptions` (member id -> the ids of
    the existing topics it subscribes to), given each topic's partition count and the
    previous target (`previous`, members absent from it had nothing). Every member of
    `subscriptions` is in the answer, possibly with nothing."""
    result: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in subscriptions}
    totals = dict.fromkeys(subscriptions, 0)
    for topic_id in sorted(partition_counts):
        count = partition_counts[topic_id]
        members = sorted(m for m, topics in subscriptions.items() if topic_id in topics)
        if count <= 0 or not members:
            continue
        held = {m: previous.get(m, {}).get(topic_id, frozenset()) for m in members}
        for member, partitions in _assign_topic(members, count, held, totals).items():
            if partitions:
                result[member][topic_id] = partitions
                totals[member] += len(partitions)
    return result


def _assign_topic(
    members: list[str],
    count: int,
    held: Mapping[str, frozenset[int]],
    totals: Mapping[str, int],
) -> dict[str, frozenset[int]]:
    """One topic's partitions 0..count-1 among `members` (rules 1-4 of the module)."""
    sharing = -(-len(members) // count)  # ceil: members per partition
    base, extra = divmod(sharing * count, len(members))
    # The extra slots: fewest partitions so far, then most of this topic held, then id.
    order = sorted(members, key=lambda m: (totals[m], -len(held[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    holders: dict[int, set[str]] = {p: set() for p in range(count)}
    taken: dict[str, set[int]] = {m: set() for m in members}
    # Keep what each member held, within its quota and each partition's sharing.
    for member in members:
        for p in sorted(held[member]):
            if p < count and len(taken[member]) < quota[member] and len(holders[p]) < sharing:
                holders[p].add(member)
                taken[member].add(p)
    # Hand out the free slots: the neediest member first, the emptiest partition first.
    for member in sorted(members, key=lambda m: (-(quota[m] - len(taken[m])), m)):
        while len(taken[member]) < quota[member]:
            free = [p for p in range(count) if len(holders[p]) < sharing and p not in taken[member]]
            if free:
                p = min(free, key=lambda q: (len(holders[q]), q))
            else:
                p = _swap_for(member, holders, taken, sharing, count)
            holders[p].add(member)
            taken[member].add(p)
    assert all(len(h) == sharing for h in holders.values()), holders
    assert all(len(taken[m]) == quota[m] for m in members), (taken, quota)
    return {m: frozenset(ps) for m, ps in taken.items()}


def _swap_for(
    member: str,
    holders: dict[int, set[str]],
    taken: dict[str, set[int]],
    sharing: int,
    count: int,
) -> int:
    """Free a partition `member` lacks when the only open slots are on partitions it
    already has: another member moves from one of `member`'s missing partitions to an
    open slot. Returns the freed partition (only reachable when sharing > 1)."""
    open_slots = [p for p in range(count) if len(holders[p]) < sharing]
    for target in open_slots:
        for freed in range(count):
            if freed in taken[member]:
                continue
            for other in sorted(holders[freed]):
                if target not in taken[other]:
                    holders[freed].discard(other)
                    taken[other].discard(freed)
                    holders[target].add(other)
                    taken[other].add(target)
                    return freed
    raise AssertionError(f"no partition can be freed for {member}")
