"""The share-group protocol (KIP-932) as a pure state machine, as Kafka 4.4 serves it.

`ShareGroupCoordinator` holds every share group of one coordinator. The broker routes
ShareGroupHeartbeat (v1) and ShareGroupDescribe (v1) to it, and the share-group part of
ListGroups and DeleteGroups; it passes the time (`now_ms`), appends the returned records
to `__consumer_offsets`, and calls `advance(now_ms)` when `next_deadline_ms()` is due.
No sockets, no disk, no clock: everything it knows comes in as arguments.

A heartbeat's steps (Kafka's `GroupMetadataManager.shareGroupHeartbeat`):

1. Validate the request; find or (epoch 0) create the group and the member. The member
   id is the client's (a UUID string, at most 36 characters). Epoch 0 joins or rejoins
   (accepted whatever the member's epoch), -1 leaves, any other epoch must be the
   member's or its previous one (a lost answer), else FENCED_MEMBER_EPOCH.
2. Update the member (rack, subscription, client); a new member or a changed
   subscription, or a change in the subscribed topics' metadata (created, deleted,
   grown: `metadata_hash`), bumps the *group epoch*.
3. When the group epoch is ahead of the *assignment epoch*, compute a new target
   assignment for every member (`share_assignor`), unless the last one was computed
   less than the assignment interval ago (`group.share.assignment.interval.ms`, Kafka
   4.3's KIP-1263): then the members keep the previous target until a heartbeat after
   the interval.
4. The member takes its target at once (no revocation: partitions are shared): its
   member epoch becomes the assignment epoch, its assignment the target restricted to
   the topics it subscribes to.
5. Its session deadline moves to now + the session timeout; the answer carries the
   assignment when the member joined, sent its subscription, or the assignment changed.

A member that stops heartbeating for the session timeout, or leaves, is removed and the
group epoch bumps; the others get a new target on their next heartbeat.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from weir.format.errors import ErrorCode
from weir.sharecoord import share_group_records as rec
from weir.sharecoord.share_assignor import ASSIGNOR_NAME, assign
from weir.sharecoord.share_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    GroupState,
    Partitions,
    ShareGroup,
    ShareMember,
    TopicInfo,
    TopicMetadata,
    metadata_hash,
    topic_lookup,
)
from weir.sharecoord.share_group_records import ShareGroupRecord

# Kafka's KafkaApis refuses longer member ids (a UUID string is 36 characters).
MEMBER_ID_LENGTH_MAX = 36
# ShareGroupDescribe's authorized_operations when the client did not ask for them.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
PROTOCOL_TYPE = "share"
# A member waiting for a new target is told to come back this long after it is due.
TARGET_DUE_SLACK_MS = 50


@dataclass(frozen=True)
class ShareGroupSettings:
    """The broker's share-group settings (Kafka's names and defaults, 4.4)."""

    # group.share.session.timeout.ms / group.share.heartbeat.interval.ms
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    # group.share.assignment.interval.ms: a new target at most this often (0: always).
    assignment_interval_ms: int = 1_000
    # group.share.max.size: members of one share group.
    max_size: int = 200


@dataclass(frozen=True)
class ShareGroupConfig:
    """A group's effective settings: `share.session.timeout.ms`,
    `share.heartbeat.interval.ms` and `share.assignment.interval.ms` (group configs set
    with IncrementalAlterConfigs) on top of the broker's."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    assignment_interval_ms: int

    @classmethod
    def defaults(cls, settings: ShareGroupSettings) -> ShareGroupConfig:
        return cls(
            settings.session_timeout_ms,
            settings.heartbeat_interval_ms,
            settings.assignment_interval_ms,
        )


@dataclass(frozen=True)
class ShareHeartbeat:
    """A ShareGroupHeartbeat v1 request, decoded, with who sent it."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ShareHeartbeatAnswer:
    """The ShareGroupHeartbeat response's fields (throttle time aside)."""

    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # None when unchanged (or on an error); else the member's whole assignment.
    assignment: dict[uuid.UUID, tuple[int, ...]] | None = None

    def response(self) -> dict[str, Any]:
        """The response body in the wire layer's field names (throttle_time_ms 0)."""
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
                "topic_partitions": [
                    {"topic_id": t, "partitions": list(ps)} for t, ps in self.assignment.items()
                ]
            },
        }


class RequestError(Exception):
    """A heartbeat refused: nothing changes, the answer carries `code` and `message`."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate(request: ShareHeartbeat) -> None:
    """Kafka's request checks (KafkaApis, then GroupCoordinatorService). Raises RequestError."""
    if not request.member_id or len(request.member_id) > MEMBER_ID_LENGTH_MAX:
        raise RequestError(ErrorCode.INVALID_REQUEST, None)
    if not request.group_id:
        raise RequestError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if request.rack_id == "":
        raise RequestError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
    if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if not request.subscribed_topic_names:
            raise RequestError(
                ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
            )
    elif request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise RequestError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")


def _check_epoch(member: ShareMember, epoch: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid: 0 rejoins; the member's epoch or
    its previous one (the answer that moved it may have been lost) are accepted."""
    if epoch == JOIN_GROUP_MEMBER_EPOCH or epoch == member.member_epoch:
        return
    if epoch > member.member_epoch:
        raise RequestError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The share group member has a greater member epoch ({epoch}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must "
            f"abandon all its partitions and rejoin.",
        )
    if epoch != member.previous_member_epoch:
        raise RequestError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The share group member has a smaller member epoch ({epoch}) than the one "
            f"known by the group coordinator ({member.member_epoch}), and it does not "
            f"match the previous member epoch ({member.previous_member_epoch}). The "
            f"member must abandon all its partitions and rejoin.",
        )


def _unknown_member(group_id: str, member_id: str) -> RequestError:
    return RequestError(
        ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
    )


def _sorted_assignment(parts: Partitions) -> dict[uuid.UUID, tuple[int, ...]]:
    return {t: tuple(sorted(parts[t])) for t in sorted(parts) if parts[t]}


class ShareGroupCoordinator:
    """Every share group of this coordinator. Time comes in as `now_ms`.

    `topics` is the broker's view of topics (name -> TopicInfo or None). `group_config`
    gives a group's own settings (None: the broker's). `other_group_type` tells whether a
    group id belongs to a classic or consumer group (its type name, or None): Kafka keeps
    one namespace of group ids, and a share heartbeat for another type's group is refused.
    """

    def __init__(
        self,
        settings: ShareGroupSettings,
        topics: TopicMetadata,
        group_config: Callable[[str], ShareGroupConfig | None] | None = None,
        other_group_type: Callable[[str], str | None] | None = None,
    ) -> None:
        self.settings = settings
        self._lookup = topic_lookup(topics)
        self._group_config = group_config or (lambda _group_id: None)
        self._other_group_type = other_group_type or (lambda _group_id: None)
        self.groups: dict[str, ShareGroup] = {}
        # Session deadlines: (deadline, group id, member id), stale entries dropped lazily.
        self._deadlines: list[tuple[int, str, str]] = []
        self._deadline_of: dict[tuple[str, str], int] = {}
        self._loading: set[str] = set()

    def group_config(self, group_id: str) -> ShareGroupConfig:
        config = self._group_config(group_id)
        return config if config is not None else ShareGroupConfig.defaults(self.settings)

    # ---- queries --------------------------------------------------------------------

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def group_state(self, group_id: str) -> GroupState:
        group = self.groups.get(group_id)
        return GroupState.DEAD if group is None else group.state()

    def members_of(self, group_id: str) -> frozenset[str]:
        group = self.groups.get(group_id)
        return frozenset() if group is None else frozenset(group.members)

    def assignment_of(
        self, group_id: str, member_id: str
    ) -> dict[uuid.UUID, frozenset[int]] | None:
        """The member's current assignment, or None when it is not a member."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        return None if member is None else dict(member.assigned)

    # ---- ShareGroupHeartbeat --------------------------------------------------------

    def heartbeat(
        self, request: ShareHeartbeat, now_ms: int
    ) -> tuple[ShareHeartbeatAnswer, list[ShareGroupRecord]]:
        """Handle one ShareGroupHeartbeat. On an error nothing changes and no records
        are returned."""
        try:
            validate(request)
            if self._other_group_type(request.group_id) is not None:
                raise RequestError(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Group {request.group_id} is not a share group.",
                )
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(request)
            return self._heartbeat(request, now_ms)
        except RequestError as failure:
            return ShareHeartbeatAnswer(failure.code, failure.message), []

    def _heartbeat(
        self, request: ShareHeartbeat, now_ms: int
    ) -> tuple[ShareHeartbeatAnswer, list[ShareGroupRecord]]:
        group, member, new_member = self._find(request)  # step 1
        group_id = request.group_id
        self.groups[group_id] = group
        group.members[member.member_id] = member
        old_assigned = dict(member.assigned)
        records, subscription_changed = self._update_member(group, member, request, new_member)
        records += self._maybe_bump(group, subscription_changed)
        config = self.group_config(group_id)
        records += self._maybe_compute_target(group, config, now_ms)  # 3
        records += self._reconcile(group, member, subscription_changed)  # 4
        self._set_deadline(group_id, member.member_id, now_ms + config.session_timeout_ms)  # 5
        full = (
            request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
            or request.subscribed_topic_names is not None
        )
        answer = ShareHeartbeatAnswer(
            ErrorCode.NONE,
            None,
            member.member_id,
            member.member_epoch,
            _heartbeat_interval_ms(group, config, now_ms),
            _sorted_assignment(member.assigned)
            if full or member.assigned != old_assigned
            else None,
        )
        return answer, records

    def _find(self, request: ShareHeartbeat) -> tuple[ShareGroup, ShareMember, bool]:
        """The group and member the heartbeat is for, and whether the member is new
        (a new group or member is not registered yet: a refused request changes
        nothing). Raises RequestError."""
        group_id, member_id = request.group_id, request.member_id
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self.groups.get(group_id)
        if group is None:
            if not joining:
                raise RequestError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found."
                )
            group = ShareGroup(group_id)
        member = group.members.get(member_id)
        if member is None:
            if len(group.members) >= self.settings.max_size:
                raise RequestError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of "
                    f"{self.settings.max_size} members.",
                )
            if not joining:
                raise _unknown_member(group_id, member_id)
            return group, ShareMember(member_id), True
        _check_epoch(member, request.member_epoch)
        return group, member, False

    def _update_member(
        self, group: ShareGroup, member: ShareMember, request: ShareHeartbeat, new_member: bool
    ) -> tuple[list[ShareGroupRecord], bool]:
        """Step 2's member part: its new metadata, recorded when it changed. Returns the
        records and whether the subscription changed (a new member's always has)."""
        before = member.metadata()
        old_names = member.subscribed_topic_names
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(request.subscribed_topic_names)))
        member.client_id = request.client_id
        member.client_host = request.client_host
        changed = new_member or member.subscribed_topic_names != old_names
        if changed:
            group.subscribe(() if new_member else old_names, member.subscribed_topic_names)
        records = []
        if new_member or member.metadata() != before:
            records.append(
                rec.member_metadata_record(group.group_id, member.member_id, member.metadata())
            )
        return records, changed

    def _maybe_bump(self, group: ShareGroup, subscription_changed: bool) -> list[ShareGroupRecord]:
        """Step 2's group part: bump the group epoch when a subscription changed or the
        subscribed topics' metadata did."""
        new_hash = metadata_hash(group.subscribed_topics(self._lookup))
        if not subscription_changed and new_hash == group.metadata_hash:
            return []
        group.group_epoch += 1
        group.metadata_hash = new_hash
        return [rec.group_epoch_record(group.group_id, group.group_epoch, new_hash)]

    def _maybe_compute_target(
        self, group: ShareGroup, config: ShareGroupConfig, now_ms: int
    ) -> list[ShareGroupRecord]:
        """Step 3: a new target for every member when the group epoch moved and the
        assignment interval has passed (Kafka's canComputeNextTargetAssignment)."""
        if group.group_epoch <= group.assignment_epoch:
            return []
        interval_ms = config.assignment_interval_ms
        last_ms = group.assignment_timestamp_ms
        if last_ms != 0 and interval_ms != 0 and now_ms < last_ms + interval_ms:
            return []
        topics = group.subscribed_topics(self._lookup)
        subscriptions = {
            m.member_id: frozenset(
                topics[n].topic_id for n in m.subscribed_topic_names if n in topics
            )
            for m in group.members.values()
        }
        counts = {info.topic_id: info.partition_count for info in topics.values()}
        target = assign(subscriptions, counts, group.target)
        records = [
            rec.target_assignment_member_record(group.group_id, member_id, parts)
            for member_id, parts in sorted(target.items())
            if group.target.get(member_id) != parts
        ]
        group.target = target
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp_ms = now_ms
        records.append(
            rec.target_assignment_epoch_record(group.group_id, group.assignment_epoch, now_ms)
        )
        return records

    def _reconcile(
        self, group: ShareGroup, member: ShareMember, subscription_changed: bool
    ) -> list[ShareGroupRecord]:
        """Step 4 (Kafka's ShareGroupAssignmentBuilder): the member takes its target,
        restricted to the topics it subscribes to, and the assignment epoch."""
        epoch_moved = member.member_epoch != group.assignment_epoch
        if not epoch_moved and not subscription_changed:
            return []
        topic_ids = {
            info.topic_id
            for name in member.subscribed_topic_names
            if (info := self._lookup(name)) is not None
        }
        target = group.target.get(member.member_id, {})
        assigned = {t: ps for t, ps in target.items() if t in topic_ids}
        before = member.current()
        if epoch_moved:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.assigned = assigned
        if member.current() == before:
            return []
        return [rec.current_assignment_record(group.group_id, member.member_id, member.current())]

    # ---- leaving and timing out -----------------------------------------------------

    def _leave(
        self, request: ShareHeartbeat
    ) -> tuple[ShareHeartbeatAnswer, list[ShareGroupRecord]]:
        group = self.groups.get(request.group_id)
        if group is None:
            raise RequestError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
        member = group.members.get(request.member_id)
        if member is None:
            raise _unknown_member(request.group_id, request.member_id)
        records = self._remove(group, member)
        answer = ShareHeartbeatAnswer(
            ErrorCode.NONE, None, member.member_id, LEAVE_GROUP_MEMBER_EPOCH
        )
        return answer, records

    def _remove(self, group: ShareGroup, member: ShareMember) -> list[ShareGroupRecord]:
        """Remove a member (left or timed out): the group epoch bumps; when it was the
        last member the (empty) target is at that epoch, as Kafka writes it."""
        gid, mid = group.group_id, member.member_id
        records = [
            rec.current_assignment_tombstone(gid, mid),
            rec.target_assignment_member_tombstone(gid, mid),
            rec.member_metadata_tombstone(gid, mid),
        ]
        del group.members[mid]
        group.target.pop(mid, None)
        group.subscribe(member.subscribed_topic_names, ())
        self._set_deadline(gid, mid, None)
        group.group_epoch += 1
        group.metadata_hash = metadata_hash(group.subscribed_topics(self._lookup))
        records.append(rec.group_epoch_record(gid, group.group_epoch, group.metadata_hash))
        if not group.members:
            # Timestamp 0, as Kafka writes it: the next member's target is not held back.
            group.assignment_epoch = group.group_epoch
            group.assignment_timestamp_ms = 0
            records.append(rec.target_assignment_epoch_record(gid, group.group_epoch, 0))
        return records

    def _set_deadline(self, group_id: str, member_id: str, deadline_ms: int | None) -> None:
        key = (group_id, member_id)
        if deadline_ms is None:
            self._deadline_of.pop(key, None)
            return
        if self._deadline_of.get(key) == deadline_ms:
            return
        self._deadline_of[key] = deadline_ms
        heapq.heappush(self._deadlines, (deadline_ms, group_id, member_id))
        if len(self._deadlines) > 2 * len(self._deadline_of) + 64:  # drop stale entries
            self._deadlines = [(d, g, m) for (g, m), d in self._deadline_of.items()]
            heapq.heapify(self._deadlines)

    def _drop_stale(self) -> None:
        heap = self._deadlines
        while heap and self._deadline_of.get((heap[0][1], heap[0][2])) != heap[0][0]:
            heapq.heappop(heap)

    def next_deadline_ms(self) -> int | None:
        """The earliest session deadline of any member, or None."""
        self._drop_stale()
        return self._deadlines[0][0] if self._deadlines else None

    def advance(self, now_ms: int) -> list[ShareGroupRecord]:
        """Remove every member whose session deadline is at or before `now_ms`.
        (A target held back by the assignment interval is computed on the next
        heartbeat after it, as Kafka does: no timer.)"""
        records: list[ShareGroupRecord] = []
        while True:
            self._drop_stale()
            if not self._deadlines or self._deadlines[0][0] > now_ms:
                return records
            _, group_id, member_id = heapq.heappop(self._deadlines)
            del self._deadline_of[(group_id, member_id)]
            group = self.groups.get(group_id)
            member = None if group is None else group.members.get(member_id)
            if group is not None and member is not None:
                records += self._remove(group, member)

    # ---- topic changes --------------------------------------------------------------

    def topics_changed(self) -> list[ShareGroupRecord]:
        """Topics were created, deleted or grew: every group whose subscribed topics'
        metadata changed moves to a new group epoch (Kafka marks them for a metadata
        refresh); the next heartbeat computes the new target."""
        records: list[ShareGroupRecord] = []
        for group_id in sorted(self.groups):
            group = self.groups[group_id]
            if group.members:
                records += self._maybe_bump(group, subscription_changed=False)
        return records

    # ---- ShareGroupDescribe, ListGroups, DeleteGroups -------------------------------

    def describe(self, group_ids: Iterable[str]) -> list[dict[str, Any]]:
        """ShareGroupDescribe v1 `groups` entries, in the wire layer's field names."""
        return [self._described(group_id) for group_id in group_ids]

    def _described(self, group_id: str) -> dict[str, Any]:
        group = self.groups.get(group_id)
        if group is None:
            other = self._other_group_type(group_id) is not None
            message = f"Group {group_id} {'is not a share group' if other else 'not found'}."
            return {
                "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                "error_message": message,
                "group_id": group_id,
                "group_state": "",
                "group_epoch": 0,
                "assignment_epoch": 0,
                "assignor_name": "",
                "members": [],
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            }
        names = {
            info.topic_id: name for name, info in group.subscribed_topics(self._lookup).items()
        }
        members = [
            {
                "member_id": m.member_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "assignment": {
                    "topic_partitions": [
                        {"topic_id": t, "topic_name": names.get(t, ""), "partitions": list(ps)}
                        for t, ps in _sorted_assignment(m.assigned).items()
                    ]
                },
            }
            for _, m in sorted(group.members.items())
        ]
        return {
            "error_code": 0,
            "error_message": None,
            "group_id": group_id,
            "group_state": group.state().value,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": ASSIGNOR_NAME,
            "members": members,
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }

    def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str]]:
        """(group id, state) of every share group, for ListGroups (protocol type and
        group type "share"); `states` filters by state, case-insensitively, as Kafka."""
        wanted = {s.lower() for s in states}
        return [
            (group_id, group.state().value)
            for group_id, group in sorted(self.groups.items())
            if not wanted or group.state().value.lower() in wanted
        ]

    def create_empty_group(self, group_id: str) -> list[ShareGroupRecord]:
        """An empty share group, as Kafka's AlterShareGroupOffsets creates one for an
        unknown id (group and assignment epochs at 1: the first member's join moves
        the group to 2 and computes its target). Returns its records; [] when the group
        exists. The caller checks that no other type's group has the id."""
        if group_id in self.groups:
            return []
        group = ShareGroup(group_id)
        group.assignment_epoch = group.group_epoch
        self.groups[group_id] = group
        return [
            rec.group_epoch_record(group_id, group.group_epoch, group.metadata_hash),
            rec.target_assignment_epoch_record(group_id, group.assignment_epoch, 0),
        ]

    def delete_groups(
        self, group_ids: Iterable[str]
    ) -> tuple[dict[str, ErrorCode], list[ShareGroupRecord]]:
        """DeleteGroups for share groups: only an empty one goes (NON_EMPTY_GROUP
        otherwise); an id that is no share group here is GROUP_ID_NOT_FOUND (the
        broker asks the other coordinators). The broker deletes the groups' share
        state (`__share_group_state`) before it appends these records."""
        results: dict[str, ErrorCode] = {}
        records: list[ShareGroupRecord] = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.members:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                del self.groups[group_id]
                results[group_id] = ErrorCode.NONE
                records += [
                    rec.target_assignment_epoch_tombstone(group_id),
                    rec.group_tombstone(group_id),
                ]
        return results, records

    # ---- loading --------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> bool:
        """Apply one `__consumer_offsets` record, in log order, while loading. Returns
        False for records that are not share-group records. Call `finish_loading` once
        the partition has been read to its end. Raises RecordFormatError on a share
        record that does not parse."""
        decoded = rec.decode_key(key)
        if decoded is None:
            return False
        record_type, group_id, member_id = decoded
        self._loading.add(group_id)
        if value is None and record_type == rec.GROUP_METADATA:
            self.groups.pop(group_id, None)
            return True
        group = self.groups.get(group_id)
        if group is None:
            if value is None:
                return True
            group = ShareGroup(group_id)
            self.groups[group_id] = group
        group.replay(record_type, member_id, value)
        return True

    def finish_loading(self, now_ms: int) -> None:
        """After replay: rebuild the replayed groups' subscription counts and start their
        members' session timers from now (a member that is gone times out then)."""
        loaded = sorted(g for g in self._loading if g in self.groups)
        self._loading = set()
        for group_id in loaded:
            group = self.groups[group_id]
            group.recount()
            session_timeout_ms = self.group_config(group_id).session_timeout_ms
            for member_id in group.members:
                self._set_deadline(group_id, member_id, now_ms + session_timeout_ms)

    def unload(self, group_ids: Iterable[str]) -> None:
        """Forget groups (their offsets partition moved to another coordinator)."""
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is not None:
                for member_id in group.members:
                    self._set_deadline(group_id, member_id, None)


__all__ = [
    "ShareGroupConfig",
    "ShareGroupCoordinator",
    "ShareGroupSettings",
    "ShareHeartbeat",
    "ShareHeartbeatAnswer",
    "TopicInfo",
]


def _heartbeat_interval_ms(group: ShareGroup, config: ShareGroupConfig, now_ms: int) -> int:
    """The heartbeat interval a member is told: the group's, or, while a new target
    waits for the assignment interval to pass (members joined within it), just past
    that moment, so they get their partitions then rather than a whole heartbeat
    interval later (Weir's: Kafka 4.4 always answers the group's interval, and 16
    members joining together get their partitions at their second heartbeat, 5 s in).
    Clients take the interval of every response (KIP-848's and KIP-932's)."""
    interval_ms = config.heartbeat_interval_ms
    if group.group_epoch <= group.assignment_epoch:
        return interval_ms
    due_ms = group.assignment_timestamp_ms + config.assignment_interval_ms - now_ms
    return max(TARGET_DUE_SLACK_MS, min(interval_ms, due_ms + TARGET_DUE_SLACK_MS))
