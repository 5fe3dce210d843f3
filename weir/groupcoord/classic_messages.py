"""Requests to and results from the classic group coordinator, as plain values.

The broker decodes a Kafka request, builds one of these (filling version-dependent
defaults as noted), calls `ClassicGroupCoordinator`, and turns the result back into the
response with `.response()`, whose keys are the snake_case field names of Kafka's JSON
schemas (`throttle_time_ms` is left to the broker). Fields a version lacks are simply
dropped by the encoder; where a version changes a field's meaning or nullability,
`.response(version)` takes the version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from weir.format.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


@dataclass(frozen=True)
class JoinGroupRequest:
    group_id: str
    member_id: str  # "" on a first join
    protocol_type: str
    protocols: Sequence[tuple[str, bytes]]  # (name, metadata), most preferred first
    session_timeout_ms: int
    rebalance_timeout_ms: int  # JoinGroup v0 has none: pass session_timeout_ms
    group_instance_id: str | None = None  # v5+
    require_known_member_id: bool = True  # v4+: a first dynamic join gets MEMBER_ID_REQUIRED
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None  # v8+


@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False  # v9: a static leader rejoining needs not reassign
    members: Sequence[JoinGroupMember] = ()  # only for the leader

    def response(self, version: int) -> dict[str, Any]:
        """The JoinGroup response body for `version` (protocol_name is nullable from v7)."""
        protocol_name = self.protocol_name
        if protocol_name is None and version < 7:
            protocol_name = ""
        return {
            "error_code": int(self.error),
            "generation_id": self.generation_id,
            "protocol_type": self.protocol_type,
            "protocol_name": protocol_name,
            "leader": self.leader,
            "skip_assignment": self.skip_assignment,
            "member_id": self.member_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata,
                }
                for m in self.members
            ],
        }


@dataclass(frozen=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: Sequence[tuple[str, bytes]] = ()  # (member id, assignment); leader only
    group_instance_id: str | None = None  # v3+
    protocol_type: str | None = None  # v5+
    protocol_name: str | None = None  # v5+


@dataclass(frozen=True)
class SyncGroupResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None

    def response(self) -> dict[str, Any]:
        return {
            "error_code": int(self.error),
            "protocol_type": self.protocol_type,
            "protocol_name": self.protocol_name,
            "assignment": self.assignment,
        }


@dataclass(frozen=True)
class LeavingMember:
    member_id: str  # may be "" for a static member named by instance id (v3+)
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True)
class LeaveGroupResult:
    error: ErrorCode
    members: Sequence[LeftMember] = ()

    def response(self, version: int) -> dict[str, Any]:
        """The LeaveGroup response body; v0-v2 carry one error: the top one, else the
        (single) member's."""
        if version < 3:
            error = self.error
            if error is ErrorCode.NONE and self.members:
                error = self.members[0].error
            return {"error_code": int(error)}
        return {
            "error_code": int(self.error),
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "error_code": int(m.error),
                }
                for m in self.members
            ],
        }


@dataclass(frozen=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True)
class OffsetCommitRequest:
    group_id: str
    offsets: Sequence[OffsetToCommit]
    generation_id: int = NO_GENERATION  # -1 with member "": a standalone (simple) commit
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None


@dataclass(frozen=True)
class PartitionError:
    topic: str
    partition: int
    error: ErrorCode


@dataclass(frozen=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int  # -1: none committed
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class OffsetFetchResult:
    error: ErrorCode
    partitions: Sequence[FetchedOffset] = ()


@dataclass(frozen=True)
class OffsetDeleteResult:
    error: ErrorCode
    partitions: Sequence[PartitionError] = ()


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str  # the selected protocol, only when Stable (else "")
    members: Sequence[DescribedMember] = field(default_factory=tuple)

    def response(self) -> dict[str, Any]:
        return {
            "error_code": int(self.error),
            "group_id": self.group_id,
            "group_state": self.state,
            "protocol_type": self.protocol_type,
            "protocol_data": self.protocol_data,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata,
                    "member_assignment": m.assignment,
                }
                for m in self.members
            ],
        }
