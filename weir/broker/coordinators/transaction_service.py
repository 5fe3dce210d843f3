"""Transactions on this broker: the coordinator, its storage, its markers and timers.

The coordinator in `weir.txn.transaction_coordinator` is a pure state machine; this
service gives it what it cannot have itself:

- storage: its records go to the transactional id's `__transaction_state` partition
  (Kafka's placement: abs(Java hashCode) % partitions), appended at once and
  reported durable (`records_durable`) once the partition's high watermark passes
  them; a request is answered only then;
- markers: once a Prepare record is durable, the commit or abort marker is written
  to every partition of the transaction, on this broker or sent as WriteTxnMarkers
  to its leader, retried until written (`weir.broker.coordinators.txn_markers`);
  then `markers_written` completes the transaction;
- loading: a partition of the topic led here is read back and its ids served; a
  transaction caught in a Prepare state gets its markers written again;
- time: a task calls `advance` at the coordinator's next deadline (timeouts abort,
  idle ids expire).

The topic is created on the first FindCoordinator or InitProducerId with a
transactional id, as Kafka does; until it exists and is loaded, ids are not
`available` (COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR, which clients retry).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.cluster.peer_client import PeerPool, peer_security
from weir.broker.coordinators.group_service import GroupService
from weir.broker.coordinators.state_topic import (
    append_state_records_now,
    create_state_topic,
    read_state_records,
    state_replica,
    unserved_partitions,
    wait_state_records,
)
from weir.broker.coordinators.txn_markers import PEER_TIMEOUT_S, MarkerWriter
from weir.broker.coordinators.txn_verification import TransactionVerification
from weir.controller.controller import (
    TRANSACTION_STATE_TOPIC_NAME,
    ControllerError,
)
from weir.format.errors import ErrorCode
from weir.format.versioned_records import RecordFormatError
from weir.groupcoord.placement import java_string_hash
from weir.log.errors import LogError
from weir.txn.pending import Effects, MarkerRequest, Reply
from weir.txn.transaction_coordinator import TransactionCoordinator, TransactionSettings
from weir.txn.transaction_metadata import PREPARE_STATES
from weir.txn.transaction_records import TransactionRecord, TxnState

log = logging.getLogger(__name__)

# Kafka's transaction.state.log.replication.factor (a cluster uses min(3, brokers)),
# and the topic's configs (transaction.state.log.segment.bytes).
TRANSACTION_STATE_REPLICATION_FACTOR = 3
TRANSACTION_STATE_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "producer",
}
# Marker retries: the first after this, doubling up to the max.
MARKER_RETRY_BACKOFF_MS = 50
MARKER_RETRY_BACKOFF_MAX_MS = 1_000


def transaction_partition(transactional_id: str, partition_count: int) -> int:
    """Kafka's `Utils.abs(transactionalId.hashCode) % partitions` (abs of the
    smallest int is 0)."""
    hash_code = java_string_hash(transactional_id)
    return (0 if hash_code == -(2**31) else abs(hash_code)) % partition_count


class TransactionService(TransactionVerification):
    def __init__(self, broker: Broker, settings: TransactionSettings, partition_count: int) -> None:
        self.broker = broker
        self.settings = settings
        self._configured_partition_count = partition_count
        self.coordinator = TransactionCoordinator(
            settings, broker.producer_ids.take, self.partition_for
        )
        # Two pools: a marker write waits for its ISR (up to the produce timeout),
        # and a leader's KIP-890 check must not queue behind one.
        self.verification_peers = self._peer_pool("weir-txn-verification")
        self.markers = MarkerWriter(broker, self._peer_pool("weir-txn-markers"))
        self.loaded = False
        self._preparing = False
        self.background: trio.Nursery | None = None
        self._wakeup = trio.Event()
        self._failed_partitions: dict[int, str] = {}
        # In a cluster: the partitions led and loaded here. None: a single node.
        self._led: set[int] | None = None if broker.cluster is None else set()
        # Per transactional id, the end offset of its last record reported durable:
        # waits end in any order, `records_durable` must only move forward.
        self._durable_ends: dict[str, int] = {}
        # Transactions whose markers are being written: (id, producer id, epoch).
        self._delivering: set[tuple[str, int, int]] = set()
        # Effects of loading at start, before `run` hosts their writes.
        self._queued: list[Effects] = []

    def _peer_pool(self, client_id: str) -> PeerPool:
        return PeerPool(
            f"{client_id}-{self.broker.config.node_id}",
            frame_bytes_max=self.broker.config.limits.frame_bytes_max,
            timeout_s=PEER_TIMEOUT_S,
            security=peer_security(self.broker.config),
        )

    @property
    def internal_topic_name(self) -> str:
        return TRANSACTION_STATE_TOPIC_NAME

    @property
    def partition_count(self) -> int:
        topic = self.broker.controller.topic(TRANSACTION_STATE_TOPIC_NAME)
        return topic.partition_count if topic else self._configured_partition_count

    @property
    def partitions_not_created(self) -> int:
        created = self.broker.controller.topic(TRANSACTION_STATE_TOPIC_NAME) is not None
        return 0 if created else self._configured_partition_count

    def partition_for(self, transactional_id: str) -> int:
        return transaction_partition(transactional_id, self.partition_count)

    def available(self, transactional_id: str) -> bool:
        partition = self.partition_for(transactional_id)
        if self._led is not None and partition not in self._led:
            return False
        return self.loaded and partition not in self._failed_partitions

    def unavailable_reason(self, transactional_id: str) -> str:
        if not self.loaded:
            return f"{TRANSACTION_STATE_TOPIC_NAME} is being created; retry"
        partition = self.partition_for(transactional_id)
        reason = self.unavailable_partitions().get(partition)
        return reason or f"this broker does not lead {TRANSACTION_STATE_TOPIC_NAME}-{partition}"

    def unavailable_partitions(self) -> dict[int, str]:
        """Partitions whose ids this broker should serve but cannot, and why."""
        return unserved_partitions(
            self.broker, TRANSACTION_STATE_TOPIC_NAME, self._led, self._failed_partitions
        )

    def mark_failed(self, partition: int, error: Exception) -> None:
        if partition not in self._failed_partitions:
            log.error("%s-%d: its log failed (%s): its transactional ids are not served "
                      "until the broker restarts", TRANSACTION_STATE_TOPIC_NAME, partition,
                      error)  # fmt: skip
            self._failed_partitions[partition] = f"its log failed: {error}"

    # -- the topic -------------------------------------------------------------

    def load_if_present(self, now_ms: int) -> None:
        """At start (a single node): load the topic when it exists."""
        if self._led is None and self.broker.controller.topic(TRANSACTION_STATE_TOPIC_NAME):
            self._load_all(now_ms)

    def ensure_ready(self) -> None:
        """On first use, start creating the topic in the background; never waits."""
        if self.loaded or self._preparing or self.background is None:
            return
        self._preparing = True
        self.background.start_soon(self._prepare_in_background)

    async def _prepare_in_background(self) -> None:
        try:
            await self.prepare()
        except (ControllerError, LogError, OSError) as exc:
            log.error("cannot create %s: %s", TRANSACTION_STATE_TOPIC_NAME, exc)

    async def prepare(self) -> None:
        self._preparing = True
        try:
            await create_state_topic(
                self.broker,
                TRANSACTION_STATE_TOPIC_NAME,
                self._configured_partition_count,
                self._replication_factor(),
                TRANSACTION_STATE_CONFIGS,
            )
            if self._led is not None:
                self.loaded = True
                self.sync_leadership()
            elif not self.loaded:
                self._load_all(wall_clock_ms())
        finally:
            self._preparing = False

    def _replication_factor(self) -> int:
        cluster = self.broker.cluster
        if cluster is None:
            return 1
        return max(1, min(TRANSACTION_STATE_REPLICATION_FACTOR, len(cluster.live_brokers())))

    # -- loading ---------------------------------------------------------------

    def _load_all(self, now_ms: int) -> None:
        for partition in range(self.partition_count):
            if (TRANSACTION_STATE_TOPIC_NAME, partition) in self.broker.offline_partitions:
                self.mark_failed(partition, LookupError("its log is damaged (offline)"))
                continue
            self._load_partition(partition, now_ms)
        self.loaded = True
        self.poke()

    def sync_leadership(self) -> None:
        """A cluster: load the partitions this broker now leads, unload the others."""
        if self._led is None or self.broker.controller.topic(TRANSACTION_STATE_TOPIC_NAME) is None:
            return
        self.loaded = True
        now_ms = wall_clock_ms()
        for partition in range(self.partition_count):
            replica = self.broker.partition(TRANSACTION_STATE_TOPIC_NAME, partition)
            leads = replica is not None and replica.is_leader
            if leads and partition not in self._led:
                self._load_partition(partition, now_ms)
            elif not leads and partition in self._led:
                self._unload_partition(partition)

    def _load_partition(self, partition: int, now_ms: int) -> None:
        self._failed_partitions.pop(partition, None)
        count = 0
        try:
            for record in read_state_records(self.broker, TRANSACTION_STATE_TOPIC_NAME, partition):
                if record.key is None:
                    continue
                try:
                    count += self.coordinator.replay(record.key, record.value)
                except RecordFormatError as exc:
                    log.warning("skipping an unreadable %s record: %s",
                                TRANSACTION_STATE_TOPIC_NAME, exc)  # fmt: skip
        except LogError as exc:
            self.mark_failed(partition, exc)
            return
        replica = state_replica(self.broker, TRANSACTION_STATE_TOPIC_NAME, partition)
        effects = self.coordinator.finish_loading(partition, max(replica.leader_epoch, 0), now_ms)
        for transactional_id in self.coordinator.transactional_ids():
            if self.partition_for(transactional_id) == partition:
                self._durable_ends.pop(transactional_id, None)
        if self._led is not None:
            self._led.add(partition)
        if count:
            log.info("%s-%d: now its transactions' coordinator (%d records loaded)",
                     TRANSACTION_STATE_TOPIC_NAME, partition, count)  # fmt: skip
        self._start_in_background(effects)
        self.poke()

    def _unload_partition(self, partition: int) -> None:
        assert self._led is not None
        self._led.discard(partition)
        self.coordinator.unload(partition)
        log.info("%s-%d: no longer its transactions' coordinator",
                 TRANSACTION_STATE_TOPIC_NAME, partition)  # fmt: skip

    # -- writing ---------------------------------------------------------------

    async def settle(self, reply: Reply[Any] | Effects) -> ErrorCode:
        """The coordinator's protocol (`weir.txn.pending`): append the records, wait
        until durable, report them, then start writing the markers."""
        error = await self._store(reply.records)
        if error == ErrorCode.NONE:
            self._send_markers(reply.markers)
        self.poke()
        return error

    async def _store(self, records: Sequence[TransactionRecord]) -> ErrorCode:
        if not records:
            return ErrorCode.NONE
        by_partition: dict[int, list[TransactionRecord]] = {}
        for record in records:
            by_partition.setdefault(self.partition_for(record.transactional_id), []).append(record)
        ends: dict[int, int] = {}
        for partition, chunk in by_partition.items():
            try:
                ends[partition] = append_state_records_now(
                    self.broker,
                    TRANSACTION_STATE_TOPIC_NAME,
                    partition,
                    [(r.key, r.value) for r in chunk],
                )
            except (LogError, LookupError) as exc:
                self._append_failed(partition, exc)
                return _coordinator_error(exc)
        for partition, end_offset in ends.items():
            try:
                await wait_state_records(
                    self.broker, TRANSACTION_STATE_TOPIC_NAME, partition, end_offset
                )
            except (LogError, LookupError) as exc:
                self._append_failed(partition, exc)
                return _coordinator_error(exc)
            self._report_durable(by_partition[partition], end_offset)
        return ErrorCode.NONE

    def _report_durable(self, records: Sequence[TransactionRecord], end_offset: int) -> None:
        fresh = [r for r in records if self._durable_ends.get(r.transactional_id, -1) < end_offset]
        for record in fresh:
            if record.value is None:  # the id expired: nothing more to order
                self._durable_ends.pop(record.transactional_id, None)
            else:
                self._durable_ends[record.transactional_id] = end_offset
        self.coordinator.records_durable(fresh)

    def _append_failed(self, partition: int, error: Exception) -> None:
        """Memory is ahead of the log: in a cluster, when leadership moved or this
        broker is fenced, drop the partition's ids now (they are loaded again from
        the log when it leads); any other failure is the log's own."""
        code = getattr(error, "error_code", None)
        if self._led is not None and code in (
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ):
            if partition in self._led:
                log.warning("%s-%d: a write was refused (%s): its ids are unloaded",
                            TRANSACTION_STATE_TOPIC_NAME, partition, error)  # fmt: skip
                self._unload_partition(partition)
            self.sync_leadership()
            return
        if isinstance(error, LogError):
            self.mark_failed(partition, error)

    # -- markers ---------------------------------------------------------------

    def _send_markers(self, markers: Iterable[MarkerRequest]) -> None:
        for marker in markers:
            key = (marker.transactional_id, marker.producer_id, marker.producer_epoch)
            if key in self._delivering or self.background is None:
                continue
            self._delivering.add(key)
            self.background.start_soon(self._deliver, marker)

    async def _deliver(self, marker: MarkerRequest) -> None:
        """Write the marker to each partition until all are written, then complete
        the transaction. Stops when the transaction no longer waits for it (this
        broker stopped coordinating it: the next coordinator writes the markers)."""
        key = (marker.transactional_id, marker.producer_id, marker.producer_epoch)
        remaining = set(marker.partitions)
        backoff_ms = MARKER_RETRY_BACKOFF_MS
        try:
            while remaining and self._still_waiting(marker):
                written = await self.markers.write(marker, remaining)
                if written:
                    remaining -= written
                    effects = self.coordinator.markers_written(
                        marker.transactional_id, marker.producer_id, marker.producer_epoch,
                        written, wall_clock_ms(),
                    )  # fmt: skip
                    await self.settle(effects)
                    backoff_ms = MARKER_RETRY_BACKOFF_MS
                    continue
                await trio.sleep(backoff_ms / 1000)
                backoff_ms = min(backoff_ms * 2, MARKER_RETRY_BACKOFF_MAX_MS)
        finally:
            self._delivering.discard(key)

    def _still_waiting(self, marker: MarkerRequest) -> bool:
        txn = self.coordinator.metadata(marker.transactional_id)
        return (
            txn is not None
            and txn.state in PREPARE_STATES
            and txn.producer_id == marker.producer_id
            and txn.producer_epoch == marker.producer_epoch
        )

    def _start_in_background(self, effects: Effects) -> None:
        if not (effects.records or effects.markers):
            return
        if self.background is None:
            self._queued.append(effects)
            return
        self.background.start_soon(self.settle, effects)

    def state_counts(self) -> list[tuple[dict[str, str], float]]:
        """The `weir_transactions` samples: ids per state, every state listed."""
        counts = dict.fromkeys((state.kafka_name for state in TxnState), 0)
        for transactional_id in self.coordinator.transactional_ids():
            txn = self.coordinator.metadata(transactional_id)
            if txn is not None:
                counts[txn.state.kafka_name] += 1
        return [({"state": name}, float(count)) for name, count in counts.items()]

    # -- time ------------------------------------------------------------------

    def poke(self) -> None:
        self._wakeup.set()

    async def run(
        self, clock_ms: object, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Abort timed-out transactions and expire idle ids, until cancelled; also
        hosts the topic's creation and the marker writes."""
        assert callable(clock_ms)
        async with trio.open_nursery() as nursery:
            self.background = nursery
            task_status.started()
            for effects in self._queued:
                nursery.start_soon(self.settle, effects)
            self._queued.clear()
            while True:
                now_ms = clock_ms()
                if self.loaded:
                    effects = self.coordinator.advance(now_ms)
                    if effects.records or effects.markers:
                        error = await self.settle(effects)
                        if error != ErrorCode.NONE:
                            log.error("transaction timer records not written: %s", error.name)
                deadline_ms = self.coordinator.next_deadline_ms() if self.loaded else None
                wait_ms = 60_000 if deadline_ms is None else max(deadline_ms - now_ms, 1)
                self._wakeup = trio.Event()
                with trio.move_on_after(min(wait_ms, 60_000) / 1000):
                    await self._wakeup.wait()


def _coordinator_error(error: Exception) -> ErrorCode:
    code = getattr(error, "error_code", None)
    if code == ErrorCode.NOT_COORDINATOR:
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


def transaction_service(broker: Broker) -> TransactionService:
    service = broker.transactions
    assert isinstance(service, TransactionService), "attached at start"
    return service


def attach_transaction_service(broker: Broker) -> TransactionService:
    """Create the broker's transaction service from its config and load the state
    topic if it exists (a single node; a cluster loads what it leads)."""
    config = broker.config
    service = TransactionService(
        broker, config.transaction_settings(), config.transaction_state_partition_count
    )
    service.load_if_present(wall_clock_ms())
    broker.transactions = service
    broker.metrics.register_gauge(
        "weir_transactions",
        "Transactional ids this broker coordinates, per state (Kafka's state names).",
        service.state_counts,
    )
    if isinstance(broker.groups, GroupService):
        broker.groups.txn_offsets_verifier = service.check_txn_offsets
    broker.internal_state_owners.append(service)
    broker.leadership_listeners.append(service.sync_leadership)
    return service
