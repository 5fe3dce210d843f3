"""Topic changes made off the event loop: creating, growing and deleting topics,
topic configs, producer-id blocks, and every metadata change's commit
(`commit_metadata`); in a cluster, the local replicas made to match the metadata.

The handlers decide at once and await these in their Deferred. Each runs its file
work on the disk executor and changes memory on the Trio thread only once the disk
agrees; the order of the broker's synchronous versions (`Broker.create_topic`, ...)
is kept (create: directories, then the metadata save, the commit point; delete: the
save first). Changes run one at a time and check their plan again under the lock,
so a create that lost a race to another one answers TOPIC_ALREADY_EXISTS and never
touches the winner's directories.

In a cluster the metadata changes under this broker (another broker creates a
topic, the controller moves a replica): after every change the local replicas are
made to match it (`reconcile_local_partitions`). Created, deleted and grown topics
all go this way, the local broker's own changes included (saved first, then
materialised here).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Protocol

import trio

from weir.broker.metrics import Metrics
from weir.broker.partition_replica import PartitionReplica
from weir.broker.roles import ClusterRole, MetadataConflictError
from weir.controller.controller import Controller, ControllerError, MetadataChange
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.log.config import LogConfig
from weir.log.disk_executor import DiskExecutor, DiskJob
from weir.log.manager import LogManager
from weir.log.partition import PartitionLog
from weir.log.partition_metadata import PartitionIdentity, read_partition_metadata_or_none
from weir.txn.producer_ids import ProducerIdAllocator

log = logging.getLogger(__name__)

# Attempts of one metadata change that keeps losing its compare-and-swap.
METADATA_SAVE_ATTEMPTS_MAX = 8


class TopicHost(Protocol):
    """What topic changes need of the broker (`Broker`, which owns them)."""

    controller: Controller
    log_manager: LogManager
    disk: DiskExecutor
    metadata_lock: trio.Lock
    producer_ids: ProducerIdAllocator
    partitions: dict[tuple[str, int], PartitionReplica]
    offline_partitions: dict[tuple[str, int], str]
    metrics: Metrics
    cluster: ClusterRole | None
    on_partitions_changed: Callable[[], None] | None

    def log_config(self, topic: TopicRecord) -> LogConfig: ...

    def local_indexes(self, topic: TopicRecord) -> list[int]: ...

    def new_replica(
        self, topic: TopicRecord, index: int, partition_log: PartitionLog
    ) -> PartitionReplica: ...

    def apply_log_config(self, name: str) -> None: ...

    def check_descriptor_budget(self, added_partitions: int) -> None: ...


class TopicChanges:
    """The broker's topic and metadata changes, one at a time (see the module)."""

    def __init__(self, broker: TopicHost) -> None:
        self._broker = broker
        # The broker's parts that never change (the cluster role is set later).
        self._controller = broker.controller
        self._log_manager = broker.log_manager
        self._disk = broker.disk
        self._metadata_lock = broker.metadata_lock
        self._producer_ids = broker.producer_ids
        self._partitions = broker.partitions
        self._offline_partitions = broker.offline_partitions
        # One topic change (create, delete, add partitions, configs) at a time, as
        # Kafka's controller: each is checked again once it holds the lock.
        self._lock = trio.Lock()

    async def commit_metadata(self, stage: Callable[[], MetadataChange | None]) -> None:
        """Stage a controller change (it may raise ControllerError), save it on the
        disk executor, apply it. Shielded once staged: memory follows the disk."""
        async with self._metadata_lock:
            if self._broker.cluster is not None:
                await self._commit_to_cluster(stage, self._broker.cluster)
                return
            change = stage()
            if change is None:
                return
            with trio.CancelScope(shield=True):
                await self._disk.run(DiskJob.METADATA_SAVE, partial(self._controller.save, change))
                change.apply()

    async def _commit_to_cluster(
        self, stage: Callable[[], MetadataChange | None], cluster: ClusterRole
    ) -> None:
        """A cluster's metadata is saved by compare-and-swap in etcd; when another
        broker changed it first, the change is staged again over the new metadata
        (it may now be refused: a topic created meanwhile)."""
        for _ in range(METADATA_SAVE_ATTEMPTS_MAX):
            change = stage()
            if change is None:
                return
            try:
                with trio.CancelScope(shield=True):
                    await cluster.save_metadata(change)
                    change.apply()
                return
            except MetadataConflictError:
                continue
        raise ControllerError(
            ErrorCode.NOT_CONTROLLER, "the cluster metadata kept changing; try again"
        )

    async def create_topic(self, plan: Callable[[], TopicRecord]) -> TopicRecord:
        """`plan()` (checked again now, may raise) is created all or nothing, as
        `Broker.create_topic`; raises ControllerError or OSError."""
        async with self._lock:
            record = plan()
            if self._broker.cluster is not None:
                await self.commit_metadata(lambda: self._controller.stage_add_topic(record))
                await self._reconcile_local_partitions()
                return record
            indexes = self._broker.local_indexes(record)
            logs = await self._build_partitions(record, indexes)
            try:
                await self.commit_metadata(lambda: self._controller.stage_add_topic(record))
            except BaseException:
                await self._discard_built(record, indexes, logs)
                raise
            self._serve_built(record, indexes, logs)
        return record

    async def increase_partitions(
        self,
        name: str,
        count: int,
        check: Callable[[], None],
        assignments: Sequence[Sequence[int]] = (),
    ) -> None:
        """Add partitions up to `count` after `check()` (again, under the lock)."""
        async with self._lock:
            check()
            record = self._controller.topic(name)
            assert record is not None, "check() found the topic"
            if self._broker.cluster is not None:
                await self.commit_metadata(
                    lambda: self._controller.stage_increase_partitions(name, count, assignments)
                )
                await self._reconcile_local_partitions()
                return
            added = range(record.partition_count, count)
            logs = await self._build_partitions(record, added)
            try:
                await self.commit_metadata(
                    lambda: self._controller.stage_increase_partitions(name, count)
                )
            except BaseException:
                await self._discard_built(record, added, logs)
                raise
            self._serve_built(record, added, logs)

    async def delete_topic(self, name: str) -> TopicRecord:
        """As `Broker.delete_topic`: the save first, then the logs stop and their
        directories go on the disk executor. Raises ControllerError or OSError."""
        async with self._lock:
            removed: list[TopicRecord] = []

            def stage() -> MetadataChange:
                change, record = self._controller.stage_remove_topic(name)
                removed.append(record)
                return change

            await self.commit_metadata(stage)
            record = removed[-1]  # the staging that was saved (a conflict restages)
            if self._broker.cluster is not None:
                await self._reconcile_local_partitions()
                return record
            keys = [(record.name, index) for index in range(record.partition_count)]
            failed = await self._remove_retired(*self._retire_partitions(keys))
            if not failed:
                try:
                    await self.commit_metadata(
                        lambda: self._controller.stage_forget_deletions([record.topic_id])
                    )
                except OSError as exc:
                    log.warning("could not record that %s is fully deleted: %s", name, exc)
        return record

    async def set_topic_configs(
        self, name: str, overrides_now: Callable[[], Mapping[str, str]]
    ) -> None:
        """Store the overrides `overrides_now()` computes when the change's turn
        comes (from the topic's configs then: concurrent changes all count)."""
        async with self._lock:
            await self.commit_metadata(
                lambda: self._controller.stage_set_topic_configs(name, overrides_now())
            )
            self._broker.apply_log_config(name)

    async def reserve_producer_ids(self) -> None:
        """Reserve the next block of producer ids (a metadata save) and hand it
        to the allocator."""
        size = self._producer_ids.block_size
        firsts: list[int] = []

        def stage() -> MetadataChange:
            change, first = self._controller.stage_allocate_producer_ids(size)
            firsts.append(first)
            return change

        await self.commit_metadata(stage)
        self._producer_ids.add_block(firsts[-1])  # the staging that was saved (the last)

    async def _build_partitions(
        self, record: TopicRecord, indexes: Sequence[int]
    ) -> list[PartitionLog]:
        config = self._broker.log_config(record)
        identity = PartitionIdentity(record.topic_id, record.name)
        leftover_ids = frozenset(self._controller.deleting_topic_ids)
        manager = self._log_manager

        def build() -> list[PartitionLog]:
            built: list[PartitionLog] = []
            try:
                for index in indexes:
                    self._clear_way_off_loop(record.name, index, leftover_ids)
                    built.append(manager.build_log(record.name, index, config, identity))
                manager.sync_data_directory()
            except BaseException:
                for partition_log in built:
                    partition_log.retire()  # known to nobody yet: safe off the loop
                directories = [manager.directory_of(record.name, i) for i in indexes]
                manager.remove_retired(directories[: len(built)], built)
                raise
            return built

        with trio.CancelScope(shield=True):
            built = await self._disk.run(DiskJob.PARTITIONS_CREATE, build)
        return built

    def _clear_way_off_loop(
        self, name: str, index: int, leftover_ids: frozenset[uuid.UUID]
    ) -> None:
        """`Broker._clear_way_for` on the disk executor (the topic is not served yet)."""
        directory = self._log_manager.directory_of(name, index)
        if not directory.exists():
            return
        identity = read_partition_metadata_or_none(directory)
        if identity is not None and identity.topic_id in leftover_ids:
            log.info("removing %s, left from a deleted topic", directory.name)
            self._log_manager.remove_directory(directory)
        else:
            self._log_manager.set_aside(directory, f"a new partition {name}-{index} goes there")

    async def _discard_built(
        self, record: TopicRecord, indexes: Sequence[int], logs: list[PartitionLog]
    ) -> None:
        for partition_log in logs:
            partition_log.retire()
        directories = [self._log_manager.directory_of(record.name, i) for i in indexes]
        with trio.CancelScope(shield=True):
            failed = await self._disk.run(
                DiskJob.PARTITIONS_REMOVE,
                partial(self._log_manager.remove_retired, directories, logs),
            )
        for directory, exc in failed:
            log.warning("could not remove the new %s: %s", directory.name, exc)

    def _serve_built(
        self, record: TopicRecord, indexes: Sequence[int], logs: list[PartitionLog]
    ) -> None:
        for index, partition_log in zip(indexes, logs, strict=True):
            self._log_manager.adopt(record.name, index, partition_log)
            self._partitions[(record.name, index)] = self._broker.new_replica(
                record, index, partition_log
            )

    def _retire_partitions(
        self, keys: Iterable[tuple[str, int]]
    ) -> tuple[list[Path], list[PartitionLog]]:
        """Stop serving these partitions (waking their long-polls) and retire their
        logs: the directories and logs to remove."""
        directories = []
        logs = []
        keys = list(keys)
        for name, index in keys:
            replica = self._partitions.pop((name, index), None)
            self._offline_partitions.pop((name, index), None)
            if replica is not None:
                replica.wake_fetchers()
                replica.wake_followers()
            partition_log = self._log_manager.retire(name, index)
            if partition_log is not None:
                logs.append(partition_log)
            directories.append(self._log_manager.directory_of(name, index))
        served = {topic for topic, _ in self._partitions}
        for name in {name for name, _ in keys} - served:
            self._broker.metrics.forget_topic(name)
        return directories, logs

    async def _remove_retired(
        self, directories: list[Path], logs: list[PartitionLog]
    ) -> list[tuple[Path, OSError]]:
        """Remove retired partitions' files on the disk executor (not cancellable
        halfway); each failure is logged and left for the next start."""
        with trio.CancelScope(shield=True):
            failed = await self._disk.run(
                DiskJob.PARTITIONS_REMOVE,
                partial(self._log_manager.remove_retired, directories, logs),
            )
        for directory, exc in failed:
            log.warning("%s: removing its files failed (%s); the next start "
                        "removes them", directory.name, exc)  # fmt: skip
        return failed

    async def auto_create_topic(self, name: str) -> TopicRecord:
        """A topic with defaults (the caller checked auto-creation is on), or
        the one another request created meanwhile."""

        def plan() -> TopicRecord:
            record = self._controller.plan_topic(name, -1, -1)
            self._broker.check_descriptor_budget(record.partition_count)
            return record

        existing = self._controller.topic(name)
        if existing is not None:
            return existing
        try:
            record = await self.create_topic(plan)
        except ControllerError as exc:
            existing = self._controller.topic(name)
            if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and existing is not None:
                return existing
            raise
        log.info("auto-created topic %s with %d partitions", name, record.partition_count)
        return record

    async def reconcile_local_partitions(self) -> None:
        """In a cluster: make the local replicas match the metadata (the cluster
        member's call after every change it applied)."""
        async with self._lock:
            await self._reconcile_local_partitions()

    async def _reconcile_local_partitions(self) -> None:
        wanted = {
            (topic.name, index): topic
            for topic in self._controller.topics()
            for index in self._broker.local_indexes(topic)
        }
        await self._retire_unwanted(wanted)
        for key, replica in self._partitions.items():
            topic = wanted[key]
            if replica.topic is not topic:
                replica.topic = topic
                replica.log.config = self._broker.log_config(topic)
        missing: dict[str, list[int]] = {}
        for key in wanted:
            if key not in self._partitions and key not in self._offline_partitions:
                missing.setdefault(key[0], []).append(key[1])
        for name, indexes in missing.items():
            record = wanted[(name, indexes[0])]
            logs = await self._build_partitions(record, indexes)
            self._serve_built(record, indexes, logs)
        if self._broker.on_partitions_changed is not None:
            self._broker.on_partitions_changed()

    async def _retire_unwanted(self, wanted: Mapping[tuple[str, int], TopicRecord]) -> None:
        gone = [
            key
            for key, replica in self._partitions.items()
            if key not in wanted or wanted[key].topic_id != replica.topic.topic_id
        ]
        if not gone:
            return
        await self._remove_retired(*self._retire_partitions(gone))
