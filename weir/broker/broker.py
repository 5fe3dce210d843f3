"""The broker's state: topics, the partition replicas this node holds, and the
wake-ups that connect appends to waiting fetches."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import trio

from weir.broker.config import BrokerConfig
from weir.broker.descriptor_budget import DescriptorBudget, open_files_limit
from weir.broker.metrics import GaugeSample, HistogramSample, Metrics
from weir.controller.controller import Controller, ControllerError, TopicDefaults
from weir.controller.metadata import EmbeddedMetadataStore, TopicRecord
from weir.log.config import LogConfig
from weir.log.descriptors import shared_log_files
from weir.log.filesystem_sync import (
    FilesystemWatch,
    SyncfsHelper,
    load_syncfs,
    resolve_fsync_method,
)
from weir.log.flusher import ROUND_SECONDS_BUCKETS, GroupFlusher
from weir.log.manager import LogManager
from weir.log.partition import PartitionLog
from weir.txn.producer_ids import ProducerIdAllocator
from weir.wire.errors import ErrorCode

if TYPE_CHECKING:
    from weir.broker.group_service import GroupService

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(eq=False)
class PartitionReplica:
    """One partition this broker leads: its log and the fetches parked on it."""

    topic: TopicRecord
    index: int
    log: PartitionLog
    waiters: set[trio.Event] = field(default_factory=set)

    @property
    def leader_epoch(self) -> int:
        return self.topic.leader_epochs[self.index]

    @property
    def high_watermark(self) -> int:
        # Single node: a record is committed once it is durable on the leader.
        return self.log.durable_end_offset

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320 fencing of a client's view of the leader epoch (-1: not checked)."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def wake_fetchers(self) -> None:
        for event in self.waiters:
            event.set()
        self.waiters.clear()


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
    window_bytes = config.page_cache_window_bytes if config.page_cache_window_bytes >= 0 else None
    watch: FilesystemWatch | None = None
    if not config.unsafe_skip_fsync and resolve_fsync_method(config.fsync_method) == "syncfs":
        syncfs = load_syncfs()
        assert syncfs is not None, "resolve_fsync_method checked it"
        watch = FilesystemWatch(config.data_dir, syncfs)
    return GroupFlusher(
        fsync_enabled=not config.unsafe_skip_fsync,
        filesystem=watch,
        syncfs_helper=SyncfsHelper(watch) if watch is not None else None,
        page_cache_window_bytes=window_bytes,
        group_commit_delay_ms=config.group_commit_delay_ms,
    )


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.descriptor_budget = DescriptorBudget.plan(open_files_limit(), config.limits)
        self.config = _within_budget(config, self.descriptor_budget)
        shared_log_files().resize(self.descriptor_budget.log_files)
        self.metrics = Metrics()
        self.controller = Controller(
            EmbeddedMetadataStore(config.data_dir),
            node_id=config.node_id,
            defaults=TopicDefaults(partition_count=config.default_partition_count),
        )
        self.producer_ids = ProducerIdAllocator(self.controller.allocate_producer_ids)
        self.flusher = build_flusher(config)
        self.log_manager = LogManager(config.data_dir, self.flusher)
        self.partitions: dict[tuple[str, int], PartitionReplica] = {}
        # Consumer groups: set by weir.broker.group_service.attach_group_service.
        self.groups: GroupService | None = None
        self.ready = False
        self._register_gauges()

    # -- lifecycle -------------------------------------------------------

    def open_logs(self) -> None:
        """Open (and recover) every partition log the metadata names."""
        for topic in self.controller.topics():
            config = self.log_config(topic)
            for index in range(topic.partition_count):
                self._attach(topic, index, config)

    def close(self) -> None:
        self.log_manager.close_all()
        self.flusher.close()

    async def run_retention(self) -> None:
        """Retention, producer-state expiry and compaction passes, until cancelled."""
        await self.log_manager.run_retention(
            self.config.retention_check_interval_ms,
            compaction_interval_ms=self.config.log_cleaner_backoff_ms,
        )

    # -- topics ----------------------------------------------------------

    @staticmethod
    def log_config(topic: TopicRecord) -> LogConfig:
        return LogConfig.from_overrides(topic.configs)

    def partition(self, topic: str, index: int) -> PartitionReplica | None:
        return self.partitions.get((topic, index))

    def create_topic(self, record: TopicRecord) -> None:
        self.controller.add_topic(record)
        config = self.log_config(record)
        for index in range(record.partition_count):
            self._attach(record, index, config, fresh=True)

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
        reserved = self.groups.partitions_not_created if self.groups is not None else 0
        refusal = self.descriptor_budget.refusal(added_partitions, len(self.partitions) + reserved)
        if refusal is not None:
            raise ControllerError(ErrorCode.POLICY_VIOLATION, refusal)

    def delete_topic(self, name: str) -> None:
        record = self.controller.remove_topic(name)
        for index in range(record.partition_count):
            replica = self.partitions.pop((name, index), None)
            if replica is not None:
                replica.wake_fetchers()
            self.log_manager.delete(name, index)

    def increase_partitions(self, name: str, count: int) -> None:
        record = self.controller.topic(name)
        assert record is not None, "plan_partition_increase checks the topic exists"
        old_count = record.partition_count
        self.controller.increase_partitions(name, count)
        config = self.log_config(record)
        for index in range(old_count, count):
            self._attach(record, index, config, fresh=True)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self.controller.set_topic_configs(name, configs)
        record = self.controller.topic(name)
        assert record is not None
        config = self.log_config(record)
        for index in range(record.partition_count):
            replica = self.partitions.get((name, index))
            if replica is not None:
                replica.log.config = config

    def _attach(
        self, topic: TopicRecord, index: int, config: LogConfig, *, fresh: bool = False
    ) -> None:
        """Open the partition's log. `fresh`: the partition is new, so a directory
        already there is left from a deletion a crash interrupted (metadata
        updated, files not yet removed) and must not come back to life."""
        stale = (
            fresh
            and self.log_manager.get(topic.name, index) is None
            and self.log_manager.directory_of(topic.name, index).exists()
        )
        if stale:
            log.warning("removing stale data of a deleted %s-%d", topic.name, index)
            self.log_manager.delete(topic.name, index)
        partition_log = self.log_manager.open(topic.name, index, config)
        self.partitions[(topic.name, index)] = PartitionReplica(topic, index, partition_log)

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

    def _register_gauges(self) -> None:
        self._register_flusher_metrics()
        self._register_descriptor_metrics()
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
            "weir_partition_log_start_offset",
            "First offset still in the log, per partition.",
            lambda: self._partition_samples(lambda r: r.log.log_start_offset),
        )
        self.metrics.register_gauge(
            "weir_topics", "Topics in the cluster.", lambda: [({}, len(self.controller.topics()))]
        )

    def _partition_samples(self, value_of: object) -> Iterable[GaugeSample]:
        assert callable(value_of)
        for (topic, index), replica in sorted(self.partitions.items()):
            yield {"topic": topic, "partition": str(index)}, float(value_of(replica))
