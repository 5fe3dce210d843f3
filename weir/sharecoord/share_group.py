"""One share group (KIP-932): its members, epochs, target and current assignments.

Plain data with the rules that need nothing but the group itself: its state, how many
members subscribe to each topic name, and how each of its `__consumer_offsets` records
applies to it when a coordinator loads the group (`replay`). The protocol that moves it
is `share_coordinator`'s; the assignment rules are `share_assignor`'s.

Unlike a KIP-848 consumer group, a share-group member never reconciles: no partition is
owned exclusively, so a member takes its new target at once, and the group is either
Empty (no members) or Stable (Kafka's `ShareGroupState`; Dead is what a deleted or
unknown group reports).
"""

from __future__ import annotations

import enum
import hashlib
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from weir.sharecoord import share_group_records as rec

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
# Kafka 4.4 creates a modern group at epoch 1 (ModernGroup's constructor), so the first
# member's join makes it 2: its heartbeat answer carries member epoch 2.
NEW_GROUP_EPOCH = 1

Partitions = dict[uuid.UUID, frozenset[int]]


class TopicInfo(NamedTuple):
    topic_id: uuid.UUID
    partition_count: int


# The broker's view of topics: a mapping or a lookup function (name -> info or None).
TopicMetadata = Mapping[str, TopicInfo] | Callable[[str], TopicInfo | None]


def topic_lookup(topics: TopicMetadata) -> Callable[[str], TopicInfo | None]:
    if isinstance(topics, Mapping):
        return topics.get
    return topics


class GroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Partitions = field(default_factory=dict)

    def metadata(self) -> rec.MemberMetadata:
        return rec.MemberMetadata(
            self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names
        )

    def current(self) -> rec.CurrentAssignment:
        return rec.CurrentAssignment(self.member_epoch, self.previous_member_epoch, self.assigned)


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = NEW_GROUP_EPOCH
    # The hash of the subscribed topics' metadata when the group epoch last moved.
    metadata_hash: int = 0
    assignment_epoch: int = 0
    # When the target was last computed (0: never); the assignment interval counts from it.
    assignment_timestamp_ms: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)  # member id -> target
    # Derived (rebuilt by `recount`): how many members subscribe to each topic name.
    subscribed_counts: Counter[str] = field(default_factory=Counter)

    def state(self) -> GroupState:
        return GroupState.STABLE if self.members else GroupState.EMPTY

    def recount(self) -> None:
        self.subscribed_counts = Counter(
            name for m in self.members.values() for name in m.subscribed_topic_names
        )

    def subscribe(self, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        """A member's subscription changed from `old` to `new` (() for none)."""
        self.subscribed_counts.subtract(old)
        self.subscribed_counts.update(new)
        self.subscribed_counts = +self.subscribed_counts  # drop names nobody subscribes to

    def subscribed_topics(self, lookup: Callable[[str], TopicInfo | None]) -> dict[str, TopicInfo]:
        """The subscribed topics that exist, by name."""
        topics = {}
        for name in sorted(self.subscribed_counts):
            info = lookup(name)
            if info is not None:
                topics[name] = info
        return topics

    # -- loading: each record of the group, in log order --

    def replay(self, record_type: int, member_id: str, value: bytes | None) -> None:
        """Apply one of the group's records (`member_id` is "" in group-level ones). The
        group's own tombstone (it is deleted) is the coordinator's to apply. Raises
        RecordFormatError on a value that does not parse."""
        if value is None:
            self._replay_tombstone(record_type, member_id)
        else:
            self._replay_value(record_type, member_id, value)

    def _replay_tombstone(self, record_type: int, member_id: str) -> None:
        if record_type == rec.TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch, self.assignment_timestamp_ms = 0, 0
        elif record_type == rec.TARGET_ASSIGNMENT_MEMBER:
            self.target.pop(member_id, None)
        elif record_type == rec.MEMBER_METADATA:
            self.members.pop(member_id, None)
        elif record_type == rec.CURRENT_MEMBER_ASSIGNMENT and member_id in self.members:
            self.members[member_id].assigned = {}

    def _replay_value(self, record_type: int, member_id: str, value: bytes) -> None:
        if record_type == rec.GROUP_METADATA:
            self.group_epoch, self.metadata_hash = rec.decode_group_metadata(value)
        elif record_type == rec.TARGET_ASSIGNMENT_METADATA:
            epoch, timestamp_ms = rec.decode_target_assignment_metadata(value)
            self.assignment_epoch, self.assignment_timestamp_ms = epoch, timestamp_ms
        elif record_type == rec.TARGET_ASSIGNMENT_MEMBER:
            self.target[member_id] = rec.decode_target_assignment_member(value)
        elif record_type == rec.MEMBER_METADATA:
            meta = rec.decode_member_metadata(value)
            member = self.members.setdefault(member_id, ShareMember(member_id))
            member.rack_id = meta.rack_id
            member.client_id = meta.client_id
            member.client_host = meta.client_host
            member.subscribed_topic_names = meta.subscribed_topic_names
        elif record_type == rec.CURRENT_MEMBER_ASSIGNMENT:
            current = rec.decode_current_assignment(value)
            member = self.members.setdefault(member_id, ShareMember(member_id))
            member.member_epoch = current.member_epoch
            member.previous_member_epoch = current.previous_member_epoch
            member.assigned = dict(current.assigned)


def metadata_hash(topics: Mapping[str, TopicInfo]) -> int:
    """A signed 64-bit hash of the subscribed topics' names, ids and partition counts: the
    group epoch moves when it changes (a subscribed topic created, deleted, recreated or
    grown). Kafka hashes its own topic image (racks included); only Weir reads this one,
    so it need not be Kafka's value."""
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(topics):
        info = topics[name]
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(info.topic_id.bytes)
        digest.update(info.partition_count.to_bytes(4, "big"))
    value = int.from_bytes(digest.digest(), "big", signed=True)
    return value if topics else 0
