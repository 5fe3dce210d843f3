"""One classic (JoinGroup/SyncGroup) group: its members, generation and protocol.

Plain data with the small rules that need nothing but the group itself: protocol
support and selection by vote, leader choice, the consumer protocol's subscribed
topics, its timers' deadlines, its GroupMetadata record (both ways) and its
ListGroups/DescribeGroups views. The transitions are driven by `classic_rebalance`
and `classic_coordinator`.
"""

from __future__ import annotations

import enum
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from weir.format.errors import ErrorCode
from weir.groupcoord import classic_records as rec
from weir.groupcoord.classic_messages import (
    DescribedMember,
    GroupDescription,
    GroupListing,
    JoinGroupResult,
    SyncGroupResult,
)
from weir.groupcoord.pending import Pending
from weir.groupcoord.record_schemas import GroupRecord

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_pending: Pending[JoinGroupResult] | None = None
    sync_pending: Pending[SyncGroupResult] | None = None
    heartbeat_deadline_ms: int = 0
    # Joined while the group was forming its first generation: expires after the new
    # member join timeout even while its JoinGroup waits (its client may be gone).
    is_new: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_pending is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return list(self.protocols) == list(protocols)

    def vote(self, candidates: set[str]) -> str:
        return next(name for name in self.protocol_names() if name in candidates)

    def can_expire(self) -> bool:
        """Members parked in a JoinGroup or SyncGroup are kept alive, as in Kafka."""
        if self.is_awaiting_join:
            return self.is_new
        return self.sync_pending is None


@dataclass
class ClassicGroup:
    group_id: str
    state_timestamp_ms: int
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    # Member ids handed out with MEMBER_ID_REQUIRED, awaiting their second JoinGroup,
    # with the time they expire if it never comes.
    pending_members: dict[str, int] = field(default_factory=dict)
    pending_sync_members: set[str] = field(default_factory=set)
    pending_sync_deadline_ms: int | None = None
    join_deadline_ms: int | None = None
    # Initial delayed join (group.initial.rebalance.delay.ms): rebalance time left to
    # extend into, and whether a member joined during the current delay.
    initial_join_remaining_ms: int | None = None
    new_member_added: bool = False
    subscribed_topics: frozenset[str] | None = None

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def supported_protocols(self) -> set[str]:
        """Protocols every member supports."""
        counts = Counter(name for m in self.members.values() for name in m.protocol_names())
        return {name for name, n in counts.items() if n == len(self.members)}

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.supported_protocols())

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer.

        Each member votes for its most preferred candidate; ties go to the candidate the
        earliest-joined voter preferred.
        """
        candidates = self.supported_protocols()
        votes = [m.vote(candidates) for m in self.members.values()]
        counts = Counter(votes)
        best = max(counts.values())
        return next(name for name in votes if counts[name] == best)

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's check of a request's member: a static one must be the instance's
        current member id (FENCED_INSTANCE_ID otherwise); any must be a member."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        self.pending_sync_members.discard(member_id)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        return member

    def elect_joined_leader(self) -> None:
        """Before the join completes: a leader that did not rejoin hands over."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.is_awaiting_join:
            return
        joined = next((m for m in self.members.values() if m.is_awaiting_join), None)
        if joined is not None:
            self.leader_id = joined.member_id

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members subscribe to, for the consumer protocol; None if unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = consumer_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return frozenset(topics)

    def deadlines_ms(self) -> list[int]:
        """Every time at which one of the group's timers falls due."""
        out = list(self.pending_members.values())
        if self.join_deadline_ms is not None:
            out.append(self.join_deadline_ms)
        if self.pending_sync_deadline_ms is not None:
            out.append(self.pending_sync_deadline_ms)
        out.extend(m.heartbeat_deadline_ms for m in self.members.values() if m.can_expire())
        return out

    # -- views: ListGroups and DescribeGroups --

    def listing(self) -> GroupListing:
        return GroupListing(self.group_id, self.protocol_type or "", self.state.value)

    def description(self) -> GroupDescription:
        """DescribeGroups: members' metadata and assignments only once Stable."""
        stable = self.state is GroupState.STABLE
        members = [
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(self.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        ]
        return GroupDescription(
            ErrorCode.NONE,
            self.group_id,
            self.state.value,
            self.protocol_type or "",
            (self.protocol_name or "") if stable else "",
            members,
        )

    # -- its GroupMetadata record, written and loaded --

    def metadata_record(self) -> GroupRecord:
        value = rec.GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp_ms=self.state_timestamp_ms,
            members=[
                rec.MemberRecord(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(self.protocol_name),
                    m.assignment,
                )
                for m in self.members.values()
            ],
        )
        return rec.group_metadata_record(self.group_id, value)

    @classmethod
    def from_record(cls, group_id: str, value: rec.GroupMetadataValue, now_ms: int) -> ClassicGroup:
        """The group a GroupMetadata value describes; members' sessions start at now_ms."""
        group = cls(
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


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def consumer_subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version), None if unparseable.

    Every version starts with int16 version, then an int32-counted array of
    int16-length topic names; what follows (user data, owned partitions, generation,
    rack) is not needed here.
    """
    try:
        pos = 2
        (count,) = _INT32.unpack_from(metadata, pos)
        pos += 4
        if count < 0 or count > len(metadata):
            return None
        topics = set()
        for _ in range(count):
            (length,) = _INT16.unpack_from(metadata, pos)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.add(metadata[pos : pos + length].decode())
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
