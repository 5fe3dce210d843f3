"""Share-group operations for the HTTP queue APIs (SQS-compatible, push) without a
share session: acquire records under a lock of the caller's length, acknowledge
them, change their locks.

A Kafka share consumer joins its group, gets partitions assigned and keeps a share
session with each leader. An SQS ReceiveMessage or a push delivery has none of
that: any caller may receive from any partition, and a receipt handle is used,
maybe on another broker, long after the request that made it. So these are
"direct" ShareFetch and ShareAcknowledge requests (Weir's tagged field
`weir_direct_lock_ms`, see weir/broker/handlers/share_fetch.py), sent through the
`KafkaGateway` to the partition's leader wherever it is, with the caller's
authorization (READ on the group and the topic, as ShareFetch needs):

- `acquire`: the records of one partition available now (or within `wait_ms`),
  locked for `member_id` for `lock_ms`; the member id is any string the caller
  picks and keeps (in a receipt handle); the records stay acquired until
  acknowledged, until their lock ends (then available again, their delivery count
  kept), or `change_lock`;
- `acknowledge`: ACCEPT (done), RELEASE (available again) or REJECT (archived: a
  dead letter when the group has a dead-letter topic), per offset;
- `change_lock`: the locks restarted to run `lock_ms` from now (RENEW), or with 0,
  the records made available again (RELEASE).
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from weir.broker.broker import Broker
from weir.broker.http.kafka_gateway import GatewayError, HttpCaller, KafkaGateway, gateway_of
from weir.format.errors import ErrorCode
from weir.format.record_batch import InvalidBatch, decode_records, iter_batch_headers
from weir.sharecoord.share_partition import AcknowledgeType
from weir.wire.api_keys import ApiKey

SHARE_API_VERSION = 2
# ShareFetch v2's record-limit mode: at most MaxRecords records, exactly.
RECORD_LIMIT_MODE = 1
# What one acquire reads and decodes at most: batches come whole, so a batch bigger
# than this is still returned (the log's reads are bounded by the broker).
ACQUIRE_BYTES_MAX = 1024 * 1024
DECODED_BYTES_MAX = 64 * 1024 * 1024
# A direct acknowledgement's lock, used by nothing but RENEW (the field must be set).
ACK_LOCK_MS = 1


@dataclass(frozen=True)
class DirectRecord:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    delivery_count: int


@dataclass(frozen=True)
class Acquired:
    """One acquire's answer: `records` (in offset order), or the partition's error."""

    error: ErrorCode
    records: list[DirectRecord]
    message: str | None = None
    # Where the partition's leader is now, when the error says it moved (-1: unknown).
    leader_id: int = -1


class ShareDirect:
    """One per broker (`share_direct_of`)."""

    def __init__(self, gateway: KafkaGateway) -> None:
        self.gateway = gateway

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
        found = self._locate(topic, partition)
        if isinstance(found, ErrorCode):
            return Acquired(found, [])
        topic_id, leader = found
        request = {
            "group_id": group_id,
            "member_id": member_id,
            "share_session_epoch": 0,
            "max_wait_ms": max(wait_ms, 0),
            "min_bytes": 1,
            "max_bytes": ACQUIRE_BYTES_MAX,
            "max_records": records_max,
            "batch_size": records_max,
            "share_acquire_mode": RECORD_LIMIT_MODE,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": partition}]}],
            "forgotten_topics_data": [],
            "weir_direct_lock_ms": lock_ms,
        }
        try:
            response = await self.gateway.send(
                caller,
                ApiKey.SHARE_FETCH,
                SHARE_API_VERSION,
                request,
                node_id=leader,
                wait_ms=wait_ms,
            )
        except GatewayError as exc:
            return Acquired(_gateway_error(exc), [], str(exc))
        if response.error_code != ErrorCode.NONE:
            return Acquired(ErrorCode(response.error_code), [], response.error_message)
        for answered in response.responses:
            for answer in answered.partitions:
                if answer.partition_index != partition:
                    continue
                if answer.error_code != ErrorCode.NONE:
                    return Acquired(
                        ErrorCode(answer.error_code),
                        [],
                        answer.error_message,
                        answer.current_leader.leader_id,
                    )
                return _records(answer.records, answer.acquired_records)
        return Acquired(ErrorCode.NONE, [])

    async def acknowledge(
        self,
        caller: HttpCaller,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: Iterable[int],
        kind: AcknowledgeType,
    ) -> dict[int, ErrorCode]:
        """Each offset's outcome. A partition's batches are applied all or nothing,
        so when some fail, each offset is tried alone for its own answer."""
        wanted = sorted(set(offsets))
        if not wanted:
            return {}
        return await self._acknowledge(
            caller, group_id, topic, partition, member_id, wanted, kind, ACK_LOCK_MS
        )

    async def change_lock(
        self,
        caller: HttpCaller,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: Iterable[int],
        lock_ms: int,
    ) -> dict[int, ErrorCode]:
        """Restart the locks to end `lock_ms` from now; 0 makes the records available."""
        wanted = sorted(set(offsets))
        if not wanted:
            return {}
        if lock_ms <= 0:
            kind, lock_ms = AcknowledgeType.RELEASE, ACK_LOCK_MS
        else:
            kind = AcknowledgeType.RENEW
        return await self._acknowledge(
            caller, group_id, topic, partition, member_id, wanted, kind, lock_ms
        )

    async def _acknowledge(
        self,
        caller: HttpCaller,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: list[int],
        kind: AcknowledgeType,
        lock_ms: int,
    ) -> dict[int, ErrorCode]:
        found = self._locate(topic, partition)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(offsets, found)
        topic_id, leader = found
        error = await self._send_acks(
            caller, group_id, topic_id, leader, partition, member_id, offsets, kind, lock_ms
        )
        if error == ErrorCode.NONE or len(offsets) == 1:
            return dict.fromkeys(offsets, error)
        outcomes = {}
        for offset in offsets:
            outcomes[offset] = await self._send_acks(
                caller, group_id, topic_id, leader, partition, member_id, [offset], kind, lock_ms
            )
        return outcomes

    async def _send_acks(
        self,
        caller: HttpCaller,
        group_id: str,
        topic_id: uuid.UUID,
        leader: int,
        partition: int,
        member_id: str,
        offsets: Sequence[int],
        kind: AcknowledgeType,
        lock_ms: int,
    ) -> ErrorCode:
        batches = [
            {"first_offset": first, "last_offset": last, "acknowledge_types": [int(kind)]}
            for first, last in _runs(offsets)
        ]
        request = {
            "group_id": group_id,
            "member_id": member_id,
            "share_session_epoch": 0,
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {"partition_index": partition, "acknowledgement_batches": batches}
                    ],
                }
            ],
            "weir_direct_lock_ms": lock_ms,
        }
        try:
            response = await self.gateway.send(
                caller, ApiKey.SHARE_ACKNOWLEDGE, SHARE_API_VERSION, request, node_id=leader
            )
        except GatewayError as exc:
            return _gateway_error(exc)
        if response.error_code != ErrorCode.NONE:
            return ErrorCode(response.error_code)
        for answered in response.responses:
            for answer in answered.partitions:
                if answer.partition_index == partition:
                    return ErrorCode(answer.error_code)
        return ErrorCode.UNKNOWN_SERVER_ERROR

    def _locate(self, topic: str, partition: int) -> tuple[uuid.UUID, int] | ErrorCode:
        record = self.gateway.broker.controller.topic(topic)
        if record is None or not 0 <= partition < record.partition_count:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        leader = self.gateway.leader_of(topic, partition)
        if leader is None:
            return ErrorCode.LEADER_NOT_AVAILABLE
        return record.topic_id, leader


def _records(batches: bytes | None, acquired: Sequence[object]) -> Acquired:
    """The acquired records out of the whole batches that hold them."""
    counts: dict[int, int] = {}
    for acquired_range in acquired:
        first = int(acquired_range.first_offset)  # type: ignore[attr-defined]
        last = int(acquired_range.last_offset)  # type: ignore[attr-defined]
        count = int(acquired_range.delivery_count)  # type: ignore[attr-defined]
        for offset in range(first, last + 1):
            counts[offset] = count
    if not counts or not batches:
        return Acquired(ErrorCode.NONE, [])
    records = []
    try:
        wanted = _batches_holding(batches, min(counts), max(counts))
        for record in decode_records(wanted, uncompressed_bytes_max=DECODED_BYTES_MAX):
            if record.offset not in counts:
                continue
            records.append(
                DirectRecord(
                    record.offset,
                    record.timestamp_ms,
                    record.key,
                    record.value,
                    tuple((name, value) for name, value in record.headers),
                    counts[record.offset],
                )
            )
    except InvalidBatch as exc:
        return Acquired(ErrorCode.CORRUPT_MESSAGE, [], str(exc))
    return Acquired(ErrorCode.NONE, records)


def _batches_holding(batches: bytes, first: int, last: int) -> bytes | memoryview:
    """The batches that hold offsets `first` to `last` (a ShareFetch answers whole
    batches, most of them maybe before or after what was acquired): only those are
    decoded. Raises InvalidBatch."""
    start = end = None
    for position, header in iter_batch_headers(batches):
        if header.last_offset < first:
            continue
        if header.base_offset > last:
            break
        if start is None:
            start = position
        end = position + header.size
    if start is None or end is None:
        return b""
    return memoryview(batches)[start:end]


def _runs(offsets: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted offsets as (first, last) runs of consecutive offsets."""
    runs: list[tuple[int, int]] = []
    for offset in offsets:
        if runs and runs[-1][1] == offset - 1:
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    return runs


def _gateway_error(exc: GatewayError) -> ErrorCode:
    return ErrorCode.LEADER_NOT_AVAILABLE if exc.retriable else ErrorCode.INVALID_REQUEST


_DIRECTS: weakref.WeakKeyDictionary[Broker, ShareDirect] = weakref.WeakKeyDictionary()


def share_direct_of(broker: Broker) -> ShareDirect:
    """The broker's one ShareDirect, made on first use."""
    direct = _DIRECTS.get(broker)
    if direct is None:
        direct = _DIRECTS[broker] = ShareDirect(gateway_of(broker))
    return direct
