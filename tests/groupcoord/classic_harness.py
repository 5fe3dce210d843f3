"""A fake clock and a driver for the classic group coordinator, shared by its tests."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from weir.format.errors import ErrorCode
from weir.groupcoord.classic_coordinator import ClassicGroupCoordinator
from weir.groupcoord.classic_messages import (
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    LeavingMember,
    OffsetCommitRequest,
    OffsetToCommit,
    PartitionError,
    SyncGroupRequest,
    SyncGroupResult,
)
from weir.groupcoord.consumer_group_records import GroupRecord
from weir.groupcoord.pending import Effects, Pending, Reply
from weir.groupcoord.settings import GroupSettings

T = TypeVar("T")

GROUP = "g"
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
INITIAL_DELAY_MS = 3_000


def subscription(*topics: str, owned: Sequence[tuple[str, int]] = ()) -> bytes:
    """A ConsumerProtocolSubscription: v0 without owned partitions, v1 with them."""
    version = 1 if owned else 0
    out = bytearray(struct.pack(">hi", version, len(topics)))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", -1)  # null user data
    if version >= 1:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in owned:
            by_topic.setdefault(topic, []).append(partition)
        out += struct.pack(">i", len(by_topic))
        for topic, partitions in by_topic.items():
            out += struct.pack(">h", len(topic)) + topic.encode()
            out += struct.pack(">i", len(partitions))
            for p in partitions:
                out += struct.pack(">i", p)
    return bytes(out)


def protocols(*topics: str, names: Sequence[str] = ("range",)) -> list[tuple[str, bytes]]:
    return [(name, subscription(*topics)) for name in names]


@dataclass
class Harness:
    """The coordinator, a fake clock, and the log of records it asked to append."""

    config: GroupSettings = field(
        default_factory=lambda: GroupSettings(classic_initial_rebalance_delay_ms=INITIAL_DELAY_MS)
    )
    now_ms: int = 1_000_000
    log: list[GroupRecord] = field(default_factory=list)
    completed: list[Pending[Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        ids = itertools.count(1)
        self.coord = ClassicGroupCoordinator(
            self.config, self.now_ms, new_member_id=lambda prefix: f"{prefix}-{next(ids)}"
        )

    # -- plumbing --

    def _take(self, reply: Reply[T]) -> Pending[T]:
        self.log.extend(reply.records)
        self.completed.extend(reply.completed)
        return reply.pending

    def _effects(self, effects: Effects) -> None:
        self.log.extend(effects.records)
        self.completed.extend(effects.completed)

    def tick(self, ms: int) -> None:
        """Move the clock and run due timers, exactly when each falls due."""
        target_ms = self.now_ms + ms
        while True:
            deadline_ms = self.coord.next_deadline_ms()
            if deadline_ms is None or deadline_ms > target_ms:
                break
            self.now_ms = max(self.now_ms, deadline_ms)
            self._effects(self.coord.advance(self.now_ms))
        self.now_ms = target_ms
        self._effects(self.coord.advance(self.now_ms))

    # -- requests --

    def join(
        self,
        member_id: str = "",
        *,
        topics: Sequence[str] = ("t",),
        protos: Sequence[tuple[str, bytes]] | None = None,
        instance_id: str | None = None,
        client_id: str = "c",
        require_known_member_id: bool = True,
        protocol_type: str = "consumer",
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS,
        group_id: str = GROUP,
    ) -> Pending[JoinGroupResult]:
        req = JoinGroupRequest(
            group_id=group_id,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=list(protos) if protos is not None else protocols(*topics),
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            group_instance_id=instance_id,
            require_known_member_id=require_known_member_id,
            client_id=client_id,
            client_host="/127.0.0.1",
        )
        return self._take(self.coord.join_group(req, self.now_ms))

    def join_new(self, **kwargs: Any) -> Pending[JoinGroupResult]:
        """A first join as a v4+ client does it: MEMBER_ID_REQUIRED, then again.

        Static members (`instance_id=...`) are let in at once, as in Kafka.
        """
        first = self.join(**kwargs)
        if kwargs.get("instance_id") is not None:
            return first
        assert first.result.error is ErrorCode.MEMBER_ID_REQUIRED
        return self.join(first.result.member_id, **kwargs)

    def sync(
        self,
        member_id: str,
        generation_id: int,
        assignments: Sequence[tuple[str, bytes]] = (),
        *,
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Pending[SyncGroupResult]:
        req = SyncGroupRequest(
            GROUP,
            generation_id,
            member_id,
            assignments,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
        )
        return self._take(self.coord.sync_group(req, self.now_ms))

    def heartbeat(
        self, member_id: str, generation_id: int, instance_id: str | None = None
    ) -> ErrorCode:
        return self.coord.heartbeat(GROUP, generation_id, member_id, instance_id, self.now_ms)

    def leave(self, *members: LeavingMember) -> LeaveGroupResult:
        return self._take(self.coord.leave_group(GROUP, members, self.now_ms)).result

    def commit(
        self,
        offsets: Sequence[tuple[str, int, int]],
        *,
        generation_id: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
        metadata: str = "",
        group_id: str = GROUP,
    ) -> list[PartitionError]:
        req = OffsetCommitRequest(
            group_id,
            [OffsetToCommit(t, p, o, metadata=metadata) for t, p, o in offsets],
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=instance_id,
        )
        return self._take(self.coord.commit_offsets(req, self.now_ms)).result

    def txn_commit(
        self,
        offsets: Sequence[tuple[str, int, int]],
        *,
        producer_id: int = 1,
        generation_id: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
        group_id: str = GROUP,
    ) -> list[PartitionError]:
        """A TxnOffsetCommit of producer `producer_id`'s transaction."""
        req = OffsetCommitRequest(
            group_id,
            [OffsetToCommit(t, p, o) for t, p, o in offsets],
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=instance_id,
        )
        reply = self.coord.commit_transactional_offsets(req, producer_id, self.now_ms)
        return self._take(reply).result

    # -- whole flows --

    def stable_group(self, *member_kwargs: dict[str, Any]) -> list[JoinGroupResult]:
        """Members join a new group together, the leader assigns, all sync: Stable."""
        joins = [self.join_new(**kwargs) for kwargs in member_kwargs]
        self.await_joins(joins)
        results = [j.result for j in joins]
        assert all(r.error is ErrorCode.NONE for r in results), results
        self.sync_all(results)
        return results

    def await_joins(self, joins: Sequence[Pending[JoinGroupResult]]) -> None:
        """Let the initial delay run out (members joining during it extend it)."""
        for _ in range(REBALANCE_TIMEOUT_MS // INITIAL_DELAY_MS + 1):
            if all(j.done for j in joins):
                return
            self.tick(INITIAL_DELAY_MS)
        raise AssertionError("joins still waiting after the rebalance timeout")

    def sync_all(self, results: Sequence[JoinGroupResult]) -> list[SyncGroupResult]:
        """Followers sync first, then the leader assigns `b"to:<member>"` to each."""
        leader = next(r for r in results if r.member_id == r.leader)
        followers = [self.sync(r.member_id, r.generation_id) for r in results if r is not leader]
        assignments = [(m.member_id, f"to:{m.member_id}".encode()) for m in leader.members]
        answers = [self.sync(leader.member_id, leader.generation_id, assignments)]
        answers += followers
        assert all(a.done and a.result.error is ErrorCode.NONE for a in answers)
        return [a.result for a in answers]
