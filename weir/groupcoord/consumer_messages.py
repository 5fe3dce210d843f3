"""The KIP-848 coordinator's answers, as dicts in the wire layer's snake_case field
names of the Kafka JSON schemas, ready to encode: the ConsumerGroupHeartbeat
response (`HeartbeatResult.response`) and ConsumerGroupDescribe's group entries.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.format.errors import ErrorCode
from weir.groupcoord.consumer_group import ConsumerGroup, GroupState
from weir.groupcoord.record_schemas import GroupRecord

# ConsumerGroupDescribe's authorized_operations when the client did not ask for them.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


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


def sorted_assignment(
    parts: Mapping[uuid.UUID, frozenset[int]],
) -> list[tuple[uuid.UUID, list[int]]]:
    return [(t, sorted(parts[t])) for t in sorted(parts) if parts[t]]


def described_group(
    group_id: str, group: ConsumerGroup | None, topic_names: Callable[[uuid.UUID], str | None]
) -> dict[str, Any]:
    """One ConsumerGroupDescribe v0 `groups` entry; `topic_names` maps ids to names."""

    def assignment(parts: Mapping[uuid.UUID, frozenset[int]]) -> dict[str, Any]:
        return {
            "topic_partitions": [
                {"topic_id": t, "topic_name": topic_names(t) or "", "partitions": ps}
                for t, ps in sorted_assignment(parts)
            ],
        }

    if group is None:
        return {
            "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
            "error_message": f"Group {group_id} not found.",
            "group_id": group_id,
            "group_state": GroupState.DEAD.value,
            "group_epoch": -1,
            "assignment_epoch": -1,
            "assignor_name": "",
            "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }
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
    return {
        "error_code": 0,
        "error_message": None,
        "group_id": group_id,
        "group_state": group.state().value,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.assignor_name,
        "members": members,
        "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }
