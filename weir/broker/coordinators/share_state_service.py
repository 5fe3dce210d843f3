"""The share coordinator (KIP-932): the durable state of every share partition.

A share partition's state (its start offset, the delivery counts and states of the
records in flight: `weir.sharecoord.share_state.ShareState`) is kept by the leader of
the data partition (`share_partitions`), and stored here, in `__share_group_state`:
one record per write, keyed by (group, topic id, partition), on the partition
Kafka's placement gives that key (abs(Java hashCode of "group:topicId:partition") %
partitions). The topic is compacted: its latest record per key is the state.

- storage: `write` appends the state as one record and returns once it is durable
  (in a cluster: below the high watermark over the ISR); a share fetch or an
  acknowledgement is answered only then, so what a client was told survives a crash;
- loading: the partitions of the topic this broker leads are read back at start (a
  cluster: when it becomes their leader) into `latest`, one state per key, so that a
  share partition that starts being served here reads its state without a scan;
- the topic is created on the first share-group use, as Kafka does.

Weir's deliberate difference from Kafka: the data partition's leader writes to this
store directly when it also leads the key's state partition (always on a single
node). A state partition led by another broker answers COORDINATOR_NOT_AVAILABLE
for now (see docs/queues.md, "Limits").
"""

from __future__ import annotations

import base64
import logging

import trio

from weir.broker.broker import Broker, wall_clock_ms
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


class ShareStateUnavailableError(Exception):
    """The key's state partition is not served here (yet): the caller answers
    `error_code` and the client retries."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


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
        self.background: trio.Nursery | None = None
        self._failed_partitions: dict[int, str] = {}
        # In a cluster: the partitions led and loaded here. None: a single node.
        self._led: set[int] | None = None if broker.cluster is None else set()

    @property
    def internal_topic_name(self) -> str:
        return SHARE_GROUP_STATE_TOPIC_NAME

    @property
    def partition_count(self) -> int:
        topic = self.broker.controller.topic(SHARE_GROUP_STATE_TOPIC_NAME)
        return topic.partition_count if topic else self._configured_partition_count

    @property
    def partitions_not_created(self) -> int:
        created = self.broker.controller.topic(SHARE_GROUP_STATE_TOPIC_NAME) is not None
        return 0 if created else self._configured_partition_count

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
            self.background.start_soon(self._prepare_in_background)
        await self._ready.wait()

    async def _prepare_in_background(self) -> None:
        try:
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
        for key in [k for k in self.latest if self.partition_for(k) == partition]:
            del self.latest[key]
            self._created_ms.pop(key, None)

    def _mark_failed(self, partition: int, error: Exception) -> None:
        if partition not in self._failed_partitions:
            log.error("%s-%d: its log failed (%s): its share partitions are not served "
                      "until the broker restarts", SHARE_GROUP_STATE_TOPIC_NAME,
                      partition, error)  # fmt: skip
            self._failed_partitions[partition] = f"its log failed: {error}"

    # -- reading and writing -----------------------------------------------------

    def _check_served(self, key: ShareKey) -> int:
        partition = self.partition_for(key)
        reason = self._failed_partitions.get(partition)
        if reason is None and self._led is not None and partition not in self._led:
            reason = f"this broker does not lead {SHARE_GROUP_STATE_TOPIC_NAME}-{partition}"
        if reason is not None:
            raise ShareStateUnavailableError(ErrorCode.COORDINATOR_NOT_AVAILABLE, reason)
        return partition

    def read(self, key: ShareKey) -> ShareState | None:
        """The key's durable state; None when it has none. Raises ShareStateUnavailableError."""
        self._check_served(key)
        return self.latest.get(key)

    async def write(self, key: ShareKey, state: ShareState | None) -> None:
        """Store `state` (None: delete the key) and return once durable. Raises
        ShareStateUnavailableError."""
        partition = self._check_served(key)
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
                raise ShareStateUnavailableError(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
                ) from exc
            self._mark_failed(partition, exc)
            raise ShareStateUnavailableError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from exc
        if state is None:
            self.latest.pop(key, None)
            self._created_ms.pop(key, None)
        else:
            self.latest[key] = state
        try:
            await wait_state_records(
                self.broker, SHARE_GROUP_STATE_TOPIC_NAME, partition, end_offset
            )
        except (LogError, LookupError) as exc:
            raise ShareStateUnavailableError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from exc

    def keys_of_group(self, group_id: str) -> list[ShareKey]:
        keys = [k for k in self.latest if k.group_id == group_id]
        return sorted(keys, key=lambda k: (str(k.topic_id), k.partition))
