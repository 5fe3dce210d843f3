"""The classic consumer-group coordinator (JoinGroup/SyncGroup) as a pure state machine.

`ClassicGroupCoordinator` holds the classic groups of one coordinator and applies
Kafka's rules to their committed offsets, which live in a
`committed_offsets.OffsetStore` shared with the KIP-848 groups (pass it as
`offsets=`). It never blocks, never reads a clock and never does I/O: time comes in
as `now_ms`, records to persist come out, and answers that Kafka gives later come
back as pending handles (see `weir.groupcoord.pending` for the protocol the broker
follows: append `records`, then wake `completed`, then answer).

API (all times in ms; requests/results are in `classic_messages`):

    coord = ClassicGroupCoordinator(GroupSettings(), now_ms, offsets=OffsetStore())
    coord.join_group(JoinGroupRequest, now_ms)            -> Reply[JoinGroupResult]
    coord.sync_group(SyncGroupRequest, now_ms)            -> Reply[SyncGroupResult]
    coord.heartbeat(group_id, generation_id, member_id, group_instance_id, now_ms)
                                                          -> ErrorCode
    coord.leave_group(group_id, [LeavingMember], now_ms)  -> Reply[LeaveGroupResult]
    coord.commit_offsets(OffsetCommitRequest, now_ms)     -> Reply[list[PartitionError]]
    coord.fetch_offsets(group_id, [(topic, partition)] | None) -> OffsetFetchResult
    coord.delete_offsets(group_id, [(topic, partition)], now_ms) -> Reply[OffsetDeleteResult]
    coord.list_groups(states | None)                      -> list[GroupListing]
    coord.describe_group(group_id)                        -> GroupDescription
    coord.delete_groups([group_id], now_ms)               -> Reply[list[(group_id, ErrorCode)]]
    coord.next_deadline_ms()                              -> int | None
    coord.advance(now_ms)                                 -> Effects
    coord.replay(key, value) -> bool;  coord.finish_loading(now_ms, other_group_ids)
                                                          (or `load(records, now_ms)`)
    coord.unload(group_ids)                               -> Effects

JoinGroup and SyncGroup may return a `Reply` whose `pending` is not done yet: JoinGroup
waits for the rebalance to complete (every member rejoined, or the rebalance timeout,
or the initial delay for a new group), a follower's SyncGroup waits for the leader's.
Call `advance(now_ms)` whenever the time reaches `next_deadline_ms()`, and re-read
`next_deadline_ms()` after every call (calls can move it earlier; it is cheap). Advance
expires sessions, completes rebalances whose timeout or initial delay passed, removes
members that never sent SyncGroup, and expires offsets every
`GroupSettings.offsets_retention_check_interval_ms`.

A call may also be made with any `now_ms` not earlier than the previous one; timers
that fell due in between run at the next `advance`.

Kafka's rules, in brief:

- States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and back to
  PreparingRebalance on any membership or metadata change; Dead once deleted. Each
  completed join bumps the generation; the protocol is the one every member supports
  that most members prefer; the first member (or the first rejoined one) is leader and
  alone receives the members' metadata.
- A first dynamic JoinGroup from v4 gets MEMBER_ID_REQUIRED with its new member id and
  must come back with it within the session timeout (KIP-394).
- The first rebalance of an Empty group waits `classic_initial_rebalance_delay_ms`, extended by
  the same again while new members keep arriving, up to the rebalance timeout (KIP-134).
- Members whose heartbeats stop for `session_timeout_ms` are removed (rebalance);
  dynamic members that do not rejoin within the rebalance timeout are dropped from the
  new generation; members that do not send SyncGroup within the rebalance timeout after
  the join completed are removed (rebalance).
- Static members (`group_instance_id`, KIP-345): a rejoin under a new member id replaces
  the old id, which is fenced (FENCED_INSTANCE_ID); in Stable with the same selected
  protocol and unchanged metadata there is no rebalance (the leader gets
  `skip_assignment`). Kafka checks only the selected protocol; Weir also rebalances
  when the member's metadata (its subscription) changed, so the leader sees it. Static
  members are not dropped for missing a rejoin, only by their session timeout or
  LeaveGroup.
- Cooperative rebalancing (KIP-429) needs nothing from the coordinator: it relays the
  leader's assignment; members keep consuming what they keep and simply rejoin.
- OffsetCommit follows Kafka's checks: generation -1 with no member commits into an
  Empty (or new) group; otherwise member, instance id and generation must match, and
  CompletingRebalance answers REBALANCE_IN_PROGRESS.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from weir.format.errors import ErrorCode
from weir.groupcoord import classic_records as rec
from weir.groupcoord.classic_group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    GroupState,
    Member,
)
from weir.groupcoord.classic_messages import (
    DescribedMember,
    FetchedOffset,
    GroupDescription,
    GroupListing,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    LeavingMember,
    LeftMember,
    OffsetCommitRequest,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionError,
    SyncGroupRequest,
    SyncGroupResult,
)
from weir.groupcoord.committed_offsets import CommittedOffset, OffsetStore, TopicPartition
from weir.groupcoord.deadlines import DeadlineIndex
from weir.groupcoord.pending import Effects, Pending, Reply
from weir.groupcoord.record_schemas import GroupRecord
from weir.groupcoord.settings import GroupSettings

T = TypeVar("T")

_ADVANCE_ROUNDS_MAX = 1_000
# Kafka's fixed NewMemberJoinTimeoutMs: a new member's first JoinGroup waits at most this.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


def _random_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class ClassicGroupCoordinator:
    def __init__(
        self,
        settings: GroupSettings | None = None,
        now_ms: int = 0,
        new_member_id: Callable[[str], str] = _random_member_id,
        offsets: OffsetStore | None = None,
    ) -> None:
        self.settings = settings or GroupSettings()
        self.groups: dict[str, ClassicGroup] = {}
        # Committed offsets of every group; share one store with the KIP-848 path.
        self.offsets = offsets if offsets is not None else OffsetStore()
        self._new_member_id = new_member_id
        self._offsets_check_ms = now_ms + self.settings.offsets_retention_check_interval_ms
        self._records: list[GroupRecord] = []
        self._completed: list[Pending[Any]] = []
        self._loading_groups: dict[str, rec.GroupMetadataValue] = {}
        self._timers = DeadlineIndex()  # group id -> its earliest timer
        self._dirty: set[str] = set()  # groups whose timers may have changed

    # ---- queries --------------------------------------------------------------------

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def group_state(self, group_id: str) -> GroupState:
        group = self.groups.get(group_id)
        return GroupState.DEAD if group is None else group.state

    # ---- effects plumbing -----------------------------------------------------------

    def _complete(self, pending: Pending[T] | None, result: T) -> None:
        if pending is not None and pending.complete(result):
            self._completed.append(pending)

    def _reply(self, pending: Pending[T]) -> Reply[T]:
        reply = Reply(pending, self._records, self._completed)
        self._records, self._completed = [], []
        return reply

    def _answer(self, result: T) -> Reply[T]:
        pending: Pending[T] = Pending()
        self._complete(pending, result)
        return self._reply(pending)

    def _effects(self) -> Effects:
        effects = Effects(self._records, self._completed)
        self._records, self._completed = [], []
        return effects

    # ---- JoinGroup ------------------------------------------------------------------

    def join_group(self, req: JoinGroupRequest, now_ms: int) -> Reply[JoinGroupResult]:
        self._dirty.add(req.group_id)
        error = self._validate_join(req)
        if error is not ErrorCode.NONE:
            return self._answer(JoinGroupResult(error, member_id=req.member_id))
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return self._answer(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
        if not self._accepts_joining_member(group, req.member_id):
            member = group.members.get(req.member_id)
            if member is not None:
                self._remove_member_and_update_group(group, member, now_ms)
            return self._answer(JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id))
        if not group.supports(req.protocol_type, req.protocols):
            return self._answer(
                JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
            )
        self.groups[group.group_id] = group
        if req.member_id:
            return self._join_existing_member(group, req, now_ms)
        return self._join_new_member(group, req, now_ms)

    def _validate_join(self, req: JoinGroupRequest) -> ErrorCode:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        if not (
            self.settings.classic_session_timeout_min_ms
            <= req.session_timeout_ms
            <= self.settings.classic_session_timeout_max_ms
        ):
            return ErrorCode.INVALID_SESSION_TIMEOUT
        return ErrorCode.NONE

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        size_max = self.settings.group_max_size
        if group.state is GroupState.EMPTY:
            return True
        member = group.members.get(member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            if member is not None and member.is_awaiting_join:
                return True
            return group.awaiting_join_count() < size_max
        return member is not None or len(group.members) < size_max

    def _join_new_member(
        self, group: ClassicGroup, req: JoinGroupRequest, now_ms: int
    ) -> Reply[JoinGroupResult]:
        if req.group_instance_id is not None:
            member_id = self._new_member_id(req.group_instance_id)
            old_member_id = group.static_member_id(req.group_instance_id)
            if old_member_id is not None:
                return self._replace_static_member(group, old_member_id, member_id, req, now_ms)
            return self._add_member_and_rebalance(group, member_id, req, now_ms)
        member_id = self._new_member_id(req.client_id)
        if req.require_known_member_id:
            group.pending_members[member_id] = now_ms + req.session_timeout_ms
            return self._answer(JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
        return self._add_member_and_rebalance(group, member_id, req, now_ms)

    def _join_existing_member(
        self, group: ClassicGroup, req: JoinGroupRequest, now_ms: int
    ) -> Reply[JoinGroupResult]:
        member_id = req.member_id
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(group, member_id, req, now_ms)
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            return self._answer(JoinGroupResult(error, member_id))
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, req, now_ms)
        if group.state is GroupState.COMPLETING_REBALANCE and member.matches(req.protocols):
            # The member lost its JoinGroup answer: give it again.
            return self._answer(self._join_result(group, member))
        if (
            group.state is GroupState.STABLE
            and not group.is_leader(member_id)
            and member.matches(req.protocols)
        ):
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            return self._answer(self._join_result(group, member))
        return self._update_member_and_rebalance(group, member, req, now_ms)

    def _add_member_and_rebalance(
        self, group: ClassicGroup, member_id: str, req: JoinGroupRequest, now_ms: int
    ) -> Reply[JoinGroupResult]:
        pending: Pending[JoinGroupResult] = Pending()
        is_new = group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 0
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            join_pending=pending,
            is_new=is_new,
        )
        if is_new:
            group.new_member_added = True
            member.heartbeat_deadline_ms = now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS
        else:
            member.heartbeat_deadline_ms = now_ms + req.session_timeout_ms
        group.add(member)
        self._maybe_prepare_rebalance(group, now_ms)
        return self._reply(pending)

    def _update_member(self, member: Member, req: JoinGroupRequest) -> Pending[JoinGroupResult]:
        self._complete(
            member.join_pending, JoinGroupResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)
        )
        pending: Pending[JoinGroupResult] = Pending()
        member.join_pending = pending
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        return pending

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, req: JoinGroupRequest, now_ms: int
    ) -> Reply[JoinGroupResult]:
        pending = self._update_member(member, req)
        self._maybe_prepare_rebalance(group, now_ms)
        return self._reply(pending)

    def _replace_static_member(
        self,
        group: ClassicGroup,
        old_member_id: str,
        new_member_id: str,
        req: JoinGroupRequest,
        now_ms: int,
    ) -> Reply[JoinGroupResult]:
        member = group.members.pop(old_member_id)
        fenced = ErrorCode.FENCED_INSTANCE_ID
        self._complete(member.join_pending, JoinGroupResult(fenced, old_member_id))
        self._complete(member.sync_pending, SyncGroupResult(fenced))
        member.join_pending = member.sync_pending = None
        old_metadata = member.metadata(group.protocol_name)
        member.member_id = new_member_id
        member.client_id, member.client_host = req.client_id, req.client_host
        group.members[new_member_id] = member
        group.static_members[req.group_instance_id or ""] = new_member_id
        if group.is_leader(old_member_id):
            group.leader_id = new_member_id
        if old_member_id in group.pending_sync_members:
            group.pending_sync_members.discard(old_member_id)
            group.pending_sync_members.add(new_member_id)
        pending = self._update_member(member, req)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state is GroupState.STABLE:
            unchanged = group.select_protocol() == group.protocol_name and (
                member.metadata(group.protocol_name) == old_metadata
            )
            if unchanged:
                member.join_pending = None
                self._records.append(self._group_record(group))
                leader = group.is_leader(new_member_id)
                self._complete(pending, self._join_result(group, member, skip_assignment=leader))
                return self._reply(pending)
            self._prepare_rebalance(group, now_ms)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may be assigning to the old member id: start over.
            self._prepare_rebalance(group, now_ms)
        else:
            self._try_complete_join(group, now_ms)
        return self._reply(pending)

    def _join_result(
        self, group: ClassicGroup, member: Member, skip_assignment: bool = False
    ) -> JoinGroupResult:
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

    # ---- rebalance ------------------------------------------------------------------

    @staticmethod
    def _rebalance_timeout_ms(group: ClassicGroup) -> int:
        return max((m.rebalance_timeout_ms for m in group.members.values()), default=0)

    def _maybe_prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, now_ms)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group, now_ms)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                self._complete(
                    member.sync_pending, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
                )
                member.sync_pending = None
        group.pending_sync_members.clear()
        group.pending_sync_deadline_ms = None
        rebalance_timeout_ms = self._rebalance_timeout_ms(group)
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
        self._try_complete_join(group, now_ms)

    def _try_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.initial_join_remaining_ms is not None:
            return  # the initial delay only ends by its timer
        if group.has_all_members_joined():
            self._complete_join(group, now_ms)

    def _on_join_deadline(self, group: ClassicGroup, now_ms: int) -> None:
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
                self._remove_member(group, member)
        if group.members and not any(m.is_awaiting_join for m in group.members.values()):
            # Only static members that did not rejoin are left: wait for them once more
            # (their session timeouts remove them if they are gone).
            group.join_deadline_ms = now_ms + self._rebalance_timeout_ms(group)
            return
        group.elect_joined_leader()
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.subscribed_topics = None
            group.transition(GroupState.EMPTY, now_ms)
            self._records.append(self._group_record(group))
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        for member in group.members.values():
            pending, member.join_pending = member.join_pending, None
            member.is_new = False
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            self._complete(pending, self._join_result(group, member))
        group.pending_sync_members = set(group.members)
        group.pending_sync_deadline_ms = now_ms + self._rebalance_timeout_ms(group)

    def _remove_member(self, group: ClassicGroup, member: Member) -> None:
        unknown = ErrorCode.UNKNOWN_MEMBER_ID
        self._complete(member.join_pending, JoinGroupResult(unknown, member.member_id))
        self._complete(member.sync_pending, SyncGroupResult(unknown))
        member.join_pending = member.sync_pending = None
        group.remove(member.member_id)

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: Member, now_ms: int
    ) -> None:
        self._remove_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group, now_ms)

    # ---- SyncGroup ------------------------------------------------------------------

    def sync_group(self, req: SyncGroupRequest, now_ms: int) -> Reply[SyncGroupResult]:
        self._dirty.add(req.group_id)
        group = self.groups.get(req.group_id)
        error = self._validate_member_request(
            req.group_id, group, req.member_id, req.group_instance_id, req.generation_id
        )
        if error is ErrorCode.NONE and group is not None:
            error = self._check_sync_protocol(group, req)
        if error is not ErrorCode.NONE or group is None:
            return self._answer(SyncGroupResult(error))
        member = group.members[req.member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return self._answer(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self._synced(group, member, now_ms)
        if group.state is GroupState.STABLE:
            return self._answer(self._sync_result(group, member))
        # CompletingRebalance: wait for the leader's assignment (or give it).
        self._complete(member.sync_pending, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        pending: Pending[SyncGroupResult] = Pending()
        member.sync_pending = pending
        if group.is_leader(member.member_id):
            self._apply_assignment(group, req.assignments, now_ms)
        return self._reply(pending)

    def _validate_member_request(
        self,
        group_id: str,
        group: ClassicGroup | None,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
    ) -> ErrorCode:
        """Kafka's checks shared by SyncGroup and Heartbeat, in Kafka's order."""
        if group is None and not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, group_instance_id)
        if error is ErrorCode.NONE and generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return error

    @staticmethod
    def _check_sync_protocol(group: ClassicGroup, req: SyncGroupRequest) -> ErrorCode:
        if req.protocol_type is not None and req.protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if req.protocol_name is not None and req.protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    @staticmethod
    def _synced(group: ClassicGroup, member: Member, now_ms: int) -> None:
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        group.pending_sync_members.discard(member.member_id)
        if not group.pending_sync_members:
            group.pending_sync_deadline_ms = None

    @staticmethod
    def _sync_result(group: ClassicGroup, member: Member) -> SyncGroupResult:
        return SyncGroupResult(
            ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
        )

    def _apply_assignment(
        self, group: ClassicGroup, assignments: Sequence[tuple[str, bytes]], now_ms: int
    ) -> None:
        by_member = dict(assignments)
        for member in group.members.values():
            member.assignment = by_member.get(member.member_id, b"")
        self._records.append(self._group_record(group))
        group.transition(GroupState.STABLE, now_ms)
        for member in group.members.values():
            pending, member.sync_pending = member.sync_pending, None
            self._complete(pending, self._sync_result(group, member))

    # ---- Heartbeat and LeaveGroup ---------------------------------------------------

    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        now_ms: int,
    ) -> ErrorCode:
        """Heartbeat: always answered at once, never writes records."""
        self._dirty.add(group_id)
        group = self.groups.get(group_id)
        error = self._validate_member_request(
            group_id, group, member_id, group_instance_id, generation_id
        )
        if error is not ErrorCode.NONE or group is None:
            return error
        if group.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(
        self, group_id: str, members: Sequence[LeavingMember], now_ms: int
    ) -> Reply[LeaveGroupResult]:
        """LeaveGroup; v0-v2 send one member with its member id, v3+ a batch."""
        self._dirty.add(group_id)
        if not group_id:
            return self._answer(LeaveGroupResult(ErrorCode.INVALID_GROUP_ID))
        group = self.groups.get(group_id)
        if group is None:
            unknown = ErrorCode.UNKNOWN_MEMBER_ID
            left = [LeftMember(m.member_id, m.group_instance_id, unknown) for m in members]
            return self._answer(LeaveGroupResult(ErrorCode.NONE, left))
        if group.state is GroupState.DEAD:
            return self._answer(LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        results = [
            LeftMember(m.member_id, m.group_instance_id, self._leave_one(group, m, now_ms))
            for m in members
        ]
        return self._answer(LeaveGroupResult(ErrorCode.NONE, results))

    def _leave_one(self, group: ClassicGroup, leaving: LeavingMember, now_ms: int) -> ErrorCode:
        member_id = leaving.member_id
        if not member_id and leaving.group_instance_id is not None:
            member_id = group.static_member_id(leaving.group_instance_id) or ""
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._try_complete_join(group, now_ms)
            return ErrorCode.NONE
        error = group.validate_member(member_id, leaving.group_instance_id)
        if error is ErrorCode.NONE:
            self._remove_member_and_update_group(group, group.members[member_id], now_ms)
        return error

    # ---- offsets --------------------------------------------------------------------

    def commit_offsets(self, req: OffsetCommitRequest, now_ms: int) -> Reply[list[PartitionError]]:
        self._dirty.add(req.group_id)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                return self._answer(self._all_failed(req, ErrorCode.ILLEGAL_GENERATION))
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
        error = self._validate_offset_commit(group, req)
        if error is not ErrorCode.NONE:
            return self._answer(self._all_failed(req, error))
        self.groups[group.group_id] = group
        member = group.members.get(req.member_id)
        if member is not None:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        results = []
        accepted = []
        for o in req.offsets:
            metadata = o.metadata or ""
            error = ErrorCode.NONE
            if len(metadata.encode()) > self.settings.offset_metadata_max_bytes:
                error = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                committed = CommittedOffset(o.offset, o.leader_epoch, metadata, now_ms)
                accepted.append((o.topic, o.partition, committed))
            results.append(PartitionError(o.topic, o.partition, error))
        self._records += self.offsets.commit(group.group_id, accepted)
        return self._answer(results)

    @staticmethod
    def _all_failed(req: OffsetCommitRequest, error: ErrorCode) -> list[PartitionError]:
        return [PartitionError(o.topic, o.partition, error) for o in req.offsets]

    @staticmethod
    def _validate_offset_commit(group: ClassicGroup, req: OffsetCommitRequest) -> ErrorCode:
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and group.state is GroupState.EMPTY:
            return ErrorCode.NONE  # a standalone commit: Kafka stores offsets only
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            error = group.validate_member(req.member_id, req.group_instance_id)
            if error is not ErrorCode.NONE:
                return error
            if req.generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif group.state is not GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> OffsetFetchResult:
        """The group's latest offsets, as OffsetFetch shapes them; `partitions=None`
        asks for every one. (The broker answers OffsetFetch from the offsets
        committed to the log instead: `OffsetStore.committed_group_offsets`.)"""
        if partitions is None:
            stored = sorted(self.offsets.group_offsets(group_id).items())
            return OffsetFetchResult(
                ErrorCode.NONE,
                [FetchedOffset(t, p, c.offset, c.leader_epoch, c.metadata) for (t, p), c in stored],
            )
        out = []
        for topic, partition in partitions:
            committed = self.offsets.fetch(group_id, topic, partition)
            if committed is None:
                out.append(FetchedOffset(topic, partition, -1, -1, ""))
            else:
                out.append(
                    FetchedOffset(
                        topic,
                        partition,
                        committed.offset,
                        committed.leader_epoch,
                        committed.metadata,
                    )
                )
        return OffsetFetchResult(ErrorCode.NONE, out)

    def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]], now_ms: int
    ) -> Reply[OffsetDeleteResult]:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return self._answer(OffsetDeleteResult(ErrorCode.GROUP_ID_NOT_FOUND))
        uses_consumer_protocol = group.protocol_type in (None, "", CONSUMER_PROTOCOL_TYPE)
        if group.state is not GroupState.EMPTY and not uses_consumer_protocol:
            return self._answer(OffsetDeleteResult(ErrorCode.NON_EMPTY_GROUP))
        subscribed = group.subscribed_topics or frozenset()
        results = []
        deleted = []
        for topic, partition in partitions:
            if group.state is not GroupState.EMPTY and topic in subscribed:
                results.append(
                    PartitionError(topic, partition, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
                )
                continue
            deleted.append((topic, partition))
            results.append(PartitionError(topic, partition, ErrorCode.NONE))
        self._records += self.offsets.delete(group_id, deleted)
        return self._answer(OffsetDeleteResult(ErrorCode.NONE, results))

    # ---- admin ----------------------------------------------------------------------

    def list_groups(self, states: Collection[str] | None = None) -> list[GroupListing]:
        """ListGroups; `states` (v4+) filters by state name, case-insensitively."""
        wanted = {s.lower() for s in states} if states else None
        return [
            GroupListing(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if wanted is None or g.state.value.lower() in wanted
        ]

    def describe_group(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(ErrorCode.NONE, group_id, GroupState.DEAD.value, "", "")
        stable = group.state is GroupState.STABLE
        members = [
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupDescription(
            ErrorCode.NONE,
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def delete_groups(
        self, group_ids: Sequence[str], now_ms: int
    ) -> Reply[list[tuple[str, ErrorCode]]]:
        results = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.state is GroupState.DEAD:
                results.append((group_id, ErrorCode.GROUP_ID_NOT_FOUND))
            elif group.state is not GroupState.EMPTY:
                results.append((group_id, ErrorCode.NON_EMPTY_GROUP))
            else:
                self._delete_group(group, now_ms)
                results.append((group_id, ErrorCode.NONE))
        return self._answer(results)

    def _delete_group(self, group: ClassicGroup, now_ms: int) -> None:
        self._dirty.add(group.group_id)
        self._records += self.offsets.delete_group(group.group_id)
        group.transition(GroupState.DEAD, now_ms)
        del self.groups[group.group_id]
        # A generation-0 group only ever stored offsets: it has no metadata to remove.
        if group.generation_id > 0:
            self._records.append(rec.group_metadata_tombstone(group.group_id))

    # ---- time -----------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """When `advance` next has work to do. Cheap: call it after every call."""
        self._refresh_timers()
        group_deadline_ms = self._timers.earliest_ms()
        if group_deadline_ms is None:
            return self._offsets_check_ms
        return min(group_deadline_ms, self._offsets_check_ms)

    def _refresh_timers(self) -> None:
        for group_id in self._dirty:
            group = self.groups.get(group_id)
            deadlines_ms = self._group_deadlines_ms(group) if group is not None else []
            self._timers.set(group_id, min(deadlines_ms, default=None))
        self._dirty.clear()

    @staticmethod
    def _group_deadlines_ms(group: ClassicGroup) -> list[int]:
        out = list(group.pending_members.values())
        if group.join_deadline_ms is not None:
            out.append(group.join_deadline_ms)
        if group.pending_sync_deadline_ms is not None:
            out.append(group.pending_sync_deadline_ms)
        out.extend(m.heartbeat_deadline_ms for m in group.members.values() if _can_expire(m))
        return out

    def advance(self, now_ms: int) -> Effects:
        """Run every timer due at `now_ms`."""
        for _ in range(_ADVANCE_ROUNDS_MAX):
            self._refresh_timers()
            due = self._timers.pop_due(now_ms)
            if not due:
                break
            for group_id in due:
                self._dirty.add(group_id)
                group = self.groups.get(group_id)
                if group is not None:
                    self._advance_group(group, now_ms)
        if now_ms >= self._offsets_check_ms:
            self._expire_offsets(now_ms)
            self._offsets_check_ms = now_ms + self.settings.offsets_retention_check_interval_ms
        return self._effects()

    def _advance_group(self, group: ClassicGroup, now_ms: int) -> None:
        for member_id, deadline_ms in list(group.pending_members.items()):
            if deadline_ms <= now_ms:
                del group.pending_members[member_id]
                self._try_complete_join(group, now_ms)
        for member in list(group.members.values()):
            still_member = group.members.get(member.member_id) is member
            if still_member and _can_expire(member) and member.heartbeat_deadline_ms <= now_ms:
                self._remove_member_and_update_group(group, member, now_ms)
        if group.pending_sync_deadline_ms is not None and group.pending_sync_deadline_ms <= now_ms:
            self._expire_pending_sync(group, now_ms)
        if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
            self._on_join_deadline(group, now_ms)

    def _expire_pending_sync(self, group: ClassicGroup, now_ms: int) -> None:
        group.pending_sync_deadline_ms = None
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        for member_id in sorted(group.pending_sync_members):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member_and_update_group(group, member, now_ms)
        group.pending_sync_members.clear()

    def _expire_offsets(self, now_ms: int) -> None:
        for group in list(self.groups.values()):
            expired = self._expired_offsets(group, now_ms)
            self._records += self.offsets.delete(group.group_id, expired)
            if (
                group.state is GroupState.EMPTY
                and not self.offsets.has_offsets(group.group_id)
                and not group.members
                and not group.pending_members
            ):
                self._delete_group(group, now_ms)

    def _expired_offsets(self, group: ClassicGroup, now_ms: int) -> list[TopicPartition]:
        """Kafka's rule: an Empty group's offsets expire counted from when it emptied; a
        group that only stores offsets (no protocol), from each commit; a Stable
        consumer group's offsets of topics it no longer subscribes to, from each commit."""
        stored = self.offsets.group_offsets(group.group_id)
        retention_ms = self.settings.offsets_retention_ms
        if group.protocol_type and group.state is GroupState.EMPTY:
            empty_since_ms = group.state_timestamp_ms
            return _expired(
                stored,
                now_ms,
                retention_ms,
                lambda c: empty_since_ms if empty_since_ms >= 0 else c.commit_timestamp_ms,
            )
        if not group.protocol_type:
            return _expired(stored, now_ms, retention_ms, lambda c: c.commit_timestamp_ms)
        if (
            group.protocol_type == CONSUMER_PROTOCOL_TYPE
            and group.state is GroupState.STABLE
            and group.subscribed_topics is not None
        ):
            return _expired(
                stored,
                now_ms,
                retention_ms,
                lambda c: c.commit_timestamp_ms,
                group.subscribed_topics,
            )
        return []

    # ---- loading and unloading ------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> bool:
        """Apply one GroupMetadata record, in log order, while loading.

        Returns False for any other record: offsets go to `self.offsets.replay` (shared
        `OffsetStore`), KIP-848 records to `ConsumerGroupCoordinator.replay`. Call
        `finish_loading` after the partition's last record. Raises
        `classic_records.RecordFormatError` on a record that does not parse.
        """
        group_id = rec.decode_group_metadata_key(key)
        if group_id is None:
            return False
        if value is None:
            self._loading_groups.pop(group_id, None)
        else:
            self._loading_groups[group_id] = rec.decode_group_metadata_value(value)
        return True

    def finish_loading(self, now_ms: int, other_group_ids: Collection[str] = ()) -> None:
        """Build the replayed groups; members start their session timeouts at `now_ms`.

        Group ids that have committed offsets but no group metadata become Empty
        offsets-only groups (as Kafka loads them), except `other_group_ids`: the groups
        of the KIP-848 coordinator, whose offsets share the store.
        """
        for group_id, value in self._loading_groups.items():
            self._dirty.add(group_id)
            self.groups[group_id] = _group_from_record(group_id, value, now_ms)
        for group_id in self.offsets.groups():
            if group_id not in self.groups and group_id not in other_group_ids:
                self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)
        self._loading_groups = {}

    def unload(self, group_ids: Iterable[str]) -> Effects:
        """Forget groups (their partition moved away): waiting requests get NOT_COORDINATOR."""
        for group_id in group_ids:
            self._dirty.add(group_id)
            group = self.groups.pop(group_id, None)
            if group is None:
                continue
            for member in group.members.values():
                error = ErrorCode.NOT_COORDINATOR
                self._complete(member.join_pending, JoinGroupResult(error, member.member_id))
                self._complete(member.sync_pending, SyncGroupResult(error))
        return self._effects()

    # ---- records --------------------------------------------------------------------

    @staticmethod
    def _group_record(group: ClassicGroup) -> GroupRecord:
        value = rec.GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp_ms=group.state_timestamp_ms,
            members=[
                rec.MemberRecord(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(group.protocol_name),
                    m.assignment,
                )
                for m in group.members.values()
            ],
        )
        return rec.group_metadata_record(group.group_id, value)


def _can_expire(member: Member) -> bool:
    """Members parked in a JoinGroup or SyncGroup are kept alive, as in Kafka."""
    if member.is_awaiting_join:
        return member.is_new
    return member.sync_pending is None


def _group_from_record(group_id: str, value: rec.GroupMetadataValue, now_ms: int) -> ClassicGroup:
    group = ClassicGroup(
        group_id,
        state_timestamp_ms=value.current_state_timestamp_ms,
        state=GroupState.STABLE if value.members else GroupState.EMPTY,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        leader_id=value.leader,
    )
    for m in value.members:
        member = Member(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.session_timeout_ms,
            protocol_type=value.protocol_type,
            protocols=[(value.protocol or "", m.subscription)],
            assignment=m.assignment,
            heartbeat_deadline_ms=now_ms + m.session_timeout_ms,
        )
        group.members[m.member_id] = member
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def load(
    records: Iterable[GroupRecord],
    now_ms: int,
    settings: GroupSettings | None = None,
) -> ClassicGroupCoordinator:
    """A coordinator (and its offset store) rebuilt from `(key, value)` records in log
    order; records of neither (KIP-848 ones) are skipped."""
    coordinator = ClassicGroupCoordinator(settings, now_ms)
    for key, value in records:
        if not coordinator.offsets.replay(key, value):
            coordinator.replay(key, value)
    coordinator.finish_loading(now_ms)
    return coordinator


def _expired(
    stored: Mapping[TopicPartition, CommittedOffset],
    now_ms: int,
    retention_ms: int,
    base_ms: Callable[[CommittedOffset], int],
    kept_topics: frozenset[str] = frozenset(),
) -> list[TopicPartition]:
    return sorted(
        tp
        for tp, committed in stored.items()
        if tp[0] not in kept_topics and now_ms - base_ms(committed) >= retention_ms
    )
