"""KIP-848 assignment as pure functions of a group: the subscribed topics' metadata,
the group's target assignment (steps 1-2 of the protocol in `consumer_coordinator`),
and one member's reconciliation towards its target (step 3).

Reconciliation revokes before it assigns: a member first gives up what it must
(`UNREVOKED_PARTITIONS`, same epoch), and only once its heartbeats no longer report
those partitions does it move to the assignment epoch and receive new partitions,
and then only those no other member still owns (`UNRELEASED_PARTITIONS` until they
are released). So a partition is never owned by two members at once.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping

from weir.groupcoord import consumer_group_records as rec
from weir.groupcoord.assignors import DEFAULT_ASSIGNOR, Assignor, MemberSpec
from weir.groupcoord.consumer_group import (
    ConsumerGroup,
    Member,
    MemberState,
    OwnedPartitions,
    Partitions,
    TopicInfo,
)
from weir.groupcoord.record_schemas import GroupRecord


def subscription_metadata(
    group: ConsumerGroup, lookup: Callable[[str], TopicInfo | None]
) -> dict[str, TopicInfo]:
    """The topics the group's members subscribe to that exist (with partitions)."""
    names = group.all_subscribed_names()
    metadata: dict[str, TopicInfo] = {}
    for name in sorted(names):
        info = lookup(name)
        if info is not None and info.partition_count > 0:
            metadata[name] = TopicInfo(info.topic_id, info.partition_count)
    return metadata


def choose_assignor(group: ConsumerGroup) -> str:
    """The server assignor most members ask for (ties: the first name), else the default."""
    counts = Counter(
        m.server_assignor for m in group.members.values() if m.server_assignor is not None
    )
    if not counts:
        return DEFAULT_ASSIGNOR
    return min(counts, key=lambda name: (-counts[name], name))


def compute_target(group: ConsumerGroup, assignors: Mapping[str, Assignor]) -> list[GroupRecord]:
    """A new target assignment for every member; the assignment epoch becomes the
    group epoch. Returns the records of the targets that changed and of the epoch."""
    group.assignor_name = choose_assignor(group)
    assignor = assignors[group.assignor_name]
    specs = {
        m.member_id: MemberSpec(
            member_id=m.member_id,
            subscribed_topic_ids=frozenset(
                group.subscription_metadata[n].topic_id
                for n in group.subscribed_names(m)
                if n in group.subscription_metadata
            ),
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            previous=group.target.get(m.member_id, {}),
        )
        for m in group.members.values()
    }
    counts = {i.topic_id: i.partition_count for i in group.subscription_metadata.values()}
    result = assignor.assign(specs, counts)
    records: list[GroupRecord] = []
    for member_id in sorted(group.members):
        new = {t: ps for t, ps in result.get(member_id, {}).items() if ps}
        if group.target.get(member_id) != new:
            group.target[member_id] = new
            records.append(rec.target_assignment_member_record(group.group_id, member_id, new))
    group.assignment_epoch = group.group_epoch
    records.append(rec.target_assignment_epoch_record(group.group_id, group.assignment_epoch))
    return records


def reconcile(
    group: ConsumerGroup, member: Member, owned: OwnedPartitions | None, now_ms: int
) -> list[GroupRecord]:
    """Move `member` one step towards its target, given what it reports it `owned`
    (None: unchanged since its last heartbeat). Starts its rebalance deadline when it
    is asked to revoke. Returns its current-assignment record if anything changed."""
    epoch = group.assignment_epoch
    if member.is_reconciled_to(epoch):
        return []
    before = (
        member.member_epoch,
        member.previous_member_epoch,
        member.state,
        member.assigned,
        member.pending_revocation,
    )
    target = group.target.get(member.member_id, {})
    owned_map = None if owned is None else _owned_to_partitions(owned)

    def still_owns(pending: Partitions) -> bool:
        if owned_map is None:
            return True
        return any(owned_map.get(t, set()) & ps for t, ps in pending.items())

    if member.state == MemberState.STABLE:
        if member.member_epoch != epoch:
            _next_assignment(group, member, member.member_epoch, target, still_owns)
    elif member.state == MemberState.UNREVOKED_PARTITIONS:
        if not still_owns(member.pending_revocation):
            _next_assignment(group, member, member.member_epoch + 1, target, still_owns)
    else:  # UNRELEASED_PARTITIONS, or UNKNOWN (a newer state from a record): go on
        _next_assignment(group, member, member.member_epoch, target, still_owns)

    after = (
        member.member_epoch,
        member.previous_member_epoch,
        member.state,
        member.assigned,
        member.pending_revocation,
    )
    if after == before:
        return []
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        member.rebalance_deadline_ms = now_ms + max(member.rebalance_timeout_ms, 0)
        member.rebalance_deadline_epoch = member.member_epoch
    else:
        member.rebalance_deadline_ms = None
    return [rec.current_assignment_record(group.group_id, member.member_id, member.current())]


def _next_assignment(
    group: ConsumerGroup,
    member: Member,
    member_epoch: int,
    target: Partitions,
    still_owns: Callable[[Partitions], bool],
) -> None:
    epoch = group.assignment_epoch
    assigned: Partitions = {}
    pending_revocation: Partitions = {}
    pending_assignment: Partitions = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        want = target.get(topic_id, frozenset())
        have = member.assigned.get(topic_id, frozenset())
        keep = have & want
        revoke = have - keep
        add = set()
        for p in want - keep:
            holder = group.owners.get((topic_id, p))
            if holder is None or holder == member.member_id:
                add.add(p)
            else:
                unreleased = True
        if keep:
            assigned[topic_id] = keep
        if revoke:
            pending_revocation[topic_id] = revoke
        if add:
            pending_assignment[topic_id] = frozenset(add)

    group.release(member)
    if pending_revocation and still_owns(pending_revocation):
        # Revoke before assign: keep the epoch and wait for the member to let go.
        member.state = MemberState.UNREVOKED_PARTITIONS
        new_epoch = member_epoch
        member.assigned = assigned
        member.pending_revocation = pending_revocation
    else:
        for topic_id, partitions in pending_assignment.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        new_epoch = epoch
        member.assigned = assigned
        member.pending_revocation = {}
    if new_epoch != member.member_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = new_epoch
    group.claim(member)


def _owned_to_partitions(owned: OwnedPartitions) -> dict[uuid.UUID, set[int]]:
    result: dict[uuid.UUID, set[int]] = {}
    for topic_id, partitions in owned:
        result.setdefault(topic_id, set()).update(partitions)
    return result
