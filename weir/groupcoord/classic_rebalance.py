"""A classic group's rebalance: its transitions, and who is answered when.

Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and back to
PreparingRebalance on any membership or metadata change. `prepare` starts a
rebalance (the first one of an Empty group waits the initial delay, KIP-134); the
join completes when every member rejoined or at the rebalance timeout, dropping
dynamic members that did not rejoin, bumping the generation, choosing the protocol
and answering every parked JoinGroup; the leader's SyncGroup (`apply_assignment`)
makes the group Stable and answers the parked SyncGroups. Removing a member answers
its parked requests with UNKNOWN_MEMBER_ID and starts a new rebalance.

`classic_coordinator` decides what each request means and calls these; the records
and completed answers go to the coordinator's `Outbox`.
"""

from __future__ import annotations

from collections.abc import Sequence

from weir.format.errors import ErrorCode
from weir.groupcoord.classic_group import ClassicGroup, GroupState, Member
from weir.groupcoord.classic_messages import JoinGroupMember, JoinGroupResult, SyncGroupResult
from weir.groupcoord.pending import Outbox
from weir.groupcoord.settings import GroupSettings


def group_rebalance_timeout_ms(group: ClassicGroup) -> int:
    return max((m.rebalance_timeout_ms for m in group.members.values()), default=0)


def join_result(
    group: ClassicGroup, member: Member, skip_assignment: bool = False
) -> JoinGroupResult:
    """A member's JoinGroup answer; only the leader gets the members' metadata."""
    members: list[JoinGroupMember] = []
    if group.is_leader(member.member_id):
        members = [
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        ]
    return JoinGroupResult(
        ErrorCode.NONE,
        member_id=member.member_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        skip_assignment=skip_assignment,
        members=members,
    )


def sync_result(group: ClassicGroup, member: Member) -> SyncGroupResult:
    return SyncGroupResult(
        ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
    )


class Rebalancer:
    """Moves classic groups through their rebalances; effects go to `out`."""

    def __init__(self, settings: GroupSettings, out: Outbox) -> None:
        self.settings = settings
        self._out = out

    def maybe_prepare(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self.prepare(group, now_ms)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self.try_complete_join(group, now_ms)

    def prepare(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                self._out.complete(
                    member.sync_pending, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
                )
                member.sync_pending = None
        group.pending_sync_members.clear()
        group.pending_sync_deadline_ms = None
        rebalance_timeout_ms = group_rebalance_timeout_ms(group)
        if group.state is GroupState.EMPTY:
            delay_ms = min(self.settings.classic_initial_rebalance_delay_ms, rebalance_timeout_ms)
            group.initial_join_remaining_ms = max(
                rebalance_timeout_ms - self.settings.classic_initial_rebalance_delay_ms, 0
            )
            group.new_member_added = False
            group.join_deadline_ms = now_ms + delay_ms
        else:
            group.initial_join_remaining_ms = None
            group.join_deadline_ms = now_ms + rebalance_timeout_ms
        group.transition(GroupState.PREPARING_REBALANCE, now_ms)
        self.try_complete_join(group, now_ms)

    def try_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.initial_join_remaining_ms is not None:
            return  # the initial delay only ends by its timer
        if group.has_all_members_joined():
            self._complete_join(group, now_ms)

    def on_join_deadline(self, group: ClassicGroup, now_ms: int) -> None:
        remaining_ms = group.initial_join_remaining_ms
        if remaining_ms is not None:
            if group.new_member_added and remaining_ms > 0:
                delay_ms = min(self.settings.classic_initial_rebalance_delay_ms, remaining_ms)
                group.new_member_added = False
                group.initial_join_remaining_ms = max(
                    remaining_ms - self.settings.classic_initial_rebalance_delay_ms, 0
                )
                group.join_deadline_ms = now_ms + delay_ms
                return
            group.initial_join_remaining_ms = None
        self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        group.join_deadline_ms = None
        group.initial_join_remaining_ms = None
        for member in list(group.members.values()):
            if not member.is_awaiting_join and member.group_instance_id is None:
                self.remove_member(group, member)
        if group.members and not any(m.is_awaiting_join for m in group.members.values()):
            # Only static members that did not rejoin are left: wait for them once more
            # (their session timeouts remove them if they are gone).
            group.join_deadline_ms = now_ms + group_rebalance_timeout_ms(group)
            return
        group.elect_joined_leader()
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.subscribed_topics = None
            group.transition(GroupState.EMPTY, now_ms)
            self._out.records.append(group.metadata_record())
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        for member in group.members.values():
            pending, member.join_pending = member.join_pending, None
            member.is_new = False
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            self._out.complete(pending, join_result(group, member))
        group.pending_sync_members = set(group.members)
        group.pending_sync_deadline_ms = now_ms + group_rebalance_timeout_ms(group)

    def remove_member(self, group: ClassicGroup, member: Member) -> None:
        unknown = ErrorCode.UNKNOWN_MEMBER_ID
        self._out.complete(member.join_pending, JoinGroupResult(unknown, member.member_id))
        self._out.complete(member.sync_pending, SyncGroupResult(unknown))
        member.join_pending = member.sync_pending = None
        group.remove(member.member_id)

    def remove_member_and_update_group(
        self, group: ClassicGroup, member: Member, now_ms: int
    ) -> None:
        self.remove_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare(group, now_ms)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self.try_complete_join(group, now_ms)

    def apply_assignment(
        self, group: ClassicGroup, assignments: Sequence[tuple[str, bytes]], now_ms: int
    ) -> None:
        by_member = dict(assignments)
        for member in group.members.values():
            member.assignment = by_member.get(member.member_id, b"")
        self._out.records.append(group.metadata_record())
        group.transition(GroupState.STABLE, now_ms)
        for member in group.members.values():
            pending, member.sync_pending = member.sync_pending, None
            self._out.complete(pending, sync_result(group, member))

    def expire_pending_sync(self, group: ClassicGroup, now_ms: int) -> None:
        group.pending_sync_deadline_ms = None
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        for member_id in sorted(group.pending_sync_members):
            member = group.members.get(member_id)
            if member is not None:
                self.remove_member_and_update_group(group, member, now_ms)
        group.pending_sync_members.clear()
