"""What the console's overview and topic list show beyond Confluent's shapes:

- `GET /v3/clusters/{c}/brokers/{id}/stats` (`KafkaBrokerStats`): one broker's
  recent traffic (weir.broker.http.broker_stats: a ring of 10-second samples over
  15 minutes and the interval in progress), what it holds (replicas, partitions
  led, bytes on disk), its ISR shrinks and, for `?topics=a,b`, those topics'
  sizes and rates on it. Any broker answers for any live broker of the cluster:
  for a peer it asks that broker's own HTTP API (its registered `http_url`),
  passing the caller's Authorization header on, so the peer checks the same
  caller. Needs DESCRIBE on the cluster, as /metrics does.
- `GET /v3/clusters/{c}/health` (`KafkaClusterHealth`): the brokers, live and
  down (a broker that holds replicas but is not registered is down), the
  controller, per broker the partitions it leads and the replicas it holds, and
  the partitions offline (no leader) and under-replicated (ISR smaller than the
  replicas), from one Metadata and one DescribeCluster as the caller.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

import httpx
import trio
from starlette.responses import Response

from weir.broker.broker import Broker
from weir.broker.http.authentication import http_authorization
from weir.broker.http.broker_stats import (
    HISTORY_S,
    SAMPLE_INTERVAL_S,
    TOPIC_RATE_WINDOW_S,
    holdings,
    isr_shrinks_total,
    topic_sizes,
    traffic_history_of,
)
from weir.broker.http.rest_admin_base import (
    AdminCall,
    Endpoint,
    Param,
    RestError,
    bad_request,
    int_text,
    json_response,
    not_found,
    resource,
    retry_later,
    topic_name,
)
from weir.broker.http.rest_admin_clusters import describe_cluster
from weir.broker.http.rest_admin_topics import NO_LEADER, metadata
from weir.format.errors import ErrorCode
from weir.security.acl import AclOperation

log = logging.getLogger(__name__)

# Topics one stats request may ask about (a console page of the topic list).
STATS_TOPICS_MAX = 500
PEER_STATS_TIMEOUT_S = 3.0
PEER_CONNECTIONS_MAX = 8
# Set on a request one broker makes to another for its stats: the peer answers
# for itself only (no second hop).
FORWARDED_HEADER = "x-weir-forwarded"


def _check_describe_cluster(call: AdminCall, what: str) -> None:
    authorization = http_authorization(call.broker, call.request, what)
    if authorization is not None and not authorization.allows_cluster(AclOperation.DESCRIBE):
        raise RestError(403, "not authorized: DESCRIBE on the cluster is needed", 40301)


def _topics_asked(call: AdminCall) -> list[str]:
    text = call.query("topics")
    if not text:
        return []
    names = [name for name in text.split(",") if name]
    if len(names) > STATS_TOPICS_MAX:
        raise bad_request(f"topics may name at most {STATS_TOPICS_MAX} topics")
    return [topic_name(name, "topics") for name in names]


def _own_stats(call: AdminCall, topics: list[str]) -> dict[str, Any]:
    broker = call.broker
    history = traffic_history_of(broker)
    lag_s = broker.loop_lag.worst_recent_s(trio.current_time())
    sizes = topic_sizes(broker, topics)
    rates = history.topic_rates(topics)
    return resource(
        "KafkaBrokerStats",
        call.url("brokers", broker.config.node_id, "stats"),
        cluster_id=call.cluster_id,
        broker_id=broker.config.node_id,
        sample_interval_s=SAMPLE_INTERVAL_S,
        history_s=HISTORY_S,
        samples=list(history.samples),
        current=history.current(),
        **holdings(broker),
        isr_shrinks_total=isr_shrinks_total(broker),
        loop_lag_worst_last_minute_ms=round(lag_s * 1000, 1),
        topic_rate_window_s=TOPIC_RATE_WINDOW_S,
        topics=[{"topic_name": name, **sizes[name], **rates[name]} for name in topics],
    )


async def get_broker_stats(call: AdminCall) -> Response:
    broker_id = int_text(call.path("broker_id"), "broker_id")
    _check_describe_cluster(call, "HTTP broker stats")
    topics = _topics_asked(call)
    if broker_id == call.broker.config.node_id:
        return json_response(_own_stats(call, topics))
    if call.request.headers.get(FORWARDED_HEADER):
        raise not_found(f"this is broker {call.broker.config.node_id}, not {broker_id}")
    return json_response(await _peer_stats(call, broker_id))


async def _peer_stats(call: AdminCall, broker_id: int) -> Any:
    cluster = call.broker.cluster
    peers = {b.node_id: b for b in cluster.live_brokers()} if cluster is not None else {}
    peer = peers.get(broker_id)
    if peer is None:
        raise not_found(f"no live broker {broker_id}")
    if not peer.http_url:
        raise retry_later(f"broker {broker_id} registered no HTTP address (an older version)")
    url = f"{peer.http_url}{call.request.url.path}"
    headers = {FORWARDED_HEADER: "1", "accept": "application/json"}
    if "authorization" in call.request.headers:
        headers["authorization"] = call.request.headers["authorization"]
    try:
        answer = await _peer_client(call.broker).get(
            url, params=call.request.query_params, headers=headers
        )
    except httpx.HTTPError as exc:
        raise retry_later(f"broker {broker_id} did not answer at {peer.http_url}: {exc}") from None
    try:
        document = answer.json()
    except ValueError:
        raise retry_later(f"broker {broker_id} answered HTTP {answer.status_code}") from None
    if answer.status_code == 401:
        # The caller got in here some other way (a client certificate): not a
        # reason to send the console to its login page.
        raise retry_later(f"broker {broker_id} did not accept the caller's credentials")
    if answer.status_code != 200:
        message = document.get("message") if isinstance(document, dict) else None
        raise RestError(answer.status_code, str(message or f"broker {broker_id} refused"))
    return document


_PEER_CLIENTS: weakref.WeakKeyDictionary[Broker, httpx.AsyncClient] = weakref.WeakKeyDictionary()


def _peer_client(broker: Broker) -> httpx.AsyncClient:
    """The broker's one client for its peers' HTTP APIs, made on first use: its
    connections are kept (a new client costs a TLS context, about 0.1 s)."""
    client = _PEER_CLIENTS.get(broker)
    if client is None:
        client = _PEER_CLIENTS[broker] = httpx.AsyncClient(
            timeout=PEER_STATS_TIMEOUT_S,
            limits=httpx.Limits(max_connections=PEER_CONNECTIONS_MAX),
        )
    return client


# -- the cluster's health ----------------------------------------------------------------


def health_summary(live: dict[int, Any], controller_id: int, topics: list[Any]) -> dict[str, Any]:
    """Brokers (live and down) with the partitions they lead and the replicas they
    hold, and the partitions offline and under-replicated, from Metadata's topics
    and DescribeCluster's live brokers (`live`: id -> broker entry)."""
    led: dict[int, int] = {}
    held: dict[int, int] = {}
    partitions = offline = under_replicated = 0
    offline_list: list[dict[str, Any]] = []
    under_list: list[dict[str, Any]] = []
    for topic in topics:
        if topic.error_code != ErrorCode.NONE:
            continue
        for partition in topic.partitions:
            partitions += 1
            for replica in partition.replica_nodes:
                held[replica] = held.get(replica, 0) + 1
            where = {"topic_name": topic.name, "partition_id": partition.partition_index}
            if partition.leader_id == NO_LEADER:
                offline += 1
                if len(offline_list) < 100:
                    offline_list.append(where)
                continue
            led[partition.leader_id] = led.get(partition.leader_id, 0) + 1
            if len(partition.isr_nodes) < len(partition.replica_nodes):
                under_replicated += 1
                if len(under_list) < 100:
                    under_list.append(
                        {
                            **where,
                            "replica_ids": list(partition.replica_nodes),
                            "isr": list(partition.isr_nodes),
                        }  # fmt: skip
                    )
    brokers = []
    for broker_id in sorted(set(live) | set(held)):
        entry = live.get(broker_id)
        brokers.append(
            {
                "broker_id": broker_id,
                "live": entry is not None,
                "is_controller": broker_id == controller_id,
                "host": None if entry is None else entry.host,
                "port": None if entry is None else entry.port,
                "rack": None if entry is None else entry.rack,
                "partitions_led": led.get(broker_id, 0),
                "replicas": held.get(broker_id, 0),
            }
        )
    return {
        "controller_id": None if controller_id == NO_LEADER else controller_id,
        "brokers": brokers,
        "partitions_count": partitions,
        "offline_partitions_count": offline,
        "under_replicated_partitions_count": under_replicated,
        "offline_partitions": offline_list,
        "under_replicated_partitions": under_list,
    }


async def get_health(call: AdminCall) -> Response:
    _check_describe_cluster(call, "HTTP cluster health")
    cluster = await describe_cluster(call)
    described = await metadata(call, None)
    summary = health_summary(
        {b.broker_id: b for b in cluster.brokers}, cluster.controller_id, described.topics
    )
    return json_response(
        resource("KafkaClusterHealth", call.url("health"), cluster_id=call.cluster_id, **summary)
    )


CLUSTER = "/v3/clusters/{cluster_id}"
ENDPOINTS = [
    Endpoint(
        "GET",
        f"{CLUSTER}/brokers/{{broker_id}}/stats",
        get_broker_stats,
        "A live broker's recent traffic (10-second samples over 15 minutes), replicas, "
        "partitions led, bytes on disk, ISR shrinks and event-loop lag; with `topics`, "
        "those topics' sizes and rates on it (DESCRIBE on the cluster)",
        query=(
            Param(
                "topics",
                f"Comma-separated topic names (at most {STATS_TOPICS_MAX}) whose bytes on "
                "this broker and records and bytes per second (last minute) to report",
            ),
        ),
        tag="cluster",
    ),
    Endpoint(
        "GET",
        f"{CLUSTER}/health",
        get_health,
        "Brokers live and down, the controller, partitions led per broker, offline and "
        "under-replicated partitions (DESCRIBE on the cluster)",
        tag="cluster",
    ),
]
