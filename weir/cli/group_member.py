"""`weir consume -g GROUP`: the CLI as one member of a classic consumer group.

JoinGroup (range assignor; the leader assigns every member's subscription), SyncGroup,
committed offsets from OffsetFetch, Heartbeat between fetches, OffsetCommit of what was
printed, LeaveGroup at the end. A rebalance (REBALANCE_IN_PROGRESS or a lost member id)
commits what was printed and joins again; the consumer then resumes from the
committed offsets of its new partitions.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.cli.cluster import COORDINATOR_MOVING_ERRORS, Cluster
from weir.cli.errors import BrokerConnectionError, CliError, GroupAction, group_error
from weir.cli.kafka_client import KafkaClient
from weir.cli.range_assignor import RANGE_ASSIGNOR, assign_range
from weir.format.errors import ErrorCode
from weir.format.primitives import DecodeError
from weir.wire.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    Subscription,
    TopicPartitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from weir.wire.protocol import ApiKey

SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
HEARTBEAT_INTERVAL_MS = 1_000
COORDINATOR_WAIT_MS_MAX = 10_000
COORDINATOR_RETRY_INTERVAL_S = 0.2
COORDINATOR_LOST_BACKOFF_S = 0.5
NO_OFFSET = -1

REJOIN_ERRORS = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.FENCED_INSTANCE_ID,
    }
)
# The coordinator no longer knows this member: join as a new one.
FORGET_MEMBER_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID})


FETCH_OFFSETS = GroupAction("fetch the committed offsets of", "consuming")


class RejoinNeededError(Exception):
    """The group moved on: commit, then join again."""


@dataclass
class Membership:
    member_id: str = ""
    generation_id: int = -1
    partitions: list[int] = field(default_factory=list)


class GroupMember:
    """One member of `group_id` subscribed to `topic`."""

    def __init__(self, cluster: Cluster, group_id: str, topic: str) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.topic = topic
        self.membership = Membership()
        self.client_id_suffix = uuid.uuid4().hex[:8]
        self._coordinator: KafkaClient | None = None
        self._last_heartbeat = 0.0

    # -- joining -------------------------------------------------------------------------------

    def join(self) -> list[int]:
        """Join (again) and return this member's partitions of the topic; gives up
        after REBALANCE_TIMEOUT_MS of rebalances or a coordinator out of reach."""
        deadline = time.monotonic() + REBALANCE_TIMEOUT_MS / 1000
        while True:
            try:
                return self._join_once()
            except RejoinNeededError:
                if time.monotonic() >= deadline:
                    break
        raise CliError(
            f"group '{self.group_id}' could not be joined within {REBALANCE_TIMEOUT_MS} ms "
            "(it kept rebalancing, or its coordinator was out of reach)"
        )

    def _join_once(self) -> list[int]:
        body = {
            "group_id": self.group_id,
            "session_timeout_ms": SESSION_TIMEOUT_MS,
            "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
            "member_id": self.membership.member_id,
            "group_instance_id": None,
            "protocol_type": CONSUMER_PROTOCOL_TYPE,
            "protocols": [
                {
                    "name": RANGE_ASSIGNOR,
                    "metadata": encode_subscription(Subscription(topics=(self.topic,))),
                }
            ],
            "reason": "weir consume joining",
        }
        response = self._request(ApiKey.JOIN_GROUP, body, wait_ms=REBALANCE_TIMEOUT_MS)
        error = int(response["error_code"])
        if error == ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394: join again with the given id
            self.membership.member_id = str(response["member_id"])
            raise RejoinNeededError
        self._check(error, "join")
        self.membership.member_id = str(response["member_id"])
        self.membership.generation_id = int(response["generation_id"])
        assignments: dict[str, bytes] = {}
        if response["leader"] == self.membership.member_id:
            assignments = self._lead(response["members"])
        self.membership.partitions = self._sync(assignments)
        self._last_heartbeat = time.monotonic()
        return self.membership.partitions

    def _lead(self, members: list[Any]) -> dict[str, bytes]:
        """The leader's part: every member's subscription assigned by range."""
        try:
            subscriptions = {
                str(m["member_id"]): decode_subscription(bytes(m["metadata"])).topics
                for m in members
            }
        except DecodeError as exc:
            raise CliError(f"group '{self.group_id}': a member's subscription is "
                           f"unreadable: {exc}") from None  # fmt: skip
        topics = sorted({t for wanted in subscriptions.values() for t in wanted})
        counts = {t.name: len(t.partitions) for t in self.cluster.metadata(topics)}
        plan = assign_range(subscriptions, counts)
        return {
            member: encode_assignment(Assignment(tuple(
                TopicPartitions(topic, tuple(partitions)) for topic, partitions in parts.items()
            )))
            for member, parts in plan.items()
        }  # fmt: skip

    def _sync(self, assignments: dict[str, bytes]) -> list[int]:
        body = {
            "group_id": self.group_id,
            "generation_id": self.membership.generation_id,
            "member_id": self.membership.member_id,
            "group_instance_id": None,
            "protocol_type": CONSUMER_PROTOCOL_TYPE,
            "protocol_name": RANGE_ASSIGNOR,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
        }
        response = self._request(ApiKey.SYNC_GROUP, body, wait_ms=REBALANCE_TIMEOUT_MS)
        self._check(int(response["error_code"]), "sync with")
        data = bytes(response["assignment"])
        if not data:  # a member without partitions
            return []
        try:
            assigned = decode_assignment(data)
        except DecodeError as exc:
            raise CliError(
                f"group '{self.group_id}': the assignment is unreadable: {exc}"
            ) from None
        return sorted(
            {
                p
                for tp in assigned.assigned_partitions
                if tp.topic == self.topic
                for p in tp.partitions
            }
        )

    # -- while consuming -----------------------------------------------------------------------

    def heartbeat_if_due(self) -> None:
        """Heartbeat once per interval; RejoinNeededError when the group moved on."""
        if time.monotonic() - self._last_heartbeat < HEARTBEAT_INTERVAL_MS / 1000:
            return
        body = {
            "group_id": self.group_id,
            "generation_id": self.membership.generation_id,
            "member_id": self.membership.member_id,
            "group_instance_id": None,
        }
        response = self._request(ApiKey.HEARTBEAT, body)
        self._last_heartbeat = time.monotonic()
        self._check(int(response["error_code"]), "heartbeat to")

    def committed(self, partitions: list[int]) -> dict[int, int]:
        """Committed offsets of `partitions` (those without one are left out)."""
        if not partitions:
            return {}
        body = {
            "group_id": self.group_id,
            "topics": [{"name": self.topic, "partition_indexes": partitions}],
            "require_stable": True,
        }
        response = self._request(ApiKey.OFFSET_FETCH, body)
        self._check(int(response.get("error_code", ErrorCode.NONE)), "fetch the offsets of")
        found: dict[int, int] = {}
        for topic in response["topics"]:
            for part in topic["partitions"]:
                error = int(part["error_code"])
                if error != ErrorCode.NONE:
                    raise group_error(error, self.group_id, FETCH_OFFSETS)
                offset = int(part["committed_offset"])
                if topic["name"] == self.topic and offset != NO_OFFSET:
                    found[int(part["partition_index"])] = offset
        return found

    def commit(self, positions: Mapping[int, int]) -> None:
        """Commit the next offset to read of each partition; RejoinNeededError if refused
        because the group moved on."""
        if not positions:
            return
        body = {
            "group_id": self.group_id,
            "generation_id_or_member_epoch": self.membership.generation_id,
            "member_id": self.membership.member_id,
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": self.topic,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                        for p, offset in sorted(positions.items())
                    ],
                }
            ],
        }
        response = self._request(ApiKey.OFFSET_COMMIT, body)
        for topic in response["topics"]:
            for part in topic["partitions"]:
                self._check(int(part["error_code"]), "commit offsets to")

    def leave(self) -> None:
        """Leave at once so the others get its partitions without waiting out the session."""
        if not self.membership.member_id:
            return
        body = {
            "group_id": self.group_id,
            "member_id": self.membership.member_id,
            "members": [
                {
                    "member_id": self.membership.member_id,
                    "group_instance_id": None,
                    "reason": "weir consume done",
                }
            ],
        }
        self._request(ApiKey.LEAVE_GROUP, body)
        self.membership = Membership()

    # -- coordinator ---------------------------------------------------------------------------

    def coordinator(self) -> KafkaClient:
        if self._coordinator is None or not self._coordinator.is_open:
            self._coordinator = self.cluster.group_coordinator(
                self.group_id, wait_ms=COORDINATOR_WAIT_MS_MAX
            )
        return self._coordinator

    def _request(self, api_key: int, body: Mapping[str, object], *, wait_ms: int = 0) -> Any:
        """A request to the coordinator; a lost coordinator (its broker died) means
        finding it again and rejoining."""
        try:
            return self.coordinator().request(api_key, body, wait_ms=wait_ms)
        except BrokerConnectionError:
            self._coordinator = None
            time.sleep(COORDINATOR_LOST_BACKOFF_S)
            raise RejoinNeededError from None

    def _check(self, error: int, action: str) -> None:
        if error == ErrorCode.NONE:
            return
        if error in REJOIN_ERRORS:
            if error in FORGET_MEMBER_ERRORS:
                self.membership = Membership()
            raise RejoinNeededError
        if error in COORDINATOR_MOVING_ERRORS:
            self._coordinator = None
            time.sleep(COORDINATOR_RETRY_INTERVAL_S)
            raise RejoinNeededError
        raise group_error(error, self.group_id, GroupAction(action, "consuming"))
