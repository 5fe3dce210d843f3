"""One partition replica this broker holds: its log, the fetches parked on it, and in
a cluster its replication role."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import trio

from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.log.partition import PartitionLog


class ReplicationRole(Protocol):
    """A partition's replication on a cluster broker (weir/broker/cluster/replication.py)."""

    @property
    def leader_epoch(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_id(self) -> int:
        """The leader in the partition's state (this broker's id even while fenced)."""
        ...

    @property
    def in_sync_replicas(self) -> tuple[int, ...]: ...

    def durable_end_moved(self) -> None:
        """The leader's own log became durable further: the HW may move."""
        ...

    async def wait_committed(self, offset: int) -> ErrorCode:
        """Wait until the high watermark reaches `offset` (acks=all)."""
        ...


@dataclass(eq=False)
class PartitionReplica:
    """One partition replica this broker holds: its log, the fetches parked on it,
    and (in a cluster) its replication role."""

    topic: TopicRecord
    index: int
    log: PartitionLog
    waiters: set[trio.Event] = field(default_factory=set)
    # Followers' fetches parked for new records (woken on append, not on fsync).
    follower_waiters: set[trio.Event] = field(default_factory=set)
    replication: ReplicationRole | None = None

    @property
    def leader_epoch(self) -> int:
        if self.replication is not None:
            return self.replication.leader_epoch
        return self.topic.leader_epochs[self.index]

    @property
    def high_watermark(self) -> int:
        if self.replication is not None:
            return self.replication.high_watermark
        # Single node: a record is committed once it is durable on the leader.
        return self.log.durable_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The LSO (read_committed's end): the first offset of the oldest
        transaction not yet decided and replicated, else the high watermark."""
        return self.log.last_stable_offset_at(self.high_watermark)

    @property
    def is_leader(self) -> bool:
        return self.replication is None or self.replication.is_leader

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320 fencing of a client's view of the leader epoch (-1: not checked)."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def wake_fetchers(self) -> None:
        for event in self.waiters:
            event.set()
        self.waiters.clear()

    def wake_followers(self) -> None:
        for event in self.follower_waiters:
            event.set()
        self.follower_waiters.clear()
