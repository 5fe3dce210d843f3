"""The member's view of etcd kept current: every change under `/weir/` applied in
revision order through one watch, resumed where it stopped when it breaks, read
again whole when its revision was compacted, and audited against etcd itself
(`audit`) because a stalled stream says nothing. What it applies: registrations,
the controller key, partition states, offline replicas, the metadata document."""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from typing import Protocol

import trio

from weir.broker.broker import Broker
from weir.broker.cluster.etcd_client import (
    EtcdClient,
    EtcdError,
    KeyValue,
    Range,
    WatchCompacted,
    WatchEvent,
)
from weir.broker.cluster.etcd_layout import (
    BROKERS_PREFIX,
    CONTROLLER_KEY,
    METADATA_KEY,
    OFFLINE_REPLICAS_PREFIX,
    PARTITIONS_PREFIX,
    PREFIX,
    StoredState,
    controller_node_id,
)
from weir.broker.cluster.offline_replicas import OfflineReplicas
from weir.controller.partition_state import (
    NO_LEADER,
    BrokerInfo,
    PartitionState,
    offline_replicas_from_json,
)

log = logging.getLogger(__name__)

WATCH_RETRY_BACKOFF_S = 0.5
# How often the watch is compared with etcd (`audit`).
WATCH_AUDIT_INTERVAL_S = 3.0
WATCH_RESTART_REASONS = ("broken", "behind", "compacted")


class WatchedMember(Protocol):
    """What the watch applies changes to (`ClusterMember`)."""

    broker: Broker
    etcd: EtcdClient
    brokers: dict[int, BrokerInfo]
    states: dict[tuple[uuid.UUID, int], StoredState]
    controller_id: int
    is_controller: bool
    controller_value: bytes
    metadata_revision: int
    watch_restarts: Counter[str]
    offline: OfflineReplicas

    def replace_metadata(self, kv: KeyValue) -> None: ...

    def apply_roles(self) -> None: ...

    def apply_role_of(self, topic_id: uuid.UUID, index: int) -> None: ...

    def wake_housekeeping(self) -> None: ...


class EtcdWatch:
    def __init__(self, member: WatchedMember) -> None:
        self._member = member
        self._broker = member.broker
        self._etcd = member.etcd
        # The next revision the watch owes, and its cancel scope (the audit
        # restarts a stream that fell behind).
        self._revision = 0
        self._scope: trio.CancelScope | None = None

    async def run(self, start_revision: int) -> None:
        """Apply every change under /weir/ in revision order, resuming where the
        previous stream stopped. A stream that broke, or that the audit found
        behind etcd (`audit` cancels it), is opened again from the next
        revision it owes."""
        self._revision = start_revision
        while True:
            with trio.CancelScope() as scope:
                self._scope = scope
                reason = await self._follow()
            if scope.cancelled_caught:
                reason = "behind"
                log.warning("the etcd watch fell behind etcd (a stalled stream): resuming "
                            "from revision %d", self._revision)  # fmt: skip
            self._member.watch_restarts[reason] += 1
            await trio.sleep(WATCH_RETRY_BACKOFF_S)

    async def _follow(self) -> str:
        """One watch stream, until it ends; returns why ("broken", "compacted")."""
        try:
            async with self._etcd.watch_prefix(PREFIX, self._revision) as batches:
                async for events in batches:
                    for event in events:
                        await self._apply_event(event)
                        self._revision = event.kv.mod_revision + 1
        except WatchCompacted:
            try:
                await self._reload_everything()
            except EtcdError as exc:
                log.warning("etcd watch compacted, and reading it all again failed: %s", exc)
            return "compacted"
        except EtcdError as exc:
            log.info("etcd watch interrupted (%s); resuming from revision %d",
                     exc, self._revision)  # fmt: skip
        return "broken"

    async def _reload_everything(self) -> None:
        """The watch's revision was compacted away: read the whole prefix again."""
        kvs, current = await self._etcd.get_prefix(PREFIX)
        self._member.brokers.clear()
        self._member.states.clear()
        self._member.offline.by_broker.clear()
        for kv in kvs:
            self.apply_put(kv, initial=True)
        await self._broker.topic_changes.reconcile_local_partitions()
        self._member.apply_roles()
        self._revision = current + 1

    async def audit(self) -> None:
        """A safety net under the watch, which may be silent for as long as nothing
        changes (etcd's progress notifications are off unless configured): every few
        seconds, compare what the watch delivered with etcd itself, in one read-only
        txn. A newer metadata document is applied at once; keys put since the
        watch's revision, or brokers or a controller that differ from the watched
        view, found by two audits in a row, restart the watch from its revision."""
        behind_before = False
        while True:
            await trio.sleep(WATCH_AUDIT_INTERVAL_S)
            try:
                behind = await self._is_behind()
            except EtcdError as exc:
                log.debug("watch audit: %s", exc)
                continue
            if behind and behind_before and self._scope is not None:
                self._scope.cancel()
                behind = False
            behind_before = behind

    async def _is_behind(self) -> bool:
        since = self._revision
        result = await self._etcd.txn(
            [],
            [
                Range(PREFIX, prefix=True, keys_only=True, min_mod_revision=since),
                Range(BROKERS_PREFIX, prefix=True, keys_only=True),
                Range(CONTROLLER_KEY),
            ],
        )
        undelivered, registered, controller = result.ranges
        metadata = [kv for kv in undelivered if kv.key == METADATA_KEY]
        if metadata and metadata[0].mod_revision > self._member.metadata_revision:
            await self._resync_metadata()
        if since != self._revision:
            return False  # the watch moved on meanwhile: it is alive
        broker_ids = {kv.key[len(BROKERS_PREFIX) :] for kv in registered}
        watched_ids = {str(node_id).encode() for node_id in self._member.brokers}
        controller_id = controller_node_id(controller[0].value) if controller else NO_LEADER
        return (
            bool(undelivered)
            or broker_ids != watched_ids
            or controller_id != self._member.controller_id
        )

    async def _resync_metadata(self) -> None:
        """Apply the metadata document in etcd when it is newer than the one applied
        (the audit found that the watch has not brought it)."""
        kv = await self._etcd.get(METADATA_KEY)
        if kv is not None and kv.mod_revision > self._member.metadata_revision:
            async with self._broker.metadata_lock:
                if kv.mod_revision > self._member.metadata_revision:
                    log.warning("metadata revision %d was not seen through the watch: "
                                "applying it", kv.mod_revision)  # fmt: skip
                    self._member.replace_metadata(kv)

    async def _apply_event(self, event: WatchEvent) -> None:
        kv = event.kv
        if event.kind == "delete":
            self._apply_delete(kv.key)
            return
        if kv.key == METADATA_KEY:
            if kv.mod_revision <= self._member.metadata_revision:
                return  # our own save, already applied
            async with self._broker.metadata_lock:
                if kv.mod_revision > self._member.metadata_revision:
                    self._member.replace_metadata(kv)  # the reconciler makes the replicas follow
            return
        self.apply_put(kv, initial=False)

    def apply_put(self, kv: KeyValue, *, initial: bool) -> None:
        key = kv.key
        try:
            if key.startswith(BROKERS_PREFIX):
                info = BrokerInfo.from_json(kv.value, kv.create_revision)
                self._member.brokers[info.node_id] = info
                self._member.wake_housekeeping()
            elif key == CONTROLLER_KEY:
                self._member.controller_id = int(json.loads(kv.value)["node_id"])
                self._member.is_controller = kv.value == self._member.controller_value
            elif key.startswith(PARTITIONS_PREFIX):
                topic_id_text, index_text = key[len(PARTITIONS_PREFIX) :].decode().split("/")
                state = PartitionState.from_json(kv.value)
                state_key = (uuid.UUID(topic_id_text), int(index_text))
                known = self._member.states.get(state_key)
                if known is not None and known.mod_revision >= kv.mod_revision:
                    return  # our own change, applied when it was made
                self._member.states[state_key] = StoredState(state, kv.mod_revision)
                if not initial:
                    self._member.apply_role_of(*state_key)
            elif key == METADATA_KEY and initial:
                self._member.replace_metadata(kv)
            elif key.startswith(OFFLINE_REPLICAS_PREFIX):
                node_id = int(key[len(OFFLINE_REPLICAS_PREFIX) :])
                self._member.offline.apply(node_id, offline_replicas_from_json(kv.value))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            log.error("ignoring unreadable %r in etcd: %s", key, exc)

    def _apply_delete(self, key: bytes) -> None:
        if key.startswith(BROKERS_PREFIX):
            try:
                node_id = int(key[len(BROKERS_PREFIX) :])
            except ValueError:
                return
            self._member.brokers.pop(node_id, None)
            log.info("broker %d left the cluster", node_id)
            self._member.wake_housekeeping()
        elif key == CONTROLLER_KEY:
            self._member.controller_id = NO_LEADER
            self._member.is_controller = False
            self._member.wake_housekeeping()
        elif key.startswith(OFFLINE_REPLICAS_PREFIX):
            try:
                node_id = int(key[len(OFFLINE_REPLICAS_PREFIX) :])
            except ValueError:
                return
            self._member.offline.apply(node_id, frozenset())
