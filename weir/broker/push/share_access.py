"""What push delivery needs of a share group: the foundation's `ShareDirect`
(weir/broker/http/share_direct.py), bound to the broker's own caller
(`weir.broker.http.push_access`, injected: this package sits beside weir.broker.http
and never imports it, since build_app imports this package's routes).

Deliveries run on the partition's leader, so these requests stay in process.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from weir.format.errors import ErrorCode
from weir.sharecoord.share_partition import AcknowledgeType

__all__ = ["AcknowledgeType", "AcquiredRecords", "RecordLike", "ShareAccess", "new_member_id"]


class RecordLike(Protocol):
    """ShareDirect's DirectRecord."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...
    @property
    def delivery_count(self) -> int: ...


class AcquiredRecords(Protocol):
    """ShareDirect's Acquired."""

    @property
    def error(self) -> ErrorCode: ...
    @property
    def records(self) -> Sequence[RecordLike]: ...


class ShareAccess(Protocol):
    async def acquire(
        self,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        *,
        records_max: int,
        lock_ms: int,
        wait_ms: int = 0,
    ) -> AcquiredRecords: ...

    async def acknowledge(
        self,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: Sequence[int],
        kind: AcknowledgeType,
    ) -> dict[int, ErrorCode]: ...

    async def change_lock(
        self,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: Sequence[int],
        lock_ms: int,
    ) -> dict[int, ErrorCode]: ...


def new_member_id(node_id: int) -> str:
    return f"weir-push-{node_id}-{uuid.uuid4().hex[:12]}"
