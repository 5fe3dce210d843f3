"""One KIP-848 consumer group: its members, epochs, assignments and partition owners.

Plain data with the rules that need nothing but the group itself: its state, the
topic names its members subscribe to, who owns which partition (a partition is never
owned by two members: `claim` asserts it), and how each of its `__consumer_offsets`
records applies to it when a coordinator loads the group (`replay`). The protocol
that moves it is `consumer_coordinator`'s.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from weir.groupcoord import consumer_group_records as rec
from weir.groupcoord.assignors import DEFAULT_ASSIGNOR

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

    # -- loading: each record of the group, in log order --

    def replay(self, record_type: int, member_id: str, value: bytes | None) -> None:
        """Apply one of the group's records (`member_id` is "" in group-level ones).
        The group's own tombstone (it is deleted) is the coordinator's to apply.
        Raises RecordFormatError on a value that does not parse."""
        if value is None:
            self._replay_tombstone(record_type, member_id)
        else:
            self._replay_value(record_type, member_id, value)

    def _replay_tombstone(self, record_type: int, member_id: str) -> None:
        if record_type == rec.PARTITION_METADATA:
            self.subscription_metadata = {}
        elif record_type == rec.TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = 0
        elif record_type == rec.TARGET_ASSIGNMENT_MEMBER:
            self.target.pop(member_id, None)
        elif record_type == rec.MEMBER_METADATA:
            gone = self.members.pop(member_id, None)
            if (
                gone is not None
                and gone.instance_id is not None
                and self.static_members.get(gone.instance_id) == gone.member_id
            ):
                del self.static_members[gone.instance_id]
        elif record_type == rec.CURRENT_MEMBER_ASSIGNMENT and member_id in self.members:
            member = self.members[member_id]
            member.assigned, member.pending_revocation = {}, {}

    def _replay_value(self, record_type: int, member_id: str, value: bytes) -> None:
        if record_type == rec.GROUP_METADATA:
            self.group_epoch = rec.decode_epoch(value)
        elif record_type == rec.PARTITION_METADATA:
            self.subscription_metadata = {
                name: TopicInfo(topic_id, count)
                for name, (topic_id, count) in rec.decode_partition_metadata(value).items()
            }
        elif record_type == rec.TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = rec.decode_target_assignment_epoch(value)
        elif record_type == rec.TARGET_ASSIGNMENT_MEMBER:
            self.target[member_id] = rec.decode_target_assignment_member(value)
        elif record_type == rec.MEMBER_METADATA:
            meta = rec.decode_member_metadata(value)
            member = self.members.setdefault(member_id, Member(member_id=member_id))
            member.instance_id = meta.instance_id
            member.rack_id = meta.rack_id
            member.client_id = meta.client_id
            member.client_host = meta.client_host
            member.subscribed_topic_names = meta.subscribed_topic_names
            member.subscribed_topic_regex = meta.subscribed_topic_regex or None
            member.rebalance_timeout_ms = meta.rebalance_timeout_ms
            member.server_assignor = meta.server_assignor
            if meta.instance_id is not None:
                self.static_members[meta.instance_id] = member_id
        elif record_type == rec.CURRENT_MEMBER_ASSIGNMENT:
            current = rec.decode_current_assignment(value)
            member = self.members.setdefault(member_id, Member(member_id=member_id))
            member.member_epoch = current.member_epoch
            member.previous_member_epoch = current.previous_member_epoch
            try:
                member.state = MemberState(current.state)
            except ValueError:
                member.state = MemberState.UNKNOWN
            member.assigned = dict(current.assigned)
            member.pending_revocation = dict(current.pending_revocation)


def topic_lookup(topics: TopicMetadata) -> Callable[[str], TopicInfo | None]:
    """The broker's view of topics as a lookup function."""
    if isinstance(topics, Mapping):
        return topics.get
    return topics
