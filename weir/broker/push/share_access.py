"""The share-partition operations push delivery needs, session-less, on this broker.

TEMPORARY: an adapter over the local share partitions (`share_fetch`'s steps without
a share session), with the interface of the foundation's `ShareDirect`
(`weir.broker.coordinators.share_direct`); replaced by it once that lands. Push
delivery only runs where the topic partition is led, so in process is enough.

`change_lock` here: lock_ms > 0 restarts the locks for the group's lock duration
(RENEW); lock_ms 0 makes every record the member holds available again without
counting a release (the share partition's `release_member`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.coordinators.share_partitions import ShareLeader
from weir.broker.coordinators.share_service import ShareService
from weir.broker.coordinators.share_state_service import ShareKey, ShareStateUnavailableError
from weir.broker.handlers.share_fetch import (
    MAX_RECORDS_DEFAULT,
    SHARE_READ_BYTES_MAX,
    _acquire_partition,
    _Limits,
    _wait_for_records,
)
from weir.broker.partition_replica import PartitionReplica
from weir.format.errors import ErrorCode
from weir.format.record_batch import InvalidBatch, decode_records
from weir.sharecoord.delivery_times import DeliveryPolicy
from weir.sharecoord.share_partition import AckBatch, AcknowledgeType

__all__ = ["Acquired", "AcknowledgeType", "DirectRecord", "LocalShareAccess"]


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


class LocalShareAccess:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def _service(self) -> ShareService:
        service = self.broker.shares
        assert isinstance(service, ShareService)
        return service

    async def _leader(
        self, group_id: str, topic: str, partition: int
    ) -> tuple[PartitionReplica, ShareLeader] | ErrorCode:
        record = self.broker.controller.topic(topic)
        if record is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        replica = self.broker.lookup(topic, partition)
        if isinstance(replica, ErrorCode):
            return replica
        key = ShareKey(group_id, record.topic_id, partition)
        try:
            leader = await self._service().partitions.leader(key, replica)
        except ShareStateUnavailableError as exc:
            return exc.error_code
        return replica, leader

    async def acquire(
        self,
        caller: object,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        *,
        records_max: int,
        lock_ms: int,
        wait_ms: int = 0,
    ) -> Acquired:
        del caller, lock_ms  # the group's lock duration (set by the subscription)
        deadline = trio.current_time() + wait_ms / 1000
        while True:
            found = await self._leader(group_id, topic, partition)
            if isinstance(found, ErrorCode):
                return Acquired(found)
            replica, leader = found
            acquired = await self._acquire_once(replica, leader, member_id, records_max)
            if acquired.error != ErrorCode.NONE or acquired.records:
                return acquired
            if trio.current_time() >= deadline:
                return acquired
            await _wait_for_records([(replica, leader)], deadline)

    async def _acquire_once(
        self, replica: PartitionReplica, leader: ShareLeader, member_id: str, records_max: int
    ) -> Acquired:
        service = self._service()
        config = service.partitions.config(leader.key.group_id)
        read_end = replica.last_stable_offset if config.read_committed else replica.high_watermark
        policy = DeliveryPolicy(
            headers=config.record_headers_enabled,
            record_ttl_ms=config.record_ttl_ms,
            delay_max_ms=config.delivery_delay_max_ms,
        ).with_topic_ttl(replica.log.config.weir_share_record_ttl_ms)
        limits = _Limits(
            records_max or MAX_RECORDS_DEFAULT, True, SHARE_READ_BYTES_MAX, config.read_committed
        )
        acquisition, records = await _acquire_partition(
            self.broker, replica, leader, member_id, read_end, limits, policy
        )
        changed = bool(acquisition.archived or acquisition.acquired)
        if acquisition.archived:
            service.partitions.archived(leader, acquisition.archived)
        if acquisition.delayed or acquisition.acquired:
            service.partitions.poke()
        if changed:
            error = await service.partitions.persist([leader])
            if error != ErrorCode.NONE:
                return Acquired(error)
        counts = {
            offset: r.delivery_count
            for r in acquisition.acquired
            for offset in range(r.first_offset, r.last_offset + 1)
        }
        if not counts:
            return Acquired()
        try:
            decoded = [
                DirectRecord(
                    r.offset, r.timestamp_ms, r.key, r.value, tuple(r.headers), counts[r.offset]
                )
                for r in decode_records(
                    records,
                    uncompressed_bytes_max=self.broker.config.limits.fetch_response_bytes_max,
                )
                if r.offset in counts
            ]
        except InvalidBatch:
            return Acquired(ErrorCode.CORRUPT_MESSAGE)
        return Acquired(records=decoded)

    async def acknowledge(
        self,
        caller: object,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: Sequence[int],
        kind: AcknowledgeType,
    ) -> dict[int, ErrorCode]:
        del caller
        found = await self._leader(group_id, topic, partition)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(offsets, found)
        _replica, leader = found
        service = self._service()
        now_ms = wall_clock_ms()
        results: dict[int, ErrorCode] = {}
        for offset in offsets:  # one by one: one refused offset refuses no other
            outcome = leader.partition.acknowledge_batches(
                member_id, [AckBatch(offset, offset, (kind,))], now_ms
            )
            service.partitions.archived(leader, outcome.archived)
            results[offset] = outcome.error
        error = await service.partitions.persist([leader])
        leader.wake()
        service.partitions.poke()
        if error != ErrorCode.NONE:
            return {o: (error if e == ErrorCode.NONE else e) for o, e in results.items()}
        return results

    async def change_lock(
        self,
        caller: object,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: Sequence[int],
        lock_ms: int,
    ) -> dict[int, ErrorCode]:
        if lock_ms > 0:
            return await self.acknowledge(
                caller, group_id, topic, partition, member_id, offsets, AcknowledgeType.RENEW
            )
        found = await self._leader(group_id, topic, partition)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(offsets, found)
        _replica, leader = found
        await self._service().partitions.release_member(member_id, [leader.key])
        return dict.fromkeys(offsets, ErrorCode.NONE)


def new_member_id(node_id: int) -> str:
    return f"weir-push-{node_id}-{uuid.uuid4().hex[:12]}"
