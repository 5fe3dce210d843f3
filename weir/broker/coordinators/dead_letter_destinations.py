"""Where a dead-letter round writes: the dead-letter partition, led by this broker
(`LocalDestination`, its log) or by another broker of the cluster
(`RemoteDestination`, Kafka requests over the broker's own connection to it).

Both give the three steps of a round (`weir/broker/coordinators/dead_letters.py`):

- `end_offset`: where the next dead letter would go, for the mark (step d). Here the
  log end offset; on another broker the high watermark (ListOffsets LATEST), which
  is at or below the leader's log end, so the mark is still at or below every dead
  letter appended after it;
- `read(first)`: the dead letters from `first` to the end that is durable (step c):
  here the log, once its end is durable; on another broker consumer Fetches up to
  the high watermark;
- `append(batches)`: appended and durable (step e): here appended and waited for
  until committed; on another broker a Produce with acks=all, which the leader
  answers once the batches are committed on its ISR;
- `settle()`: first thing in a round (before step c): on another broker, the appends
  of an earlier round that got no answer, or an error after they may have been
  appended (a timeout, a lost connection, NOT_LEADER_OR_FOLLOWER as leadership
  moved), sent again until answered; nothing here.

An unanswered append may still be committed later (by the old leader's in-sync
follower, once it leads). Reading to the high watermark could miss it and the round
would write those dead letters again. So the remote appends are idempotent: this
broker's `RemoteWriter` takes a producer id (Kafka's idempotent producer, epoch 0)
and numbers its batches per dead-letter partition; an unanswered batch is kept and
sent again, byte for byte, before anything else goes to that partition, and the
leader (whichever broker it is then: the producer state is in the log) answers a
copy it has with success, not a second append. The remote path's one gap,
documented in docs/queues.md: when the broker writing dead letters dies with an
append unanswered, the next writer (another broker, its own producer id) reads only
to the high watermark; if those letters are still uncommitted then, they may be
written again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.cluster.peer_client import PeerError, PeerPool, peer_security
from weir.broker.coordinators.state_topic import wait_state_records
from weir.broker.partition_replica import PartitionReplica
from weir.controller.controller import ControllerError
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    InvalidBatch,
    Record,
    RecordInput,
    build_batch,
    decode_records,
)
from weir.log.disk_executor import DiskJob
from weir.log.errors import LogError, OffsetOutOfRange
from weir.log.page_cache import ReadNotCached, warm
from weir.log.settings import BATCH_INFLATE_BYTES_MAX
from weir.wire.api_keys import ApiKey
from weir.wire.messages.fetch import FetchRequest, FetchRequestPartition, FetchRequestTopic
from weir.wire.messages.list_offsets import (
    ListOffsetsRequest,
    ListOffsetsRequestPartition,
    ListOffsetsRequestTopic,
)
from weir.wire.messages.produce import (
    ProduceRequest,
    ProduceRequestPartitionData,
    ProduceRequestTopicData,
)

log = logging.getLogger(__name__)

# Bytes one read of a log (or one Fetch of a partition) asks for.
READ_BYTES_MAX = 1024 * 1024
# One request to the dead-letter partition's leader; a Produce is answered once
# committed, so this bounds a round's wait for its followers too.
PEER_TIMEOUT_S = 10.0
FETCH_VERSION = 12  # topic names, not ids
LIST_OFFSETS_VERSION = 7
PRODUCE_VERSION = 9
LATEST_TIMESTAMP = -1
ACKS_ALL = -1
NO_PRODUCER_ID = -1
SEQUENCE_WRAP = 2**31  # a producer's sequence numbers wrap past INT32_MAX


class RoundDeferredError(Exception):
    """The round cannot be done now (not led here, not durable): try again later."""


@dataclass(frozen=True)
class LocalDestination:
    """The dead-letter partition, led by this broker."""

    broker: Broker
    topic: TopicRecord
    replica: PartitionReplica

    @property
    def index(self) -> int:
        return self.replica.index

    async def end_offset(self) -> int:
        return self.replica.log.log_end_offset

    async def read(self, first: int) -> list[Record]:
        replica = self.replica
        end_offset = replica.log.log_end_offset
        await self._wait_durable(end_offset)
        return await read_log(
            self.broker, replica, max(first, replica.log.log_start_offset), end_offset
        )

    async def settle(self) -> None:
        """Nothing waits: a local append is answered or was never made."""

    async def append(self, batches: Sequence[Sequence[RecordInput]]) -> None:
        replica = self.replica
        if not replica.is_leader:
            raise RoundDeferredError(f"{replica.topic.name}-{replica.index} is no longer led here")
        now_ms = wall_clock_ms()
        end_offset = replica.log.log_end_offset
        for records in batches:
            batch = build_batch(records, timestamp_ms=now_ms)
            try:
                result = replica.log.append(batch, leader_epoch=replica.leader_epoch, now_ms=now_ms)
            except LogError as exc:
                raise RoundDeferredError(f"appending to {replica.topic.name}: {exc}") from exc
            end_offset = result.last_offset + 1
        replica.wake_followers()
        await self._wait_durable(end_offset)

    async def _wait_durable(self, end_offset: int) -> None:
        replica = self.replica
        try:
            await wait_state_records(self.broker, replica.topic.name, replica.index, end_offset)
        except (LogError, LookupError) as exc:
            raise RoundDeferredError(f"dead letters not durable: {exc}") from exc


class RemoteWriter:
    """What a broker's dead-letter writer keeps for the partitions other brokers lead:
    the connections, its producer id and each partition's next sequence, and the
    batches sent to a partition that got no answer yet (`settle`)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.peers = PeerPool(
            f"weir-dead-letters-{broker.config.node_id}",
            frame_bytes_max=broker.config.limits.frame_bytes_max,
            timeout_s=PEER_TIMEOUT_S,
            security=peer_security(broker.config),
        )
        self.producer_id = NO_PRODUCER_ID
        self.next_sequence: dict[tuple[str, int], int] = {}
        self.unsettled: dict[tuple[str, int], list[bytes]] = {}

    async def take_producer_id(self) -> int:
        if self.producer_id == NO_PRODUCER_ID:
            allocator = self.broker.producer_ids
            if not allocator.available:
                try:
                    await self.broker.topic_changes.reserve_producer_ids()
                except (ControllerError, OSError) as exc:
                    raise RoundDeferredError(f"no producer id: {exc}") from exc
            producer_id = allocator.take()
            if producer_id is None:
                raise RoundDeferredError("no producer id reserved")
            self.producer_id = producer_id
        return self.producer_id

    def sequence_lost(self, partition: tuple[str, int]) -> None:
        """`partition`'s leader has no state of our producer's last batch there: the
        unanswered batches are not in its log (the records are still ARCHIVING; a
        later round writes them). A new producer id numbers everything from 0; the
        other partitions' unanswered batches are still sent again as they are (their
        leaders know the old id)."""
        self.producer_id = NO_PRODUCER_ID
        self.next_sequence.clear()
        self.unsettled.pop(partition, None)

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self.peers.aclose()


@dataclass(frozen=True)
class RemoteDestination:
    """The dead-letter partition, led by broker `leader_id`."""

    broker: Broker
    writer: RemoteWriter
    topic: TopicRecord
    index: int
    leader_id: int

    async def end_offset(self) -> int:
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsRequestTopic(
                    self.topic.name,
                    [ListOffsetsRequestPartition(self.index, timestamp=LATEST_TIMESTAMP)],
                )
            ],
        )
        response = await self._request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, request)
        partition = _only(response.topics, "partitions")
        self._raise_for(partition.error_code, "ListOffsets")
        return int(partition.offset)

    async def read(self, first: int) -> list[Record]:
        records: list[Record] = []
        offset = first
        while True:
            partition = await self._fetch(offset)
            if partition.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                if 0 <= offset < partition.log_start_offset:
                    offset = partition.log_start_offset  # retention passed the mark
                    continue
                return records  # past the end (a truncation): nothing there
            self._raise_for(partition.error_code, "Fetch")
            decoded = _decode(partition.records or b"", self.topic.name, self.index, offset)
            records.extend(r for r in decoded if offset <= r.offset < partition.high_watermark)
            next_offset = max((r.offset for r in decoded), default=offset - 1) + 1
            if next_offset <= offset or next_offset >= partition.high_watermark:
                return records
            offset = next_offset

    @property
    def _partition(self) -> tuple[str, int]:
        return self.topic.name, self.index

    async def settle(self) -> None:
        """Send again, as they were, the batches an earlier round got no answer for."""
        if self.writer.unsettled.get(self._partition):
            await self._send_unsettled()

    async def append(self, batches: Sequence[Sequence[RecordInput]]) -> None:
        await self.settle()
        producer_id = await self.writer.take_producer_id()
        sequence = self.writer.next_sequence.get(self._partition, 0)
        now_ms = wall_clock_ms()
        built = []
        for records in batches:
            built.append(
                build_batch(
                    records,
                    timestamp_ms=now_ms,
                    producer_id=producer_id,
                    producer_epoch=0,
                    base_sequence=sequence,
                )
            )
            sequence = (sequence + len(records)) % SEQUENCE_WRAP
        self.writer.unsettled[self._partition] = built
        self.writer.next_sequence[self._partition] = sequence
        await self._send_unsettled()

    async def _send_unsettled(self) -> None:
        """The partition's unanswered batches, in order; each leaves the list once the
        leader answered it (a copy it has already counts)."""
        pending = self.writer.unsettled[self._partition]
        while pending:
            request = ProduceRequest(
                acks=ACKS_ALL,
                timeout_ms=int(PEER_TIMEOUT_S * 1000),
                topic_data=[
                    ProduceRequestTopicData(
                        self.topic.name, [ProduceRequestPartitionData(self.index, pending[0])]
                    )
                ],
            )
            response = await self._request(ApiKey.PRODUCE, PRODUCE_VERSION, request)
            error_code = _only(response.responses, "partition_responses").error_code
            if error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                self.writer.sequence_lost(self._partition)
            # UNKNOWN_PRODUCER_ID: the leader has not seen our id's reservation yet
            # (refused before anything was written): sent again in a later round.
            if error_code not in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                self._raise_for(error_code, "Produce")
            pending.pop(0)
        del self.writer.unsettled[self._partition]

    async def _fetch(self, offset: int) -> Any:
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=READ_BYTES_MAX,
            topics=[
                FetchRequestTopic(
                    topic=self.topic.name,
                    partitions=[
                        FetchRequestPartition(
                            partition=self.index,
                            fetch_offset=offset,
                            partition_max_bytes=READ_BYTES_MAX,
                        )
                    ],
                )
            ],
        )
        response = await self._request(ApiKey.FETCH, FETCH_VERSION, request)
        if response.error_code:
            self._raise_for(response.error_code, "Fetch")
        return _only(response.responses, "partitions")

    async def _request(self, api_key: ApiKey, version: int, body: object) -> Any:
        where = f"{self.topic.name}-{self.index} (leader {self.leader_id})"
        try:
            return await self.writer.peers.request_live(
                self.broker.cluster, self.leader_id, api_key, version, body
            )
        except PeerError as exc:
            raise RoundDeferredError(f"{where}: {api_key.name}: {exc}") from exc

    def _raise_for(self, error_code: int, what: str) -> None:
        if error_code != ErrorCode.NONE:
            try:
                name = ErrorCode(error_code).name
            except ValueError:
                name = str(error_code)
            raise RoundDeferredError(
                f"{self.topic.name}-{self.index} on broker {self.leader_id}: {what}: {name}"
            )


Destination = LocalDestination | RemoteDestination


async def read_log(broker: Broker, replica: PartitionReplica, first: int, end: int) -> list[Record]:
    """The records of `replica`'s log in `[first, end)` (fewer if the log start passed
    them), read up to the high watermark: a log read returns whole batches below its
    end, and the last record wanted may sit mid-batch."""
    records: list[Record] = []
    offset = first
    while offset < end:
        data = await _read_batches(broker, replica, offset)
        if not data:
            break
        decoded = _decode(data, replica.topic.name, replica.index, offset)
        records.extend(r for r in decoded if offset <= r.offset < end)
        next_offset = max((r.offset for r in decoded), default=offset - 1) + 1
        if next_offset <= offset:
            break
        offset = next_offset
    return records


async def _read_batches(
    broker: Broker, replica: PartitionReplica, offset: int
) -> bytes | bytearray:
    for attempt in range(2):
        try:
            return replica.log.read(
                offset,
                bytes_max=READ_BYTES_MAX,
                end_offset=replica.high_watermark,
                cached_only=attempt == 0,
            ).records
        except ReadNotCached as exc:
            if exc.cold.file.try_hold():
                await broker.disk.run(DiskJob.COLD_READ, partial(warm, [exc.cold]))
        except OffsetOutOfRange:
            return b""
        except LogError as exc:
            raise RoundDeferredError(f"reading {replica.topic.name}: {exc}") from exc
    return b""


def _decode(
    data: bytes | bytearray | memoryview, topic: str, index: int, offset: int
) -> list[Record]:
    try:
        return list(decode_records(data, uncompressed_bytes_max=BATCH_INFLATE_BYTES_MAX))
    except InvalidBatch as exc:
        log.warning("%s-%d at %d: unreadable: %s", topic, index, offset, exc)
        return []


def _only(items: list[Any], inner: str) -> Any:
    """The one partition of a one-partition response."""
    try:
        (item,) = items
        (partition,) = getattr(item, inner)
    except ValueError:
        raise RoundDeferredError("the leader answered for another partition") from None
    return partition
