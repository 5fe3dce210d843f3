"""The KIP-848 "consumer" group protocol as a pure state machine.

`ConsumerGroupCoordinator` holds every consumer group of one coordinator: members,
epochs, target assignments and current assignments. The broker routes
ConsumerGroupHeartbeat (v0-v1) and ConsumerGroupDescribe (v0) to it, passes the time
(`now_ms`) and a view of topic metadata, appends the returned records to
`__consumer_offsets`, and calls `advance(now_ms)` when `next_deadline_ms()` is due.
No sockets, no disk, no clock: everything it knows comes in as arguments.

The protocol (KIP-848):

1. A member joins with member epoch 0 and its subscription. Any change of membership,
   of a member's subscription or of a subscribed topic's metadata bumps the *group
   epoch*.
2. When the group epoch is ahead of the *assignment epoch*, the next heartbeat
   recomputes the target assignment with the group's server-side assignor and the
   assignment epoch becomes the group epoch.
3. Each member reconciles towards its target on its own heartbeats: it keeps what
   stays, is first asked to revoke what it must give up (keeping its epoch), and only
   when its heartbeats no longer report those partitions does it move to the
   assignment epoch and receive its new partitions - and then only partitions that
   no other member still owns (unreleased partitions follow on later heartbeats).
   So a partition is never owned by two members at once.
4. A member that stops heartbeating for the session timeout, or does not revoke
   within its rebalance timeout, is fenced (removed); its partitions become free.

Here: the heartbeat's steps, leaving and fencing, timers, deletion, loading and the
offset checks. The group and its records are `consumer_group`'s; the request checks
`consumer_validation`'s; the target assignment and reconciliation (steps 2 and 3)
are pure functions in `consumer_reconciliation`; the answers, dicts in the wire
layer's field names, are `consumer_messages`'.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from weir.format.errors import ErrorCode
from weir.groupcoord import consumer_group_records as rec
from weir.groupcoord.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Assignor
from weir.groupcoord.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    GroupState,
    Member,
    MemberState,
    OwnedPartitions,
    TopicInfo,
    TopicMetadata,
    topic_lookup,
)
from weir.groupcoord.consumer_messages import HeartbeatResult, described_group, sorted_assignment
from weir.groupcoord.consumer_reconciliation import (
    choose_assignor,
    compute_target,
    reconcile,
    subscription_metadata,
)
from weir.groupcoord.consumer_validation import (
    RequestError,
    existing_group,
    find_member,
    leaving_member,
    validate_request,
)
from weir.groupcoord.group_configs import GroupConfig
from weir.groupcoord.record_schemas import GroupRecord
from weir.groupcoord.settings import GroupSettings
from weir.groupcoord.topic_regex import TopicRegexError, compile_topic_regex, matching_topics

# A group's regular expressions are resolved again when topics were created or
# deleted since their last resolution, at most this often (Kafka's batch refresh
# interval): each resolution matches every regex of the group against every topic.
REGEX_REFRESH_INTERVAL_MS = 10_000


class ConsumerGroupCoordinator:
    """Every KIP-848 consumer group of this coordinator. Time comes in as `now_ms`."""

    def __init__(
        self,
        settings: GroupSettings | None = None,
        assignors: Mapping[str, Assignor] | None = None,
        member_id_factory: Callable[[], str] | None = None,
    ) -> None:
        self.settings = settings or GroupSettings()
        self.assignors: Mapping[str, Assignor] = assignors or ASSIGNORS
        if DEFAULT_ASSIGNOR not in self.assignors:
            raise ValueError(f"unknown default assignor {DEFAULT_ASSIGNOR!r}")
        self.groups: dict[str, ConsumerGroup] = {}
        self._new_member_id = member_id_factory or (lambda: str(uuid.uuid4()))
        # Groups with configs of their own (weir.groupcoord.group_configs); the
        # others use the broker's settings. A group id may be configured before
        # the group exists, and keeps its config when the group is deleted.
        self._group_configs: dict[str, GroupConfig] = {}
        # Every topic name a regular expression may match (`set_topic_names`).
        self._topic_names: frozenset[str] = frozenset()
        self._topic_names_version = 0
        # Groups replayed since the last `finish_loading` (one offsets partition's).
        self._loading: set[str] = set()

    def set_topic_names(self, names: Iterable[str]) -> None:
        """The topics subscribed regular expressions are matched against: the broker
        calls this at start and whenever topics were created or deleted. Groups
        resolve their regexes again on a member's next heartbeat (at most every
        REGEX_REFRESH_INTERVAL_MS), and a changed resolution bumps the group epoch."""
        topic_names = frozenset(names)
        if topic_names != self._topic_names:
            self._topic_names = topic_names
            self._topic_names_version += 1

    def set_group_config(self, group_id: str, config: GroupConfig | None) -> None:
        """Use `config` for `group_id` from its members' next heartbeat on (None: the
        broker's settings again), as Kafka applies a changed group config."""
        if config is None:
            self._group_configs.pop(group_id, None)
        else:
            self._group_configs[group_id] = config

    def group_config(self, group_id: str) -> GroupConfig:
        config = self._group_configs.get(group_id)
        return config if config is not None else GroupConfig.defaults(self.settings)

    # ---- queries --------------------------------------------------------------------

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def group_state(self, group_id: str) -> GroupState:
        group = self.groups.get(group_id)
        return GroupState.DEAD if group is None else group.state()

    # ---- ConsumerGroupHeartbeat -----------------------------------------------------

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        now_ms: int,
        topics: TopicMetadata,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribed_topic_names: Sequence[str] | None = None,
        subscribed_topic_regex: str | None = None,
        server_assignor: str | None = None,
        topic_partitions: OwnedPartitions | None = None,
        client_id: str = "",
        client_host: str = "",
        api_version: int = 1,
    ) -> HeartbeatResult:
        """Handle one ConsumerGroupHeartbeat request.

        Arguments are the request's fields (None where the request has null:
        "unchanged since the last heartbeat"). `topic_partitions` is what the member
        reports it owns. On an error nothing changes and no records are returned.
        """
        try:
            validate_request(
                group_id,
                member_id,
                member_epoch,
                instance_id,
                rack_id,
                rebalance_timeout_ms,
                subscribed_topic_names,
                subscribed_topic_regex,
                server_assignor,
                topic_partitions,
                api_version,
                self.assignors,
            )
            if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(group_id, member_id, member_epoch, instance_id)
            return self._heartbeat(
                group_id,
                member_id,
                member_epoch,
                now_ms,
                topic_lookup(topics),
                instance_id,
                rack_id,
                rebalance_timeout_ms,
                subscribed_topic_names,
                subscribed_topic_regex,
                server_assignor,
                topic_partitions,
                client_id,
                client_host,
            )
        except RequestError as failure:
            return HeartbeatResult(failure.code, failure.message)

    def _heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        now_ms: int,
        lookup: Callable[[str], TopicInfo | None],
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: Sequence[str] | None,
        subscribed_topic_regex: str | None,
        server_assignor: str | None,
        owned: OwnedPartitions | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatResult:
        joining = member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self.groups.get(group_id)
        if group is None and not joining:
            existing_group(self.groups, group_id)
        if not member_id:
            member_id = self._new_member_id()  # v0 join: the coordinator names the member
        existing, replaced = find_member(group, member_id, member_epoch, instance_id, owned)
        if (
            existing is None
            and replaced is None
            and group is not None
            and len(group.members) >= self.settings.group_max_size
        ):
            raise RequestError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum size of "
                f"{self.settings.group_max_size} members.",
            )

        # ---- validated: from here on, state changes and records are produced ----
        records: list[GroupRecord] = []
        if group is None:
            group = ConsumerGroup(group_id, assignor_name=DEFAULT_ASSIGNOR)
            self.groups[group_id] = group

        if replaced is not None:
            # A static member comes back under a new member id: it takes over the
            # previous instance's assignment and target without a rebalance.
            old = replaced
            member = dataclasses.replace(
                old,
                member_id=member_id,
                member_epoch=0,
                previous_member_epoch=0,
                rebalance_deadline_ms=None,
            )
            records += self._remove_member_records(group, old)
            group.release(old)
            del group.members[old.member_id]
            target = group.target.pop(old.member_id, None)
            group.members[member_id] = member
            group.static_members[member.instance_id or ""] = member_id
            group.claim(member)
            if target is not None:
                group.target[member_id] = target
                records.append(rec.target_assignment_member_record(group_id, member_id, target))
            records.append(rec.member_metadata_record(group_id, member_id, member.metadata()))
            records.append(rec.current_assignment_record(group_id, member_id, member.current()))
            previous = dataclasses.replace(member)
        elif existing is None:
            member = Member(member_id=member_id)
            previous = None
        else:
            member = existing
            previous = dataclasses.replace(existing)
        old_assigned = dict(member.assigned)

        # 1. Update the member; a changed subscription bumps the group epoch.
        updated = dataclasses.replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms
            if rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=server_assignor
            if server_assignor is not None
            else member.server_assignor,
            subscribed_topic_names=tuple(sorted(set(subscribed_topic_names)))
            if subscribed_topic_names is not None
            else member.subscribed_topic_names,
            # null: unchanged; the empty string: no regex any more.
            subscribed_topic_regex=(subscribed_topic_regex or None)
            if subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=client_id,
            client_host=client_host,
        )
        bump = False
        if previous is None or updated.metadata() != previous.metadata():
            records.append(rec.member_metadata_record(group_id, member_id, updated.metadata()))
            if previous is None or (
                updated.subscribed_topic_names != previous.subscribed_topic_names
                or updated.subscribed_topic_regex != previous.subscribed_topic_regex
            ):
                bump = True
        group.members[member_id] = updated
        if updated.instance_id is not None:
            group.static_members[updated.instance_id] = member_id
        member = updated
        if self._refresh_regexes(group, now_ms):
            bump = True

        metadata = subscription_metadata(group, lookup)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            records.append(
                rec.partition_metadata_record(
                    group_id, {n: (i.topic_id, i.partition_count) for n, i in metadata.items()}
                )
            )
            bump = True
        if bump:
            group.group_epoch += 1
            records.append(rec.group_epoch_record(group_id, group.group_epoch))

        # 2. A new target assignment when the group epoch moved past the assignment epoch.
        if group.group_epoch > group.assignment_epoch:
            records += compute_target(group, self.assignors)

        # 3. Reconcile this member towards its target.
        records += reconcile(group, member, owned, now_ms)
        config = self.group_config(group_id)
        member.session_deadline_ms = now_ms + config.consumer_session_timeout_ms

        full_request = joining or (
            rebalance_timeout_ms != -1
            and (subscribed_topic_names is not None or subscribed_topic_regex is not None)
            and owned is not None
        )
        changed = member.assigned != old_assigned
        return HeartbeatResult(
            ErrorCode.NONE,
            None,
            member_id,
            member.member_epoch,
            config.consumer_heartbeat_interval_ms,
            sorted_assignment(member.assigned) if full_request or changed else None,
            records,
        )

    def _refresh_regexes(self, group: ConsumerGroup, now_ms: int) -> bool:
        """Resolve the group's regular expressions that are new, and all of them when
        topics changed since the last resolution and REGEX_REFRESH_INTERVAL_MS has
        passed. Resolutions of regexes no member uses any more are dropped. Returns
        whether a regex in use now matches other topics (the group epoch must move)."""
        wanted = {m.subscribed_topic_regex for m in group.members.values()}
        wanted.discard(None)
        stale = group.regex_topic_names_version != self._topic_names_version and (
            group.regex_refreshed_ms is None
            or now_ms >= group.regex_refreshed_ms + REGEX_REFRESH_INTERVAL_MS
        )
        resolved: dict[str, frozenset[str]] = {}
        for regex in sorted(r for r in wanted if r is not None):
            known = group.resolved_regexes.get(regex)
            resolved[regex] = known if known is not None and not stale else self._resolve(regex)
        if stale and wanted:
            group.regex_topic_names_version = self._topic_names_version
            group.regex_refreshed_ms = now_ms
        changed = any(group.resolved_regexes.get(r) != ts for r, ts in resolved.items())
        group.resolved_regexes = resolved
        return changed

    def _resolve(self, regex: str) -> frozenset[str]:
        try:
            pattern = compile_topic_regex(regex)
        except TopicRegexError:
            return frozenset()  # only from a log written elsewhere: heartbeats validate
        return matching_topics(pattern, self._topic_names)

    # ---- leaving and fencing --------------------------------------------------------

    def _leave(
        self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None
    ) -> HeartbeatResult:
        group = existing_group(self.groups, group_id)
        member = leaving_member(group, member_id, instance_id)
        if instance_id is not None and member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A static member leaves for a while: it keeps its partitions (so nobody
            # else gets them) until it returns or its session expires.
            group.release(member)
            member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            member.pending_revocation = {}
            member.rebalance_deadline_ms = None
            group.claim(member)
            return HeartbeatResult(
                ErrorCode.NONE,
                None,
                member_id,
                LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                0,
                None,
                [rec.current_assignment_record(group_id, member_id, member.current())],
            )
        records = self._fence(group, member)
        return HeartbeatResult(ErrorCode.NONE, None, member_id, member_epoch, 0, None, records)

    def _remove_member_records(self, group: ConsumerGroup, member: Member) -> list[GroupRecord]:
        gid, mid = group.group_id, member.member_id
        return [
            rec.current_assignment_tombstone(gid, mid),
            rec.target_assignment_member_tombstone(gid, mid),
            rec.member_metadata_tombstone(gid, mid),
        ]

    def _fence(self, group: ConsumerGroup, member: Member) -> list[GroupRecord]:
        """Remove a member: its partitions are free at once; the group epoch bumps."""
        records = self._remove_member_records(group, member)
        group.release(member)
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if member.instance_id is not None and (
            group.static_members.get(member.instance_id) == member.member_id
        ):
            del group.static_members[member.instance_id]
        # Topics only the leaving member subscribed to drop out of the metadata.
        in_use = {m.subscribed_topic_regex for m in group.members.values()}
        group.resolved_regexes = {r: t for r, t in group.resolved_regexes.items() if r in in_use}
        names = group.all_subscribed_names()
        metadata = {n: i for n, i in group.subscription_metadata.items() if n in names}
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            records.append(
                rec.partition_metadata_record(
                    group.group_id,
                    {n: (i.topic_id, i.partition_count) for n, i in metadata.items()},
                )
            )
        group.group_epoch += 1
        records.append(rec.group_epoch_record(group.group_id, group.group_epoch))
        return records

    # ---- timers ---------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """The earliest session or rebalance deadline of any member, or None."""
        deadlines = [
            d
            for g in self.groups.values()
            for m in g.members.values()
            for d in (m.session_deadline_ms, m.rebalance_deadline_ms)
            if d is not None
        ]
        return min(deadlines, default=None)

    def advance(self, now_ms: int) -> list[GroupRecord]:
        """Fence every member whose session or rebalance deadline is at or before now_ms."""
        records: list[GroupRecord] = []
        for group in list(self.groups.values()):
            for member in list(group.members.values()):
                session_over = (
                    member.session_deadline_ms is not None and member.session_deadline_ms <= now_ms
                )
                rebalance_over = (
                    member.rebalance_deadline_ms is not None
                    and member.rebalance_deadline_ms <= now_ms
                    and member.state == MemberState.UNREVOKED_PARTITIONS
                    and member.member_epoch == member.rebalance_deadline_epoch
                )
                if session_over or rebalance_over:
                    records += self._fence(group, member)
                elif member.rebalance_deadline_ms is not None and (
                    member.rebalance_deadline_ms <= now_ms
                ):
                    member.rebalance_deadline_ms = None
        return records

    # ---- deletion and loading -------------------------------------------------------

    def delete_group(self, group_id: str) -> tuple[ErrorCode, list[GroupRecord]]:
        """DeleteGroups for a consumer group: only an empty group may go (NON_EMPTY_GROUP)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP, []
        del self.groups[group_id]
        return ErrorCode.NONE, [
            rec.target_assignment_epoch_tombstone(group_id),
            rec.partition_metadata_tombstone(group_id),
            rec.group_tombstone(group_id),
        ]

    def replay(self, key: bytes, value: bytes | None) -> bool:
        """Apply one `__consumer_offsets` record, in log order, while loading.

        Returns False for records that are not KIP-848 consumer-group records (offsets,
        classic groups), which the caller hands to their owners. Call `finish_loading`
        once the partition has been read to its end. Raises RecordFormatError on a
        record that does not parse.
        """
        decoded = rec.decode_key(key)
        if decoded is None:
            return False
        record_type, (group_id, *rest) = decoded
        self._loading.add(group_id)
        if value is None and record_type == rec.GROUP_METADATA:
            self.groups.pop(group_id, None)
            return True
        group = self.groups.get(group_id)
        if group is None:
            if value is None:
                return True
            group = ConsumerGroup(group_id, assignor_name=DEFAULT_ASSIGNOR)
            self.groups[group_id] = group
        group.replay(record_type, rest[0] if rest else "", value)
        return True

    def unload(self, group_ids: Iterable[str]) -> None:
        """Forget groups (their partition moved to another coordinator). KIP-848
        heartbeats are answered at once, so no request waits on them."""
        for group_id in group_ids:
            self.groups.pop(group_id, None)

    def finish_loading(self, now_ms: int) -> None:
        """After replay: rebuild the replayed groups' ownership and start their
        members' timers from now. Groups loaded before (from other offsets
        partitions) keep theirs: restarting every group's session timers on each
        load would keep a dead member from ever being fenced while leadership of
        offsets partitions keeps moving."""
        loaded = [(g, self.groups[g]) for g in sorted(self._loading) if g in self.groups]
        self._loading = set()
        for group_id, group in loaded:
            group.owners = {}
            group.assignor_name = choose_assignor(group)
            # Resolutions are not stored: resolve from today's topics (a group whose
            # regex now matches other topics rebalances when the change shows in its
            # subscription metadata, on the next heartbeat).
            group.resolved_regexes = {}
            group.regex_topic_names_version, group.regex_refreshed_ms = -1, None
            self._refresh_regexes(group, now_ms)
            session_timeout_ms = self.group_config(group_id).consumer_session_timeout_ms
            for member in group.members.values():
                group.claim(member)
                member.session_deadline_ms = now_ms + session_timeout_ms
                if member.state == MemberState.UNREVOKED_PARTITIONS:
                    member.rebalance_deadline_ms = now_ms + max(member.rebalance_timeout_ms, 0)
                    member.rebalance_deadline_epoch = member.member_epoch
                else:
                    member.rebalance_deadline_ms = None

    # ---- offsets --------------------------------------------------------------------

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode:
        """Whether an OffsetCommit (v9) of this member may be stored.

        Epoch < 0 (admin clients, manual assignment) may commit only to an empty group.
        """
        group = self.groups.get(group_id)
        if member_epoch < 0 and (group is None or not group.members):
            return ErrorCode.NONE
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.member_epoch != member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_txn_offset_commit(
        self, group_id: str, member_id: str, group_instance_id: str | None, member_epoch: int
    ) -> ErrorCode:
        """TxnOffsetCommit (Kafka's rules): with no member fields (epoch -1) it commits
        into any group; otherwise as OffsetCommit, a stale epoch answered
        ILLEGAL_GENERATION (the error transactional producers know)."""
        if member_epoch == -1 and not member_id and group_instance_id is None:
            return ErrorCode.NONE
        error = self.validate_offset_commit(group_id, member_id, member_epoch)
        return ErrorCode.ILLEGAL_GENERATION if error == ErrorCode.STALE_MEMBER_EPOCH else error

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        """Whether an OffsetFetch (v9) naming a member may be answered."""
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        group = self.groups.get(group_id)
        member = group.members.get(member_id or "") if group is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.member_epoch != member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    # ---- ConsumerGroupDescribe ------------------------------------------------------

    def describe(
        self, group_ids: Iterable[str], topic_names: Callable[[uuid.UUID], str | None]
    ) -> list[dict[str, Any]]:
        """ConsumerGroupDescribe v0 `groups` entries; `topic_names` maps ids to names."""
        return [
            described_group(group_id, self.groups.get(group_id), topic_names)
            for group_id in group_ids
        ]
