"""Writing a transaction's commit or abort markers: on this broker, or on the leader
of each partition through WriteTxnMarkers.

`append_marker_here` is the one place a marker enters a log: the coordinator's own
writes to partitions led here and the WriteTxnMarkers handler both reach it through
`write_markers_here`. It appends the control batch (the log checks the producer and
coordinator epochs) and hands a `__consumer_offsets` marker to the group service
(the transaction's offsets become committed or are dropped); `write_markers_here`
then waits until the markers are committed (acks=all), as Kafka's marker writes do.

`MarkerWriter.write` is the coordinator's side: it groups the partitions by leader
and returns those written; the caller retries the rest (leaders move, brokers stop).
A partition that no longer exists needs no marker and counts as written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.cluster.peer_client import PeerError, PeerPool
from weir.broker.coordinators.group_service import GroupService
from weir.broker.partition_replica import PartitionReplica
from weir.controller.controller import OFFSETS_TOPIC_NAME
from weir.format.errors import ErrorCode
from weir.log.errors import LogError
from weir.txn.pending import MarkerRequest
from weir.txn.transaction_records import TopicPartition, partitions_by_topic
from weir.wire.api_keys import ApiKey
from weir.wire.messages.transactions import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersRequestMarker,
    WriteTxnMarkersRequestTopic,
    WriteTxnMarkersResponse,
)

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 2  # carries the transaction version (KIP-1228)
PEER_TIMEOUT_S = 10.0
# Errors after which a marker is not retried by this coordinator: the partition has
# seen a newer producer epoch or coordinator (this coordinator is deposed; the
# current one completes the transaction).
FENCED_ERRORS = frozenset(
    {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
)


@dataclass(frozen=True, slots=True)
class Marker:
    """What one marker says (a MarkerRequest without its partitions)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    transaction_version: int


def append_marker_here(
    broker: Broker, marker: Marker, topic: str, index: int
) -> tuple[PartitionReplica, int] | ErrorCode:
    """Append the marker to a partition this broker leads: (its replica, the offset
    to wait for), or the error (not led here, unknown, refused by the log)."""
    replica = broker.partition(topic, index)
    if replica is None:
        return broker.missing_partition_error(topic, index)
    if not replica.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    try:
        result = replica.log.append_txn_marker(
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            coordinator_epoch=marker.coordinator_epoch,
            commit=marker.commit,
            leader_epoch=replica.leader_epoch,
            now_ms=wall_clock_ms(),
            transaction_version=marker.transaction_version,
        )
    except LogError as exc:
        return exc.error_code
    replica.wake_followers()
    if topic == OFFSETS_TOPIC_NAME and isinstance(broker.groups, GroupService):
        broker.groups.complete_transaction(
            index, marker.producer_id, marker.commit, result.base_offset
        )
    return replica, result.last_offset + 1


async def write_markers_here(
    broker: Broker, marker: Marker, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, ErrorCode]:
    """Append the marker to each partition now, then wait until every append is
    committed, together (their fsyncs share rounds). Only partitions appended get a
    task: a request naming partitions not led here is answered without one each."""
    errors: dict[TopicPartition, ErrorCode] = {}
    appended: dict[TopicPartition, tuple[PartitionReplica, int]] = {}
    for partition in dict.fromkeys(partitions):
        outcome = append_marker_here(broker, marker, *partition)
        if isinstance(outcome, ErrorCode):
            errors[partition] = outcome
        else:
            appended[partition] = outcome

    async def wait(partition: TopicPartition, replica: PartitionReplica, end: int) -> None:
        errors[partition] = await _wait_committed(broker, replica, end)

    async with trio.open_nursery() as nursery:
        for partition, (replica, end_offset) in appended.items():
            nursery.start_soon(wait, partition, replica, end_offset)
    return errors


async def _wait_committed(broker: Broker, replica: PartitionReplica, end_offset: int) -> ErrorCode:
    timeout_s = broker.config.limits.produce_timeout_ms_max / 1000
    with trio.move_on_after(timeout_s):
        try:
            await replica.log.wait_durable(end_offset)
        except LogError as exc:
            return exc.error_code
        replication = replica.replication
        if replication is None:
            replica.wake_fetchers()
            return ErrorCode.NONE
        replication.durable_end_moved()
        return await replication.wait_committed(end_offset)
    return ErrorCode.REQUEST_TIMED_OUT


class MarkerWriter:
    """The coordinator's marker writes, here or through a connection per peer."""

    def __init__(self, broker: Broker, peers: PeerPool) -> None:
        self.broker = broker
        self.peers = peers

    async def write(
        self, request: MarkerRequest, partitions: Iterable[TopicPartition]
    ) -> set[TopicPartition]:
        """Write the marker to `partitions`, all at once (the partitions led here
        share fsync rounds; each other leader gets one WriteTxnMarkers); return
        those written (or gone)."""
        marker = Marker(
            request.producer_id,
            request.producer_epoch,
            request.coordinator_epoch,
            request.commit,
            request.transaction_version,
        )
        written: set[TopicPartition] = set()
        by_leader: dict[int, list[TopicPartition]] = {}
        for topic, index in sorted(partitions):
            leader = self._leader(topic, index)
            if leader is None:
                written.add((topic, index))  # deleted: nothing to mark
            elif leader != -1:  # -1: no leader now, retried
                by_leader.setdefault(leader, []).append((topic, index))
        errors: dict[TopicPartition, ErrorCode] = {}

        async def write_to(node_id: int, led: list[TopicPartition]) -> None:
            errors.update(await self._write_to_leader(node_id, marker, led))

        async with trio.open_nursery() as nursery:
            for node_id, led in by_leader.items():
                nursery.start_soon(write_to, node_id, led)
        written |= {tp for tp, error in errors.items() if self._settled(request, *tp, error)}
        return written

    async def _write_to_leader(
        self, node_id: int, marker: Marker, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        if node_id != self.broker.config.node_id:
            return await self._write_remote(node_id, marker, partitions)
        return await write_markers_here(self.broker, marker, partitions)

    def _settled(self, request: MarkerRequest, topic: str, index: int, error: ErrorCode) -> bool:
        if error == ErrorCode.NONE:
            return True
        if error in FENCED_ERRORS:
            log.warning("marker for %s of %r on %s-%d refused (%s): a newer epoch or "
                        "coordinator was seen there; not retried",
                        "commit" if request.commit else "abort", request.transactional_id,
                        topic, index, error.name)  # fmt: skip
            return True
        # A partition deleted meanwhile needs no marker.
        return error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self._leader(topic, index) is None

    def _leader(self, topic: str, index: int) -> int | None:
        """The partition's leader: this broker's id on a single node; -1 without one
        now; None when the partition does not exist."""
        record = self.broker.controller.topic(topic)
        if record is None or not 0 <= index < record.partition_count:
            return None
        cluster = self.broker.cluster
        if cluster is None:
            return self.broker.config.node_id
        leader = cluster.partition_state(record, index).leader
        live = {b.node_id for b in cluster.live_brokers()}
        return leader if leader in live else -1

    async def _write_remote(
        self, node_id: int, marker: Marker, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        topics = partitions_by_topic(partitions)
        request = WriteTxnMarkersRequest(
            markers=[
                WriteTxnMarkersRequestMarker(
                    producer_id=marker.producer_id,
                    producer_epoch=marker.producer_epoch,
                    transaction_result=marker.commit,
                    topics=[
                        WriteTxnMarkersRequestTopic(name=name, partition_indexes=indexes)
                        for name, indexes in topics.items()
                    ],
                    coordinator_epoch=marker.coordinator_epoch,
                    transaction_version=marker.transaction_version,
                )
            ]
        )
        failed = dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            response = await self._request(node_id, request)
        except PeerError as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", node_id, exc)
            return failed
        errors: dict[TopicPartition, ErrorCode] = {}
        for result in response.markers:
            for topic_result in result.topics:
                for partition in topic_result.partitions:
                    errors[(topic_result.name, partition.partition_index)] = ErrorCode(
                        partition.error_code
                    )
        return {tp: errors.get(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER) for tp in partitions}

    async def _request(
        self, node_id: int, request: WriteTxnMarkersRequest
    ) -> WriteTxnMarkersResponse:
        response: WriteTxnMarkersResponse = await self.peers.request_live(
            self.broker.cluster, node_id, ApiKey.WRITE_TXN_MARKERS,
            WRITE_TXN_MARKERS_VERSION, request,
        )  # fmt: skip
        return response
