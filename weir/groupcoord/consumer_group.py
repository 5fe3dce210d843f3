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

Heartbeat and describe answers are dicts in the wire layer's snake_case field names
of the Kafka JSON schemas, ready to encode.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from weir.format.errors import ErrorCode
from weir.groupcoord import consumer_group_records as rec
from weir.groupcoord.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Assignor, MemberSpec
from weir.groupcoord.group_configs import GroupConfig
from weir.groupcoord.record_schemas import GroupRecord
from weir.groupcoord.settings import GroupSettings
from weir.groupcoord.topic_regex import TopicRegexError, compile_topic_regex, matching_topics

SUBSCRIBED_TOPICS_PER_MEMBER_MAX = 10_000
# A group's regular expressions are resolved again when topics were created or
# deleted since their last resolution, at most this often (Kafka's batch refresh
# interval): each resolution matches every regex of the group against every topic.
REGEX_REFRESH_INTERVAL_MS = 10_000

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

Partitions = dict[uuid.UUID, frozenset[int]]
OwnedPartitions = Sequence[tuple[uuid.UUID, Sequence[int]]]


class TopicInfo(NamedTuple):
    topic_id: uuid.UUID
    partition_count: int


# The broker's view of topics: a mapping or a lookup function (name -> info or None).
TopicMetadata = Mapping[str, TopicInfo] | Callable[[str], TopicInfo | None]


class MemberState(enum.IntEnum):
    """Kafka's MemberState byte, as stored in ConsumerGroupCurrentMemberAssignmentValue."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class GroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # Timers (not persisted: a loaded group restarts them from the load time).
    session_deadline_ms: int | None = None
    rebalance_deadline_ms: int | None = None
    rebalance_deadline_epoch: int = 0

    def metadata(self) -> rec.MemberMetadata:
        return rec.MemberMetadata(
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
        )

    def current(self) -> rec.CurrentAssignment:
        return rec.CurrentAssignment(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            self.assigned,
            self.pending_revocation,
        )

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Partitions] = field(default_factory=dict)  # member id -> target
    owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    # Subscribed topics that exist: name -> (topic id, partition count).
    subscription_metadata: dict[str, TopicInfo] = field(default_factory=dict)
    assignor_name: str = DEFAULT_ASSIGNOR
    # The members' regular expressions and the topic names each matches (derived
    # state, not persisted: resolved again from the topic names after loading),
    # with the coordinator's topic-names version and the time of the last resolution.
    resolved_regexes: dict[str, frozenset[str]] = field(default_factory=dict)
    regex_topic_names_version: int = -1
    regex_refreshed_ms: int | None = None

    def subscribed_names(self, member: Member) -> frozenset[str]:
        """The member's topic names and the names its regular expression matches."""
        regex = member.subscribed_topic_regex
        matched = self.resolved_regexes.get(regex, frozenset()) if regex else frozenset()
        return frozenset(member.subscribed_topic_names) | matched

    def all_subscribed_names(self) -> set[str]:
        return {n for m in self.members.values() for n in self.subscribed_names(m)}

    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if all(m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return GroupState.STABLE
        return GroupState.RECONCILING

    # -- partition ownership (assigned + pending revocation, per member) --

    def release(self, member: Member) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for topic_id, partitions in parts.items():
                for p in partitions:
                    if self.owners.get((topic_id, p)) == member.member_id:
                        del self.owners[(topic_id, p)]

    def claim(self, member: Member) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for topic_id, partitions in parts.items():
                for p in partitions:
                    holder = self.owners.setdefault((topic_id, p), member.member_id)
                    assert holder == member.member_id, (
                        f"partition {topic_id}-{p} owned by {holder} and {member.member_id}"
                    )


class _RequestError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class HeartbeatResult:
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # None when unchanged; else the full current assignment as (topic id, partitions).
    assignment: list[tuple[uuid.UUID, list[int]]] | None = None
    records: list[GroupRecord] = field(default_factory=list)

    def response(self) -> dict[str, Any]:
        """The ConsumerGroupHeartbeat response body (throttle_time_ms 0)."""
        return {
            "throttle_time_ms": 0,
            "error_code": int(self.error_code),
            "error_message": self.error_message,
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "assignment": None
            if self.assignment is None
            else {
                "topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in self.assignment]
            },
        }


def _lookup(topics: TopicMetadata) -> Callable[[str], TopicInfo | None]:
    if isinstance(topics, Mapping):
        return topics.get
    return topics


def _sorted_assignment(
    parts: Mapping[uuid.UUID, frozenset[int]],
) -> list[tuple[uuid.UUID, list[int]]]:
    return [(t, sorted(parts[t])) for t in sorted(parts) if parts[t]]


def _owned_to_partitions(owned: OwnedPartitions) -> dict[uuid.UUID, set[int]]:
    result: dict[uuid.UUID, set[int]] = {}
    for topic_id, partitions in owned:
        result.setdefault(topic_id, set()).update(partitions)
    return result


def _is_subset(owned: OwnedPartitions | None, assigned: Partitions) -> bool:
    if owned is None:
        return False
    return all(set(ps) <= assigned.get(t, frozenset()) for t, ps in owned)


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
            self._validate(
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
            )
            if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(group_id, member_id, member_epoch, instance_id)
            return self._heartbeat(
                group_id,
                member_id,
                member_epoch,
                now_ms,
                _lookup(topics),
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
        except _RequestError as failure:
            return HeartbeatResult(failure.code, failure.message)

    def _validate(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: Sequence[str] | None,
        subscribed_topic_regex: str | None,
        server_assignor: str | None,
        topic_partitions: OwnedPartitions | None,
        api_version: int,
    ) -> None:
        def invalid(message: str) -> _RequestError:
            return _RequestError(ErrorCode.INVALID_REQUEST, message)

        if not group_id:
            raise invalid("GroupId can't be empty.")
        if instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if rack_id == "":
            raise invalid("RackId can't be empty.")
        if not member_id and (api_version >= 1 or member_epoch != JOIN_GROUP_MEMBER_EPOCH):
            # From v1 the client generates its member id (KIP-1082); v0 gets one on join.
            raise invalid("MemberId can't be empty.")
        if member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if topic_partitions is None or len(topic_partitions) > 0:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if subscribed_topic_names is None and not subscribed_topic_regex:
                raise invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
                )
        elif member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if rebalance_timeout_ms < -1:
            raise invalid("RebalanceTimeoutMs is invalid.")
        if subscribed_topic_names is not None and (
            len(subscribed_topic_names) > SUBSCRIBED_TOPICS_PER_MEMBER_MAX
        ):
            raise invalid("Too many subscribed topics.")
        if subscribed_topic_regex:
            # An empty regex (what librdkafka sends with name-only subscriptions)
            # means none.
            try:
                compile_topic_regex(subscribed_topic_regex)
            except TopicRegexError as exc:
                raise _RequestError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(exc)) from None
        if server_assignor is not None and server_assignor not in self.assignors:
            raise _RequestError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {server_assignor} is not supported. Supported assignors: "
                + ", ".join(sorted(self.assignors))
                + ".",
            )

    def _existing_group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            # Kafka answers GROUP_ID_NOT_FOUND; UNKNOWN_MEMBER_ID makes every client
            # rejoin, which is also right after a restart that lost the group.
            raise _RequestError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Consumer group {group_id} not found."
            )
        return group

    @staticmethod
    def _check_epoch(member: Member, received: int, owned: OwnedPartitions | None) -> None:
        if received == JOIN_GROUP_MEMBER_EPOCH:
            return  # a (fenced) member may always rejoin with epoch 0 (KAFKA-19233)
        if received > member.member_epoch:
            raise _RequestError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The member epoch {received} is ahead of the coordinator's "
                f"{member.member_epoch}. The member must abandon its partitions and rejoin.",
            )
        if received < member.member_epoch and (
            received != member.previous_member_epoch or not _is_subset(owned, member.assigned)
        ):
            raise _RequestError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The member epoch {received} is behind the coordinator's "
                f"{member.member_epoch}. The member must abandon its partitions and rejoin.",
            )

    def _find_member(
        self,
        group: ConsumerGroup | None,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        owned: OwnedPartitions | None,
    ) -> tuple[Member | None, Member | None]:
        """(existing member or None for a new one, static member it replaces or None)."""
        joining = member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if group is None:
            return None, None
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise _RequestError(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return None, None
            self._check_epoch(member, member_epoch, owned)
            return member, None
        existing_id = group.static_members.get(instance_id)
        existing = group.members.get(existing_id) if existing_id is not None else None
        if joining:
            if existing is None:
                member = group.members.get(member_id)
                return member, None
            if existing.member_id == member_id:
                return existing, None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise _RequestError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join "
                    f"the group because the instance id is owned by member {existing.member_id}.",
                )
            return None, existing
        if existing is None:
            raise _RequestError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Instance id {instance_id} is unknown in group {group.group_id}.",
            )
        if existing.member_id != member_id:
            raise _RequestError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by "
                f"member {existing.member_id}.",
            )
        self._check_epoch(existing, member_epoch, owned)
        return existing, None

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
            self._existing_group(group_id)
        if not member_id:
            member_id = self._new_member_id()  # v0 join: the coordinator names the member
        existing, replaced = self._find_member(group, member_id, member_epoch, instance_id, owned)
        if (
            existing is None
            and replaced is None
            and group is not None
            and len(group.members) >= self.settings.group_max_size
        ):
            raise _RequestError(
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

        metadata = self._subscription_metadata(group, lookup)
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
            records += self._compute_target(group)

        # 3. Reconcile this member towards its target.
        records += self._reconcile(group, member, owned, now_ms)
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
            _sorted_assignment(member.assigned) if full_request or changed else None,
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

    @staticmethod
    def _subscription_metadata(
        group: ConsumerGroup, lookup: Callable[[str], TopicInfo | None]
    ) -> dict[str, TopicInfo]:
        names = group.all_subscribed_names()
        metadata: dict[str, TopicInfo] = {}
        for name in sorted(names):
            info = lookup(name)
            if info is not None and info.partition_count > 0:
                metadata[name] = TopicInfo(info.topic_id, info.partition_count)
        return metadata

    def _choose_assignor(self, group: ConsumerGroup) -> str:
        counts = Counter(
            m.server_assignor for m in group.members.values() if m.server_assignor is not None
        )
        if not counts:
            return DEFAULT_ASSIGNOR
        return min(counts, key=lambda name: (-counts[name], name))

    def _compute_target(self, group: ConsumerGroup) -> list[GroupRecord]:
        group.assignor_name = self._choose_assignor(group)
        assignor = self.assignors[group.assignor_name]
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

    def _reconcile(
        self, group: ConsumerGroup, member: Member, owned: OwnedPartitions | None, now_ms: int
    ) -> list[GroupRecord]:
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
                self._next_assignment(group, member, member.member_epoch, target, still_owns)
        elif member.state == MemberState.UNREVOKED_PARTITIONS:
            if not still_owns(member.pending_revocation):
                self._next_assignment(group, member, member.member_epoch + 1, target, still_owns)
        else:  # UNRELEASED_PARTITIONS, or UNKNOWN (a newer state from a record): go on
            self._next_assignment(group, member, member.member_epoch, target, still_owns)

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

    @staticmethod
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

    # ---- leaving and fencing --------------------------------------------------------

    def _leave(
        self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None
    ) -> HeartbeatResult:
        group = self._existing_group(group_id)
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise _RequestError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group_id}.",
                )
        else:
            static_id = group.static_members.get(instance_id)
            member = group.members.get(static_id) if static_id is not None else None
            if member is None:
                raise _RequestError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Instance id {instance_id} is unknown in group {group_id}.",
                )
            if member.member_id != member_id:
                raise _RequestError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced "
                    f"by member {member.member_id}.",
                )
            if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
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
        group = self.groups.get(group_id)
        if value is None:
            if group is None:
                return True
            if record_type == rec.GROUP_METADATA:
                del self.groups[group_id]
            elif record_type == rec.PARTITION_METADATA:
                group.subscription_metadata = {}
            elif record_type == rec.TARGET_ASSIGNMENT_METADATA:
                group.assignment_epoch = 0
            elif record_type == rec.TARGET_ASSIGNMENT_MEMBER:
                group.target.pop(rest[0], None)
            elif record_type == rec.MEMBER_METADATA:
                gone = group.members.pop(rest[0], None)
                if (
                    gone is not None
                    and gone.instance_id is not None
                    and group.static_members.get(gone.instance_id) == gone.member_id
                ):
                    del group.static_members[gone.instance_id]
            elif record_type == rec.CURRENT_MEMBER_ASSIGNMENT and rest[0] in group.members:
                member = group.members[rest[0]]
                member.assigned, member.pending_revocation = {}, {}
            return True
        if group is None:
            group = ConsumerGroup(group_id, assignor_name=DEFAULT_ASSIGNOR)
            self.groups[group_id] = group
        if record_type == rec.GROUP_METADATA:
            group.group_epoch = rec.decode_epoch(value)
        elif record_type == rec.PARTITION_METADATA:
            group.subscription_metadata = {
                name: TopicInfo(topic_id, count)
                for name, (topic_id, count) in rec.decode_partition_metadata(value).items()
            }
        elif record_type == rec.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = rec.decode_target_assignment_epoch(value)
        elif record_type == rec.TARGET_ASSIGNMENT_MEMBER:
            group.target[rest[0]] = rec.decode_target_assignment_member(value)
        elif record_type == rec.MEMBER_METADATA:
            meta = rec.decode_member_metadata(value)
            member = group.members.setdefault(rest[0], Member(member_id=rest[0]))
            member.instance_id = meta.instance_id
            member.rack_id = meta.rack_id
            member.client_id = meta.client_id
            member.client_host = meta.client_host
            member.subscribed_topic_names = meta.subscribed_topic_names
            member.subscribed_topic_regex = meta.subscribed_topic_regex or None
            member.rebalance_timeout_ms = meta.rebalance_timeout_ms
            member.server_assignor = meta.server_assignor
            if meta.instance_id is not None:
                group.static_members[meta.instance_id] = rest[0]
        elif record_type == rec.CURRENT_MEMBER_ASSIGNMENT:
            current = rec.decode_current_assignment(value)
            member = group.members.setdefault(rest[0], Member(member_id=rest[0]))
            member.member_epoch = current.member_epoch
            member.previous_member_epoch = current.previous_member_epoch
            try:
                member.state = MemberState(current.state)
            except ValueError:
                member.state = MemberState.UNKNOWN
            member.assigned = dict(current.assigned)
            member.pending_revocation = dict(current.pending_revocation)
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
            group.assignor_name = self._choose_assignor(group)
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

        def assignment(parts: Mapping[uuid.UUID, frozenset[int]]) -> dict[str, Any]:
            return {
                "topic_partitions": [
                    {"topic_id": t, "topic_name": topic_names(t) or "", "partitions": ps}
                    for t, ps in _sorted_assignment(parts)
                ],
            }

        described = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                described.append(
                    {
                        "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                        "error_message": f"Group {group_id} not found.",
                        "group_id": group_id,
                        "group_state": GroupState.DEAD.value,
                        "group_epoch": -1,
                        "assignment_epoch": -1,
                        "assignor_name": "",
                        "members": [],
                        "authorized_operations": -(2**31),
                    }
                )
                continue
            members = []
            for member_id in sorted(group.members):
                m = group.members[member_id]
                members.append(
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed_topic_names),
                        "subscribed_topic_regex": m.subscribed_topic_regex,
                        "assignment": assignment(m.assigned),
                        "target_assignment": assignment(group.target.get(member_id, {})),
                    }
                )
            described.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "group_id": group_id,
                    "group_state": group.state().value,
                    "group_epoch": group.group_epoch,
                    "assignment_epoch": group.assignment_epoch,
                    "assignor_name": group.assignor_name,
                    "members": members,
                    "authorized_operations": -(2**31),
                }
            )
        return described
