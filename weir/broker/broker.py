"""The broker's state: topics, the partition replicas this node holds, and the
wake-ups that connect appends to waiting fetches."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import trio

from weir.broker.config import BrokerConfig
from weir.broker.descriptor_budget import DescriptorBudget, open_files_limit
from weir.broker.loop_lag import LAG_SECONDS_BUCKETS, EventLoopLag
from weir.broker.metrics import GaugeSample, HistogramSample, Metrics
from weir.broker.partition_replica import PartitionReplica
from weir.broker.quotas import QuotaManager
from weir.broker.roles import (
    ClusterRole,
    InternalStateOwner,
    OAuthBearerKeysRole,
    OffsetsTopicPlanner,
)
from weir.broker.topic_changes import TopicChanges
from weir.controller.controller import (
    Controller,
    ControllerError,
    TopicDefaults,
)
from weir.controller.metadata import (
    EmbeddedMetadataStore,
    MetadataMissingError,
    MetadataStore,
    TopicRecord,
)
from weir.controller.partition_state import NO_LEADER
from weir.format.errors import ErrorCode
from weir.log.config import LogConfig
from weir.log.descriptors import shared_log_files
from weir.log.disk_executor import DiskExecutor, DiskJob
from weir.log.errors import LogDamaged
from weir.log.filesystem_sync import (
    FilesystemWatch,
    SyncfsHelper,
    load_syncfs,
    resolve_fsync_method,
)
from weir.log.flusher import ROUND_SECONDS_BUCKETS, GroupFlusher
from weir.log.manager import LogManager, partition_directories
from weir.log.partition import PartitionLog
from weir.log.partition_metadata import PartitionIdentity, read_partition_metadata_or_none
from weir.security.acl import AclBinding, Authorizer
from weir.txn.producer_ids import ProducerIdAllocator

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _identity(topic: TopicRecord) -> PartitionIdentity:
    return PartitionIdentity(topic.topic_id, topic.name)


def _refuse_unknown_partition_data(store: EmbeddedMetadataStore, data_dir: Path) -> None:
    """Without its metadata document, every partition directory would look
    unknown: refuse to start rather than set all the data aside."""
    if store.exists():
        return
    found = partition_directories(data_dir)
    if found:
        raise MetadataMissingError(
            f"{store.path} is missing, but {data_dir} holds {len(found)} partition "
            f"directories (e.g. {found[0]}) whose topics it named. Restore it from a "
            f"backup, or rebuild it from the partition directories with `weir repair "
            f"--data-dir {data_dir} --rebuild-metadata --execute` (topic configs return "
            "to their defaults), or move those directories away."
        )


def _within_budget(config: BrokerConfig, budget: DescriptorBudget) -> BrokerConfig:
    """The config with connections_max lowered to what the open files limit allows."""
    if budget.connections_max >= config.limits.connections_max:
        return config
    log.warning("open files limit %d is too low for connections_max %d: accepting at most %d "
                "connections; raise `ulimit -n`", budget.limit, config.limits.connections_max,
                budget.connections_max)  # fmt: skip
    return replace(config, limits=replace(config.limits, connections_max=budget.connections_max))


def _open_files_count() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def build_flusher(config: BrokerConfig) -> GroupFlusher:
    """The broker's group-commit flusher, with the configured fsync method."""
    settings = config.log_settings()
    window_bytes = settings.page_cache_window_bytes
    watch: FilesystemWatch | None = None
    if not settings.unsafe_skip_fsync and resolve_fsync_method(settings.fsync_method) == "syncfs":
        syncfs = load_syncfs()
        assert syncfs is not None, "resolve_fsync_method checked it"
        watch = FilesystemWatch(config.data_dir, syncfs)
    return GroupFlusher(
        fsync_enabled=not settings.unsafe_skip_fsync,
        filesystem=watch,
        syncfs_helper=SyncfsHelper(watch) if watch is not None else None,
        page_cache_window_bytes=window_bytes if window_bytes >= 0 else None,
        group_commit_delay_ms=settings.group_commit_delay_ms,
    )


class Broker:
    def __init__(self, config: BrokerConfig, metadata_store: MetadataStore | None = None) -> None:
        """`metadata_store`: a cluster's (etcd, loaded); else the embedded one."""
        self.descriptor_budget = DescriptorBudget.plan(open_files_limit(), config.limits)
        self.config = _within_budget(config, self.descriptor_budget)
        shared_log_files().resize(self.descriptor_budget.log_files)
        self.metrics = Metrics()
        if metadata_store is None:
            embedded = EmbeddedMetadataStore(config.data_dir)
            _refuse_unknown_partition_data(embedded, config.data_dir)
        store = metadata_store or embedded
        self.controller = Controller(
            store,
            node_id=config.node_id,
            defaults=TopicDefaults(partition_count=config.default_partition_count),
            check_topic_configs=LogConfig.from_overrides,
        )
        self.producer_ids = ProducerIdAllocator(self.controller.allocate_producer_ids)
        self.flusher = build_flusher(config)
        self.log_manager = LogManager(config.data_dir, self.flusher, config.log_settings())
        self.partitions: dict[tuple[str, int], PartitionReplica] = {}
        # Partitions the metadata names whose logs are damaged: why, for each.
        self.offline_partitions: dict[tuple[str, int], str] = {}
        # Consumer groups: set by weir.broker.coordinators.group_service.attach_group_service
        # (named by what the broker itself needs of it, so broker.py does not
        # import the service that imports it).
        self.groups: OffsetsTopicPlanner | None = None
        # Transactions: set by weir.broker.coordinators.transaction_service (the same
        # need: room for `__transaction_state` before it is created).
        self.transactions: OffsetsTopicPlanner | None = None
        # Share groups' partition-leader side: set by
        # weir.broker.coordinators.share_service (room for `__share_group_state`).
        self.shares: OffsetsTopicPlanner | None = None
        # Services serving state from internal topics: health and metrics report the
        # partitions each cannot serve (see InternalStateOwner).
        self.internal_state_owners: list[InternalStateOwner] = []
        # Set when this broker is one of a cluster over etcd (weir.broker.cluster.cluster_member).
        self.cluster: ClusterRole | None = None
        # Called after the local replicas changed (the cluster member gives them roles).
        self.on_partitions_changed: Callable[[], None] | None = None
        # Called after the cluster member changed which local replicas lead.
        self.leadership_listeners: list[Callable[[], None]] = []
        # The ACL authorizer when `security.authorizer_enabled` (the app builds it
        # from the metadata's bindings and keeps it current); None: all allowed.
        self.authorizer: Authorizer | None = None
        self.controller.acl_listeners.append(self._follow_acls)
        # Client quotas: what each request is measured on, and its throttle.
        self.quotas = QuotaManager(self.controller, self.metrics)
        # OAUTHBEARER's token validator when that mechanism is enabled (the app).
        self.oauthbearer: OAuthBearerKeysRole | None = None
        self.ready = False
        self._closing = False
        self.loop_lag = EventLoopLag()
        # Every file operation other than appends and group-commit fsyncs runs there.
        self.disk = DiskExecutor()
        # One metadata save at a time, each applied before the next is staged.
        self.metadata_lock = trio.Lock()
        # Topic and metadata changes off the event loop, one at a time.
        self.topic_changes = TopicChanges(self)
        self._register_gauges()

    def _follow_acls(self, bindings: Sequence[AclBinding]) -> None:
        """The controller's ACLs changed (saved here, or another broker's document)."""
        if self.authorizer is not None:
            self.authorizer.replace_bindings(bindings)

    # -- lifecycle -------------------------------------------------------

    def open_logs(self) -> None:
        """Open (and recover) every partition log the metadata names, after
        setting aside partition directories it does not name. A damaged
        partition goes offline (KAFKA_STORAGE_ERROR); the others serve."""
        known = {
            (topic.name, index): topic.topic_id
            for topic in self.controller.topics()
            for index in self.local_indexes(topic)
        }
        deleting = self.controller.deleting_topic_ids
        self.log_manager.sweep_unknown(known, deleting)
        if deleting and self.cluster is None:  # a cluster's ids are every broker's
            try:
                self.controller.forget_deletions(deleting)
            except OSError as exc:  # the next start sweeps them again
                log.warning("could not record finished deletions: %s", exc)
        for topic in self.controller.topics():
            config = self.log_config(topic)
            for index in self.local_indexes(topic):
                if (
                    self.cluster is not None
                    and not self.log_manager.directory_of(topic.name, index).exists()
                ):
                    continue  # created by the cluster member (assigned while away)
                self._open_existing(topic, index, config)

    def local_indexes(self, topic: TopicRecord) -> list[int]:
        """The partitions of `topic` with a replica on this broker."""
        node_id = self.config.node_id
        return [
            index
            for index in range(topic.partition_count)
            if node_id in topic.replicas(index, node_id)
        ]

    def _open_existing(self, topic: TopicRecord, index: int, config: LogConfig) -> None:
        key = (topic.name, index)
        try:
            partition_log = self.log_manager.open_existing(
                topic.name, index, config, _identity(topic)
            )
        except LogDamaged as exc:
            self.offline_partitions[key] = exc.problem
            log.error(
                "%s-%d is offline: %s. Its files are untouched. With the broker stopped, "
                "`weir repair --data-dir %s` shows what a repair would keep and skip "
                "(offsets are never reused); add --execute to apply it.",
                topic.name, index, exc.problem, self.config.data_dir,
            )  # fmt: skip
            return
        self.partitions[key] = self.new_replica(topic, index, partition_log)

    def new_replica(
        self, topic: TopicRecord, index: int, partition_log: PartitionLog
    ) -> PartitionReplica:
        partition_log.on_failure = partial(self._log_failed, (topic.name, index))
        return PartitionReplica(topic, index, partition_log)

    def _log_failed(self, key: tuple[str, int], error: OSError) -> None:
        """A log's failure hook. In a cluster the replica goes offline here and its
        partition is served by the other replicas (Kafka's failed log directory);
        a single broker keeps it, refusing writes with KAFKA_STORAGE_ERROR and
        serving reads of what it holds, until a restart."""
        if self.cluster is not None and not self._closing:
            self.cluster.replica_failed(key, f"a write or fsync failed: {error}")

    def take_replica_offline(self, key: tuple[str, int], reason: str) -> PartitionReplica | None:
        """Stop serving a replica whose log failed (the cluster member's call, once
        the failure surfaced): it joins `offline_partitions` until a restart opens
        its log again, and its long-polls wake. The log stays open (and unwritten:
        it refuses writes) until shutdown, which closes it without a clean-shutdown
        marker, so the next start recovers it."""
        replica = self.partitions.pop(key, None)
        if replica is None:
            return None
        self.offline_partitions[key] = reason
        log.error("%s-%d is offline on this broker: %s. Its other replicas serve it; "
                  "restart the broker once the disk is fixed.", key[0], key[1], reason)  # fmt: skip
        replica.wake_fetchers()
        replica.wake_followers()
        return replica

    def close(self, timeout_s: float | None = None, *, threads_count: int = 1) -> None:
        """Close every log, then the flusher. `timeout_s` and `threads_count`:
        see `LogManager.close_all` (threads only once no Trio task is left)."""
        self._closing = True  # a failure while closing concerns nobody any more
        self.log_manager.close_all(timeout_s, threads_count=threads_count)
        self.flusher.close()

    async def run_retention(self) -> None:
        """Retention, producer-state expiry and compaction passes, and the
        durable-offset checkpoints, until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.log_manager.run_durable_checkpoints, self.disk)
            await self._run_retention_passes()

    async def _run_retention_passes(self) -> None:
        await self.log_manager.run_retention()

    # -- topics ----------------------------------------------------------

    @staticmethod
    def log_config(topic: TopicRecord) -> LogConfig:
        return LogConfig.from_overrides(topic.configs)

    def partition(self, topic: str, index: int) -> PartitionReplica | None:
        return self.partitions.get((topic, index))

    def lookup(self, topic: str, index: int) -> PartitionReplica | ErrorCode:
        """The partition when this broker leads it, or the error to answer for it
        (see below)."""
        replica = self.partitions.get((topic, index))
        if replica is None:
            return self.missing_partition_error(topic, index)
        if not replica.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return replica

    def missing_partition_error(self, topic: str, index: int) -> ErrorCode:
        """The error for a partition `partition()` did not find: offline
        (damaged log), led by another broker of the cluster, or unknown."""
        if (topic, index) in self.offline_partitions and not self._led_elsewhere(topic, index):
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.cluster is not None:
            record = self.controller.topic(topic)
            if record is not None and 0 <= index < record.partition_count:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def _led_elsewhere(self, topic: str, index: int) -> bool:
        """In a cluster: another broker leads the partition (its replica here is offline)."""
        record = self.controller.topic(topic)
        if self.cluster is None or record is None or not 0 <= index < record.partition_count:
            return False
        leader = self.cluster.partition_state(record, index).leader
        return leader not in (NO_LEADER, self.config.node_id)

    def create_topic(self, record: TopicRecord) -> None:
        """All or nothing: the partition directories are created first, then the
        metadata is saved (the commit point); on any failure what was created is
        removed and the metadata is unchanged. A crash in between leaves empty
        directories no topic names, removed at the next start."""
        self._create_partitions(record, range(record.partition_count))
        try:
            self.controller.add_topic(record)
        except BaseException:
            self._discard_partitions(record.name, range(record.partition_count))
            raise

    def _create_partitions(self, record: TopicRecord, indexes: Sequence[int]) -> None:
        config = self.log_config(record)
        created = []
        try:
            for index in indexes:
                self._clear_way_for(record.name, index)
                partition_log = self.log_manager.create(
                    record.name, index, config, _identity(record)
                )
                created.append(index)
                self.partitions[(record.name, index)] = self.new_replica(
                    record, index, partition_log
                )
        except BaseException:
            self._discard_partitions(record.name, created)
            raise

    def _discard_partitions(self, name: str, indexes: Iterable[int]) -> None:
        """Undo `_create_partitions` (the partitions are new and hold nothing)."""
        for index in indexes:
            self.partitions.pop((name, index), None)
            try:
                self.log_manager.delete(name, index)
            except OSError as exc:
                log.warning("could not remove the new %s-%d: %s", name, index, exc)

    def _clear_way_for(self, name: str, index: int) -> None:
        """A directory where a new partition goes is left from a deletion that
        failed midway (removed) or of unknown origin (set aside, never deleted)."""
        directory = self.log_manager.directory_of(name, index)
        if not directory.exists():
            return
        identity = read_partition_metadata_or_none(directory)
        if identity is not None and identity.topic_id in self.controller.deleting_topic_ids:
            log.info("removing %s, left from a deleted topic", directory.name)
            self.log_manager.delete(name, index)
        else:
            self.log_manager.set_aside(directory, f"a new partition {name}-{index} goes there")

    def apply_log_config(self, name: str) -> None:
        record = self.controller.topic(name)
        assert record is not None
        config = self.log_config(record)
        for index in range(record.partition_count):
            replica = self.partitions.get((name, index))
            if replica is not None:
                replica.log.config = config

    def auto_create_topic(self, name: str) -> TopicRecord | None:
        """Create a topic with defaults when auto-creation is on; None when not allowed."""
        if not self.config.auto_create_topics:
            return None
        record = self.controller.plan_topic(name, -1, -1)
        self.check_descriptor_budget(record.partition_count)
        self.create_topic(record)
        log.info("auto-created topic %s with %d partitions", name, record.partition_count)
        return record

    def check_descriptor_budget(self, added_partitions: int) -> None:
        """Refuse (POLICY_VIOLATION) partitions the open files limit cannot serve
        all at once (weir/broker/descriptor_budget.py). Call before anything is written."""
        reserved = sum(
            owner.partitions_not_created
            for owner in (self.groups, self.transactions, self.shares)
            if owner is not None
        )
        held = len(self.partitions) + len(self.offline_partitions) + reserved
        refusal = self.descriptor_budget.refusal(added_partitions, held)
        if refusal is not None:
            raise ControllerError(ErrorCode.POLICY_VIOLATION, refusal)

    def delete_topic(self, name: str) -> None:
        """The metadata change is the commit point (when it fails, nothing
        changed). Then the logs close and their directories go; a directory
        that cannot be removed now is removed at the next start."""
        record = self.controller.remove_topic(name)
        self.metrics.forget_topic(name)
        removed_all = True
        for index in range(record.partition_count):
            replica = self.partitions.pop((name, index), None)
            self.offline_partitions.pop((name, index), None)
            if replica is not None:
                replica.wake_fetchers()
            try:
                self.log_manager.delete(name, index)
            except OSError as exc:
                removed_all = False
                log.warning("%s-%d: removing its files failed (%s); the next start "
                            "removes them", name, index, exc)  # fmt: skip
        if removed_all:
            try:
                self.controller.forget_deletions([record.topic_id])
            except OSError as exc:
                log.warning("could not record that %s is fully deleted: %s", name, exc)

    def increase_partitions(self, name: str, count: int) -> None:
        record = self.controller.topic(name)
        assert record is not None, "plan_partition_increase checks the topic exists"
        added = range(record.partition_count, count)
        self._create_partitions(record, added)
        try:
            self.controller.increase_partitions(name, count)
        except BaseException:
            self._discard_partitions(name, added)
            raise

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self.controller.set_topic_configs(name, configs)
        self.apply_log_config(name)

    # -- metrics ---------------------------------------------------------

    def _register_flusher_metrics(self) -> None:
        flusher = self.flusher
        self.metrics.register_histogram(
            "weir_fsync_round_seconds",
            "Duration of group-commit fsync rounds (every acknowledged produce waits for one).",
            lambda: HistogramSample(
                list(zip(ROUND_SECONDS_BUCKETS, flusher.round_times.bucket_counts, strict=True)),
                flusher.round_times.seconds_total,
                flusher.round_times.count,
            ),
        )
        self.metrics.register_counter(
            "weir_page_cache_evicted_bytes_total",
            "Synced log bytes evicted from the page cache behind page_cache_window_bytes.",
            lambda: flusher.page_cache_dropped_bytes,
        )
        self.metrics.register_counter(
            "weir_syncfs_helper_starts_total",
            "Starts of the syncfs helper process (more than one: it died and was replaced).",
            lambda: flusher.syncfs_helper.starts_count if flusher.syncfs_helper else 0,
        )

    def _register_descriptor_metrics(self) -> None:
        budget = self.descriptor_budget
        cache = shared_log_files()
        self.metrics.register_gauge(
            "weir_open_files",
            "File descriptors the process holds (sockets included).",
            lambda: [({}, float(_open_files_count()))],
        )
        self.metrics.register_gauge(
            "weir_open_files_limit",
            "The soft RLIMIT_NOFILE the descriptor budget splits.",
            lambda: [({}, float(budget.limit))],
        )
        self.metrics.register_gauge(
            "weir_log_files_open",
            "Log file descriptors open through the cache (held and pinned included).",
            lambda: [({}, float(cache.open_count))],
        )
        self.metrics.register_gauge(
            "weir_log_files_capacity",
            "Log file descriptors the cache may hold: the limit less what is reserved.",
            lambda: [({}, float(cache.capacity))],
        )
        self.metrics.register_counter(
            "weir_log_file_evictions_total",
            "Log files the cache closed to make room for another.",
            lambda: cache.evictions_count,
        )
        self.metrics.register_gauge(
            "weir_partitions_max",
            "Partitions the descriptor budget admits (CreateTopics past it: POLICY_VIOLATION).",
            lambda: [({}, float(budget.partitions_max))],
        )

    def _register_disk_executor_metrics(self) -> None:
        disk = self.disk
        for job in DiskJob:
            self.metrics.register_counter(
                f"weir_disk_executor_{job.value}_jobs_total",
                f"Jobs of kind {job.value} run on the disk executor's worker threads.",
                partial(lambda kind: disk.jobs_count[kind], job),
            )
        self.metrics.register_gauge(
            "weir_disk_executor_jobs_running",
            "Disk executor jobs running or queued for one of its threads.",
            lambda: [({}, float(disk.running_count))],
        )

    def _register_gauges(self) -> None:
        self._register_flusher_metrics()
        self._register_disk_executor_metrics()
        lag = self.loop_lag
        self.metrics.register_histogram(
            "weir_event_loop_lag_seconds",
            "How late the event loop woke a probe due every 10 ms: what every "
            "connection waited for whatever ran on the loop then.",
            lambda: HistogramSample(
                list(zip(LAG_SECONDS_BUCKETS, lag.bucket_counts, strict=True)),
                lag.seconds_total,
                lag.count,
            ),
        )
        self._register_descriptor_metrics()
        self.metrics.register_gauge(
            "weir_partition_corrupt_batches_read",
            "Stored batches that failed their CRC32C when read back, per partition "
            "since it was opened (the broker logs an ERROR for each).",
            lambda: self._partition_samples(lambda r: r.log.corrupt_batches_read),
        )
        self.metrics.register_gauge(
            "weir_partitions_offline",
            "Partition replicas this broker holds but cannot serve: a damaged log (until "
            "`weir repair`) or, in a cluster, a failed write or fsync (until a restart).",
            lambda: [({}, len(self.offline_partitions))],
        )
        self.metrics.register_gauge(
            "weir_internal_partitions_unavailable",
            "Partitions of an internal topic whose state this broker should serve but "
            "cannot (its log failed; in a cluster: fenced, or not loaded yet).",
            lambda: [
                ({"topic": owner.internal_topic_name}, len(owner.unavailable_partitions()))
                for owner in self.internal_state_owners
            ],
        )
        self.metrics.register_gauge(
            "weir_partition_log_end_offset",
            "Next offset to be assigned, per partition.",
            lambda: self._partition_samples(lambda r: r.log.log_end_offset),
        )
        self.metrics.register_gauge(
            "weir_partition_high_watermark",
            "Offset up to which records are committed (durable), per partition.",
            lambda: self._partition_samples(lambda r: r.high_watermark),
        )
        self.metrics.register_gauge(
            "weir_partition_last_stable_offset",
            "Offset up to which read_committed consumers read (the first offset of the "
            "oldest open transaction, else the high watermark), per partition.",
            lambda: self._partition_samples(lambda r: r.last_stable_offset),
        )
        self.metrics.register_gauge(
            "weir_partition_log_start_offset",
            "First offset still in the log, per partition.",
            lambda: self._partition_samples(lambda r: r.log.log_start_offset),
        )
        self.metrics.register_gauge(
            "weir_topics", "Topics in the cluster.", lambda: [({}, len(self.controller.topics()))]
        )

    def internal_partitions_unavailable(self) -> dict[str, str]:
        """`topic-partition` -> why, over every internal-state owner (/health/ready)."""
        return {
            f"{owner.internal_topic_name}-{partition}": reason
            for owner in self.internal_state_owners
            for partition, reason in sorted(owner.unavailable_partitions().items())
        }

    def _partition_samples(self, value_of: object) -> Iterable[GaugeSample]:
        assert callable(value_of)
        for (topic, index), replica in sorted(self.partitions.items()):
            yield {"topic": topic, "partition": str(index)}, float(value_of(replica))
