"""Replicas offline after a storage error: a local log whose write or fsync failed
is taken offline (it stops leading and following), and `offline_replicas/<node id>`
in etcd is kept equal to this broker's offline replicas, so that the controller
moves their leaderships and leaders drop them from their ISRs. Other brokers'
reports, from the watch, are kept here too (`holders`)."""

from __future__ import annotations

import logging
import uuid
from typing import Protocol

import trio

from weir.broker.broker import Broker
from weir.broker.cluster.etcd_client import Compare, EtcdClient, EtcdError, Put
from weir.broker.cluster.etcd_layout import broker_key, offline_replicas_key
from weir.broker.cluster.replication import Replication
from weir.controller.partition_state import ReplicaKey, offline_replicas_to_json

log = logging.getLogger(__name__)

# How often the report in etcd is checked even when nothing failed (a new
# registration's lease took the previous one's).
REPORT_INTERVAL_S = 0.5


class OfflineSeat(Protocol):
    """What offline replicas need of the cluster member (`ClusterMember`)."""

    broker: Broker
    etcd: EtcdClient
    node_id: int
    registration_revision: int
    lease_id: int
    leaving: bool

    def apply_roles(self) -> None: ...

    def wake_housekeeping(self) -> None: ...


class OfflineReplicas:
    def __init__(self, member: OfflineSeat) -> None:
        self._member = member
        self._broker = member.broker
        self._etcd = member.etcd
        self._node_id = member.node_id
        # Replicas each live broker reported offline (theirs and this broker's own).
        self.by_broker: dict[int, frozenset[ReplicaKey]] = {}
        # Local replicas whose log failed, not yet taken offline: why, for each.
        self._failed: dict[tuple[str, int], str] = {}
        self._changed = trio.Event()
        # (registration revision, document) last written to this broker's key.
        self._published: tuple[int, bytes] | None = None

    def replica_failed(self, key: tuple[str, int], reason: str) -> None:
        """The broker's hook for a local log that failed: taken offline by
        `run` right after, outside the log's own call."""
        self._failed[key] = reason
        self._changed.set()

    def holders(self, topic_id: uuid.UUID, index: int) -> frozenset[int]:
        """Live brokers that reported their replica of this partition offline."""
        key = (topic_id, index)
        return frozenset(n for n, keys in self.by_broker.items() if key in keys)

    async def run(self) -> None:
        """Take failed local replicas offline (they stop leading and following at
        once), then keep `offline_replicas/<node id>` in etcd equal to the broker's
        offline replicas (written again after each new registration: the previous
        one's lease took it). The controller then moves their leaderships and
        drops them from their ISRs."""
        while True:
            with trio.move_on_after(REPORT_INTERVAL_S):
                await self._changed.wait()
            self._changed = trio.Event()
            if self._failed:
                self._take_failed_offline()
            try:
                await self._publish()
            except EtcdError as exc:
                log.warning("could not report offline replicas to etcd: %s", exc)

    def _take_failed_offline(self) -> None:
        failed, self._failed = self._failed, {}
        for key, reason in failed.items():
            replica = self._broker.take_replica_offline(key, reason)
            if replica is not None and isinstance(replica.replication, Replication):
                replica.replication.go_offline()
        self._member.apply_roles()  # the fetchers let go of them

    async def _publish(self) -> None:
        registration = self._member.registration_revision
        if self._member.leaving or registration == 0:
            return
        keys = []
        for name, index in self._broker.offline_partitions:
            topic = self._broker.controller.topic(name)
            if topic is not None:
                keys.append((topic.topic_id, index))
        document = offline_replicas_to_json(keys)
        if self._published == (registration, document):
            return
        result = await self._etcd.txn(
            [Compare.create_revision_is(broker_key(self._node_id), registration)],
            [Put(offline_replicas_key(self._node_id), document, lease_id=self._member.lease_id)],
        )
        if result.succeeded:
            self._published = (registration, document)
            if keys:
                log.warning("reported %d offline replicas to the controller", len(keys))

    def apply(self, node_id: int, keys: frozenset[ReplicaKey]) -> None:
        """Another broker's (or this one's) offline replicas: as leader, stop
        counting such a follower as fetching; as controller, elect without them."""
        added = keys - self.by_broker.get(node_id, frozenset())
        if keys:
            self.by_broker[node_id] = keys
        else:
            self.by_broker.pop(node_id, None)
        for replica in self._broker.partitions.values():
            replication = replica.replication
            if (replica.topic.topic_id, replica.index) in added and isinstance(
                replication, Replication
            ):
                replication.forget_follower(node_id)
        if added:
            log.info("broker %d reports %d offline replicas", node_id, len(added))
        self._member.wake_housekeeping()
