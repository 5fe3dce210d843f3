"""A partition's producers and their open transactions, in Weir's own shape under
/v3, as `weir txn abort|find-hanging` (Kafka's `kafka-transactions.sh`) sees them:

- `GET .../topics/{t}/partitions/{p}/producers`: the partition's active producers
  (DescribeProducers, on its leader), with the offset their open transaction
  starts at (`current_transaction_start_offset`, null when none is open);
- `POST .../topics/{t}/partitions/{p}/abort-transaction`: an abort marker for one
  producer's open transaction there (WriteTxnMarkers on the leader, as Kafka's
  `Admin.abortTransaction`), the producer named by `producer_id`,
  `producer_epoch` and `coordinator_epoch`, or found by the `start_offset` of its
  transaction; the caller needs CLUSTER_ACTION on the cluster;
- `GET .../hanging-transactions[?topic_name=T]`: the open transactions of a topic's
  partitions (or every non-internal topic's) that have run longer than
  `max_transaction_timeout_ms` (default 15 minutes) and that their coordinator no
  longer counts as including the partition (ListTransactions by producer id on
  every broker, then DescribeTransactions): no marker will end them, so they hold
  the partition's last stable offset back until aborted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from weir.broker.http.kafka_gateway import GatewayError
from weir.broker.http.rest_admin_base import (
    INT16_MAX,
    INT32_MAX,
    AdminCall,
    Endpoint,
    Param,
    RestError,
    bad_request,
    bounded_int,
    check_kafka,
    collection,
    int_text,
    json_response,
    not_found,
    resource,
    retry_later,
    topic_name,
)
from weir.broker.http.rest_admin_lookups import KEY_TYPE_TRANSACTION, broker_ids, coordinator
from weir.broker.http.rest_admin_topics import NO_LEADER, PARTITION, described_topic, metadata
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

DESCRIBE_PRODUCERS_VERSION = 0
WRITE_TXN_MARKERS_VERSION = 1
LIST_TRANSACTIONS_VERSION = 2
DESCRIBE_TRANSACTIONS_VERSION = 0
MAX_TRANSACTION_TIMEOUT_MS_DEFAULT = 15 * 60_000
INT64_MAX = 2**63 - 1
NO_DURATION_FILTER = -1


@dataclass(frozen=True)
class Producer:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int  # -1: no open transaction
    last_timestamp_ms: int


async def producers_at_leaders(
    call: AdminCall, topic: str, leaders: dict[int, int]
) -> list[Producer]:
    """The active producers of `leaders`' partitions (index -> leader), each asked of
    its leader."""
    by_leader: dict[int, list[int]] = {}
    for index, leader in leaders.items():
        if leader == NO_LEADER:
            raise retry_later(f"{topic}-{index} has no leader; retry")
        by_leader.setdefault(leader, []).append(index)
    found = []
    for leader, indexes in sorted(by_leader.items()):
        response = await call.send(
            ApiKey.DESCRIBE_PRODUCERS,
            DESCRIBE_PRODUCERS_VERSION,
            {"topics": [{"name": topic, "partition_indexes": sorted(indexes)}]},
            node_id=leader,
        )
        for answered in response.topics:
            for part in answered.partitions:
                what = f"describe the producers of {topic}-{part.partition_index}"
                check_kafka(part.error_code, part.error_message, what)
                found += [
                    Producer(
                        topic,
                        part.partition_index,
                        p.producer_id,
                        p.producer_epoch,
                        p.coordinator_epoch,
                        p.current_txn_start_offset,
                        p.last_timestamp,
                    )
                    for p in part.active_producers
                ]
    return found


async def _partition_leader(call: AdminCall) -> tuple[str, int, int]:
    topic = topic_name(call.path("topic_name"))
    index = int_text(call.path("partition_id"), "partition_id")
    described = await described_topic(call, topic)
    for partition in described.partitions:
        if partition.partition_index == index:
            return topic, index, partition.leader_id
    raise not_found(f"topic {topic!r} has no partition {index}")


def producer_resource(call: AdminCall, producer: Producer) -> dict[str, Any]:
    base = ("topics", producer.topic, "partitions", producer.partition)
    return resource(
        "WeirProducer",
        call.url(*base, "producers"),
        cluster_id=call.cluster_id,
        topic_name=producer.topic,
        partition_id=producer.partition,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        coordinator_epoch=producer.coordinator_epoch,
        current_transaction_start_offset=None
        if producer.start_offset < 0
        else producer.start_offset,
        last_timestamp_ms=producer.last_timestamp_ms,
    )


async def list_producers(call: AdminCall) -> Response:
    topic, index, leader = await _partition_leader(call)
    producers = await producers_at_leaders(call, topic, {index: leader})
    return json_response(
        collection(
            "WeirProducerList",
            call.url("topics", topic, "partitions", index, "producers"),
            [producer_resource(call, p) for p in sorted(producers, key=lambda p: p.producer_id)],
        )
    )


async def _named_producer(
    call: AdminCall, document: dict[str, Any], topic: str, index: int, leader: int
) -> Producer:
    if "start_offset" in document:
        start_offset = bounded_int(document["start_offset"], "start_offset", 0, INT64_MAX)
        for producer in await producers_at_leaders(call, topic, {index: leader}):
            if producer.start_offset == start_offset:
                return producer
        raise not_found(f"no open transaction starts at offset {start_offset} of {topic}-{index}")
    if "producer_id" not in document:
        raise bad_request("the body needs 'start_offset', or 'producer_id' and 'producer_epoch'")
    return Producer(
        topic,
        index,
        bounded_int(document["producer_id"], "producer_id", 0, INT64_MAX),
        bounded_int(document.get("producer_epoch"), "producer_epoch", 0, INT16_MAX),
        # -1 (a producer that never ended a transaction) is sent as 0, below every epoch.
        max(
            0, bounded_int(document.get("coordinator_epoch", 0), "coordinator_epoch", -1, INT32_MAX)
        ),
        -1,
        -1,
    )


async def abort_transaction(call: AdminCall) -> Response:
    topic, index, leader = await _partition_leader(call)
    producer = await _named_producer(call, await call.json_body(), topic, index, leader)
    if leader == NO_LEADER:
        raise retry_later(f"{topic}-{index} has no leader; retry")
    response = await call.send(
        ApiKey.WRITE_TXN_MARKERS,
        WRITE_TXN_MARKERS_VERSION,
        {
            "markers": [
                {
                    "producer_id": producer.producer_id,
                    "producer_epoch": producer.producer_epoch,
                    "transaction_result": False,
                    "topics": [{"name": topic, "partition_indexes": [index]}],
                    "coordinator_epoch": producer.coordinator_epoch,
                }
            ]
        },
        node_id=leader,
    )
    what = f"abort the transaction of producer {producer.producer_id} on {topic}-{index}"
    for marker in response.markers:
        for answered in marker.topics:
            for part in answered.partitions:
                if part.error_code == ErrorCode.INVALID_PRODUCER_EPOCH:
                    raise RestError(409, f"{what}: the producer has a newer epoch")
                if part.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
                    raise RestError(
                        409, f"{what}: the coordinator epoch is older than the partition's"
                    )
                check_kafka(part.error_code, None, what)
    return json_response(
        resource(
            "WeirAbortedTransaction",
            call.url("topics", topic, "partitions", index, "abort-transaction"),
            cluster_id=call.cluster_id,
            topic_name=topic,
            partition_id=index,
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            coordinator_epoch=producer.coordinator_epoch,
            start_offset=None if producer.start_offset < 0 else producer.start_offset,
        )
    )


# -- hanging transactions ------------------------------------------------------------------------


async def _candidates(call: AdminCall, topic: str | None, timeout_ms: int) -> list[Producer]:
    response = await metadata(call, None if topic is None else [topic])
    now_ms = int(time.time() * 1000)
    found = []
    for described in sorted(response.topics, key=lambda t: t.name):
        if described.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise not_found(f"no topic {described.name!r}")
        if described.error_code != ErrorCode.NONE or (topic is None and described.is_internal):
            continue
        leaders = {p.partition_index: p.leader_id for p in described.partitions}
        found += [
            p
            for p in await producers_at_leaders(call, described.name, leaders)
            if p.start_offset >= 0 and now_ms - p.last_timestamp_ms > timeout_ms
        ]
    return found


async def _transactional_ids(call: AdminCall, producer_ids: set[int]) -> dict[int, str]:
    found = {}
    body = {
        "state_filters": [],
        "producer_id_filters": sorted(producer_ids),
        "duration_filter": NO_DURATION_FILTER,
        "transactional_id_pattern": None,
    }
    for node_id in await broker_ids(call):
        try:
            response = await call.send(
                ApiKey.LIST_TRANSACTIONS, LIST_TRANSACTIONS_VERSION, body, node_id=node_id
            )
        except GatewayError as exc:  # its transactions unknown: none can be called hanging
            raise retry_later(f"broker {node_id} did not list its transactions: {exc}") from exc
        check_kafka(response.error_code, None, f"list the transactions of broker {node_id}")
        for t in response.transaction_states:
            if t.producer_id in producer_ids:
                found[t.producer_id] = t.transactional_id
    return found


async def _partitions_in_transaction(
    call: AdminCall, transactional_id: str
) -> set[tuple[str, int]]:
    node_id = await coordinator(
        call, transactional_id, KEY_TYPE_TRANSACTION, f"transactional id {transactional_id!r}"
    )
    response = await call.send(
        ApiKey.DESCRIBE_TRANSACTIONS,
        DESCRIBE_TRANSACTIONS_VERSION,
        {"transactional_ids": [transactional_id]},
        node_id=node_id,
    )
    described = response.transaction_states[0]
    if described.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
        return set()
    check_kafka(described.error_code, None, f"describe transactional id {transactional_id!r}")
    return {(t.topic, p) for t in described.topics for p in t.partitions}


async def list_hanging(call: AdminCall) -> Response:
    given = call.query("topic_name")
    topic = None if given is None else topic_name(given)
    timeout_text = call.query("max_transaction_timeout_ms")
    timeout_ms = (
        MAX_TRANSACTION_TIMEOUT_MS_DEFAULT
        if timeout_text is None
        else int_text(timeout_text, "max_transaction_timeout_ms", 0, INT32_MAX)
    )
    candidates = await _candidates(call, topic, timeout_ms)
    hanging = []
    if candidates:
        ids = await _transactional_ids(call, {c.producer_id for c in candidates})
        included = {
            transactional_id: await _partitions_in_transaction(call, transactional_id)
            for transactional_id in sorted(set(ids.values()))
        }
        hanging = [
            c
            for c in candidates
            if (c.topic, c.partition) not in included.get(ids.get(c.producer_id, ""), set())
        ]
    document = collection(
        "WeirHangingTransactionList",
        call.url("hanging-transactions"),
        [producer_resource(call, p) for p in hanging],
    )
    document["max_transaction_timeout_ms"] = timeout_ms
    return json_response(document)


ENDPOINTS = [
    Endpoint(
        "GET",
        f"{PARTITION}/producers",
        list_producers,
        "A partition's active producers and their open transactions",
        tag="transactions",
    ),
    Endpoint(
        "POST",
        f"{PARTITION}/abort-transaction",
        abort_transaction,
        "Abort one producer's open transaction on a partition",
        body={
            "type": "object",
            "properties": {
                "start_offset": {"type": "integer", "minimum": 0},
                "producer_id": {"type": "integer", "minimum": 0},
                "producer_epoch": {"type": "integer", "minimum": 0},
                "coordinator_epoch": {"type": "integer"},
            },
        },
        tag="transactions",
    ),
    Endpoint(
        "GET",
        "/v3/clusters/{cluster_id}/hanging-transactions",
        list_hanging,
        "Open transactions no marker will end",
        query=(
            Param("topic_name", "Only this topic's partitions (absent: every non-internal topic)"),
            Param(
                "max_transaction_timeout_ms",
                "How long a transaction may run (default 900000)",
                schema={"type": "integer"},
            ),
        ),
        tag="transactions",
    ),
]
