"""One broker of a cluster over etcd: its registration and lease (fenced once the
lease may have ended), the view of the cluster it keeps (live brokers, the
controller, partition states, the metadata revision), the metadata it saves, the
roles of its local replicas, and the housekeeping that drives its duties. Its parts:
the key layout (`etcd_layout`), the watch that keeps the view current
(`metadata_watch`), a leader's duties (`leader_duties`), the controller's
(`controller_duties`), and replicas offline after a storage error
(`offline_replicas`)."""

from __future__ import annotations

import json
import logging
import secrets
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.cluster.controller_duties import ControllerDuties
from weir.broker.cluster.etcd_client import (
    Compare,
    EtcdClient,
    EtcdError,
    KeyValue,
    Put,
)
from weir.broker.cluster.etcd_layout import (
    METADATA_KEY,
    PREFIX,
    StoredState,
    broker_key,
)
from weir.broker.cluster.leader_duties import LeaderDuties
from weir.broker.cluster.metadata_watch import WATCH_RESTART_REASONS, EtcdWatch
from weir.broker.cluster.offline_replicas import OfflineReplicas
from weir.broker.cluster.peer_client import peer_security
from weir.broker.cluster.replication import (
    REPLICA_CLIENT_ID_PREFIX,
    FollowedPartition,
    ReplicaFetcher,
    Replication,
    monotonic_ms,
)
from weir.broker.config import BrokerConfig
from weir.broker.partition_replica import PartitionReplica
from weir.broker.roles import ConnectionEnd, MetadataConflictError
from weir.controller.controller import ControllerError, MetadataChange
from weir.controller.metadata import (
    MetadataCorruptError,
    TopicRecord,
    metadata_from_json,
    metadata_to_json,
)
from weir.controller.partition_state import (
    NO_LEADER,
    BrokerInfo,
    PartitionLeadership,
    PartitionState,
    initial_state,
    preferred_imbalance,
)
from weir.format.errors import ErrorCode

log = logging.getLogger(__name__)

# How often leaders check their followers' lag and the controller its partitions.
HOUSEKEEPING_INTERVAL_S = 0.5
LEAVE_TIMEOUT_S = 1.0


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
        self.metadata_revision = metadata_revision
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id = NO_LEADER
        self.states: dict[tuple[uuid.UUID, int], StoredState] = {}
        self.replication_token = secrets.token_hex(16)
        self.controller_value = json.dumps(
            {"node_id": self.node_id, "token": secrets.token_hex(8)}
        ).encode()
        self.is_controller = False
        self.leaving = False
        self.lease_id = 0
        self.registration_revision = 0
        self._lease_valid_until = 0.0
        # Fencing as the roles last saw it (see `_check_fencing`).
        self._fenced_seen = False
        self.fencings_total = 0
        # The watch's restarts by reason.
        self.watch_restarts: Counter[str] = Counter(dict.fromkeys(WATCH_RESTART_REASONS, 0))
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._nursery: trio.Nursery | None = None
        self._leadership_dirty = trio.Event()
        self._reconcile_wanted = trio.Event()
        self.controller_elections_total = 0
        self.isr_shrinks_total = 0
        self.isr_expands_total = 0
        # This broker's HTTP API (set by the app once it listens), registered so the
        # other brokers can ask it for its statistics (`BrokerInfo.http_url`).
        self.http_url = ""
        self.preferred_leader_elections_total = 0
        self.leader_abdications_total = 0
        self.offline = OfflineReplicas(self)
        self.watch = EtcdWatch(self)
        self.as_leader = LeaderDuties(self)
        self.as_controller = ControllerDuties(self)
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
        self.as_leader.record_follower_fetch(replica, replica_id, fetch_offset)

    def follower_connected(self, replica_id: int, connection: ConnectionEnd | None) -> None:
        self.as_leader.follower_connected(replica_id, connection)

    async def elect(self, topic: TopicRecord, index: int, *, unclean: bool) -> ErrorCode:
        return await self.as_controller.elect(topic, index, unclean=unclean)

    def replica_failed(self, key: tuple[str, int], reason: str) -> None:
        self.offline.replica_failed(key, reason)

    def offline_holders(self, topic_id: uuid.UUID, index: int) -> frozenset[int]:
        return self.offline.holders(topic_id, index)

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
            self.replace_metadata(kv)
        raise MetadataConflictError()

    async def leave(self) -> None:
        """At shutdown: stop leading and revoke the lease, so the registration (and
        the controller key) go at once and the controller moves this broker's
        leaderships now rather than after the session timeout."""
        self.leaving = True
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
            self.watch.apply_put(kv, initial=True)
        await self._register()
        try:
            await self._run_tasks(revision + 1, task_status)
        finally:
            self._nursery = None  # stopping: start no fetcher any more

    async def _run_tasks(self, watch_from: int, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self.broker.topic_changes.reconcile_local_partitions()
            self.apply_roles()
            nursery.start_soon(self._keep_lease)
            nursery.start_soon(self._watch_fencing)
            nursery.start_soon(self.watch.run, watch_from)
            nursery.start_soon(self.as_controller.campaign)
            nursery.start_soon(self._housekeeping)
            nursery.start_soon(self._reconcile_own_changes)
            nursery.start_soon(self.watch.audit)
            nursery.start_soon(self.as_controller.balance_preferred_leaders)
            nursery.start_soon(self.offline.run)
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
            listeners=tuple(
                (listener.name, listener.advertised_host, listener.advertised_port)
                for listener in config.kafka_listeners
            ),
            http_url=self.http_url,
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
            self.wake_housekeeping()

    async def _keep_lease(self) -> None:
        ttl_s = max(1, self.session_timeout_ms // 1000)
        interval_s = ttl_s / 3
        while not self.leaving:
            await trio.sleep(interval_s)
            if self.leaving:
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
                self.apply_roles()
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
        while not self.leaving:
            await trio.sleep(max(self._lease_valid_until - trio.current_time(), 0.0) + 0.05)
            self._check_fencing()

    def _check_fencing(self) -> None:
        """Apply the roles again when fencing began or ended: a fenced broker acts as
        leader of nothing (its internal-topic owners unload what they serve), and a
        lease renewed in time (etcd came back before it ended) makes it the leader it
        still is in etcd again (they load it back), without a restart."""
        fenced = self.fenced()
        if fenced == self._fenced_seen or self.leaving:
            return
        self._fenced_seen = fenced
        if fenced:
            self.fencings_total += 1
            log.warning("broker %d is fenced: its etcd lease may have ended (no renewal "
                        "answered), so it acts as leader of nothing", self.node_id)  # fmt: skip
        else:
            log.warning("broker %d renewed its etcd lease: it acts on its roles again",
                        self.node_id)  # fmt: skip
        self.apply_roles()

    def replace_metadata(self, kv: KeyValue) -> None:
        try:
            metadata = metadata_from_json(kv.value)
        except MetadataCorruptError as exc:
            log.error("unreadable cluster metadata in etcd (revision %d): %s",
                      kv.mod_revision, exc)  # fmt: skip
            return
        self.broker.controller.replace_metadata(metadata)
        self.metadata_revision = kv.mod_revision
        self._reconcile_wanted.set()  # whichever path brought it: replicas follow

    # -- roles ---------------------------------------------------------------------

    def _partitions_changed(self) -> None:
        self.apply_roles()

    def apply_roles(self) -> None:
        """Make every local replica lead, follow its leader or do neither, as the
        partition states say (after anything that may change many roles: fencing, a
        registration, the metadata, a broker's offline replicas)."""
        now_ms = monotonic_ms()
        active: dict[int, set[tuple[str, int]]] = {}
        for key, replica in self.broker.partitions.items():
            followed_leader = self._apply_role(replica, now_ms)
            if followed_leader is not None:
                active.setdefault(followed_leader, set()).add(key)
        for leader_id, fetcher in self.fetchers.items():
            for key in list(fetcher.partitions):
                if key not in active.get(leader_id, set()):
                    fetcher.unfollow(key)
        self._notify_leadership_listeners()

    def apply_role_of(self, topic_id: uuid.UUID, index: int) -> None:
        """`apply_roles` for one partition whose state changed: the others are as
        they were. A failover changes thousands of states one etcd event at a time,
        and each event passing over every local replica made it quadratic."""
        topic = self.broker.controller.topic_by_id(topic_id)
        replica = None if topic is None else self.broker.partitions.get((topic.name, index))
        if replica is not None:
            key = (replica.topic.name, replica.index)
            followed_leader = self._apply_role(replica, monotonic_ms())
            for leader_id, fetcher in self.fetchers.items():
                if leader_id != followed_leader and key in fetcher.partitions:
                    fetcher.unfollow(key)
        self._notify_leadership_listeners()

    def _apply_role(self, replica: PartitionReplica, now_ms: int) -> int | None:
        """One local replica's role; the leader it now follows, or None."""
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
            return None
        if replication.state != state:
            replication.become_follower(state)
        fetcher = self._fetcher(state.leader) if state.leader != NO_LEADER else None
        if fetcher is None:
            return None
        key = (topic.name, replica.index)
        fetcher.follow(key, FollowedPartition(replica, replication, state.leader_epoch))
        return state.leader

    def _notify_leadership_listeners(self) -> None:
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
                security=peer_security(self.broker.config),
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
                await self.as_leader.maintain_isr()
                if self.is_controller:
                    await self.as_controller.elect_leaders()
            except EtcdError as exc:
                log.warning("etcd: %s", exc)
            except Exception:  # a bug here must not stop the broker: log, go on
                log.exception("leader and controller duties failed; retrying")

    def wake_housekeeping(self) -> None:
        """Run the leader's and controller's duties now (something they act on changed)."""
        self._leadership_dirty.set()

    def _leaderships(self) -> dict[tuple[uuid.UUID, int], PartitionLeadership]:
        return self.as_controller.leaderships()

    def preferred_imbalance_count(self) -> int:
        """Partitions not led by their preferred replica (Kafka's
        PreferredReplicaImbalanceCount), cluster-wide view."""
        imbalance = preferred_imbalance(self._leaderships().values())
        return sum(i.not_led for i in imbalance.values())

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
