"""Producing records over HTTP: the topic looked up, a partition picked, and the
records sent as Kafka Produce requests through the Kafka gateway, as the HTTP
principal (so the Kafka API's rules apply: WRITE on the topic), to each
partition's leader wherever it is in the cluster.

A round (`ProduceRound.send`) takes the records that are ready (one for a plain
request; in streaming mode, all those parsed while the previous round was in
flight) and sends one batch per partition, one Produce request per leader, acks
all. Records of one partition keep their order: a stream has one round in flight
at a time, and a round puts a partition's records in one batch in arrival order.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from weir.broker.broker import wall_clock_ms
from weir.broker.http.kafka_gateway import GatewayError, HttpCaller, KafkaGateway
from weir.broker.http.rest_records_format import (
    ProduceRecord,
    RestError,
    delivery_report,
)
from weir.format.errors import ErrorCode
from weir.format.partitioner import partition_for_key
from weir.format.record_batch import build_batch
from weir.wire.api_keys import ApiKey

log = logging.getLogger(__name__)

PRODUCE_VERSION = 9
METADATA_VERSION = 12
ACKS_ALL = -1
# Leader changes (and a topic's metadata not yet everywhere) are retried, as a
# Kafka producer does, within the request's time.
RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE})
RETRY_BACKOFF_S = 0.1
RETRIES_MAX = 20


@dataclass(frozen=True)
class TopicTarget:
    """A topic records may be produced to (as far as Metadata tells this caller)."""

    cluster_id: str
    topic: str
    partition_count: int


def topic_error(code: int, topic: str) -> RestError | None:
    """Confluent's answer to Metadata's error for `topic` (None: no error)."""
    if code == ErrorCode.NONE:
        return None
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return RestError(404, 40401, f"Topic {topic} not found.")
    if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        return RestError(403, 40301, f"Not authorized to access topics: [{topic}]")
    if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
        return RestError(400, 40002, f"Topic name {topic!r} is not valid.")
    if code == ErrorCode.LEADER_NOT_AVAILABLE:
        return RestError(503, 50302, f"Topic {topic} has no leader yet.")
    return RestError(500, 50002, f"Topic {topic}: {ErrorCode(code).name}")


def cluster_error(wanted: str, cluster_id: str) -> RestError | None:
    if wanted == cluster_id:
        return None
    return RestError(404, 404, f"Cluster {wanted} cannot be found.")


async def find_topic(
    gateway: KafkaGateway, caller: HttpCaller, cluster_id: str, topic: str
) -> TopicTarget:
    """The topic's partitions, after the caller's DESCRIBE (RestError otherwise)."""
    body = {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    try:
        response = await gateway.send(caller, ApiKey.METADATA, METADATA_VERSION, body)
    except GatewayError as exc:
        raise gateway_error(exc) from exc
    error = cluster_error(cluster_id, response.cluster_id or "")
    if error is None:
        [found] = response.topics
        error = topic_error(found.error_code, topic)
    if error is not None:
        raise error
    return TopicTarget(response.cluster_id, topic, len(found.partitions))


def gateway_error(exc: GatewayError) -> RestError:
    """A request the gateway could not run (a broker not live, or not answering)."""
    if exc.retriable:
        return RestError(503, 50302, f"{exc}; try again")
    return RestError(500, 50002, str(exc))


def partition_refusal(target: TopicTarget, partition: int) -> RestError | None:
    if partition < target.partition_count:
        return None
    return RestError(404, 40402, f"Partition {partition} of topic {target.topic} not found.")


def produce_error(code: int, message: str | None, topic: str, partition: int) -> RestError:
    """Confluent's answer to Produce's error for one partition."""
    where = f"{topic}-{partition}"
    detail = f": {message}" if message else ""
    if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        return RestError(403, 40301, f"Not authorized to access topics: [{topic}]")
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return RestError(404, 40403, f"This server does not host this topic-partition ({where}).")
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return RestError(422, 42201, f"The record is too large for {where}{detail}")
    if code in (ErrorCode.INVALID_TIMESTAMP, ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE):
        return RestError(400, 40002, f"{ErrorCode(code).name} for {where}{detail}")
    if code in RETRIABLE or code in (
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return RestError(500, 50003, f"{ErrorCode(code).name} for {where}{detail}")
    return RestError(500, 50002, f"{ErrorCode(code).name} for {where}{detail}")


Outcome = dict[str, object] | RestError


@dataclass
class _PartitionRecords:
    partition: int
    positions: list[int] = field(default_factory=list)
    records: list[ProduceRecord] = field(default_factory=list)


class ProduceRound:
    """Sends records of one topic for one HTTP request (or stream)."""

    def __init__(
        self,
        gateway: KafkaGateway,
        caller: HttpCaller,
        target: TopicTarget,
        timeout_ms: int,
    ) -> None:
        self.gateway = gateway
        self.caller = caller
        self.target = target
        self.timeout_ms = timeout_ms
        # Records with neither key nor partition go to one partition per round
        # (Kafka's sticky partitioner), a new one each round.
        self._sticky = random.randrange(target.partition_count) if target.partition_count else 0

    def partition_of(self, record: ProduceRecord) -> int | RestError:
        if record.partition_id is not None:
            return partition_refusal(self.target, record.partition_id) or record.partition_id
        if record.key.data is not None:
            return partition_for_key(record.key.data, self.target.partition_count)
        return self._sticky

    async def send(self, records: Sequence[ProduceRecord | RestError]) -> list[Outcome]:
        """One outcome per record, in order: its delivery report or its error."""
        outcomes: list[Outcome | None] = [None] * len(records)
        by_partition: dict[int, _PartitionRecords] = {}
        for position, record in enumerate(records):
            if isinstance(record, RestError):
                outcomes[position] = record
                continue
            partition = self.partition_of(record)
            if isinstance(partition, RestError):
                outcomes[position] = partition
                continue
            group = by_partition.setdefault(partition, _PartitionRecords(partition))
            group.positions.append(position)
            group.records.append(record)
        if self.target.partition_count:
            self._sticky = (self._sticky + 1) % self.target.partition_count
        if by_partition:
            await self._send_partitions(list(by_partition.values()), outcomes)
        assert all(outcome is not None for outcome in outcomes)
        return outcomes  # type: ignore[return-value]

    async def _send_partitions(
        self, groups: list[_PartitionRecords], outcomes: list[Outcome | None]
    ) -> None:
        pending = groups
        for attempt in range(RETRIES_MAX + 1):
            by_leader: dict[int | None, list[_PartitionRecords]] = defaultdict(list)
            for group in pending:
                by_leader[self.gateway.leader_of(self.target.topic, group.partition)].append(group)
            retry: list[_PartitionRecords] = []
            async with trio.open_nursery() as nursery:
                for leader, leader_groups in by_leader.items():
                    nursery.start_soon(
                        self._send_to_leader,
                        leader,
                        leader_groups,
                        outcomes,
                        retry,
                        attempt == RETRIES_MAX,
                    )
            if not retry:
                return
            pending = retry
            await trio.sleep(RETRY_BACKOFF_S)

    async def _send_to_leader(
        self,
        leader: int | None,
        groups: list[_PartitionRecords],
        outcomes: list[Outcome | None],
        retry: list[_PartitionRecords],
        last_attempt: bool,
    ) -> None:
        if leader is None:
            self._settle(groups, outcomes, retry, last_attempt, ErrorCode.LEADER_NOT_AVAILABLE)
            return
        now_ms = wall_clock_ms()
        partition_data = [
            {"index": group.partition, "records": _batch(group.records, now_ms)} for group in groups
        ]
        body = {
            "transactional_id": None,
            "acks": ACKS_ALL,
            "timeout_ms": self.timeout_ms,
            "topic_data": [{"name": self.target.topic, "partition_data": partition_data}],
        }
        try:
            response = await self.gateway.send(
                self.caller, ApiKey.PRODUCE, PRODUCE_VERSION, body, node_id=leader
            )
        except GatewayError as exc:
            # The records may or may not have been written: not retried (a
            # duplicate is worse than an error the client can act on).
            log.info("REST produce to broker %s failed: %s", leader, exc)
            for group in groups:
                for position in group.positions:
                    outcomes[position] = gateway_error(exc)
            return
        answers = {p.index: p for t in response.responses for p in t.partition_responses}
        for group in groups:
            answer = answers.get(group.partition)
            if answer is None or answer.error_code in RETRIABLE:
                code = ErrorCode.UNKNOWN_SERVER_ERROR if answer is None else answer.error_code
                self._settle([group], outcomes, retry, last_attempt, code)
                continue
            if answer.error_code != ErrorCode.NONE:
                error = produce_error(
                    answer.error_code, answer.error_message, self.target.topic, group.partition
                )
                for position in group.positions:
                    outcomes[position] = error
                continue
            self._report(group, answer, now_ms, outcomes)

    def _settle(
        self,
        groups: list[_PartitionRecords],
        outcomes: list[Outcome | None],
        retry: list[_PartitionRecords],
        last_attempt: bool,
        code: int,
    ) -> None:
        """A retriable failure: retried, or on the last attempt the records' error."""
        if not last_attempt and code in RETRIABLE:
            retry.extend(groups)
            return
        for group in groups:
            error = produce_error(code, None, self.target.topic, group.partition)
            for position in group.positions:
                outcomes[position] = error

    def _report(
        self, group: _PartitionRecords, answer: Any, now_ms: int, outcomes: list[Outcome | None]
    ) -> None:
        log_append_ms = answer.log_append_time_ms
        for delta, (position, record) in enumerate(
            zip(group.positions, group.records, strict=True)
        ):
            if log_append_ms != -1:
                timestamp_ms = log_append_ms
            else:
                timestamp_ms = now_ms if record.timestamp_ms is None else record.timestamp_ms
            outcomes[position] = delivery_report(
                self.target.cluster_id,
                self.target.topic,
                group.partition,
                answer.base_offset + delta,
                timestamp_ms,
                record,
            )


def _batch(records: Sequence[ProduceRecord], now_ms: int) -> bytes:
    return build_batch(
        [
            (
                r.key.data,
                r.value.data,
                r.headers,
                now_ms if r.timestamp_ms is None else r.timestamp_ms,
            )
            for r in records
        ]
    )
