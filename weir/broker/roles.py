"""What the broker's state needs of the parts above it, as protocols: the cluster
member, the coordinator services, a client connection. broker.py names them by what
it needs, so it imports none of the modules that import it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Protocol

from weir.broker.partition_replica import PartitionReplica
from weir.controller.controller import MetadataChange
from weir.controller.metadata import TopicRecord
from weir.controller.partition_state import BrokerInfo, PartitionState
from weir.format.errors import ErrorCode
from weir.security.jwt_validation import JwkSet, ValidatedToken
from weir.security.oauthbearer import OAuthBearerSettings


class ConnectionEnd(Protocol):
    """A client connection's end, as a handler may watch for it (`ClientConnection`
    in weir/broker/handlers/context.py)."""

    def on_close(self, callback: Callable[[], None]) -> None: ...


class ClusterRole(Protocol):
    """What the broker needs of its cluster member (weir/broker/cluster/cluster_member.py)
    when it is one broker of a cluster over etcd."""

    @property
    def controller_id(self) -> int: ...

    @property
    def node_id(self) -> int: ...

    def fenced(self) -> bool:
        """True once this broker's etcd lease may have ended: it must not act as leader."""
        ...

    async def save_metadata(self, change: MetadataChange) -> None:
        """Persist the change by compare-and-swap; raises MetadataConflictError after
        bringing the controller's metadata up to date when another broker won."""
        ...

    def live_brokers(self) -> list[BrokerInfo]: ...

    def replicas_catching_up(self) -> int:
        """Local follower replicas outside their ISR whose leader is alive."""
        ...

    def partition_state(self, topic: TopicRecord, index: int) -> PartitionState: ...

    def offline_holders(self, topic_id: uuid.UUID, index: int) -> frozenset[int]:
        """Brokers whose replica of the partition went offline (a storage error)."""
        ...

    def replica_fetch_allowed(self, replica_id: int, client_id: str | None) -> bool: ...

    def follower_connected(self, replica_id: int, connection: ConnectionEnd | None) -> None:
        """A follower's replica fetch came on `connection` (None: not a socket)."""
        ...

    async def elect(self, topic: TopicRecord, index: int, *, unclean: bool) -> ErrorCode: ...

    def record_follower_fetch(
        self, replica: PartitionReplica, replica_id: int, fetch_offset: int
    ) -> None: ...

    def replica_failed(self, key: tuple[str, int], reason: str) -> None:
        """A local replica's log went offline (a failed write or fsync): take it
        offline and have its leadership and ISR place moved (soon, not in this call:
        the log's failure may surface in the middle of any of its operations)."""
        ...


class MetadataConflictError(Exception):
    """Another broker changed the cluster metadata first: stage the change again."""


class OffsetsTopicPlanner(Protocol):
    """What the broker needs of its group and transaction services: their internal
    topic's partitions not created yet, which the descriptor budget keeps room for."""

    @property
    def partitions_not_created(self) -> int: ...


class InternalStateOwner(Protocol):
    """A service whose state lives in an internal topic and is served from memory
    (the group coordinators over `__consumer_offsets`, the transaction coordinator over
    `__transaction_state`; the share-group coordinator to come): the broker reports the
    partitions it cannot serve."""

    @property
    def internal_topic_name(self) -> str: ...

    def unavailable_partitions(self) -> dict[int, str]:
        """Partitions this broker should serve but cannot, and why."""
        ...


def live_broker(cluster: ClusterRole, node_id: int) -> BrokerInfo | None:
    """The live broker `node_id` (its address), or None when it is not live."""
    return next((b for b in cluster.live_brokers() if b.node_id == node_id), None)


class OAuthBearerKeysRole(Protocol):
    """OAUTHBEARER's settings and current keys (the JWKS, refreshed by the broker),
    and the check of an HTTP bearer token."""

    settings: OAuthBearerSettings
    keys: JwkSet

    def validate(self, token: str, now_ms: int) -> ValidatedToken: ...
