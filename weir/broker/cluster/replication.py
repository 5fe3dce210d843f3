"""Kafka's ISR replication, on one broker of a cluster.

A partition replica on this broker is its partition's leader or a follower, as
its state in etcd says (`PartitionState`, applied by the cluster member).

Leader: every follower fetch reports the follower's durable log end (a follower
fetches offset N only once everything below N is fsynced on it). The leader keeps
each follower's progress and when it was last caught up; the high watermark is
the least durable end over the ISR (its own included), raised only while the ISR
has at least `min.insync.replicas` members and no eligible leader replica waits
(KIP-966's ELR, see weir/controller/partition_state.py), and never lowered. A
follower that has not caught up for `replica_lag_time_max_ms` (or whose fetch
connection closed and stayed closed for `replica_disconnect_grace_ms`) leaves the
ISR; one that reaches the high watermark (and the start of the current leader
epoch) joins it. Both changes are a compare-and-swap of the partition's state in
etcd, made only while this broker's registration lease is alive: a leader cut off
from etcd cannot shrink the ISR to itself and so can never acknowledge acks=all
alone. A leader that reaches etcd but no follower (none fetched for
`replica_lag_time_max_ms`) while its ISR is below `min.insync.replicas` hands
leadership to an eligible replica (`abdicate`), the same compare-and-swap.

Follower: `ReplicaFetcher` (one per leader broker) first truncates each new
partition where its log diverges from the leader's (OffsetForLeaderEpoch,
KIP-101/279; never to the high watermark), then fetches with its replica id,
appends the leader's batches as they are (`PartitionLog.append_replicated`),
waits until they are durable, and only then fetches again from the new end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import trio

from weir.broker.cluster.peer_client import PeerConnection, PeerError, PeerSecurity
from weir.broker.partition_replica import PartitionReplica
from weir.controller.partition_state import NO_LEADER, PartitionState
from weir.format.errors import ErrorCode
from weir.log.errors import LogClosed, LogError
from weir.wire.api_keys import ApiKey

log = logging.getLogger(__name__)

# Fetch v12: the newest version with topic names and the replica id as a field.
REPLICA_FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
REPLICA_FETCH_WAIT_MS = 500
REPLICA_FETCH_PARTITION_BYTES_MAX = 1024 * 1024
REPLICA_FETCH_BYTES_MAX = 16 * 1024 * 1024
REPLICA_REQUEST_TIMEOUT_S = 10.0
REPLICA_RETRY_BACKOFF_S = 0.2
# A follower's client id: the prefix, its node id and its replication token.
REPLICA_CLIENT_ID_PREFIX = "weir-replica-"


def monotonic_ms() -> int:
    """The clock of replication's durations (a follower's lag, since it was last
    caught up): monotonic, so a wall-clock step on a leader (NTP, an operator)
    neither drops every follower from the ISR nor keeps a lagging one in it."""
    return int(trio.current_time() * 1000)


@dataclass
class FollowerProgress:
    """What the leader knows of one follower (Kafka's Replica state)."""

    log_end_offset: int = -1  # unknown until it fetches
    caught_up_ms: int = 0
    # The leader's log end and the time at the follower's previous fetch: a fetch
    # that reaches that end proves the follower was caught up then.
    previous_fetch_leader_end: int = -1
    previous_fetch_ms: int = 0


@dataclass(eq=False)
class Replication:
    """One partition replica's role in the cluster: leader or follower."""

    node_id: int
    replica: PartitionReplica
    replicas: tuple[int, ...]
    state: PartitionState
    high_watermark: int = 0
    followers: dict[int, FollowerProgress] = field(default_factory=dict)
    # Where the current leader epoch began on this leader (a joining follower must reach it).
    epoch_start_offset: int = 0
    isr_change_in_flight: bool = False
    # Trio-clock seconds of the last follower fetch of this term (its start before
    # any): a leader no follower reaches may hand leadership over (see `abdicate`).
    follower_fetched_s: float = 0.0
    # Set (and replaced) whenever the high watermark moves or the role changes.
    changed: trio.Event = field(default_factory=trio.Event)
    # The broker's lease is alive (the cluster member's view): a fenced leader refuses produces.
    fenced: Callable[[], bool] = lambda: False

    def __post_init__(self) -> None:
        # From now on the log's high watermark is this one (its LSO follows it).
        self.replica.log.update_high_watermark(self.high_watermark)

    def set_high_watermark(self, high_watermark: int) -> None:
        self.high_watermark = high_watermark
        self.replica.log.update_high_watermark(high_watermark)

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.node_id and not self.fenced()

    @property
    def leader_id(self) -> int:
        return self.state.leader

    @property
    def in_sync_replicas(self) -> tuple[int, ...]:
        return self.state.isr

    def durable_end_moved(self) -> None:
        self.advance_high_watermark()

    def notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    # -- roles -------------------------------------------------------------------

    def become_leader(self, state: PartitionState, now_ms: int) -> None:
        partition_log = self.replica.log
        new_term = (
            state.leader_epoch != self.state.leader_epoch or self.state.leader != self.node_id
        )
        self.state = state
        if new_term:
            self.follower_fetched_s = trio.current_time()
            self.followers = {
                r: FollowerProgress(caught_up_ms=now_ms) for r in self.replicas if r != self.node_id
            }
            self.epoch_start_offset = partition_log.log_end_offset
            try:
                partition_log.begin_leader_epoch(state.leader_epoch)
            except LogError as exc:  # the log went offline: the broker takes it offline
                log.error("%s: cannot lead: %s", partition_log.directory.name, exc)
        else:  # the same term: replicas may have been added or removed (a move)
            for replica_id in self.replicas:
                if replica_id != self.node_id and replica_id not in self.followers:
                    self.followers[replica_id] = FollowerProgress(caught_up_ms=now_ms)
            for replica_id in [r for r in self.followers if r not in self.replicas]:
                del self.followers[replica_id]
        self.set_high_watermark(min(self.high_watermark, partition_log.log_end_offset))
        self.advance_high_watermark()
        self.notify()

    def become_follower(self, state: PartitionState) -> None:
        self.state = state
        self.followers = {}
        self.notify()

    def go_offline(self) -> None:
        """This replica's log failed (a write or fsync): it neither leads nor
        follows any more, and acks=all writes waiting on it stop waiting
        (NOT_LEADER_OR_FOLLOWER: never acknowledged here)."""
        self.become_follower(replace(self.state, leader=NO_LEADER))

    def forget_follower(self, replica_id: int) -> None:
        """The follower's replica went offline: its progress no longer counts as
        fetching (so it is not added back to the ISR) until it fetches again."""
        if replica_id in self.followers:
            self.followers[replica_id] = FollowerProgress()

    # -- leader ------------------------------------------------------------------

    def min_insync_replicas(self) -> int:
        return self.replica.log.config.min_insync_replicas

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        progress = self.followers.get(replica_id)
        if progress is None:
            return
        self.follower_fetched_s = trio.current_time()
        leader_end = self.replica.log.log_end_offset
        if fetch_offset >= leader_end:
            progress.caught_up_ms = now_ms
        elif fetch_offset >= progress.previous_fetch_leader_end >= 0:
            progress.caught_up_ms = max(progress.caught_up_ms, progress.previous_fetch_ms)
        progress.previous_fetch_leader_end = leader_end
        progress.previous_fetch_ms = now_ms
        progress.log_end_offset = min(fetch_offset, leader_end)
        self.advance_high_watermark()

    def advance_high_watermark(self) -> bool:
        """Raise the high watermark to the least durable end over the ISR, while
        the ISR meets min.insync.replicas (KIP-966: a shrunken ISR commits nothing)
        and the ELR is empty (its members must keep every committed record: one
        left over from a lowered min.insync.replicas is cleared first, by the
        cluster member's ISR maintenance)."""
        if self.state.leader != self.node_id:
            return False
        isr = self.state.isr
        if len(isr) < self.min_insync_replicas() or self.state.elr:
            return False
        ends = [self.replica.log.durable_end_offset]
        for replica_id in isr:
            if replica_id != self.node_id:
                progress = self.followers.get(replica_id)
                ends.append(progress.log_end_offset if progress is not None else -1)
        candidate = min(ends)
        if candidate <= self.high_watermark:
            return False
        self.set_high_watermark(candidate)
        assert self.high_watermark <= self.replica.log.log_end_offset, "HW <= LEO"
        self.replica.wake_fetchers()
        self.notify()
        return True

    def lagging_followers(self, now_ms: int, lag_max_ms: int) -> list[int]:
        return [
            r
            for r in self.state.isr
            if r != self.node_id
            and (p := self.followers.get(r)) is not None
            and now_ms - p.caught_up_ms > lag_max_ms
        ]

    def caught_up_followers(self, now_ms: int, lag_max_ms: int) -> list[int]:
        """Followers outside the ISR that reached the high watermark and the
        start of this leader epoch, and are fetching (caught up within the lag
        bound): they may join."""
        joining = []
        for replica_id, progress in self.followers.items():
            if replica_id in self.state.isr:
                continue
            end = progress.log_end_offset
            fetching = now_ms - progress.caught_up_ms <= lag_max_ms and end >= 0
            if fetching and end >= self.high_watermark and end >= self.epoch_start_offset:
                joining.append(replica_id)
        return joining

    def cut_off(self, now_s: float, lag_max_ms: int) -> bool:
        """This leader's ISR is below min.insync.replicas and no follower fetched
        for `lag_max_ms`: it may hand leadership to an eligible replica."""
        return (
            self.state.leader == self.node_id
            and len(self.state.isr) < self.min_insync_replicas()
            and now_s - self.follower_fetched_s >= lag_max_ms / 1000
        )

    async def wait_committed(self, offset: int) -> ErrorCode:
        """Wait until the high watermark reaches `offset` (acks=all)."""
        while self.high_watermark < offset:
            if self.state.leader != self.node_id:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if len(self.state.isr) < self.min_insync_replicas():
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            await self.changed.wait()
        return ErrorCode.NONE


# -- follower ------------------------------------------------------------------------


@dataclass
class FollowedPartition:
    replica: PartitionReplica
    replication: Replication
    leader_epoch: int
    truncated: bool = False


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(
        self,
        node_id: int,
        leader_id: int,
        address: Callable[[], tuple[str, int] | None],
        client_id: str,
        *,
        frame_bytes_max: int,
        now_ms: Callable[[], int],
        security: PeerSecurity | None = None,
    ) -> None:
        self.node_id = node_id
        self._security = security
        self.leader_id = leader_id
        self._address = address
        self._client_id = client_id
        self._frame_bytes_max = frame_bytes_max
        self._now_ms = now_ms
        self.partitions: dict[tuple[str, int], FollowedPartition] = {}
        self._changed = trio.Event()
        self.cancel_scope = trio.CancelScope()

    def follow(self, key: tuple[str, int], followed: FollowedPartition) -> None:
        current = self.partitions.get(key)
        if current is not None and current.leader_epoch == followed.leader_epoch:
            return
        self.partitions[key] = followed
        self._wake()

    def unfollow(self, key: tuple[str, int]) -> None:
        if self.partitions.pop(key, None) is not None:
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def run(self) -> None:
        with self.cancel_scope:
            while True:
                if not self.partitions:
                    await self._changed.wait()
                    continue
                address = self._address()
                if address is None:
                    await self._pause()
                    continue
                try:
                    connection = await PeerConnection.open(
                        *address,
                        self._client_id,
                        frame_bytes_max=self._frame_bytes_max,
                        timeout_s=REPLICA_REQUEST_TIMEOUT_S,
                        security=self._security,
                    )
                except PeerError as exc:
                    log.debug("replica fetcher for leader %d: %s", self.leader_id, exc)
                    await self._pause()
                    continue
                try:
                    await self._fetch_loop(connection)
                except PeerError as exc:
                    log.info("replica fetcher for leader %d: %s", self.leader_id, exc)
                    await self._pause()
                except Exception:  # a bug here must not stop the broker: log, retry
                    log.exception("replica fetcher for leader %d failed", self.leader_id)
                    await self._pause()
                finally:
                    await connection.aclose()

    async def _pause(self) -> None:
        with trio.move_on_after(REPLICA_RETRY_BACKOFF_S):
            await self._changed.wait()

    async def _fetch_loop(self, connection: PeerConnection) -> None:
        while self.partitions:
            untruncated = {k: f for k, f in self.partitions.items() if not f.truncated}
            if untruncated:
                await self._truncate(connection, untruncated)
            fetched = {k: f for k, f in self.partitions.items() if f.truncated}
            if not fetched:
                await self._pause()
                continue
            await self._fetch(connection, fetched)

    async def _truncate(
        self, connection: PeerConnection, partitions: dict[tuple[str, int], FollowedPartition]
    ) -> None:
        """KIP-279: ask the leader where our latest epoch ends on it; cut there."""
        topics: dict[str, list[dict[str, int]]] = {}
        for (name, index), asking in partitions.items():
            latest = asking.replica.log.latest_epoch
            topics.setdefault(name, []).append(
                {
                    "partition": index,
                    "current_leader_epoch": asking.leader_epoch,
                    "leader_epoch": -1 if latest is None else latest,
                }
            )
        request = {
            "replica_id": self.node_id,
            "topics": [{"topic": t, "partitions": parts} for t, parts in topics.items()],
        }
        response = await connection.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            request,
            REPLICA_REQUEST_TIMEOUT_S,
        )
        for topic in response.topics:
            for answer in topic.partitions:
                followed = partitions.get((topic.topic, answer.partition))
                if (
                    followed is None
                    or self.partitions.get((topic.topic, answer.partition)) is not followed
                ):
                    continue
                if answer.error_code != ErrorCode.NONE:
                    log.info("%s-%d: leader %d answered OffsetForLeaderEpoch with %s",
                             topic.topic, answer.partition, self.leader_id,
                             ErrorCode(answer.error_code).name)  # fmt: skip
                    continue
                try:
                    self._truncate_partition(followed, answer.leader_epoch, answer.end_offset)
                except LogError as exc:  # retired meanwhile (moved away, topic deleted)
                    log.info("%s-%d: not truncated: %s", topic.topic, answer.partition, exc)

    def _truncate_partition(
        self, followed: FollowedPartition, leader_epoch: int, end_offset: int
    ) -> None:
        """KIP-279: cut where the leader's answer says; when this log lacks the
        leader's epoch the cut is provisional and the leader is asked again (with
        the log's new latest epoch) before fetching."""
        partition_log = followed.replica.log
        if partition_log.log_end_offset == partition_log.log_start_offset:
            # Nothing to compare; an epoch this log led without writing goes.
            partition_log.truncate_to(partition_log.log_end_offset)
            followed.truncated = True
            return
        point = partition_log.truncation_point(leader_epoch, end_offset)
        if point.offset < partition_log.log_end_offset:
            log.warning("%s: truncating from %d to %d to match leader %d (epoch %d)",
                        partition_log.directory.name, partition_log.log_end_offset, point.offset,
                        self.leader_id, leader_epoch)  # fmt: skip
        partition_log.truncate_to(point.offset)
        followed.replication.set_high_watermark(
            min(followed.replication.high_watermark, partition_log.log_end_offset)
        )
        followed.truncated = point.complete

    async def _fetch(
        self, connection: PeerConnection, partitions: dict[tuple[str, int], FollowedPartition]
    ) -> None:
        topics: dict[str, list[dict[str, int]]] = {}
        for (name, index), fetching in partitions.items():
            partition_log = fetching.replica.log
            topics.setdefault(name, []).append(
                {
                    "partition": index,
                    "current_leader_epoch": fetching.leader_epoch,
                    "fetch_offset": partition_log.log_end_offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": partition_log.log_start_offset,
                    "partition_max_bytes": REPLICA_FETCH_PARTITION_BYTES_MAX,
                }
            )
        request = {
            "replica_id": self.node_id,
            "max_wait_ms": REPLICA_FETCH_WAIT_MS,
            "min_bytes": 1,
            "max_bytes": REPLICA_FETCH_BYTES_MAX,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": parts} for t, parts in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        response = await connection.request(
            ApiKey.FETCH, REPLICA_FETCH_VERSION, request, REPLICA_REQUEST_TIMEOUT_S
        )
        if response.error_code != ErrorCode.NONE:
            raise PeerError(f"fetch refused: {ErrorCode(response.error_code).name}")
        appended: list[tuple[FollowedPartition, int]] = []
        for topic in response.responses:
            for answer in topic.partitions:
                key = (topic.topic, answer.partition_index)
                followed = partitions.get(key)
                if followed is None or self.partitions.get(key) is not followed:
                    continue
                end = self._apply(followed, answer)
                if end is not None:
                    appended.append((followed, end))
        for followed, end in appended:
            await self._wait_durable(followed, end)

    def _apply(self, followed: FollowedPartition, answer: object) -> int | None:
        """Append one partition's fetched records; the new log end, or None."""
        error = ErrorCode(getattr(answer, "error_code"))  # noqa: B009 - generated class
        partition_log = followed.replica.log
        if error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                     ErrorCode.UNKNOWN_LEADER_EPOCH,
                     ErrorCode.KAFKA_STORAGE_ERROR):  # fmt: skip
            # The metadata will move this partition to its new leader (a leader
            # whose replica went offline is replaced by the controller).
            return None
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_start = getattr(answer, "log_start_offset")  # noqa: B009
            if leader_start > partition_log.log_end_offset:
                try:  # the leader deleted what this log lacks: start over at its start
                    partition_log.truncate_fully_and_start_at(leader_start)
                except LogError as exc:
                    log.info("%s: not restarted: %s", partition_log.directory.name, exc)
            else:
                followed.truncated = False
            return None
        if error != ErrorCode.NONE:
            log.info("%s: leader %d answered %s", partition_log.directory.name,
                     self.leader_id, error.name)  # fmt: skip
            return None
        records = getattr(answer, "records")  # noqa: B009
        if records:
            try:
                partition_log.append_replicated(records, now_ms=self._now_ms())
            except LogClosed:
                return None  # retired meanwhile (moved away, topic deleted)
            except LogError as exc:
                log.error("%s: replicated append failed: %s", partition_log.directory.name, exc)
                followed.truncated = False
                return None
        leader_hw = getattr(answer, "high_watermark")  # noqa: B009
        replication = followed.replication
        replication.set_high_watermark(
            max(replication.high_watermark, min(leader_hw, partition_log.log_end_offset))
        )
        return partition_log.log_end_offset

    @staticmethod
    async def _wait_durable(followed: FollowedPartition, end: int) -> None:
        try:
            await followed.replica.log.wait_durable(end)
        except LogError as exc:
            log.warning("%s: replicated records not durable: %s",
                        followed.replica.log.directory.name, exc)  # fmt: skip
