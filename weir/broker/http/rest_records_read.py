"""Reading records over HTTP: ListOffsets and Fetch sent through the Kafka gateway
as the HTTP principal (READ on the topic, as a consumer needs), to each
partition's leader wherever it is in the cluster; the records decoded by
weir.broker.http.rest_records_fetched."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import trio

from weir.broker.http.kafka_gateway import GatewayError, HttpCaller, KafkaGateway
from weir.broker.http.rest_records_fetched import FetchedRecords, fetched_records
from weir.broker.http.rest_records_format import RestError
from weir.broker.http.rest_records_produce import gateway_error
from weir.format.errors import ErrorCode
from weir.format.record_batch import InvalidBatch
from weir.wire.api_keys import ApiKey
from weir.wire.consumer_fetch import consumer_fetch_body

log = logging.getLogger(__name__)

FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 7
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True)
class PartitionRead:
    """What one Fetch of one partition gave."""

    fetched: FetchedRecords
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


def read_error(code: int, topic: str, partition: int) -> RestError:
    where = f"{topic}-{partition}"
    if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        return RestError(403, 40301, f"Not authorized to access topics: [{topic}]")
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return RestError(404, 40403, f"This server does not host this topic-partition ({where}).")
    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
        return RestError(422, 42202, f"The offset is out of range for {where}.")
    if code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    ):
        return RestError(503, 50302, f"{ErrorCode(code).name} for {where}; try again.")
    return RestError(500, 50002, f"{ErrorCode(code).name} for {where}")


def _leader(gateway: KafkaGateway, topic: str, partition: int) -> int:
    leader = gateway.leader_of(topic, partition)
    if leader is None:
        raise RestError(503, 50302, f"{topic}-{partition} has no leader; try again.")
    return leader


async def list_offset(
    gateway: KafkaGateway,
    caller: HttpCaller,
    topic: str,
    partition: int,
    timestamp_ms: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> int:
    """The first offset at or after `timestamp_ms` (or EARLIEST/LATEST_TIMESTAMP);
    the end of the partition when no record is that late."""
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "current_leader_epoch": -1,
                        "timestamp": timestamp_ms,
                    }
                ],
            }
        ],
    }
    leader = _leader(gateway, topic, partition)
    try:
        response = await gateway.send(
            caller, ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, node_id=leader
        )
    except GatewayError as exc:
        raise gateway_error(exc) from exc
    [answer] = response.topics[0].partitions
    if answer.error_code != ErrorCode.NONE:
        raise read_error(answer.error_code, topic, partition)
    if answer.offset < 0:  # no record at or after the timestamp: the end
        return await list_offset(
            gateway, caller, topic, partition, LATEST_TIMESTAMP, isolation_level
        )
    return int(answer.offset)


def fetch_body(
    topic: str,
    partitions: dict[int, int],
    bytes_max: int,
    isolation_level: int,
    wait_ms: int,
) -> dict[str, Any]:
    """A consumer's Fetch (no session) of `partitions` {partition: offset}."""
    return consumer_fetch_body(
        topic, partitions, bytes_max=bytes_max, isolation_level=isolation_level, wait_ms=wait_ms
    )


async def fetch_partitions(
    gateway: KafkaGateway,
    caller: HttpCaller,
    leader: int,
    topic: str,
    partitions: dict[int, int],
    *,
    bytes_max: int,
    isolation_level: int,
    wait_ms: int,
) -> dict[int, PartitionRead | RestError]:
    """One Fetch to `leader` of `partitions` {partition: offset}."""
    body = fetch_body(topic, partitions, bytes_max, isolation_level, wait_ms)
    try:
        response = await gateway.send(
            caller, ApiKey.FETCH, FETCH_VERSION, body, node_id=leader, wait_ms=wait_ms
        )
    except GatewayError as exc:
        log.info("REST fetch from broker %d failed: %s", leader, exc)
        return dict.fromkeys(partitions, gateway_error(exc))
    if response.error_code != ErrorCode.NONE:
        error = read_error(response.error_code, topic, -1)
        return dict.fromkeys(partitions, error)
    reads: dict[int, PartitionRead | RestError] = {}
    for answer in (p for t in response.responses for p in t.partitions):
        offset = partitions.get(answer.partition_index)
        if offset is None:
            continue
        if answer.error_code != ErrorCode.NONE:
            reads[answer.partition_index] = read_error(
                answer.error_code, topic, answer.partition_index
            )
            continue
        aborted = [(a.producer_id, a.first_offset) for a in answer.aborted_transactions or ()]
        try:
            fetched = fetched_records(
                answer.records, offset, aborted, read_committed=isolation_level == READ_COMMITTED
            )
        except InvalidBatch as exc:
            log.warning("REST read of %s-%d: %s", topic, answer.partition_index, exc)
            reads[answer.partition_index] = RestError(500, 50002, f"unreadable records: {exc}")
            continue
        reads[answer.partition_index] = PartitionRead(
            fetched, answer.high_watermark, answer.last_stable_offset, answer.log_start_offset
        )
    for partition in partitions:
        reads.setdefault(partition, RestError(500, 50002, f"no answer for {topic}-{partition}"))
    return reads


async def fetch_one(
    gateway: KafkaGateway,
    caller: HttpCaller,
    topic: str,
    partition: int,
    offset: int,
    *,
    bytes_max: int,
    isolation_level: int,
    wait_ms: int = 0,
) -> PartitionRead:
    leader = _leader(gateway, topic, partition)
    reads = await fetch_partitions(
        gateway,
        caller,
        leader,
        topic,
        {partition: offset},
        bytes_max=bytes_max,
        isolation_level=isolation_level,
        wait_ms=wait_ms,
    )
    read = reads[partition]
    if isinstance(read, RestError):
        raise read
    return read


async def fetch_by_leader(
    gateway: KafkaGateway,
    caller: HttpCaller,
    topic: str,
    positions: dict[int, int],
    *,
    bytes_max: int,
    isolation_level: int,
    wait_ms: int,
) -> dict[int, PartitionRead | RestError]:
    """`positions` {partition: offset} fetched from their leaders at once (one
    Fetch per leader, side by side)."""
    by_leader: dict[int, dict[int, int]] = {}
    reads: dict[int, PartitionRead | RestError] = {}
    for partition, offset in positions.items():
        leader = gateway.leader_of(topic, partition)
        if leader is None:
            reads[partition] = RestError(503, 50302, f"{topic}-{partition} has no leader")
        else:
            by_leader.setdefault(leader, {})[partition] = offset

    async def one(leader: int, partitions: dict[int, int]) -> None:
        reads.update(
            await fetch_partitions(
                gateway,
                caller,
                leader,
                topic,
                partitions,
                bytes_max=bytes_max,
                isolation_level=isolation_level,
                wait_ms=wait_ms,
            )
        )

    async with trio.open_nursery() as nursery:
        for leader, partitions in by_leader.items():
            nursery.start_soon(one, leader, partitions)
    return reads
