"""The share coordinator (KIP-932): the durable state of every share partition, and
the share partition leader's way to it from any broker.

A share partition's state (its start offset, the delivery counts and states of the
records in flight: `weir.sharecoord.share_state.ShareState`) is kept by the leader of
the data partition (`share_partitions`), and stored by the *share coordinator* of its
key: the leader of the key's `__share_group_state` partition (Kafka's placement:
abs(Java hashCode of "group:topicId:partition") % partitions). One record per write,
keyed by (group, topic id, partition); the topic is compacted: its latest record per
key is the state. In a cluster the two leaders are usually different brokers.

The share partition leader's side (Kafka's persister), `read`, `write` and
`read_summary`: find the key's coordinator (the state partition's leader in etcd's
partition states); on this broker call the coordinator's side directly, on another
send it ReadShareGroupState / WriteShareGroupState / DeleteShareGroupState /
ReadShareGroupStateSummary (`share_state_rpc`). While the coordinator moves (not
live, NOT_COORDINATOR, loading) it finds it again and retries, for at most
`SHARE_STATE_RETRY_S`. A key's writes leave this broker one at a time, newest
state first (`_KeyWrites`): two states of one key never cross on the way, so an
older one never lands after a newer one.

The coordinator's side, `read_here`, `write_here`, `summary_here`, for the keys of
the state partitions this broker leads and has loaded:

- storage: a write appends the state as one record and returns once it is durable
  (in a cluster: below the high watermark over the ISR); a share fetch or an
  acknowledgement is answered only then, so what a client was told survives a crash
  of either leader;
- fencing, as Kafka's share coordinator: each key keeps the highest leader epoch
  seen (from its records, and from reads). A read with an older leader epoch, or a
  write with an older leader epoch or state epoch than the key's, is refused with
  FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH (-1: not checked). A read with a newer
  leader epoch (a new data leader loading the state) stores that epoch before it
  is answered, so from then on a deposed leader's late write is refused;
- loading: the partitions of the topic this broker leads are read back at start (a
  cluster: when it becomes their leader) into `latest`, one state per key;
- the topic is created on the first share-group use, as Kafka does.

Differences from Kafka: a write carries the leader's whole state and replaces the
stored one (Kafka's writes carry batches merged into it; Weir's leaders always send
every batch, so the two agree), and Weir writes snapshot records only. A read with
a new leader epoch for a key that has no state yet records the epoch in memory only
(Kafka writes a record with start offset -1, which a ShareSnapshot of Weir's cannot
hold): that fence does not survive the coordinator's failover.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.coordinators.share_state_rpc import ShareStateRpc, ShareStateUnavailableError
from weir.broker.coordinators.state_topic import (
    append_state_records_now,
    create_state_topic,
    read_state_records,
    unserved_partitions,
    wait_state_records,
)
from weir.controller.controller import SHARE_GROUP_STATE_TOPIC_NAME, ControllerError
from weir.format.errors import ErrorCode
from weir.format.versioned_records import RecordFormatError
from weir.groupcoord.placement import java_string_hash
from weir.log.errors import LogError
from weir.sharecoord.share_state import (
    ShareState,
    ShareStateKey,
    decode_share_snapshot_key,
    decode_share_snapshot_value,
    encode_share_snapshot,
)

log = logging.getLogger(__name__)

# Kafka's share.coordinator.state.topic.num.partitions and .replication.factor (a
# cluster uses min(3, brokers)), and the topic's configs.
SHARE_STATE_PARTITION_COUNT = 50
# How long a request waits for `__share_group_state` to be created and loaded (a
# cluster's creation waits on etcd; a stuck attempt must not hold requests forever).
READY_WAIT_MAX_S = 30.0
SHARE_STATE_REPLICATION_FACTOR = 3
SHARE_STATE_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "producer",
}


# One share partition: a share group's view of one topic partition.
ShareKey = ShareStateKey


def coordinator_key(key: ShareKey) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey, "group:topicId:partition", with
    the topic id as Kafka's Uuid.toString writes it (URL-safe base64, unpadded)."""
    topic_id = base64.urlsafe_b64encode(key.topic_id.bytes).decode().rstrip("=")
    return f"{key.group_id}:{topic_id}:{key.partition}"


def share_state_partition(key: ShareKey, partition_count: int) -> int:
    hash_code = java_string_hash(coordinator_key(key))
    return (0 if hash_code == -(2**31) else abs(hash_code)) % partition_count


# How long the share partition leader's side keeps finding a moving coordinator again
# (longer than a failover with the default 9 s session timeout takes to be noticed is
# not needed: the client retries the request), and its pause between attempts.
SHARE_STATE_RETRY_S = 8.0
SHARE_STATE_RETRY_PAUSE_S = 0.2
# A coordinator moving or loading: find it again and retry.
RETRIABLE_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)
# What the share partition's client is answered for a coordinator's error (Kafka's
# SharePartition: a fenced leader epoch means this broker no longer leads the data
# partition; a coordinator that cannot be reached is COORDINATOR_NOT_AVAILABLE).
SHARE_PARTITION_ERRORS = {
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_STATE_EPOCH: ErrorCode.FENCED_STATE_EPOCH,
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}
EPOCH_NOT_CHECKED = -1

T = TypeVar("T")


class ShareStateFencedError(ShareStateUnavailableError):
    """The share coordinator refused this leader's read or write: a newer leader epoch
    (another broker leads the data partition now) or state epoch (the state was reset)
    is stored. The share partition must be dropped and loaded again."""


def fencing_error(
    stored_leader_epoch: int | None,
    stored_state_epoch: int | None,
    leader_epoch: int,
    state_epoch: int,
) -> ErrorCode | None:
    """Kafka's share coordinator's check of a write: an older leader epoch, then an
    older state epoch, than the key's is fenced; -1 is not checked."""
    if (
        leader_epoch != EPOCH_NOT_CHECKED
        and stored_leader_epoch is not None
        and stored_leader_epoch > leader_epoch
    ):
        return ErrorCode.FENCED_LEADER_EPOCH
    if (
        state_epoch != EPOCH_NOT_CHECKED
        and stored_state_epoch is not None
        and stored_state_epoch > state_epoch
    ):
        return ErrorCode.FENCED_STATE_EPOCH
    return None


@dataclass(eq=False)
class _KeyWrites:
    """One key's writes from this broker, in order: each caller takes a sequence
    number and leaves its state as the newest; whoever holds the lock sends the newest
    state, which answers every caller up to its number (a share partition's later
    state holds all of its earlier changes)."""

    lock: trio.Lock = dataclasses.field(default_factory=trio.Lock)
    next_sequence: int = 0
    stored_sequence: int = -1
    newest: tuple[int, ShareState | None] | None = None

    def idle(self) -> bool:
        return not self.lock.locked() and self.lock.statistics().tasks_waiting == 0


class ShareStateService:
    def __init__(self, broker: Broker, partition_count: int = SHARE_STATE_PARTITION_COUNT) -> None:
        self.broker = broker
        self._configured_partition_count = partition_count
        self.latest: dict[ShareKey, ShareState] = {}
        # When each key's state was first written (the snapshot's CreateTimestamp).
        self._created_ms: dict[ShareKey, int] = {}
        self.loaded = False
        self._preparing = False
        self._ready = trio.Event()
        # The current (or last) attempt to create and load the topic has ended.
        self._attempt_done = trio.Event()
        self.background: trio.Nursery | None = None
        self._failed_partitions: dict[int, str] = {}
        # In a cluster: the partitions led and loaded here. None: a single node.
        self._led: set[int] | None = None if broker.cluster is None else set()
        # The coordinator's fence: the highest leader epoch seen per key (Kafka's
        # leaderEpochMap), from its records and from reads.
        self._leader_epochs: dict[ShareKey, int] = {}
        # The leader's side: each key's writes in flight from here, in order.
        self._writes: dict[ShareKey, _KeyWrites] = {}
        self.rpc = ShareStateRpc(broker) if broker.cluster is not None else None

    @property
    def internal_topic_name(self) -> str:
        return SHARE_GROUP_STATE_TOPIC_NAME

    @property
    def partition_count(self) -> int:
        topic = self.broker.controller.topic(SHARE_GROUP_STATE_TOPIC_NAME)
        return topic.partition_count if topic else self._configured_partition_count

    @property
    def partitions_not_created(self) -> int:
        """Nothing is kept in the open-files budget for `__share_group_state` before it
        exists (unlike `__consumer_offsets`): a broker whose users never use queues
        keeps its 50 partitions' descriptors for topics. Under a full budget the topic's
        creation at the first share-group use is refused (logged, the share fetch
        answers COORDINATOR_NOT_AVAILABLE) until `ulimit -n` is raised."""
        return 0

    def partition_for(self, key: ShareKey) -> int:
        return share_state_partition(key, self.partition_count)

    def unavailable_partitions(self) -> dict[int, str]:
        return unserved_partitions(
            self.broker, SHARE_GROUP_STATE_TOPIC_NAME, self._led, self._failed_partitions
        )

    # -- creating and loading ------------------------------------------------

    def load_if_present(self) -> None:
        """At start on a single node: load the topic if it exists."""
        if self._led is None and self.broker.controller.topic(SHARE_GROUP_STATE_TOPIC_NAME):
            self._load_all()

    async def ready(self) -> None:
        """Return once the topic exists and its partitions led here are loaded
        (creating it on first use, in the background, once at a time)."""
        if self.loaded:
            return
        if not self._preparing and self.background is not None:
            self._preparing = True
            self._attempt_done = trio.Event()
            self.background.start_soon(self._prepare_in_background)
        if self.background is None:
            await self._ready.wait()
            return
        # Until this attempt ends: loaded, or failed (logged; the state's reads and
        # writes then answer COORDINATOR_NOT_AVAILABLE, and the next use tries again).
        with trio.move_on_at(trio.current_time() + READY_WAIT_MAX_S):
            await self._attempt_done.wait()

    async def _prepare_in_background(self) -> None:
        try:
            if self.broker.controller.topic(SHARE_GROUP_STATE_TOPIC_NAME) is None:
                # No room was kept for it (`partitions_not_created`): it must fit now.
                self.broker.check_descriptor_budget(self._configured_partition_count)
            await create_state_topic(
                self.broker,
                SHARE_GROUP_STATE_TOPIC_NAME,
                self._configured_partition_count,
                self._replication_factor(),
                SHARE_STATE_CONFIGS,
            )
            if self._led is not None:
                self.sync_leadership()
            elif not self.loaded:
                self._load_all()
        except (ControllerError, LogError, OSError) as exc:
            log.error("cannot create %s: %s", SHARE_GROUP_STATE_TOPIC_NAME, exc)
        finally:
            self._preparing = False
            self._attempt_done.set()

    def _replication_factor(self) -> int:
        cluster = self.broker.cluster
        if cluster is None:
            return 1
        return max(1, min(SHARE_STATE_REPLICATION_FACTOR, len(cluster.live_brokers())))

    def _mark_loaded(self) -> None:
        self.loaded = True
        self._ready.set()

    def _load_all(self) -> None:
        for partition in range(self.partition_count):
            if (SHARE_GROUP_STATE_TOPIC_NAME, partition) in self.broker.offline_partitions:
                self._mark_failed(partition, LookupError("its log is damaged (offline)"))
                continue
            self._load_partition(partition)
        self._mark_loaded()

    def sync_leadership(self) -> None:
        """A cluster: load the partitions this broker now leads, unload the others."""
        if self._led is None or self.broker.controller.topic(SHARE_GROUP_STATE_TOPIC_NAME) is None:
            return
        for partition in range(self.partition_count):
            replica = self.broker.partition(SHARE_GROUP_STATE_TOPIC_NAME, partition)
            leads = replica is not None and replica.is_leader
            if leads and partition not in self._led:
                self._load_partition(partition)
            elif not leads and partition in self._led:
                self._unload_partition(partition)
        self._mark_loaded()

    def _load_partition(self, partition: int) -> None:
        self._failed_partitions.pop(partition, None)
        count = 0
        try:
            for record in read_state_records(self.broker, SHARE_GROUP_STATE_TOPIC_NAME, partition):
                if record.key is None:
                    continue
                try:
                    key = decode_share_snapshot_key(record.key)
                    if record.value is None:
                        self.latest.pop(key, None)
                        self._created_ms.pop(key, None)
                    else:
                        snapshot = decode_share_snapshot_value(record.value)
                        self.latest[key] = snapshot.state
                        self._created_ms[key] = snapshot.create_timestamp_ms
                        self._note_leader_epoch(key, snapshot.state.leader_epoch)
                except RecordFormatError as exc:
                    log.warning("skipping an unreadable %s record: %s",
                                SHARE_GROUP_STATE_TOPIC_NAME, exc)  # fmt: skip
                    continue
                count += 1
        except LogError as exc:
            self._mark_failed(partition, exc)
            return
        if self._led is not None:
            self._led.add(partition)
        if count:
            log.info("%s-%d: loaded (%d records)", SHARE_GROUP_STATE_TOPIC_NAME, partition, count)

    def _unload_partition(self, partition: int) -> None:
        assert self._led is not None
        self._led.discard(partition)
        for key in [k for k in self._known_keys() if self.partition_for(k) == partition]:
            self.latest.pop(key, None)
            self._created_ms.pop(key, None)
            self._leader_epochs.pop(key, None)

    def _known_keys(self) -> set[ShareKey]:
        return set(self.latest) | set(self._leader_epochs)

    def _note_leader_epoch(self, key: ShareKey, leader_epoch: int) -> None:
        if leader_epoch > self._leader_epochs.get(key, EPOCH_NOT_CHECKED):
            self._leader_epochs[key] = leader_epoch

    def _mark_failed(self, partition: int, error: Exception) -> None:
        if partition not in self._failed_partitions:
            log.error("%s-%d: its log failed (%s): its share partitions are not served "
                      "until the broker restarts", SHARE_GROUP_STATE_TOPIC_NAME,
                      partition, error)  # fmt: skip
            self._failed_partitions[partition] = f"its log failed: {error}"

    # -- the share partition leader's side: through the key's coordinator -----------

    async def read(self, key: ShareKey, leader_epoch: int) -> ShareState | None:
        """The key's durable state (None: it has none), read by the data partition's
        leader of `leader_epoch` (which fences older leaders' writes from then on).
        Raises ShareStateUnavailableError (ShareStateFencedError: a newer leader
        loaded it), with the error to answer the share partition's client."""
        return await self._through_coordinator(
            key,
            lambda: self.read_here(key, leader_epoch),
            lambda rpc, node_id: rpc.read(node_id, key, leader_epoch),
        )

    async def write(self, key: ShareKey, state: ShareState | None) -> None:
        """Store `state` (None: delete the key) and return once durable. Raises
        ShareStateUnavailableError (ShareStateFencedError: a newer leader epoch or
        state epoch is stored for the key)."""
        writes = self._writes.get(key)
        if writes is None:
            writes = self._writes[key] = _KeyWrites()
        sequence = writes.next_sequence
        writes.next_sequence += 1
        try:
            self._offer_newest(writes, sequence, state)
            async with writes.lock:
                if writes.stored_sequence >= sequence:
                    return  # a newer state, holding this one's changes, is stored
                await self._send_newest(key, writes)
        finally:
            if writes.idle() and self._writes.get(key) is writes:
                del self._writes[key]

    async def read_summary(self, key: ShareKey) -> ShareState | None:
        """The key's start offset and epochs (batches left out when read from another
        broker), for describing: its leader epoch is not moved."""

        async def here() -> ShareState | None:
            return self.summary_here(key)

        return await self._through_coordinator(
            key, here, lambda rpc, node_id: rpc.summary(node_id, key)
        )

    def _offer_newest(self, writes: _KeyWrites, sequence: int, state: ShareState | None) -> None:
        """Make `state` the key's newest, unless an epoch newer than its own was
        offered already (a deposed share partition's late change: fenced here, as the
        coordinator would)."""
        newest = None if writes.newest is None else writes.newest[1]
        if state is not None and newest is not None:
            error = fencing_error(
                newest.leader_epoch, newest.state_epoch, state.leader_epoch, state.state_epoch
            )
            if error is not None:
                raise ShareStateFencedError(
                    SHARE_PARTITION_ERRORS[error], f"{error.name}: a newer state was written"
                )
        writes.newest = (sequence, state)

    async def _send_newest(self, key: ShareKey, writes: _KeyWrites) -> None:
        async def here() -> None:
            assert writes.newest is not None
            sent, state = writes.newest
            await self.write_here(key, state)
            writes.stored_sequence = max(writes.stored_sequence, sent)

        async def remote(rpc: ShareStateRpc, node_id: int) -> None:
            assert writes.newest is not None
            sent, state = writes.newest
            if state is None:
                await rpc.delete(node_id, key)
            else:
                await rpc.write(node_id, key, state)
            writes.stored_sequence = max(writes.stored_sequence, sent)

        await self._through_coordinator(key, here, remote)

    async def _through_coordinator(
        self,
        key: ShareKey,
        here: Callable[[], Awaitable[T]],
        remote: Callable[[ShareStateRpc, int], Awaitable[T]],
    ) -> T:
        """`here()` when this broker is the key's coordinator, else `remote(rpc,
        node)`; a coordinator moving is found again, for up to SHARE_STATE_RETRY_S."""
        await self.ready()
        deadline = trio.current_time() + SHARE_STATE_RETRY_S
        while True:
            try:
                node_id = self._coordinator_node(key)
                if node_id is None or self.rpc is None:
                    return await here()
                return await remote(self.rpc, node_id)
            except ShareStateUnavailableError as exc:
                retry = self._led is not None and exc.error_code in RETRIABLE_ERRORS
                if not retry or trio.current_time() >= deadline:
                    raise _for_share_partition(exc) from None
            await trio.sleep(SHARE_STATE_RETRY_PAUSE_S)

    def _coordinator_node(self, key: ShareKey) -> int | None:
        """The key's coordinator when another broker: None when it is this one (a
        single node always). Raises ShareStateUnavailableError without one."""
        cluster = self.broker.cluster
        topic = self.broker.controller.topic(SHARE_GROUP_STATE_TOPIC_NAME)
        if cluster is None or topic is None:
            return None
        partition = self.partition_for(key)
        leader = cluster.partition_state(topic, partition).leader
        if leader == self.broker.config.node_id:
            return None
        if leader < 0:
            raise ShareStateUnavailableError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"{SHARE_GROUP_STATE_TOPIC_NAME}-{partition} has no leader",
            )
        return leader

    # -- the coordinator's side: the keys of the state partitions led here ---------

    def _check_served(self, key: ShareKey) -> int:
        """The key's state partition, when this broker serves it now. Raises
        ShareStateUnavailableError: COORDINATOR_LOAD_IN_PROGRESS while the topic is
        created or the partition loaded, NOT_COORDINATOR when another broker leads
        it, COORDINATOR_NOT_AVAILABLE when its log failed."""
        if not self.loaded:
            raise ShareStateUnavailableError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                f"{SHARE_GROUP_STATE_TOPIC_NAME} is being created or loaded",
            )
        partition = self.partition_for(key)
        reason = self._failed_partitions.get(partition)
        if reason is not None:
            raise ShareStateUnavailableError(ErrorCode.COORDINATOR_NOT_AVAILABLE, reason)
        if self._led is not None and partition not in self._led:
            replica = self.broker.partition(SHARE_GROUP_STATE_TOPIC_NAME, partition)
            leads = replica is not None and replica.is_leader
            raise ShareStateUnavailableError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if leads else ErrorCode.NOT_COORDINATOR,
                f"this broker {'is loading' if leads else 'does not lead'} "
                f"{SHARE_GROUP_STATE_TOPIC_NAME}-{partition}",
            )
        return partition

    async def read_here(self, key: ShareKey, leader_epoch: int) -> ShareState | None:
        """ReadShareGroupState at this coordinator: the key's state (None: none), after
        storing `leader_epoch` as the key's when it is newer. Raises
        ShareStateUnavailableError (FENCED_LEADER_EPOCH for an older epoch)."""
        partition = self._check_served(key)
        stored_epoch = self._leader_epochs.get(key)
        if stored_epoch is not None and stored_epoch > leader_epoch:
            raise ShareStateFencedError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"leader epoch {leader_epoch} is older than the share partition's {stored_epoch}",
            )
        state = self.latest.get(key)
        if leader_epoch == EPOCH_NOT_CHECKED or stored_epoch == leader_epoch:
            return state
        self._note_leader_epoch(key, leader_epoch)
        if state is None:
            return None  # the fence is in memory only (see the module's docstring)
        # Stored before the answer: a new coordinator keeps the fence too.
        fenced = dataclasses.replace(state, leader_epoch=leader_epoch)
        await self._store(partition, key, fenced)
        return fenced

    async def write_here(self, key: ShareKey, state: ShareState | None) -> None:
        """WriteShareGroupState (DeleteShareGroupState with None) at this coordinator:
        store it, return once durable. Raises ShareStateUnavailableError
        (FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for an older leader or state)."""
        partition = self._check_served(key)
        if state is not None:
            stored = self.latest.get(key)
            error = fencing_error(
                self._leader_epochs.get(key),
                None if stored is None else stored.state_epoch,
                state.leader_epoch,
                state.state_epoch,
            )
            if error is not None:
                raise ShareStateFencedError(error, f"{error.name}: a newer state is stored")
            if state.leader_epoch == EPOCH_NOT_CHECKED:
                state = dataclasses.replace(state, leader_epoch=self._leader_epochs.get(key, 0))
        await self._store(partition, key, state)

    def summary_here(self, key: ShareKey) -> ShareState | None:
        """ReadShareGroupStateSummary at this coordinator: the key's state, no fencing."""
        self._check_served(key)
        return self.latest.get(key)

    async def _store(self, partition: int, key: ShareKey, state: ShareState | None) -> None:
        """Append now (the check before it and the append are one step: no other write
        of the key comes between), then wait until durable."""
        now_ms = wall_clock_ms()
        if state is None:
            record: tuple[bytes, bytes | None] = (
                encode_share_snapshot(
                    key, ShareState(0, 0, 0, ()), create_timestamp_ms=0, write_timestamp_ms=0
                )[0],
                None,
            )
        else:
            created_ms = self._created_ms.setdefault(key, now_ms)
            record = encode_share_snapshot(
                key, state, create_timestamp_ms=created_ms, write_timestamp_ms=now_ms
            )
        try:
            end_offset = append_state_records_now(
                self.broker, SHARE_GROUP_STATE_TOPIC_NAME, partition, [record]
            )
        except (LogError, LookupError) as exc:
            if isinstance(exc, LogError) and exc.error_code == ErrorCode.NOT_COORDINATOR:
                raise ShareStateUnavailableError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
            self._mark_failed(partition, exc)
            raise ShareStateUnavailableError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from exc
        if state is None:
            self.latest.pop(key, None)
            self._created_ms.pop(key, None)
        else:
            self.latest[key] = state
            self._note_leader_epoch(key, state.leader_epoch)
        try:
            await wait_state_records(
                self.broker, SHARE_GROUP_STATE_TOPIC_NAME, partition, end_offset
            )
        except (LogError, LookupError) as exc:
            code = exc.error_code if isinstance(exc, LogError) else None
            raise ShareStateUnavailableError(
                code or ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
            ) from exc

    def keys_of_group(self, group_id: str) -> list[ShareKey]:
        keys = [k for k in self.latest if k.group_id == group_id]
        return sorted(keys, key=lambda k: (str(k.topic_id), k.partition))


def _for_share_partition(exc: ShareStateUnavailableError) -> ShareStateUnavailableError:
    """The coordinator's error as the share partition's client is answered it."""
    error = SHARE_PARTITION_ERRORS.get(exc.error_code, exc.error_code)
    fenced = exc.error_code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH)
    if error == exc.error_code and fenced == isinstance(exc, ShareStateFencedError):
        return exc
    kind = ShareStateFencedError if fenced else ShareStateUnavailableError
    return kind(error, str(exc))
