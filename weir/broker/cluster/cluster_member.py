"""One broker of a cluster over etcd: registration, the metadata it watches and
applies, partition roles, the ISR changes it makes as a leader, and the
controller's elections when it is the active controller.

etcd holds (under `/weir/`):

- `metadata`: the cluster metadata document (topics, their configs and replica
  assignment, the next producer id, group configs), changed only by
  compare-and-swap on its mod revision (`save_metadata`);
- `brokers/<node id>`: each live broker's registration, under its lease;
- `controller`: the active controller's node id, under its lease (the first broker
  to create it wins; the others watch for its deletion);
- `partitions/<topic id>/<index>`: a partition's leader, leader epoch, ISR,
  partition epoch and eligible leader replicas once it first changed (absent: its
  first replica leads, every replica in sync); changed only by compare-and-swap on
  its mod revision, by the leader (ISR, or handing leadership over while cut off
  from its followers; while its own registration exists) or the controller
  (leader, while it still holds the controller key);
- `offline_replicas/<node id>`: the replicas a live broker holds but cannot
  serve (a failed write or fsync, a damaged log), under its lease, written only
  while its registration exists. The controller counts them as dead for their
  partition (Kafka's brokers report failed log directories to the controller).
"""

from __future__ import annotations

import json
import logging
import secrets
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.cluster.etcd_client import (
    Compare,
    EtcdClient,
    EtcdError,
    KeyValue,
    Put,
    Range,
    WatchCompacted,
    WatchEvent,
)
from weir.broker.cluster.replication import (
    REPLICA_CLIENT_ID_PREFIX,
    FollowedPartition,
    ReplicaFetcher,
    Replication,
)
from weir.broker.config import BrokerConfig
from weir.broker.partition_replica import PartitionReplica
from weir.broker.roles import ConnectionEnd, MetadataConflictError
from weir.controller.controller import ControllerError, MetadataChange
from weir.controller.metadata import (
    ClusterMetadata,
    MetadataCorruptError,
    TopicRecord,
    metadata_from_json,
    metadata_to_json,
    new_cluster_id,
)
from weir.controller.partition_state import (
    NO_LEADER,
    BrokerInfo,
    PartitionLeadership,
    PartitionState,
    ReplicaKey,
    abdicate,
    change_isr,
    elect_leader,
    elect_leader_without_offline,
    elect_preferred,
    initial_state,
    offline_replicas_from_json,
    offline_replicas_to_json,
    preferred_imbalance,
    preferred_leader_rebalance,
)
from weir.format.errors import ErrorCode

log = logging.getLogger(__name__)

PREFIX = b"/weir/"
METADATA_KEY = PREFIX + b"metadata"
BROKERS_PREFIX = PREFIX + b"brokers/"
CONTROLLER_KEY = PREFIX + b"controller"
PARTITIONS_PREFIX = PREFIX + b"partitions/"
OFFLINE_REPLICAS_PREFIX = PREFIX + b"offline_replicas/"
# How often leaders check their followers' lag and the controller its partitions.
HOUSEKEEPING_INTERVAL_S = 0.5
WATCH_RETRY_BACKOFF_S = 0.5
LEAVE_TIMEOUT_S = 1.0
# How often the watch is compared with etcd (`_audit_watch`).
WATCH_AUDIT_INTERVAL_S = 3.0
WATCH_RESTART_REASONS = ("broken", "behind", "compacted")


# Bounds of one etcd request's wait on one member (see `etcd_request_timeout_s`).
ETCD_REQUEST_TIMEOUT_S_MIN = 1.5
ETCD_REQUEST_TIMEOUT_S_MAX = 5.0


def etcd_request_timeout_s(config: BrokerConfig) -> float:
    """A third of the session timeout, within bounds: a lease renewal sent to a
    member that stopped answering (paused, cut off) times out and is answered by
    another member before the lease (renewed every third of the session) runs out."""
    third_s = config.broker_session_timeout_ms / 3000
    return min(max(third_s, ETCD_REQUEST_TIMEOUT_S_MIN), ETCD_REQUEST_TIMEOUT_S_MAX)


def monotonic_ms() -> int:
    """The clock of replication's durations (a follower's lag, since it was last
    caught up): monotonic, so a wall-clock step on a leader (NTP, an operator)
    neither drops every follower from the ISR nor keeps a lagging one in it."""
    return int(trio.current_time() * 1000)


def _controller_node_id(value: bytes) -> int:
    """The node id in the controller key's value (NO_LEADER when unreadable)."""
    try:
        return int(json.loads(value)["node_id"])
    except (ValueError, KeyError, TypeError):
        return NO_LEADER


def broker_key(node_id: int) -> bytes:
    return BROKERS_PREFIX + str(node_id).encode()


def partition_key(topic_id: uuid.UUID, index: int) -> bytes:
    return PARTITIONS_PREFIX + f"{topic_id}/{index}".encode()


def offline_replicas_key(node_id: int) -> bytes:
    return OFFLINE_REPLICAS_PREFIX + str(node_id).encode()


@dataclass
class StoredState:
    state: PartitionState
    mod_revision: int  # 0: not in etcd yet (the initial state)


class EtcdMetadataStore:
    """The controller's store in a cluster: loaded from etcd before the broker is
    built; every save goes through `ClusterMember.save_metadata`."""

    def __init__(self, metadata: ClusterMetadata) -> None:
        self._metadata = metadata

    def load(self) -> ClusterMetadata:
        return self._metadata

    def save(self, metadata: ClusterMetadata) -> None:
        raise AssertionError("a cluster's metadata is saved by compare-and-swap in etcd")


async def load_cluster_metadata(etcd: EtcdClient) -> tuple[ClusterMetadata, int]:
    """The metadata document and its mod revision, created when the cluster is new."""
    for _ in range(3):
        kv = await etcd.get(METADATA_KEY)
        if kv is not None:
            return metadata_from_json(kv.value), kv.mod_revision
        fresh = ClusterMetadata(cluster_id=new_cluster_id())
        result = await etcd.txn(
            [Compare.absent(METADATA_KEY)], [Put(METADATA_KEY, metadata_to_json(fresh))]
        )
        if result.succeeded:
            log.info("created the cluster metadata in etcd (cluster id %s)", fresh.cluster_id)
            return fresh, result.revision
    raise MetadataCorruptError("the metadata key in etcd keeps changing")


class ClusterMember:
    def __init__(
        self,
        broker: Broker,
        etcd: EtcdClient,
        metadata_revision: int,
    ) -> None:
        self.broker = broker
        self.etcd = etcd
        config: BrokerConfig = broker.config
        self.node_id = config.node_id
        self.session_timeout_ms = config.broker_session_timeout_ms
        self.replica_lag_time_max_ms = config.replica_lag_time_max_ms
        self.metadata_revision = metadata_revision
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id = NO_LEADER
        self.states: dict[tuple[uuid.UUID, int], StoredState] = {}
        self.replication_token = secrets.token_hex(16)
        self._controller_value = json.dumps(
            {"node_id": self.node_id, "token": secrets.token_hex(8)}
        ).encode()
        self.is_controller = False
        self._leaving = False
        self.lease_id = 0
        self.registration_revision = 0
        self._lease_valid_until = 0.0
        # Fencing as the roles last saw it (see `_check_fencing`).
        self._fenced_seen = False
        self.fencings_total = 0
        # The next revision the watch owes, its cancel scope (the audit restarts a
        # stream that fell behind), and its restarts by reason.
        self._watch_revision = 0
        self._watch_scope: trio.CancelScope | None = None
        self.watch_restarts: Counter[str] = Counter(dict.fromkeys(WATCH_RESTART_REASONS, 0))
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._nursery: trio.Nursery | None = None
        self._roles_changed = trio.Event()
        self._leadership_dirty = trio.Event()
        self._reconcile_wanted = trio.Event()
        self.controller_elections_total = 0
        self.isr_shrinks_total = 0
        self.isr_expands_total = 0
        self.preferred_leader_elections_total = 0
        # Replicas each live broker reported offline (theirs and this broker's own).
        self.offline_replicas: dict[int, frozenset[ReplicaKey]] = {}
        # Local replicas whose log failed, not yet taken offline: why, for each.
        self._failed_replicas: dict[tuple[str, int], str] = {}
        self._offline_changed = trio.Event()
        # (registration revision, document) last written to this broker's key.
        self._offline_published: tuple[int, bytes] | None = None
        self.leader_abdications_total = 0
        self.replica_disconnect_grace_ms = config.replica_disconnect_grace_ms
        # Per follower broker: the connection its latest replica fetch came on, and
        # when (Trio clock) that connection closed with no fetch since.
        self._follower_connections: dict[int, ConnectionEnd] = {}
        self._follower_disconnected_s: dict[int, float] = {}
        broker.cluster = self
        broker.controller.clustered = True
        broker.controller.live_brokers = lambda: sorted(
            self.brokers.values(), key=lambda b: b.node_id
        )
        broker.on_partitions_changed = self._partitions_changed

    # -- what the broker asks ------------------------------------------------------

    def fenced(self) -> bool:
        """True once this broker's lease may have ended: it must not act as leader."""
        return trio.current_time() > self._lease_valid_until

    def live_brokers(self) -> list[BrokerInfo]:
        return sorted(self.brokers.values(), key=lambda b: b.node_id)

    def replicas_catching_up(self) -> int:
        count = 0
        for replica in self.broker.partitions.values():
            state = self.partition_state(replica.topic, replica.index)
            leader = state.leader
            if leader not in (NO_LEADER, self.node_id) and leader in self.brokers:
                count += self.node_id not in state.isr
        return count

    def partition_state(self, topic: TopicRecord, index: int) -> PartitionState:
        stored = self.states.get((topic.topic_id, index))
        if stored is not None:
            return stored.state
        # Never changed since creation: its replicas then were all in sync (empty). A
        # move in progress adds replicas that are not: those at creation are the
        # move's original ones.
        move = topic.reassignments.get(index)
        return initial_state(move[1] if move else topic.replicas(index, self.node_id))

    def replica_fetch_allowed(self, replica_id: int, client_id: str | None) -> bool:
        """A replica fetch must present the registered broker's replication token
        (CVE-2018-1288's class: a client may not pose as a follower)."""
        info = self.brokers.get(replica_id)
        if info is None or not info.replication_token:
            return False
        expected = f"{REPLICA_CLIENT_ID_PREFIX}{replica_id}-{info.replication_token}"
        return client_id is not None and secrets.compare_digest(client_id, expected)

    def record_follower_fetch(
        self, replica: PartitionReplica, replica_id: int, fetch_offset: int
    ) -> None:
        replication = replica.replication
        if not isinstance(replication, Replication) or replication.state.leader != self.node_id:
            return
        now_ms = monotonic_ms()
        replication.record_follower_fetch(replica_id, fetch_offset, now_ms)
        if replication.caught_up_followers(now_ms, self.replica_lag_time_max_ms):
            self._leadership_dirty.set()

    async def save_metadata(self, change: MetadataChange) -> None:
        try:
            result = await self.etcd.txn(
                [Compare.mod_revision_is(METADATA_KEY, self.metadata_revision)],
                [Put(METADATA_KEY, metadata_to_json(change.document))],
                [],
            )
        except EtcdError as exc:  # maybe applied: the watch brings it if so
            raise ControllerError(
                ErrorCode.REQUEST_TIMED_OUT, f"the cluster metadata store did not answer: {exc}"
            ) from exc
        if result.succeeded:
            self.metadata_revision = result.revision
            self._reconcile_wanted.set()  # the watch skips this broker's own saves
            return
        try:
            kv = await self.etcd.get(METADATA_KEY)
        except EtcdError as exc:
            raise ControllerError(
                ErrorCode.REQUEST_TIMED_OUT, f"the cluster metadata store did not answer: {exc}"
            ) from exc
        if kv is not None:
            self._replace_metadata(kv)
        raise MetadataConflictError()

    async def leave(self) -> None:
        """At shutdown: stop leading and revoke the lease, so the registration (and
        the controller key) go at once and the controller moves this broker's
        leaderships now rather than after the session timeout."""
        self._leaving = True
        self._lease_valid_until = 0.0
        self.is_controller = False
        with trio.move_on_after(LEAVE_TIMEOUT_S):
            try:
                await self.etcd.lease_revoke(self.lease_id)
            except EtcdError as exc:
                log.warning("could not leave the cluster cleanly: %s", exc)

    # -- running -------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        kvs, revision = await self.etcd.get_prefix(PREFIX)
        for kv in kvs:
            self._apply_put(kv, initial=True)
        await self._register()
        try:
            await self._run_tasks(revision + 1, task_status)
        finally:
            self._nursery = None  # stopping: start no fetcher any more

    async def _run_tasks(self, watch_from: int, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self.broker.topic_changes.reconcile_local_partitions()
            self._apply_roles()
            nursery.start_soon(self._keep_lease)
            nursery.start_soon(self._watch_fencing)
            nursery.start_soon(self._watch, watch_from)
            nursery.start_soon(self._campaign)
            nursery.start_soon(self._housekeeping)
            nursery.start_soon(self._reconcile_own_changes)
            nursery.start_soon(self._audit_watch)
            nursery.start_soon(self._balance_preferred_leaders)
            nursery.start_soon(self._report_offline_replicas)
            task_status.started()

    async def _register(self) -> None:
        ttl_s = max(1, self.session_timeout_ms // 1000)
        config = self.broker.config
        advertised = config.advertised
        info = BrokerInfo(
            node_id=self.node_id,
            host=advertised.host,
            port=advertised.port,
            rack=config.rack,
            replication_token=self.replication_token,
        )
        key = broker_key(self.node_id)
        previous = await self.etcd.get(key)
        if previous is not None:
            log.warning("broker %d was still registered (a restart within its session "
                        "timeout): replacing that registration", self.node_id)  # fmt: skip
            await self.etcd.delete(key)
        lease_id = await self.etcd.lease_grant(ttl_s)
        started = trio.current_time()
        result = await self.etcd.txn([], [Put(key, info.to_json(), lease_id=lease_id)])
        self.lease_id = lease_id
        self.registration_revision = result.revision
        self._lease_valid_until = started + ttl_s
        self.brokers[self.node_id] = replace(info, epoch=result.revision)
        log.info("registered broker %d in etcd (lease %x, %d s)", self.node_id, lease_id, ttl_s)

    async def _reconcile_own_changes(self) -> None:
        """After this broker saved a metadata change, make its replicas match it
        (other brokers do so when their watch sees the change)."""
        while True:
            await self._reconcile_wanted.wait()
            self._reconcile_wanted = trio.Event()
            try:
                await self.broker.topic_changes.reconcile_local_partitions()
            except Exception:  # a failed directory operation: the next change retries
                log.exception("could not make the local replicas match the metadata")
            self._leadership_dirty.set()

    async def _resync_metadata(self) -> None:
        """Apply the metadata document in etcd when it is newer than the one applied
        (the audit found that the watch has not brought it)."""
        kv = await self.etcd.get(METADATA_KEY)
        if kv is not None and kv.mod_revision > self.metadata_revision:
            async with self.broker.metadata_lock:
                if kv.mod_revision > self.metadata_revision:
                    log.warning("metadata revision %d was not seen through the watch: "
                                "applying it", kv.mod_revision)  # fmt: skip
                    self._replace_metadata(kv)

    async def _keep_lease(self) -> None:
        ttl_s = max(1, self.session_timeout_ms // 1000)
        interval_s = ttl_s / 3
        while not self._leaving:
            await trio.sleep(interval_s)
            if self._leaving:
                return
            sent = trio.current_time()
            try:
                remaining_s = await self.etcd.lease_keepalive(self.lease_id)
            except EtcdError as exc:
                log.warning("lease keepalive failed: %s", exc)
                continue
            if remaining_s <= 0:
                log.warning("broker %d's lease ended: registering again", self.node_id)
                self.is_controller = False
                self._apply_roles()
                try:
                    await self._register()
                except EtcdError as exc:
                    log.warning("registering again failed: %s", exc)
                self._check_fencing()
                continue
            self._lease_valid_until = sent + remaining_s
            self._check_fencing()

    async def _watch_fencing(self) -> None:
        """Notice the moment the lease may have ended (no renewal answered in time:
        etcd unreachable), which no event announces."""
        while not self._leaving:
            await trio.sleep(max(self._lease_valid_until - trio.current_time(), 0.0) + 0.05)
            self._check_fencing()

    def _check_fencing(self) -> None:
        """Apply the roles again when fencing began or ended: a fenced broker acts as
        leader of nothing (its internal-topic owners unload what they serve), and a
        lease renewed in time (etcd came back before it ended) makes it the leader it
        still is in etcd again (they load it back), without a restart."""
        fenced = self.fenced()
        if fenced == self._fenced_seen or self._leaving:
            return
        self._fenced_seen = fenced
        if fenced:
            self.fencings_total += 1
            log.warning("broker %d is fenced: its etcd lease may have ended (no renewal "
                        "answered), so it acts as leader of nothing", self.node_id)  # fmt: skip
        else:
            log.warning("broker %d renewed its etcd lease: it acts on its roles again",
                        self.node_id)  # fmt: skip
        self._apply_roles()

    async def _watch(self, start_revision: int) -> None:
        """Apply every change under /weir/ in revision order, resuming where the
        previous stream stopped. A stream that broke, or that the audit found
        behind etcd (`_audit_watch` cancels it), is opened again from the next
        revision it owes."""
        self._watch_revision = start_revision
        while True:
            with trio.CancelScope() as scope:
                self._watch_scope = scope
                reason = await self._follow_watch()
            if scope.cancelled_caught:
                reason = "behind"
                log.warning("the etcd watch fell behind etcd (a stalled stream): resuming "
                            "from revision %d", self._watch_revision)  # fmt: skip
            self.watch_restarts[reason] += 1
            await trio.sleep(WATCH_RETRY_BACKOFF_S)

    async def _follow_watch(self) -> str:
        """One watch stream, until it ends; returns why ("broken", "compacted")."""
        try:
            async with self.etcd.watch_prefix(PREFIX, self._watch_revision) as batches:
                async for events in batches:
                    for event in events:
                        await self._apply_event(event)
                        self._watch_revision = event.kv.mod_revision + 1
        except WatchCompacted:
            try:
                await self._reload_everything()
            except EtcdError as exc:
                log.warning("etcd watch compacted, and reading it all again failed: %s", exc)
            return "compacted"
        except EtcdError as exc:
            log.info("etcd watch interrupted (%s); resuming from revision %d",
                     exc, self._watch_revision)  # fmt: skip
        return "broken"

    async def _reload_everything(self) -> None:
        """The watch's revision was compacted away: read the whole prefix again."""
        kvs, current = await self.etcd.get_prefix(PREFIX)
        self.brokers.clear()
        self.states.clear()
        self.offline_replicas.clear()
        for kv in kvs:
            self._apply_put(kv, initial=True)
        await self.broker.topic_changes.reconcile_local_partitions()
        self._apply_roles()
        self._watch_revision = current + 1

    async def _audit_watch(self) -> None:
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
                behind = await self._watch_is_behind()
            except EtcdError as exc:
                log.debug("watch audit: %s", exc)
                continue
            if behind and behind_before and self._watch_scope is not None:
                self._watch_scope.cancel()
                behind = False
            behind_before = behind

    async def _watch_is_behind(self) -> bool:
        since = self._watch_revision
        result = await self.etcd.txn(
            [],
            [
                Range(PREFIX, prefix=True, keys_only=True, min_mod_revision=since),
                Range(BROKERS_PREFIX, prefix=True, keys_only=True),
                Range(CONTROLLER_KEY),
            ],
        )
        undelivered, registered, controller = result.ranges
        metadata = [kv for kv in undelivered if kv.key == METADATA_KEY]
        if metadata and metadata[0].mod_revision > self.metadata_revision:
            await self._resync_metadata()
        if since != self._watch_revision:
            return False  # the watch moved on meanwhile: it is alive
        broker_ids = {kv.key[len(BROKERS_PREFIX) :] for kv in registered}
        watched_ids = {str(node_id).encode() for node_id in self.brokers}
        controller_id = _controller_node_id(controller[0].value) if controller else NO_LEADER
        return bool(undelivered) or broker_ids != watched_ids or controller_id != self.controller_id

    async def _apply_event(self, event: WatchEvent) -> None:
        kv = event.kv
        if event.kind == "delete":
            self._apply_delete(kv.key)
            return
        if kv.key == METADATA_KEY:
            if kv.mod_revision <= self.metadata_revision:
                return  # our own save, already applied
            async with self.broker.metadata_lock:
                if kv.mod_revision > self.metadata_revision:
                    self._replace_metadata(kv)  # the reconciler makes the replicas follow
            return
        self._apply_put(kv, initial=False)

    def _replace_metadata(self, kv: KeyValue) -> None:
        try:
            metadata = metadata_from_json(kv.value)
        except MetadataCorruptError as exc:
            log.error("unreadable cluster metadata in etcd (revision %d): %s",
                      kv.mod_revision, exc)  # fmt: skip
            return
        self.broker.controller.replace_metadata(metadata)
        self.metadata_revision = kv.mod_revision
        self._reconcile_wanted.set()  # whichever path brought it: replicas follow

    def _apply_put(self, kv: KeyValue, *, initial: bool) -> None:
        key = kv.key
        try:
            if key.startswith(BROKERS_PREFIX):
                info = BrokerInfo.from_json(kv.value, kv.create_revision)
                self.brokers[info.node_id] = info
                self._leadership_dirty.set()
            elif key == CONTROLLER_KEY:
                self.controller_id = int(json.loads(kv.value)["node_id"])
                self.is_controller = kv.value == self._controller_value
            elif key.startswith(PARTITIONS_PREFIX):
                topic_id_text, index_text = key[len(PARTITIONS_PREFIX) :].decode().split("/")
                state = PartitionState.from_json(kv.value)
                state_key = (uuid.UUID(topic_id_text), int(index_text))
                known = self.states.get(state_key)
                if known is not None and known.mod_revision >= kv.mod_revision:
                    return  # our own change, applied when it was made
                self.states[state_key] = StoredState(state, kv.mod_revision)
                if not initial:
                    self._apply_roles()
            elif key == METADATA_KEY and initial:
                self._replace_metadata(kv)
            elif key.startswith(OFFLINE_REPLICAS_PREFIX):
                node_id = int(key[len(OFFLINE_REPLICAS_PREFIX) :])
                self._apply_offline_replicas(node_id, offline_replicas_from_json(kv.value))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            log.error("ignoring unreadable %r in etcd: %s", key, exc)

    def _apply_delete(self, key: bytes) -> None:
        if key.startswith(BROKERS_PREFIX):
            try:
                node_id = int(key[len(BROKERS_PREFIX) :])
            except ValueError:
                return
            self.brokers.pop(node_id, None)
            log.info("broker %d left the cluster", node_id)
            self._leadership_dirty.set()
        elif key == CONTROLLER_KEY:
            self.controller_id = NO_LEADER
            self.is_controller = False
            self._leadership_dirty.set()
        elif key.startswith(OFFLINE_REPLICAS_PREFIX):
            try:
                node_id = int(key[len(OFFLINE_REPLICAS_PREFIX) :])
            except ValueError:
                return
            self._apply_offline_replicas(node_id, frozenset())

    # -- roles ---------------------------------------------------------------------

    def _partitions_changed(self) -> None:
        self._apply_roles()

    def _apply_roles(self) -> None:
        now_ms = monotonic_ms()
        active: dict[int, set[tuple[str, int]]] = {}
        for key, replica in self.broker.partitions.items():
            topic = replica.topic
            state = self.partition_state(topic, replica.index)
            replication = replica.replication
            if not isinstance(replication, Replication):
                replication = Replication(
                    node_id=self.node_id,
                    replica=replica,
                    replicas=tuple(topic.replicas(replica.index, self.node_id)),
                    state=PartitionState(NO_LEADER, -1, ()),
                    high_watermark=0,
                    fenced=self.fenced,
                )
                replica.replication = replication
            replication.replicas = tuple(topic.replicas(replica.index, self.node_id))
            if state.leader == self.node_id:
                replication.become_leader(state, now_ms)
            else:
                if replication.state != state:
                    replication.become_follower(state)
                fetcher = self._fetcher(state.leader) if state.leader != NO_LEADER else None
                if fetcher is not None:
                    fetcher.follow(key, FollowedPartition(replica, replication, state.leader_epoch))
                    active.setdefault(state.leader, set()).add(key)
        for leader_id, fetcher in self.fetchers.items():
            for key in list(fetcher.partitions):
                if key not in active.get(leader_id, set()):
                    fetcher.unfollow(key)
        for listener in self.broker.leadership_listeners:
            listener()

    def _fetcher(self, leader_id: int) -> ReplicaFetcher | None:
        """The fetcher from `leader_id`, started on first use (None once stopping)."""
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            if self._nursery is None:
                return None
            fetcher = ReplicaFetcher(
                self.node_id,
                leader_id,
                lambda: self._address_of(leader_id),
                f"{REPLICA_CLIENT_ID_PREFIX}{self.node_id}-{self.replication_token}",
                frame_bytes_max=self.broker.config.limits.frame_bytes_max,
                now_ms=wall_clock_ms,  # record timestamps: the log's clock
            )
            self.fetchers[leader_id] = fetcher
            self._nursery.start_soon(fetcher.run)
        return fetcher

    def _address_of(self, node_id: int) -> tuple[str, int] | None:
        info = self.brokers.get(node_id)
        return None if info is None else (info.host, info.port)

    # -- leader and controller duties --------------------------------------------

    async def _housekeeping(self) -> None:
        while True:
            with trio.move_on_after(HOUSEKEEPING_INTERVAL_S):
                await self._leadership_dirty.wait()
            self._leadership_dirty = trio.Event()
            try:
                await self._maintain_isr()
                if self.is_controller:
                    await self._elect_leaders()
            except EtcdError as exc:
                log.warning("etcd: %s", exc)
            except Exception:  # a bug here must not stop the broker: log, go on
                log.exception("leader and controller duties failed; retrying")

    async def _maintain_isr(self) -> None:
        if self.fenced():
            return
        now_ms = monotonic_ms()
        now_s = trio.current_time()
        disconnected = self._disconnected_followers(now_s)
        for replica in list(self.broker.partitions.values()):
            replication = replica.replication
            if not isinstance(replication, Replication):
                continue
            if replication.state.leader != self.node_id:
                continue
            replication.advance_high_watermark()
            # The current assignment, not the replication's view (a metadata change
            # may not have reached it): a replica a move removed never rejoins.
            replicas = replica.topic.replicas(replica.index, self.node_id)
            isr = replication.state.isr
            lagging = replication.lagging_followers(now_ms, self.replica_lag_time_max_ms)
            lagging += [r for r in isr if r in disconnected and r not in lagging]
            joining = [
                r
                for r in replication.caught_up_followers(now_ms, self.replica_lag_time_max_ms)
                if r in self.brokers and r in replicas and r not in disconnected
            ]
            # An ELR left over from a higher min.insync.replicas holds the HW back.
            stale_elr = bool(replication.state.elr) and (
                len(isr) >= replication.min_insync_replicas()
            )
            if lagging or joining or stale_elr:
                await self._change_isr(replica, replication, lagging, joining)
            elif replication.cut_off(now_s, self.replica_lag_time_max_ms):
                await self._abdicate(replica, replication)

    async def _change_isr(
        self,
        replica: PartitionReplica,
        replication: Replication,
        lagging: list[int],
        joining: list[int],
    ) -> None:
        isr = [r for r in replication.state.isr if r not in lagging] + joining
        if not await self._swap_isr(replica, replication, isr):
            return
        name = f"{replica.topic.name}-{replica.index}"
        if lagging:
            self.isr_shrinks_total += 1
            log.info("%s: ISR shrinks by %s", name, lagging)
        if joining:
            self.isr_expands_total += 1
            log.info("%s: ISR gains %s", name, joining)
        if replication.state.elr:
            log.info("%s: eligible leader replicas %s", name, list(replication.state.elr))

    async def _swap_isr(
        self, replica: PartitionReplica, replication: Replication, isr: list[int]
    ) -> bool:
        new_state = change_isr(
            replication.state,
            isr,
            min_isr=replication.min_insync_replicas(),
            replicas=replica.topic.replicas(replica.index, self.node_id),
        )
        if not await self._swap_as_leader(replica, new_state):
            return False
        replication.become_leader(new_state, monotonic_ms())
        return True

    async def _swap_as_leader(self, replica: PartitionReplica, new_state: PartitionState) -> bool:
        """Compare-and-swap the state of a partition this broker leads, guarded by
        its own registration: a leader whose lease ended changes nothing."""
        topic = replica.topic
        stored = self.states.get((topic.topic_id, replica.index))
        key = partition_key(topic.topic_id, replica.index)
        guard = (
            Compare.mod_revision_is(key, stored.mod_revision)
            if stored is not None
            else Compare.absent(key)
        )
        result = await self.etcd.txn(
            [
                guard,
                Compare.create_revision_is(broker_key(self.node_id), self.registration_revision),
            ],
            [Put(key, new_state.to_json())],
        )
        if not result.succeeded:
            return False
        self.states[(topic.topic_id, replica.index)] = StoredState(new_state, result.revision)
        return True

    async def _abdicate(self, replica: PartitionReplica, replication: Replication) -> None:
        """No follower reached this leader for replica_lag_time_max_ms and its ISR is
        below min.insync.replicas: hand leadership to an eligible replica that is
        alive (`abdicate`), which the followers may reach, and follow it."""
        before = replication.state
        new_state = abdicate(
            before,
            replica.topic.replicas(replica.index, self.node_id),
            frozenset(self.brokers),
            min_isr=replication.min_insync_replicas(),
        )
        if new_state is None or not await self._swap_as_leader(replica, new_state):
            return
        self.leader_abdications_total += 1
        log.warning("%s-%d: no follower fetched for %d ms and ISR %s is below "
                    "min.insync.replicas: broker %d leads now (epoch %d), ELR %s",
                    replica.topic.name, replica.index, self.replica_lag_time_max_ms,
                    list(before.isr), new_state.leader, new_state.leader_epoch,
                    list(new_state.elr))  # fmt: skip
        self._apply_roles()

    # -- followers' fetch connections (as a leader) -------------------------------

    def follower_connected(self, replica_id: int, connection: ConnectionEnd | None) -> None:
        """A replica fetch of `replica_id` came on `connection`. When that connection
        closes (a killed follower's kernel closes it at once) and no fetch follows
        within replica_disconnect_grace_ms, the follower leaves the ISR of every
        partition this broker leads, without waiting for replica_lag_time_max_ms."""
        self._follower_disconnected_s.pop(replica_id, None)
        if connection is None or self._follower_connections.get(replica_id) is connection:
            return
        self._follower_connections[replica_id] = connection
        connection.on_close(lambda: self._follower_connection_closed(replica_id, connection))

    def _follower_connection_closed(self, replica_id: int, connection: ConnectionEnd) -> None:
        if self._follower_connections.get(replica_id) is not connection:
            return  # an older connection: the follower fetches on a newer one
        del self._follower_connections[replica_id]
        self._follower_disconnected_s[replica_id] = trio.current_time()
        self._leadership_dirty.set()

    def _disconnected_followers(self, now_s: float) -> set[int]:
        grace_s = self.replica_disconnect_grace_ms / 1000
        return {r for r, at_s in self._follower_disconnected_s.items() if now_s - at_s >= grace_s}

    async def _campaign(self) -> None:
        while True:
            if self.controller_id == NO_LEADER and not self.fenced():
                result = await self._try_campaign()
                if result:
                    self.controller_elections_total += 1
                    self.is_controller = True
                    self.controller_id = self.node_id
                    log.info("broker %d is the active controller", self.node_id)
                    self._leadership_dirty.set()
            await trio.sleep(HOUSEKEEPING_INTERVAL_S)

    async def _try_campaign(self) -> bool:
        try:
            result = await self.etcd.txn(
                [Compare.absent(CONTROLLER_KEY)],
                [Put(CONTROLLER_KEY, self._controller_value, lease_id=self.lease_id)],
            )
        except EtcdError as exc:
            log.warning("controller campaign: %s", exc)
            return False
        return result.succeeded

    async def _elect_leaders(self) -> None:
        alive = frozenset(self.brokers)
        for topic in self.broker.controller.topics():
            config = self.broker.log_config(topic)
            unclean = config.unclean_leader_election_enable
            for index in range(topic.partition_count):
                replicas = topic.replicas(index, self.node_id)
                state = self.partition_state(topic, index)
                offline = self.offline_holders(topic.topic_id, index)
                new_state = elect_leader_without_offline(
                    state,
                    replicas,
                    alive,
                    offline,
                    unclean=unclean,
                    min_isr=config.min_insync_replicas,
                )
                if new_state is not None:
                    await self.swap_partition_state(topic, index, new_state, as_controller=True)
            for index in list(topic.reassignments):
                await self._finish_reassignment(topic, index)

    async def _finish_reassignment(self, topic: TopicRecord, index: int) -> None:
        """A move is done once every target replica is in sync: the ISR keeps only
        target replicas, a leader outside the target hands over to the first target
        replica in sync (new leader epoch), then the assignment becomes the target."""
        target, _ = topic.reassignments[index]
        state = self.partition_state(topic, index)
        if not set(target) <= set(state.isr):
            return
        isr = [r for r in state.isr if r in target]
        leader = state.leader if state.leader in target else next(r for r in target if r in isr)
        if isr != list(state.isr) or leader != state.leader:
            moved = PartitionState(
                leader=leader,
                leader_epoch=state.leader_epoch + (leader != state.leader),
                isr=tuple(isr),
                partition_epoch=state.partition_epoch + 1,
            )
            if not await self.swap_partition_state(topic, index, moved, as_controller=True):
                return
        await self.broker.topic_changes.commit_metadata(
            lambda: self.broker.controller.stage_finish_reassignment(topic.name, index)
        )
        log.info("%s-%d: replicas moved to %s", topic.name, index, target)

    async def _balance_preferred_leaders(self) -> None:
        """Kafka's auto.leader.rebalance.enable: every
        `leader_imbalance_check_interval_ms`, the active controller hands leadership
        back to the preferred replicas of imbalanced brokers (`preferred_leader_rebalance`)."""
        config = self.broker.config
        if not config.auto_leader_rebalance_enable:
            return
        while True:
            await trio.sleep(config.leader_imbalance_check_interval_ms / 1000)
            if not self.is_controller or self.fenced():
                continue
            try:
                await self._elect_preferred_leaders(config.leader_imbalance_per_broker_percentage)
            except EtcdError as exc:
                log.warning("preferred leader balance: etcd: %s", exc)
            except Exception:  # a bug here must not stop the broker: log, check again
                log.exception("preferred leader balance failed; checking again later")

    def _leaderships(self) -> dict[tuple[uuid.UUID, int], PartitionLeadership]:
        """Every partition's replicas and state, as the preferred-leader balance reads them."""
        return {
            (topic.topic_id, index): PartitionLeadership(
                replicas=tuple(topic.replicas(index, self.node_id)),
                state=self.partition_state(topic, index),
                moving=index in topic.reassignments,
            )
            for topic in self.broker.controller.topics()
            for index in range(topic.partition_count)
        }

    async def _elect_preferred_leaders(self, imbalance_percentage: int) -> None:
        leaderships = self._leaderships()
        elections = preferred_leader_rebalance(
            leaderships, frozenset(self.brokers), imbalance_percentage
        )
        for (topic_id, index), new_state in elections:
            previous = leaderships[(topic_id, index)].state
            # Each swap awaits etcd: what changed since the decision (the partition's
            # state, its topic, a move begun, the controller key) waits for the next check.
            topic = self.broker.controller.topic_by_id(topic_id)
            if (
                not self.is_controller
                or topic is None
                or index in topic.reassignments
                or self.partition_state(topic, index) != previous
                or new_state.leader in self.offline_holders(topic_id, index)
            ):
                continue
            if await self.swap_partition_state(topic, index, new_state, as_controller=True):
                self.preferred_leader_elections_total += 1
                log.info("%s-%d: leadership back to preferred replica %d (from %d): "
                         "automatic leader rebalance", topic.name, index, new_state.leader,
                         previous.leader)  # fmt: skip

    def preferred_imbalance_count(self) -> int:
        """Partitions not led by their preferred replica (Kafka's
        PreferredReplicaImbalanceCount), cluster-wide view."""
        imbalance = preferred_imbalance(self._leaderships().values())
        return sum(i.not_led for i in imbalance.values())

    async def swap_partition_state(
        self, topic: TopicRecord, index: int, new_state: PartitionState, *, as_controller: bool
    ) -> bool:
        """Compare-and-swap the partition's state; the controller's swaps also
        require that it still holds the controller key."""
        key = partition_key(topic.topic_id, index)
        stored = self.states.get((topic.topic_id, index))
        guard = (
            Compare.mod_revision_is(key, stored.mod_revision)
            if stored is not None
            else Compare.absent(key)
        )
        guards = [guard]
        if as_controller:
            guards.append(Compare.value_is(CONTROLLER_KEY, self._controller_value))
        result = await self.etcd.txn(guards, [Put(key, new_state.to_json())])
        if not result.succeeded:
            return False
        self.states[(topic.topic_id, index)] = StoredState(new_state, result.revision)
        log.info("%s-%d: leader %d (epoch %d), ISR %s", topic.name, index, new_state.leader,
                 new_state.leader_epoch, list(new_state.isr))  # fmt: skip
        self._apply_roles()
        return True

    async def elect(self, topic: TopicRecord, index: int, *, unclean: bool) -> ErrorCode:
        """ElectLeaders for one partition: the preferred replica (the first), or
        with `unclean` any live replica when no in-sync one is alive."""
        replicas = topic.replicas(index, self.node_id)
        state = self.partition_state(topic, index)
        # A replica reported offline can lead no more than a dead broker's.
        alive = frozenset(self.brokers) - self.offline_holders(topic.topic_id, index)
        outcome: PartitionState | ErrorCode | None
        if not unclean:
            outcome = elect_preferred(state, replicas, alive)
        elif state.leader in alive:
            outcome = ErrorCode.ELECTION_NOT_NEEDED
        else:
            outcome = elect_leader(state, replicas, alive, unclean=True)
            if outcome is None or outcome.leader == NO_LEADER:
                outcome = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        if isinstance(outcome, ErrorCode):
            return outcome
        try:
            swapped = await self.swap_partition_state(topic, index, outcome, as_controller=False)
        except EtcdError as exc:
            log.warning("election of %s-%d: %s", topic.name, index, exc)
            return ErrorCode.REQUEST_TIMED_OUT
        if not swapped:
            return ErrorCode.REQUEST_TIMED_OUT  # the state changed meanwhile: ask again
        return ErrorCode.NONE

    # -- replicas offline after a storage error ------------------------------------

    def replica_failed(self, key: tuple[str, int], reason: str) -> None:
        """The broker's hook for a local log that failed: taken offline by
        `_report_offline_replicas` right after, outside the log's own call."""
        self._failed_replicas[key] = reason
        self._offline_changed.set()

    def offline_holders(self, topic_id: uuid.UUID, index: int) -> frozenset[int]:
        """Live brokers that reported their replica of this partition offline."""
        key = (topic_id, index)
        return frozenset(n for n, keys in self.offline_replicas.items() if key in keys)

    async def _report_offline_replicas(self) -> None:
        """Take failed local replicas offline (they stop leading and following at
        once), then keep `offline_replicas/<node id>` in etcd equal to the broker's
        offline replicas (written again after each new registration: the previous
        one's lease took it). The controller then moves their leaderships and
        drops them from their ISRs."""
        while True:
            with trio.move_on_after(HOUSEKEEPING_INTERVAL_S):
                await self._offline_changed.wait()
            self._offline_changed = trio.Event()
            if self._failed_replicas:
                self._take_failed_replicas_offline()
            try:
                await self._publish_offline_replicas()
            except EtcdError as exc:
                log.warning("could not report offline replicas to etcd: %s", exc)

    def _take_failed_replicas_offline(self) -> None:
        failed, self._failed_replicas = self._failed_replicas, {}
        for key, reason in failed.items():
            replica = self.broker.take_replica_offline(key, reason)
            if replica is not None and isinstance(replica.replication, Replication):
                replica.replication.go_offline()
        self._apply_roles()  # the fetchers let go of them

    async def _publish_offline_replicas(self) -> None:
        registration = self.registration_revision
        if self._leaving or registration == 0:
            return
        keys = []
        for name, index in self.broker.offline_partitions:
            topic = self.broker.controller.topic(name)
            if topic is not None:
                keys.append((topic.topic_id, index))
        document = offline_replicas_to_json(keys)
        if self._offline_published == (registration, document):
            return
        result = await self.etcd.txn(
            [Compare.create_revision_is(broker_key(self.node_id), registration)],
            [Put(offline_replicas_key(self.node_id), document, lease_id=self.lease_id)],
        )
        if result.succeeded:
            self._offline_published = (registration, document)
            if keys:
                log.warning("reported %d offline replicas to the controller", len(keys))

    def _apply_offline_replicas(self, node_id: int, keys: frozenset[ReplicaKey]) -> None:
        """Another broker's (or this one's) offline replicas: as leader, stop
        counting such a follower as fetching; as controller, elect without them."""
        added = keys - self.offline_replicas.get(node_id, frozenset())
        if keys:
            self.offline_replicas[node_id] = keys
        else:
            self.offline_replicas.pop(node_id, None)
        for replica in self.broker.partitions.values():
            replication = replica.replication
            if (replica.topic.topic_id, replica.index) in added and isinstance(
                replication, Replication
            ):
                replication.forget_follower(node_id)
        if added:
            log.info("broker %d reports %d offline replicas", node_id, len(added))
        self._leadership_dirty.set()

    def follower_lag_samples(
        self, *, in_seconds: bool = False
    ) -> list[tuple[dict[str, str], float]]:
        """Per follower of each partition this broker leads: records behind the log
        end, or (`in_seconds`) time since it was last caught up."""
        samples = []
        now_ms = monotonic_ms()
        for (name, index), replica in sorted(self.broker.partitions.items()):
            replication = replica.replication
            if not isinstance(replication, Replication) or not replication.is_leader:
                continue
            end = replica.log.log_end_offset
            for follower, progress in sorted(replication.followers.items()):
                if in_seconds:
                    lag = max(now_ms - progress.caught_up_ms, 0) / 1000
                else:
                    lag = end - progress.log_end_offset if progress.log_end_offset >= 0 else end
                labels = {"topic": name, "partition": str(index), "follower": str(follower)}
                samples.append((labels, float(lag)))
        return samples

    def leader_counts(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for topic in self.broker.controller.topics():
            for index in range(topic.partition_count):
                leader = self.partition_state(topic, index).leader
                counts[leader] = counts.get(leader, 0) + 1
        return counts

    def partitions_matching(self, under_replicated: bool) -> Iterable[tuple[TopicRecord, int]]:
        for topic in self.broker.controller.topics():
            for index in range(topic.partition_count):
                state = self.partition_state(topic, index)
                replicas = topic.replicas(index, self.node_id)
                matches = (
                    len(state.isr) < len(replicas)
                    if under_replicated
                    else state.leader == NO_LEADER
                )
                if matches:
                    yield topic, index


def register_cluster_metrics(broker: Broker, member: ClusterMember) -> None:
    metrics = broker.metrics

    def partition_gauge(under_replicated: bool) -> list[tuple[dict[str, str], float]]:
        return [({}, float(sum(1 for _ in member.partitions_matching(under_replicated))))]

    metrics.register_gauge(
        "weir_under_replicated_partitions",
        "Partitions whose ISR is smaller than their replica list (cluster-wide view).",
        lambda: partition_gauge(True),
    )
    metrics.register_gauge(
        "weir_offline_partitions",
        "Partitions without a leader (cluster-wide view).",
        lambda: partition_gauge(False),
    )
    metrics.register_gauge(
        "weir_partition_leaders",
        "Partitions each broker leads (cluster-wide view).",
        lambda: [
            ({"node_id": str(n)}, float(c)) for n, c in sorted(member.leader_counts().items())
        ],
    )
    metrics.register_gauge(
        "weir_active_controller",
        "1 on the active controller, else 0.",
        lambda: [({}, 1.0 if member.is_controller else 0.0)],
    )
    metrics.register_gauge(
        "weir_broker_fenced",
        "1 while this broker's etcd lease may have ended (it acts as leader of nothing).",
        lambda: [({}, 1.0 if member.fenced() else 0.0)],
    )
    metrics.register_counter(
        "weir_broker_fencings_total",
        "Times this broker became fenced (no lease renewal answered within its TTL).",
        lambda: member.fencings_total,
    )
    metrics.register_counter_family(
        "weir_etcd_watch_restarts_total",
        "Times this broker's etcd watch was opened again, by reason: broken (the "
        "stream ended or failed), behind (the audit found changes it had not "
        "delivered), compacted (its revision was compacted: everything read again).",
        "reason",
        lambda: member.watch_restarts,
    )
    metrics.register_counter(
        "weir_controller_elections_total",
        "Times this broker became the active controller.",
        lambda: member.controller_elections_total,
    )
    metrics.register_counter(
        "weir_isr_shrinks_total",
        "ISR shrinks made by this broker as leader.",
        lambda: member.isr_shrinks_total,
    )
    metrics.register_counter(
        "weir_isr_expands_total",
        "ISR expansions made by this broker as leader.",
        lambda: member.isr_expands_total,
    )
    metrics.register_counter(
        "weir_preferred_leader_elections_total",
        "Partitions whose leadership this broker, as the active controller, handed back "
        "to their preferred replica (auto_leader_rebalance_enable).",
        lambda: member.preferred_leader_elections_total,
    )
    metrics.register_gauge(
        "weir_preferred_replica_imbalance_partitions",
        "Partitions whose leader is not their preferred (first) replica (cluster-wide view).",
        lambda: [({}, float(member.preferred_imbalance_count()))],
    )
    metrics.register_counter(
        "weir_leader_abdications_total",
        "Leaderships this broker handed to an eligible replica because no follower "
        "reached it while its ISR was below min.insync.replicas.",
        lambda: member.leader_abdications_total,
    )
    metrics.register_gauge(
        "weir_follower_lag_messages",
        "Per partition this broker leads, each follower's distance from the log end.",
        member.follower_lag_samples,
    )
    metrics.register_gauge(
        "weir_follower_lag_seconds",
        "Per partition this broker leads, how long ago each follower was last caught up "
        "(past replica_lag_time_max_ms it leaves the ISR).",
        lambda: member.follower_lag_samples(in_seconds=True),
    )
