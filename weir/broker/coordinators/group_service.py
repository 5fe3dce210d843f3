"""Consumer groups on this broker: the coordinators, their storage and their timers.

The coordinators in `weir/groupcoord` are pure state machines; this service gives
them what they cannot have themselves:

- storage: their records go to the `__consumer_offsets` partition of the group
  (Kafka's placement, `weir.groupcoord.placement`), appended at once (state and
  log change together, in order) and answered once durable;
- loading: when the offsets topic exists, every partition is read back at start
  and each record handed to its owner (offsets, then KIP-848 groups); records of
  transactional batches are pending offsets of their producer's transaction,
  which the markers read back commit or abort (those without a marker stay
  pending: the transaction coordinator writes it later);
- transactions: TxnOffsetCommit's records are appended as a transactional batch
  of the producer (`commit_transactional_offsets`); the transaction coordinator,
  once it wrote a marker to an offsets partition, calls `complete_transaction`;
- time: a task calls the coordinators' `advance` at their next deadline and
  expires the offsets of groups that stayed empty past `offsets.retention.minutes`.

The offsets topic is created on the first FindCoordinator for a group, as Kafka
does, so a broker that never sees a group keeps no internal topic. It is created
in the background (its file work on the disk executor): until it exists and its
state is loaded, no group is `available` (FindCoordinator answers
COORDINATOR_NOT_AVAILABLE, the other group APIs NOT_COORDINATOR, and clients
retry, as against Kafka). With no topic there is no stored group state, so
what the unloaded coordinators answer to reads (no groups) is true.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.coordinators.group_transactions import TransactionalOffsets, TxnOffsetsVerifier
from weir.broker.coordinators.offsets_topic import (
    OFFSETS_TOPIC_NAME,
    LoadedMarker,
    LoadedRecord,
    adopt_offsets_topic,
    append_group_records_now,
    create_offsets_topic,
    offsets_replica,
    read_group_log,
    wait_group_records,
)
from weir.broker.coordinators.share_configs import share_group_config
from weir.broker.coordinators.state_topic import unserved_partitions
from weir.controller.controller import ControllerError, is_internal_topic
from weir.format.errors import ErrorCode
from weir.format.versioned_records import RecordFormatError
from weir.groupcoord.classic_coordinator import ClassicGroupCoordinator
from weir.groupcoord.committed_offsets import CommittedOffset, OffsetStore
from weir.groupcoord.consumer_coordinator import ConsumerGroupCoordinator
from weir.groupcoord.consumer_group import TopicInfo
from weir.groupcoord.group_configs import GroupConfig, InvalidGroupConfig
from weir.groupcoord.pending import Effects, Pending
from weir.groupcoord.placement import group_partition
from weir.groupcoord.record_schemas import GroupRecord
from weir.groupcoord.settings import GroupSettings
from weir.log.errors import LogError
from weir.sharecoord.share_coordinator import (
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareGroupSettings,
)
from weir.sharecoord.share_group import TopicInfo as ShareTopicInfo
from weir.sharecoord.share_group_records import ShareGroupRecord

log = logging.getLogger(__name__)

# Kafka's default offsets.topic.replication.factor (a cluster uses min(3, brokers)).
OFFSETS_TOPIC_REPLICATION_FACTOR = 3


@dataclass(frozen=True)
class PendingWrite:
    """Records appended but maybe not yet durable: await `durable()` before answering."""

    service: GroupService
    ends: dict[int, int]  # partition -> offset to wait for

    async def durable(self) -> ErrorCode:
        for partition, end_offset in self.ends.items():
            try:
                await wait_group_records(self.service.broker, partition, end_offset)
            except LogError as exc:
                if exc.error_code in (
                    ErrorCode.NOT_COORDINATOR,
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ):
                    # Leadership moved (the role change unloads the partition), or the
                    # ISR is short: the records are in the log, as in memory. Retry.
                    return exc.error_code
                self.service.mark_failed(partition, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            self.service.offsets.promote(partition, end_offset)
        return ErrorCode.NONE


class GroupService(TransactionalOffsets):
    def __init__(self, broker: Broker, settings: GroupSettings) -> None:
        self.broker = broker
        self.settings = settings
        self.offsets = OffsetStore()
        self.consumer_groups = ConsumerGroupCoordinator(settings)
        self.classic = ClassicGroupCoordinator(settings, offsets=self.offsets)
        self.share_groups = ShareGroupCoordinator(
            share_group_settings(settings),
            self._share_topic_info,
            group_config=self._share_group_config,
            other_group_type=self._other_group_type,
        )
        # Connections waiting for a classic JoinGroup/SyncGroup answer.
        self._waiting: dict[Pending[Any], trio.Event] = {}
        self.loaded = False
        self.loaded_event = trio.Event()  # set once group state is loaded
        self._wakeup = trio.Event()
        # Groups with no members (no consumer group, or an empty one): since when.
        self._empty_since_ms: dict[str, int] = {}
        # Offsets partitions whose log failed (a write or fsync error took it
        # offline): their groups' state in memory may be ahead of the log, so they
        # are not served until a restart reloads them from what is durable.
        self._failed_partitions: dict[int, str] = {}
        # Where the offsets topic is created in the background (set by `run`).
        self.background: trio.Nursery | None = None
        self._preparing = False
        self._topic_names_version = -1  # the controller's, when last handed over
        # In a cluster: the offsets partitions this broker leads and has loaded (the
        # coordinator of a group is the leader of its partition). None: a single
        # node, which serves every partition.
        self._led: set[int] | None = None if broker.cluster is None else set()
        # The transaction coordinator's check of a TxnOffsetCommit (see TxnOffsetsCheck).
        self.txn_offsets_verifier: TxnOffsetsVerifier | None = None
        for group_id in broker.controller.metadata.group_configs:
            self.refresh_group_config(group_id)

    @property
    def internal_topic_name(self) -> str:
        return OFFSETS_TOPIC_NAME

    def refresh_group_config(self, group_id: str) -> None:
        """Hand the KIP-848 coordinator the group's stored config overrides (at
        start, and after IncrementalAlterConfigs/AlterConfigs saved a change)."""
        overrides = self.broker.controller.group_configs(group_id)
        try:
            config = GroupConfig.from_overrides(overrides, self.settings) if overrides else None
        except InvalidGroupConfig as exc:
            log.warning("group %r: stored group configs ignored: %s", group_id, exc)
            config = None
        self.consumer_groups.set_group_config(group_id, config)

    # -- the offsets topic ---------------------------------------------------

    @property
    def partition_count(self) -> int:
        topic = self.broker.controller.topic(OFFSETS_TOPIC_NAME)
        return topic.partition_count if topic else self.settings.offsets_topic_partition_count

    @property
    def partitions_not_created(self) -> int:
        """Offsets topic partitions counted in the descriptor budget before they exist."""
        created = self.broker.controller.topic(OFFSETS_TOPIC_NAME) is not None
        return 0 if created else self.settings.offsets_topic_partition_count

    def partition_for(self, group_id: str) -> int:
        return group_partition(group_id, self.partition_count)

    def available(self, group_id: str) -> bool:
        """False until group state is loaded (the offsets topic is being created),
        and once the group's offsets partition failed a write (see __init__). In a
        cluster, only for groups whose offsets partition this broker leads (and
        has loaded)."""
        partition = self.partition_for(group_id)
        if self._led is not None and partition not in self._led:
            return False
        return self.loaded and partition not in self._failed_partitions

    def unavailable_reason(self, group_id: str) -> str:
        if not self.loaded:
            return f"{OFFSETS_TOPIC_NAME} is being created; retry"
        partition = self.partition_for(group_id)
        reason = self.unavailable_partitions().get(partition)
        return reason or f"this broker does not lead {OFFSETS_TOPIC_NAME}-{partition}"

    def mark_failed(self, partition: int, error: Exception) -> None:
        """The partition's log failed: nothing non-durable may be served from memory."""
        if partition not in self._failed_partitions:
            log.error("%s-%d: its log failed (%s): its groups are not served until the "
                      "broker restarts", OFFSETS_TOPIC_NAME, partition, error)  # fmt: skip
            self._failed_partitions[partition] = f"its log failed: {error}"

    def unavailable_partitions(self) -> dict[int, str]:
        """The offsets partitions whose groups this broker should serve but cannot,
        and why (see `unserved_partitions`)."""
        return unserved_partitions(
            self.broker, OFFSETS_TOPIC_NAME, self._led, self._failed_partitions
        )

    def load_if_present(self, now_ms: int) -> None:
        """At start: load group state when the offsets topic already exists, after
        making it the broker's own (a client may have created it, in data dirs
        from before clients were refused; see `adopt_offsets_topic`)."""
        count = self.settings.offsets_topic_partition_count
        if self.broker.cluster is not None:
            return  # a cluster broker loads the partitions it leads (`sync_leadership`)
        if adopt_offsets_topic(self.broker, count) is not None:
            self._load(now_ms)

    def ensure_ready(self, now_ms: int) -> None:
        """On first use, start creating the offsets topic in the background (once
        at a time; a failure is logged and the next use tries again). Never waits:
        groups are `available` once it is done."""
        if self.loaded or self._preparing or self.background is None:
            return
        self._preparing = True
        self.background.start_soon(self._prepare_in_background)

    async def _prepare_in_background(self) -> None:
        try:
            await self.prepare()
        except (ControllerError, LogError, OSError) as exc:
            log.error("cannot create %s: %s", OFFSETS_TOPIC_NAME, exc)

    async def prepare(self) -> None:
        """Create the offsets topic (file work on the disk executor), then load state."""
        self._preparing = True
        try:
            await create_offsets_topic(
                self.broker,
                self.settings.offsets_topic_partition_count,
                self._offsets_replication_factor(),
            )
            if self._led is not None:
                self.loaded = True
                self.loaded_event.set()
                self.sync_leadership()
            elif not self.loaded:
                self._load(wall_clock_ms())
        finally:
            self._preparing = False

    def _offsets_replication_factor(self) -> int:
        """min(3, live brokers) in a cluster (Kafka's offsets.topic.replication.factor
        is 3); 1 on a single node."""
        cluster = self.broker.cluster
        if cluster is None:
            return 1
        return max(1, min(OFFSETS_TOPIC_REPLICATION_FACTOR, len(cluster.live_brokers())))

    # -- a cluster: the coordinator moves with its partition's leadership -----------

    def sync_leadership(self) -> None:
        """Load the offsets partitions this broker now leads, unload those it no
        longer leads (their groups' waiting requests get NOT_COORDINATOR)."""
        if self._led is None or self.broker.controller.topic(OFFSETS_TOPIC_NAME) is None:
            return
        if not self.loaded:  # another broker created the topic
            self.loaded = True
            self.loaded_event.set()
        now_ms = wall_clock_ms()
        for partition in range(self.partition_count):
            replica = self.broker.partition(OFFSETS_TOPIC_NAME, partition)
            leads = replica is not None and replica.is_leader
            if leads and partition not in self._led:
                self._load_partition(partition, now_ms)
            elif not leads and partition in self._led:
                self._unload_partition(partition)

    def _load_partition(self, partition: int, now_ms: int) -> None:
        self._failed_partitions.pop(partition, None)
        count = 0
        # A new leader loads its whole log; what is past the high watermark is not
        # committed yet and joins the committed offsets once it is.
        high_watermark = offsets_replica(self.broker, partition).high_watermark
        for entry in read_group_log(self.broker, partition):
            if self._replay_entry(partition, entry, high_watermark) is not None:
                count += 1
        self.sync_topic_names()
        self.consumer_groups.finish_loading(now_ms)
        self.share_groups.finish_loading(now_ms)
        self.classic.finish_loading(now_ms, other_group_ids=self._modern_group_ids())
        assert self._led is not None
        self._led.add(partition)
        log.info("%s-%d: now its groups' coordinator (%d records loaded)",
                 OFFSETS_TOPIC_NAME, partition, count)  # fmt: skip
        self.poke()

    def _unload_partition(self, partition: int) -> None:
        assert self._led is not None
        self._led.discard(partition)
        known = set(self.classic.groups) | self._modern_group_ids() | set(self.offsets.groups())
        group_ids = [g for g in known if self.partition_for(g) == partition]
        effects = self.classic.unload(group_ids)
        self.consumer_groups.unload(group_ids)
        self.share_groups.unload(group_ids)
        self.offsets.forget(group_ids)
        for group_id in group_ids:
            self._empty_since_ms.pop(group_id, None)
        for pending in effects.completed:
            event = self._waiting.pop(pending, None)
            if event is not None:
                event.set()
        log.info("%s-%d: no longer its groups' coordinator (%d groups unloaded)",
                 OFFSETS_TOPIC_NAME, partition, len(group_ids))  # fmt: skip

    def _load(self, now_ms: int) -> None:
        counts = {
            "offsets": 0, "classic groups": 0, "consumer groups": 0, "share groups": 0, "other": 0
        }  # fmt: skip
        for partition in range(self.partition_count):
            if (OFFSETS_TOPIC_NAME, partition) in self.broker.offline_partitions:
                self.mark_failed(partition, LookupError("its log is damaged (offline)"))
                continue
            for entry in read_group_log(self.broker, partition):
                kind = self._replay_entry(partition, entry)
                if kind is not None:
                    counts[kind] = counts.get(kind, 0) + 1
        self.sync_topic_names()
        self.consumer_groups.finish_loading(now_ms)
        self.share_groups.finish_loading(now_ms)
        self.classic.finish_loading(now_ms, other_group_ids=self._modern_group_ids())
        self.loaded = True
        self.loaded_event.set()
        log.info("loaded group state from %s: %s", OFFSETS_TOPIC_NAME, counts)
        self.poke()  # the timer task now has deadlines and expiry to watch

    def _replay_entry(
        self,
        partition: int,
        entry: LoadedRecord | LoadedMarker,
        high_watermark: int | None = None,
    ) -> str | None:
        """Apply one record or marker read back from `partition`; what is at or past
        `high_watermark` (None: everything is committed) joins the committed
        offsets once committed. Returns the kind of record applied (None: none)."""
        if isinstance(entry, LoadedMarker):
            committed = high_watermark is None or entry.offset < high_watermark
            self.offsets.end_transaction(
                entry.producer_id,
                entry.committed,
                lambda group_id: self.partition_for(group_id) == partition,
                partition,
                None if committed else entry.offset + 1,
            )
            return "transaction markers"
        record = entry.record
        if record.key is None:
            return None
        uncommitted = None
        if high_watermark is not None and record.offset >= high_watermark:
            uncommitted = (partition, record.offset + 1)
        return self._replay(record.key, record.value, uncommitted, entry.producer_id)

    def _replay(
        self,
        key: bytes,
        value: bytes | None,
        uncommitted: tuple[int, int] | None = None,
        producer_id: int = -1,
    ) -> str:
        """Hand one record to its owner; an unreadable one (malformed, or a non-UTF-8
        id a client wrote before the offsets topic was the broker's) is skipped.
        `uncommitted`, `producer_id`: see `OffsetStore.replay`."""
        try:
            if self.offsets.replay(key, value, uncommitted, producer_id):
                return "offsets"
            if self.classic.replay(key, value):
                return "classic groups"
            if self.consumer_groups.replay(key, value):
                return "consumer groups"
            if self.share_groups.replay(key, value):
                return "share groups"
        except RecordFormatError as exc:
            log.warning("skipping an unreadable %s record: %s", OFFSETS_TOPIC_NAME, exc)
        return "other"

    # -- writing ---------------------------------------------------------------

    def append(self, records: Sequence[GroupRecord], group_id: str | None = None) -> PendingWrite:
        """Append `records` now, each to its group's partition. `group_id`, when the
        caller names the one group it acts for, must be every record's. Raises LogError."""
        by_partition: dict[int, list[GroupRecord]] = {}
        for record in records:
            assert group_id is None or record.group_id == group_id, (record, group_id)
            by_partition.setdefault(self.partition_for(record.group_id), []).append(record)
        ends: dict[int, int] = {}
        chunks = list(by_partition.items())
        for index, (partition, chunk) in enumerate(chunks):
            try:
                ends[partition] = append_group_records_now(self.broker, partition, chunk)
            except LogError as exc:
                for _, unwritten in chunks[index:]:
                    self.offsets.discard(unwritten)
                self._append_failed(partition, exc)
                raise
            self.offsets.place(partition, ends[partition], chunk)
        self.poke()
        return PendingWrite(self, ends)

    def _pending_write(self, ends: dict[int, int]) -> PendingWrite:
        return PendingWrite(self, ends)

    def loads(self, partition: int) -> bool:
        """Whether this broker holds the groups of offsets partition `partition`."""
        return self.loaded and (self._led is None or partition in self._led)

    def unavailable_error(self, group_id: str) -> ErrorCode:
        """What a group request is answered when `available` is False: the offsets
        topic is still being created and loaded (COORDINATOR_LOAD_IN_PROGRESS), or
        another broker, or none until a restart, serves the group (NOT_COORDINATOR)."""
        return ErrorCode.NOT_COORDINATOR if self.loaded else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        """The group's offsets whose records are committed in its offsets partition
        (what OffsetFetch answers: never an offset a failover could take back)."""
        partition = self.partition_for(group_id)
        replica = self.broker.partition(OFFSETS_TOPIC_NAME, partition)
        if replica is not None:
            self.offsets.promote(partition, replica.high_watermark)
        return self.offsets.committed_group_offsets(group_id)

    def _append_failed(self, partition: int, error: LogError) -> None:
        """The coordinator's state already holds records the log refused: in a
        cluster, when this broker no longer acts as the partition's leader (fenced,
        or leadership moved), drop the partition's groups from memory now; they are
        loaded again from the log once it leads the partition unfenced (the
        cluster member's role changes call `sync_leadership`), with no restart.
        Any other failure is the log's own: see `mark_failed`."""
        if self._led is not None and error.error_code in (
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ):
            if partition in self._led:
                log.warning("%s-%d: a write was refused (%s): its groups are unloaded and "
                            "loaded again from the log once this broker leads it",
                            OFFSETS_TOPIC_NAME, partition, error)  # fmt: skip
                self._unload_partition(partition)
            self.sync_leadership()
            return
        self.mark_failed(partition, error)

    # -- topics for the KIP-848 coordinator ----------------------------------

    def topic_info(self, name: str) -> TopicInfo | None:
        record = self.broker.controller.topic(name)
        if record is None or record.is_internal or is_internal_topic(name):
            return None
        return TopicInfo(record.topic_id, record.partition_count)

    def sync_topic_names(self) -> None:
        """Hand the KIP-848 coordinator the topic names its regex subscriptions match,
        when topics were created or deleted since the last call (internal topics are
        never assigned to consumer groups, so never matched either)."""
        controller = self.broker.controller
        if controller.topic_names_version == self._topic_names_version:
            return
        first = self._topic_names_version < 0
        self._topic_names_version = controller.topic_names_version
        self.consumer_groups.set_topic_names(
            t.name for t in controller.topics() if not (t.is_internal or is_internal_topic(t.name))
        )
        if not first and self.loaded and self.background is not None:
            records = self.share_records(self.share_groups.topics_changed())
            if records:
                self.background.start_soon(self._write_in_background, records)

    def _share_topic_info(self, name: str) -> ShareTopicInfo | None:
        info = self.topic_info(name)
        return None if info is None else ShareTopicInfo(info.topic_id, info.partition_count)

    def _share_group_config(self, group_id: str) -> ShareGroupConfig | None:
        """A share group's own session and heartbeat settings (its group configs)."""
        if not self.broker.controller.group_configs(group_id):
            return None
        config = share_group_config(self.broker, group_id)
        return ShareGroupConfig(
            session_timeout_ms=config.session_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            assignment_interval_ms=config.assignment_interval_ms,
        )

    def _other_group_type(self, group_id: str) -> str | None:
        """Whether a group id is taken by a classic or KIP-848 group (a share group
        cannot have it)."""
        if group_id in self.consumer_groups.groups:
            return "consumer"
        if self.classic.has_group(group_id):
            return "classic"
        return None

    def _modern_group_ids(self) -> set[str]:
        """The KIP-848 and share groups' ids (a classic group cannot have them)."""
        return set(self.consumer_groups.groups) | set(self.share_groups.groups)

    @staticmethod
    def share_records(records: Sequence[ShareGroupRecord]) -> list[GroupRecord]:
        return [GroupRecord(r.group_id, r.key, r.value) for r in records]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        record = self.broker.controller.topic_by_id(topic_id)
        return record.name if record is not None else None

    # -- membership and time ---------------------------------------------------

    # -- classic groups' answers that come later ----------------------------------

    async def settle(self, records: Sequence[GroupRecord], completed: Sequence[Pending[Any]],
                     group_id: str | None = None) -> ErrorCode:  # fmt: skip
        """The classic coordinator's protocol: append `records`, wait until they are
        durable, then wake the connections waiting on `completed`."""
        error = ErrorCode.NONE
        if records:
            try:
                error = await self.append(records, group_id).durable()
            except LogError as exc:
                error = exc.error_code
        for pending in completed:
            event = self._waiting.pop(pending, None)
            if event is not None:
                event.set()
        self.poke()
        return error

    async def wait_for(self, pending: Pending[Any]) -> None:
        """Return once `pending` is done (another member's call or a timer completes it)."""
        if pending.done:
            return
        event = self._waiting.setdefault(pending, trio.Event())
        await event.wait()

    def has_members(self, group_id: str) -> bool:
        group = self.consumer_groups.groups.get(group_id)
        if group is not None and group.members:
            return True
        return bool(self.share_groups.members_of(group_id))

    def empty_since_ms(self, group_id: str, now_ms: int) -> int | None:
        """For the KIP-848 groups' offsets (classic groups expire their own)."""
        if self.has_members(group_id) or self.classic.has_group(group_id):
            self._empty_since_ms.pop(group_id, None)
            return None
        return self._empty_since_ms.setdefault(group_id, now_ms)

    def poke(self) -> None:
        """Deadlines may have changed: let the timer task look again."""
        self._wakeup.set()

    async def run(
        self, clock_ms: object, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Fence expired KIP-848 members and expire old offsets, until cancelled;
        also hosts the offsets topic's creation (`ensure_ready`). Started once
        that host exists."""
        async with trio.open_nursery() as nursery:
            self.background = nursery
            task_status.started()
            await self._run_timers(clock_ms)

    async def _run_timers(self, clock_ms: object) -> None:
        assert callable(clock_ms)
        next_expiry_ms = 0
        while True:
            now_ms = clock_ms()
            if self.loaded:
                effects: Effects = self.classic.advance(now_ms)
                if effects.records or effects.completed:
                    await self.settle(effects.records, effects.completed)
                records = self.consumer_groups.advance(now_ms)
                records += self.share_records(self.share_groups.advance(now_ms))
                if now_ms >= next_expiry_ms:
                    records += self._expire_offsets(now_ms)
                    next_expiry_ms = now_ms + self.settings.offsets_retention_check_interval_ms
                if records:
                    await self._write_in_background(records)
            wait_ms = self._wait_ms(now_ms, next_expiry_ms)
            self._wakeup = trio.Event()
            with trio.move_on_after(max(wait_ms, 1) / 1000):
                await self._wakeup.wait()

    def _wait_ms(self, now_ms: int, next_expiry_ms: int) -> int:
        """How long the timer task may sleep: until the next member deadline or
        offset expiry check. Before the state is loaded there is nothing to
        expire; the task sleeps until poked (at most one expiry interval)."""
        if not self.loaded:
            return self.settings.offsets_retention_check_interval_ms
        deadlines_ms = [
            d
            for d in (
                self.consumer_groups.next_deadline_ms(),
                self.classic.next_deadline_ms(),
                self.share_groups.next_deadline_ms(),
            )
            if d is not None
        ]
        return min([next_expiry_ms, *deadlines_ms]) - now_ms

    def _expire_offsets(self, now_ms: int) -> list[GroupRecord]:
        def empty_since(group_id: str) -> int | None:
            return self.empty_since_ms(group_id, now_ms)

        return self.offsets.expire(now_ms, self.settings.offsets_retention_ms, empty_since)

    async def _write_in_background(self, records: Sequence[GroupRecord]) -> None:
        try:
            error = await self.append(records).durable()
        except LogError as exc:
            error = exc.error_code
        if error != ErrorCode.NONE:
            log.error("timer records for %d groups not written: %s", len(records), error.name)


def share_group_settings(settings: GroupSettings) -> ShareGroupSettings:
    """The share-group coordinator's part of the broker's group settings."""
    return ShareGroupSettings(
        session_timeout_ms=settings.share_session_timeout_ms,
        heartbeat_interval_ms=settings.share_heartbeat_interval_ms,
        assignment_interval_ms=settings.share_assignment_interval_ms,
        max_size=settings.share_group_max_size,
    )


def attach_group_service(broker: Broker) -> GroupService:
    """Create the broker's group service from its config and load group state if
    the offsets topic exists."""
    service = GroupService(broker, broker.config.group_settings())
    service.load_if_present(wall_clock_ms())
    broker.groups = service
    broker.internal_state_owners.append(service)
    broker.leadership_listeners.append(service.sync_leadership)
    return service
