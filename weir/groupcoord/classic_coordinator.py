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

Here: what each request means (validation, admission, static-member replacement),
timers, admin and loading. The rebalance transitions and the answers they release
are `classic_rebalance`'s; the offset rules are pure functions in `classic_offsets`;
the group, its record and its admin views are `classic_group`'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Sequence

from weir.format.errors import ErrorCode
from weir.groupcoord import classic_records as rec
from weir.groupcoord.classic_group import ClassicGroup, GroupState, Member
from weir.groupcoord.classic_messages import (
    GroupDescription,
    GroupListing,
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
from weir.groupcoord.classic_offsets import (
    accepted_offsets,
    all_failed,
    expired_offsets,
    fetched_offsets,
    offset_deletions,
    validate_offset_commit,
)
from weir.groupcoord.classic_rebalance import Rebalancer, join_result, sync_result
from weir.groupcoord.committed_offsets import OffsetStore
from weir.groupcoord.deadlines import DeadlineIndex
from weir.groupcoord.pending import Effects, Outbox, Pending, Reply
from weir.groupcoord.record_schemas import GroupRecord
from weir.groupcoord.settings import GroupSettings

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
        # This call's records and completed answers, shared with the rebalances.
        self._out = Outbox()
        self._rebalance = Rebalancer(self.settings, self._out)
        self._loading_groups: dict[str, rec.GroupMetadataValue] = {}
        self._timers = DeadlineIndex()  # group id -> its earliest timer
        self._dirty: set[str] = set()  # groups whose timers may have changed

    # ---- queries --------------------------------------------------------------------

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def group_state(self, group_id: str) -> GroupState:
        group = self.groups.get(group_id)
        return GroupState.DEAD if group is None else group.state

    # ---- JoinGroup ------------------------------------------------------------------

    def join_group(self, req: JoinGroupRequest, now_ms: int) -> Reply[JoinGroupResult]:
        self._dirty.add(req.group_id)
        error = self._validate_join(req)
        if error is not ErrorCode.NONE:
            return self._out.answer(JoinGroupResult(error, member_id=req.member_id))
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return self._out.answer(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
        if not self._accepts_joining_member(group, req.member_id):
            member = group.members.get(req.member_id)
            if member is not None:
                self._rebalance.remove_member_and_update_group(group, member, now_ms)
            return self._out.answer(
                JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id)
            )
        if not group.supports(req.protocol_type, req.protocols):
            return self._out.answer(
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
            return self._out.answer(JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
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
            return self._out.answer(JoinGroupResult(error, member_id))
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, req, now_ms)
        if group.state is GroupState.COMPLETING_REBALANCE and member.matches(req.protocols):
            # The member lost its JoinGroup answer: give it again.
            return self._out.answer(join_result(group, member))
        if (
            group.state is GroupState.STABLE
            and not group.is_leader(member_id)
            and member.matches(req.protocols)
        ):
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            return self._out.answer(join_result(group, member))
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
        self._rebalance.maybe_prepare(group, now_ms)
        return self._out.reply(pending)

    def _update_member(self, member: Member, req: JoinGroupRequest) -> Pending[JoinGroupResult]:
        self._out.complete(
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
        self._rebalance.maybe_prepare(group, now_ms)
        return self._out.reply(pending)

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
        self._out.complete(member.join_pending, JoinGroupResult(fenced, old_member_id))
        self._out.complete(member.sync_pending, SyncGroupResult(fenced))
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
                self._out.records.append(group.metadata_record())
                leader = group.is_leader(new_member_id)
                self._out.complete(pending, join_result(group, member, skip_assignment=leader))
                return self._out.reply(pending)
            self._rebalance.prepare(group, now_ms)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may be assigning to the old member id: start over.
            self._rebalance.prepare(group, now_ms)
        else:
            self._rebalance.try_complete_join(group, now_ms)
        return self._out.reply(pending)

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
            return self._out.answer(SyncGroupResult(error))
        member = group.members[req.member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return self._out.answer(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self._synced(group, member, now_ms)
        if group.state is GroupState.STABLE:
            return self._out.answer(sync_result(group, member))
        # CompletingRebalance: wait for the leader's assignment (or give it).
        self._out.complete(member.sync_pending, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        pending: Pending[SyncGroupResult] = Pending()
        member.sync_pending = pending
        if group.is_leader(member.member_id):
            self._rebalance.apply_assignment(group, req.assignments, now_ms)
        return self._out.reply(pending)

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
            return self._out.answer(LeaveGroupResult(ErrorCode.INVALID_GROUP_ID))
        group = self.groups.get(group_id)
        if group is None:
            unknown = ErrorCode.UNKNOWN_MEMBER_ID
            left = [LeftMember(m.member_id, m.group_instance_id, unknown) for m in members]
            return self._out.answer(LeaveGroupResult(ErrorCode.NONE, left))
        if group.state is GroupState.DEAD:
            return self._out.answer(LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        results = [
            LeftMember(m.member_id, m.group_instance_id, self._leave_one(group, m, now_ms))
            for m in members
        ]
        return self._out.answer(LeaveGroupResult(ErrorCode.NONE, results))

    def _leave_one(self, group: ClassicGroup, leaving: LeavingMember, now_ms: int) -> ErrorCode:
        member_id = leaving.member_id
        if not member_id and leaving.group_instance_id is not None:
            member_id = group.static_member_id(leaving.group_instance_id) or ""
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._rebalance.try_complete_join(group, now_ms)
            return ErrorCode.NONE
        error = group.validate_member(member_id, leaving.group_instance_id)
        if error is ErrorCode.NONE:
            self._rebalance.remove_member_and_update_group(group, group.members[member_id], now_ms)
        return error

    # ---- offsets --------------------------------------------------------------------

    def commit_offsets(self, req: OffsetCommitRequest, now_ms: int) -> Reply[list[PartitionError]]:
        self._dirty.add(req.group_id)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                return self._out.answer(all_failed(req, ErrorCode.ILLEGAL_GENERATION))
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
        error = validate_offset_commit(group, req)
        if error is not ErrorCode.NONE:
            return self._out.answer(all_failed(req, error))
        self.groups[group.group_id] = group
        member = group.members.get(req.member_id)
        if member is not None:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        results, accepted = accepted_offsets(req, now_ms, self.settings.offset_metadata_max_bytes)
        self._out.records += self.offsets.commit(group.group_id, accepted)
        return self._out.answer(results)

    def commit_transactional_offsets(
        self, req: OffsetCommitRequest, producer_id: int, now_ms: int
    ) -> Reply[list[PartitionError]]:
        """TxnOffsetCommit: the offsets are held pending in the producer's transaction
        (`OffsetStore.commit_transactional`); an unknown group is created to store
        offsets only when the request names no generation, as for OffsetCommit."""
        self._dirty.add(req.group_id)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                return self._out.answer(all_failed(req, ErrorCode.ILLEGAL_GENERATION))
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
        error = validate_offset_commit(group, req, transactional=True)
        if error is not ErrorCode.NONE:
            return self._out.answer(all_failed(req, error))
        self.groups[group.group_id] = group
        results, accepted = accepted_offsets(req, now_ms, self.settings.offset_metadata_max_bytes)
        self._out.records += self.offsets.commit_transactional(
            producer_id, group.group_id, accepted
        )
        return self._out.answer(results)

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> OffsetFetchResult:
        """The group's latest offsets (see `classic_offsets.fetched_offsets`)."""
        return fetched_offsets(self.offsets, group_id, partitions)

    def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]], now_ms: int
    ) -> Reply[OffsetDeleteResult]:
        result, deleted = offset_deletions(self.groups.get(group_id), partitions)
        if result.error is ErrorCode.NONE:
            self._out.records += self.offsets.delete(group_id, deleted)
        return self._out.answer(result)

    # ---- admin ----------------------------------------------------------------------

    def list_groups(self, states: Collection[str] | None = None) -> list[GroupListing]:
        """ListGroups; `states` (v4+) filters by state name, case-insensitively."""
        wanted = {s.lower() for s in states} if states else None
        return [
            g.listing()
            for g in self.groups.values()
            if wanted is None or g.state.value.lower() in wanted
        ]

    def describe_group(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(ErrorCode.NONE, group_id, GroupState.DEAD.value, "", "")
        return group.description()

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
        return self._out.answer(results)

    def _delete_group(self, group: ClassicGroup, now_ms: int) -> None:
        self._dirty.add(group.group_id)
        self._out.records += self.offsets.delete_group(group.group_id)
        group.transition(GroupState.DEAD, now_ms)
        del self.groups[group.group_id]
        # A generation-0 group only ever stored offsets: it has no metadata to remove.
        if group.generation_id > 0:
            self._out.records.append(rec.group_metadata_tombstone(group.group_id))

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
            deadlines_ms = group.deadlines_ms() if group is not None else []
            self._timers.set(group_id, min(deadlines_ms, default=None))
        self._dirty.clear()

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
        return self._out.effects()

    def _advance_group(self, group: ClassicGroup, now_ms: int) -> None:
        for member_id, deadline_ms in list(group.pending_members.items()):
            if deadline_ms <= now_ms:
                del group.pending_members[member_id]
                self._rebalance.try_complete_join(group, now_ms)
        for member in list(group.members.values()):
            still_member = group.members.get(member.member_id) is member
            if still_member and member.can_expire() and member.heartbeat_deadline_ms <= now_ms:
                self._rebalance.remove_member_and_update_group(group, member, now_ms)
        if group.pending_sync_deadline_ms is not None and group.pending_sync_deadline_ms <= now_ms:
            self._rebalance.expire_pending_sync(group, now_ms)
        if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
            self._rebalance.on_join_deadline(group, now_ms)

    def _expire_offsets(self, now_ms: int) -> None:
        for group in list(self.groups.values()):
            stored = self.offsets.group_offsets(group.group_id)
            retention_ms = self.settings.offsets_retention_ms
            expired = [
                tp
                for tp in expired_offsets(group, stored, now_ms, retention_ms)
                if not self.offsets.has_pending_transaction(group.group_id, *tp)
            ]
            self._out.records += self.offsets.delete(group.group_id, expired)
            if (
                group.state is GroupState.EMPTY
                and not self.offsets.has_offsets(group.group_id)
                and not self.offsets.has_open_transactions(group.group_id)
                and not group.members
                and not group.pending_members
            ):
                self._delete_group(group, now_ms)

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
            self.groups[group_id] = ClassicGroup.from_record(group_id, value, now_ms)
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
                self._out.complete(member.join_pending, JoinGroupResult(error, member.member_id))
                self._out.complete(member.sync_pending, SyncGroupResult(error))
        return self._out.effects()


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
