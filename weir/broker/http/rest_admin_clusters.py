"""Clusters and brokers, in Confluent REST Proxy v3's shapes (`KafkaCluster`,
`KafkaBroker`), from DescribeCluster as the HTTP caller: one cluster, the one this
broker belongs to, whose id is the Kafka cluster id; its live brokers."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from weir.broker.http.rest_admin_base import (
    AdminCall,
    Endpoint,
    check_kafka,
    collection,
    int_text,
    json_response,
    not_found,
    related,
    resource,
)
from weir.wire.protocol import ApiKey

DESCRIBE_CLUSTER_VERSION = 1
BROKER_ENDPOINT_TYPE = 1


async def describe_cluster(call: AdminCall) -> Any:
    response = await call.send(
        ApiKey.DESCRIBE_CLUSTER,
        DESCRIBE_CLUSTER_VERSION,
        {"include_cluster_authorized_operations": False, "endpoint_type": BROKER_ENDPOINT_TYPE},
    )
    check_kafka(response.error_code, response.error_message, "describe the cluster")
    return response


def cluster_resource(call: AdminCall, controller_id: int) -> dict[str, Any]:
    return resource(
        "KafkaCluster",
        call.url(),
        cluster_id=call.cluster_id,
        controller=related(call.url("brokers", controller_id)),
        acls=related(call.url("acls")),
        brokers=related(call.url("brokers")),
        consumer_groups=related(call.url("consumer-groups")),
        share_groups=related(call.url("share-groups")),
        topics=related(call.url("topics")),
        transactions=related(call.url("transactions")),
    )


def broker_resource(call: AdminCall, broker: Any) -> dict[str, Any]:
    return resource(
        "KafkaBroker",
        call.url("brokers", broker.broker_id),
        cluster_id=call.cluster_id,
        broker_id=broker.broker_id,
        host=broker.host,
        port=broker.port,
        rack=broker.rack,
    )


async def list_clusters(call: AdminCall) -> Response:
    response = await describe_cluster(call)
    base = str(call.request.base_url).rstrip("/")
    return json_response(
        collection(
            "KafkaClusterList",
            f"{base}/v3/clusters",
            [cluster_resource(call, response.controller_id)],
        )
    )


async def get_cluster(call: AdminCall) -> Response:
    response = await describe_cluster(call)
    return json_response(cluster_resource(call, response.controller_id))


async def list_brokers(call: AdminCall) -> Response:
    response = await describe_cluster(call)
    brokers = sorted(response.brokers, key=lambda b: b.broker_id)
    return json_response(
        collection(
            "KafkaBrokerList", call.url("brokers"), [broker_resource(call, b) for b in brokers]
        )
    )


async def get_broker(call: AdminCall) -> Response:
    broker_id = int_text(call.path("broker_id"), "broker_id")
    response = await describe_cluster(call)
    for broker in response.brokers:
        if broker.broker_id == broker_id:
            return json_response(broker_resource(call, broker))
    raise not_found(f"no live broker {broker_id}")


CLUSTER = "/v3/clusters/{cluster_id}"
ENDPOINTS = [
    Endpoint(
        "GET", "/v3/clusters", list_clusters, "The cluster this broker belongs to", tag="cluster"
    ),
    Endpoint("GET", CLUSTER, get_cluster, "One cluster", tag="cluster"),
    Endpoint(
        "GET", f"{CLUSTER}/brokers", list_brokers, "The cluster's live brokers", tag="cluster"
    ),
    Endpoint("GET", f"{CLUSTER}/brokers/{{broker_id}}", get_broker, "One broker", tag="cluster"),
]
