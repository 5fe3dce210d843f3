"""A stand-in for the HTTP foundation's KafkaGateway and ShareDirect on a single node
(the interfaces of `weir.broker.http.kafka_gateway` and
`weir.broker.coordinators.share_direct`), until those land: Kafka APIs run in process
as the caller, share-group operations on the share partitions led here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.coordinators.share_partitions import ShareLeader
from weir.broker.coordinators.share_service import ShareService
from weir.broker.coordinators.share_state_service import ShareKey, ShareStateUnavailableError
from weir.broker.handlers.apis import HANDLERS
from weir.broker.handlers.context import EncodedResponse, RequestContext, resolve
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.broker.handlers.share_fetch import _acquire_partition, _Limits, _wait_for_records
from weir.broker.partition_replica import PartitionReplica
from weir.format.errors import ErrorCode
from weir.format.record_batch import InvalidBatch, decode_records
from weir.security.acl import AclOperation
from weir.sharecoord.delivery_times import DeliveryPolicy
from weir.sharecoord.share_partition import AckBatch, AcknowledgeType, RecordState
from weir.wire.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)

HttpCaller = RequestAuthorization | None
SHARE_READ_BYTES_MAX = 1024 * 1024


class LocalKafka:
    """`send` runs a Kafka API on this broker as the caller (its ACLs checked by the
    handler, as on the Kafka listener)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def send(
        self, caller: HttpCaller, api_key: int, version: int, body: Mapping[str, Any]
    ) -> Any:
        frame = memoryview(encode_request(api_key, version, 1, "weir-sqs", body))[4:]
        header = parse_request_header(frame)
        context = RequestContext(header, self.broker, authorization=caller)
        response = await resolve(HANDLERS[api_key](context, decode_request(header, frame)))
        assert response is not None
        if isinstance(response, EncodedResponse):
            encoded = response.frame
        else:
            encoded = encode_response(api_key, version, header.correlation_id, response)
        return decode_response(api_key, version, memoryview(encoded)[4:])[1]


@dataclass(frozen=True)
class DirectRecord:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    delivery_count: int


@dataclass
class Acquired:
    error: ErrorCode = ErrorCode.NONE
    records: list[DirectRecord] = field(default_factory=list)


class LocalShareDirect:
    """Session-less share-group operations on the share partitions led here."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @property
    def service(self) -> ShareService:
        service = self.broker.shares
        assert isinstance(service, ShareService)
        return service

    def _allowed(self, caller: HttpCaller, group_id: str, topic: str) -> bool:
        return caller is None or (
            caller.allows_group(AclOperation.READ, group_id)
            and caller.allows_topic(AclOperation.READ, topic)
        )

    async def _leader(
        self, group_id: str, topic: str, partition: int
    ) -> tuple[PartitionReplica, ShareLeader] | ErrorCode:
        replica = self.broker.lookup(topic, partition)
        if isinstance(replica, ErrorCode):
            return replica
        key = ShareKey(group_id, replica.topic.topic_id, partition)
        try:
            return replica, await self.service.partitions.leader(key, replica)
        except ShareStateUnavailableError as exc:
            return exc.error_code

    async def acquire(
        self,
        caller: HttpCaller,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        *,
        records_max: int,
        lock_ms: int,
        wait_ms: int = 0,
    ) -> Acquired:
        if not self._allowed(caller, group_id, topic):
            return Acquired(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        deadline = trio.current_time() + wait_ms / 1000
        while True:
            found = await self._leader(group_id, topic, partition)
            if isinstance(found, ErrorCode):
                return Acquired(found)
            replica, leader = found
            records = await self._acquire_once(
                group_id, replica, leader, member_id, records_max, lock_ms
            )
            if records or trio.current_time() >= deadline:
                return Acquired(ErrorCode.NONE, records)
            await _wait_for_records([(replica, leader)], deadline)

    async def _acquire_once(
        self,
        group_id: str,
        replica: PartitionReplica,
        leader: ShareLeader,
        member_id: str,
        records_max: int,
        lock_ms: int,
    ) -> list[DirectRecord]:
        partitions = self.service.partitions
        config = partitions.config(group_id)
        read_end = replica.last_stable_offset if config.read_committed else replica.high_watermark
        policy = DeliveryPolicy(
            headers=config.record_headers_enabled,
            record_ttl_ms=config.record_ttl_ms,
            delay_max_ms=config.delivery_delay_max_ms,
        ).with_topic_ttl(replica.log.config.weir_share_record_ttl_ms)
        acquisition, data = await _acquire_partition(
            self.broker,
            replica,
            leader,
            member_id,
            read_end,
            _Limits(records_max, True, SHARE_READ_BYTES_MAX, config.read_committed),
            policy,
        )
        if acquisition.archived:
            partitions.archived(leader, acquisition.archived)
        if acquisition.delayed:
            partitions.poke()
        if not acquisition.acquired and not acquisition.archived:
            return []
        error = await partitions.persist([leader])
        if error != ErrorCode.NONE or not acquisition.acquired:
            return []
        now_ms = wall_clock_ms()
        kept = leader.partition.hold_from(member_id, acquisition.acquired, now_ms)
        _set_locks(
            leader, member_id, [(r.first_offset, r.last_offset) for r in kept], now_ms + lock_ms
        )
        partitions.poke()
        counts = {
            offset: r.delivery_count
            for r in kept
            for offset in range(r.first_offset, r.last_offset + 1)
        }
        try:
            decoded = decode_records(
                data, uncompressed_bytes_max=self.broker.config.limits.fetch_response_bytes_max
            )
            return [
                DirectRecord(
                    record.offset,
                    record.timestamp_ms,
                    record.key,
                    record.value,
                    tuple(record.headers),
                    counts[record.offset],
                )
                for record in decoded
                if record.offset in counts
            ]
        except InvalidBatch:
            return []

    async def acknowledge(
        self,
        caller: HttpCaller,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: Sequence[int],
        kind: AcknowledgeType,
    ) -> dict[int, ErrorCode]:
        if not self._allowed(caller, group_id, topic):
            return dict.fromkeys(offsets, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        found = await self._leader(group_id, topic, partition)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(offsets, found)
        _, leader = found
        results = {}
        now_ms = wall_clock_ms()
        for offset in offsets:
            outcome = leader.partition.acknowledge_batches(
                member_id, [AckBatch(offset, offset, (int(kind),))], now_ms
            )
            self.service.partitions.archived(leader, outcome.archived)
            results[offset] = outcome.error
        error = await self.service.partitions.persist([leader])
        leader.wake()
        self.service.partitions.poke()
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        return results

    async def change_lock(
        self,
        caller: HttpCaller,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: Sequence[int],
        lock_ms: int,
    ) -> dict[int, ErrorCode]:
        if lock_ms <= 0:
            return await self.acknowledge(
                caller, group_id, topic, partition, member_id, offsets, AcknowledgeType.RELEASE
            )
        if not self._allowed(caller, group_id, topic):
            return dict.fromkeys(offsets, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        found = await self._leader(group_id, topic, partition)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(offsets, found)
        _, leader = found
        results = {}
        for offset in offsets:
            state = leader.partition.record_state(offset)
            if state is None or state[0] is not RecordState.ACQUIRED or state[2] != member_id:
                results[offset] = ErrorCode.INVALID_RECORD_STATE
                continue
            _set_locks(leader, member_id, [(offset, offset)], wall_clock_ms() + lock_ms)
            results[offset] = ErrorCode.NONE
        self.service.partitions.poke()
        return results


def _set_locks(
    leader: ShareLeader, member_id: str, ranges: Sequence[tuple[int, int]], deadline_ms: int
) -> None:
    """Set the lock deadline of records `member_id` holds (the stand-in reaches into the
    share partition; ShareDirect does this properly)."""
    partition = leader.partition
    for first, last in ranges:
        for offset in range(first, last + 1):
            slot = partition._slots[offset - partition.start_offset]  # noqa: SLF001
            if slot.state is RecordState.ACQUIRED and slot.owner == member_id:
                slot.deadline_ms = deadline_ms
        partition._push_deadline(deadline_ms, first, last)  # noqa: SLF001
