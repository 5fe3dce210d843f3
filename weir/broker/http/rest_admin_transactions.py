"""Transactions, in Weir's own shape under /v3 (Confluent defines none), as
`weir txn list|describe` shows them: every broker lists the transactional ids it
coordinates (ListTransactions, filtered by state, producer id, how long they have
run and a transactional-id pattern), and a transactional id's coordinator
describes it (DescribeTransactions): its producer, state, timeout, start and
partitions."""

from __future__ import annotations

import time
from typing import Any

from starlette.responses import Response

from weir.broker.http.kafka_gateway import GatewayError
from weir.broker.http.rest_admin_base import (
    AdminCall,
    Endpoint,
    Param,
    bad_request,
    check_kafka,
    collection,
    int_text,
    json_response,
    not_found,
    related,
    resource,
    resource_name,
)
from weir.broker.http.rest_admin_lookups import KEY_TYPE_TRANSACTION, broker_ids, coordinator
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

LIST_TRANSACTIONS_VERSION = 2
DESCRIBE_TRANSACTIONS_VERSION = 0
NO_DURATION_FILTER = -1
FILTER_VALUES_MAX = 100
PRODUCER_ID_MAX = 2**63 - 1


def _list_filters(call: AdminCall) -> dict[str, Any]:
    request = call.request
    states = request.query_params.getlist("state")
    producer_ids = request.query_params.getlist("producer_id")
    if len(states) > FILTER_VALUES_MAX or len(producer_ids) > FILTER_VALUES_MAX:
        raise bad_request(f"at most {FILTER_VALUES_MAX} state and producer_id filters")
    duration = call.query("min_duration_ms")
    pattern = call.query("transactional_id_pattern")
    return {
        "state_filters": [resource_name(s, "state") for s in states],
        "producer_id_filters": [
            int_text(p, "producer_id", 0, PRODUCER_ID_MAX) for p in producer_ids
        ],
        "duration_filter": NO_DURATION_FILTER
        if duration is None
        else int_text(duration, "min_duration_ms", 0, PRODUCER_ID_MAX),
        "transactional_id_pattern": None
        if pattern is None
        else resource_name(pattern, "transactional_id_pattern"),
    }


async def list_transactions(call: AdminCall) -> Response:
    body = _list_filters(call)
    rows = []
    silent = []
    for node_id in await broker_ids(call):
        try:
            response = await call.send(
                ApiKey.LIST_TRANSACTIONS, LIST_TRANSACTIONS_VERSION, body, node_id=node_id
            )
        except GatewayError:
            silent.append(node_id)
            continue
        check_kafka(response.error_code, None, f"list the transactions of broker {node_id}")
        rows += [
            resource(
                "WeirTransaction",
                call.url("transactions", t.transactional_id),
                cluster_id=call.cluster_id,
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                state=t.transaction_state,
                coordinator=related(call.url("brokers", node_id)),
            )
            for t in response.transaction_states
        ]
    rows.sort(key=lambda r: str(r["transactional_id"]))
    document = collection("WeirTransactionList", call.url("transactions"), rows)
    document["brokers_not_answering"] = silent
    return json_response(document)


async def get_transaction(call: AdminCall) -> Response:
    transactional_id = resource_name(call.path("transactional_id"), "transactional_id")
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
        raise not_found(f"no transactional id {transactional_id!r}")
    check_kafka(described.error_code, None, f"describe transactional id {transactional_id!r}")
    start_ms = described.transaction_start_time_ms
    now_ms = int(time.time() * 1000)
    return json_response(
        resource(
            "WeirTransaction",
            call.url("transactions", transactional_id),
            cluster_id=call.cluster_id,
            transactional_id=transactional_id,
            producer_id=described.producer_id,
            producer_epoch=described.producer_epoch,
            state=described.transaction_state,
            transaction_timeout_ms=described.transaction_timeout_ms,
            transaction_start_time_ms=None if start_ms < 0 else start_ms,
            transaction_duration_ms=None if start_ms < 0 else max(0, now_ms - start_ms),
            partitions=[
                {"topic_name": t.topic, "partition_id": p}
                for t in sorted(described.topics, key=lambda t: t.topic)
                for p in sorted(t.partitions)
            ],
            coordinator=related(call.url("brokers", node_id)),
        )
    )


TRANSACTIONS = "/v3/clusters/{cluster_id}/transactions"
ENDPOINTS = [
    Endpoint(
        "GET",
        TRANSACTIONS,
        list_transactions,
        "The transactional ids of the cluster (ListTransactions on every broker)",
        query=(
            Param("state", "Only these states (repeatable): Ongoing, PrepareCommit, ..."),
            Param(
                "producer_id", "Only these producer ids (repeatable)", schema={"type": "integer"}
            ),
            Param(
                "min_duration_ms",
                "Only transactions running at least this long",
                schema={"type": "integer"},
            ),
            Param("transactional_id_pattern", "Only ids matching this regular expression"),
        ),
        tag="transactions",
    ),
    Endpoint(
        "GET",
        f"{TRANSACTIONS}/{{transactional_id}}",
        get_transaction,
        "One transactional id, described by its coordinator",
        tag="transactions",
    ),
]
