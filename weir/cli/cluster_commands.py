"""`weir cluster info | status | brokers | partitions`: the cluster as a Kafka client
sees it (DescribeCluster, Metadata, ApiVersions), in text tables or JSON with the same
names."""

from __future__ import annotations

from typing import Any

from weir.cli.cluster import NO_LEADER, Cluster, TopicMetadata
from weir.cli.errors import BrokerProtocolError, CliError, failed_to, kafka_error
from weir.cli.formatting import headers_for, render_table
from weir.cli.kafka_client import (
    CLIENT_SOFTWARE_NAME,
    KafkaClient,
    api_name,
    client_software_version,
)
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey


def _describe_cluster(cluster: Cluster) -> dict[str, Any]:
    response = cluster.any_broker().request(
        ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False}
    )
    error = int(response["error_code"])
    if error != ErrorCode.NONE:
        raise failed_to("describe the cluster", error, response.get("error_message"))
    return dict(response)


# -- info -------------------------------------------------------------------------------


def cluster_info(cluster: Cluster) -> dict[str, Any]:
    """Who the cluster is (id, controller, brokers) and which versions meet: this CLI's,
    and the API version ranges the bootstrap broker advertises in ApiVersions (the Kafka
    protocol carries no broker software version, so that one is null)."""
    described = _describe_cluster(cluster)
    controller_id = int(described["controller_id"])
    client = cluster.any_broker()
    return {
        "cluster_id": described["cluster_id"],
        "controller_id": controller_id,
        "brokers": [
            {
                "node_id": int(b["broker_id"]),
                "host": b["host"],
                "port": int(b["port"]),
                "rack": b.get("rack"),
                "is_controller": int(b["broker_id"]) == controller_id,
            }
            for b in sorted(described["brokers"], key=lambda b: int(b["broker_id"]))
        ],
        "versions": {
            "cli_name": CLIENT_SOFTWARE_NAME,
            "cli_version": client_software_version(),
            "broker_software_version": None,
            "api_versions_from": str(client.address),
            "apis": _api_versions(client),
            "features": _features(client),
        },
    }


def _api_versions(client: KafkaClient) -> list[dict[str, Any]]:
    """Every API the broker advertises, with the version this CLI uses (null: none)."""
    rows = []
    for api_key, (low, high) in sorted(client.broker_versions.items()):
        try:
            used_version: int | None = client.version(api_key)
        except BrokerProtocolError:
            used_version = None
        rows.append(
            {
                "api_key": api_key,
                "name": api_name(api_key),
                "min_version": low,
                "max_version": high,
                "cli_version": used_version,
            }
        )
    return rows


def _features(client: KafkaClient) -> list[dict[str, Any]]:
    """ApiVersions v3+'s supported features (KIP-584), by name; empty before v3."""
    response = client.request(ApiKey.API_VERSIONS, {
        "client_software_name": CLIENT_SOFTWARE_NAME,
        "client_software_version": client_software_version(),
    })  # fmt: skip
    return [
        {"name": f["name"], "min_version": int(f["min_version"]),
         "max_version": int(f["max_version"])}
        for f in sorted(response.get("supported_features") or [], key=lambda f: f["name"])
    ]  # fmt: skip


def render_cluster_info(document: dict[str, Any]) -> str:
    versions = document["versions"]
    apis = versions["apis"]
    used = sum(1 for api in apis if api["cli_version"] is not None)
    broker_version = (
        versions["broker_software_version"] or "not advertised (Kafka's ApiVersions carries none)"
    )
    lines = [
        f"cluster_id: {document['cluster_id']}\n",
        f"controller_id: {document['controller_id']}\n",
        render_table(
            ("NODE-ID", "HOST", "PORT", "RACK", "CONTROLLER"),
            [
                (b["node_id"], b["host"], b["port"], b["rack"], b["is_controller"])
                for b in document["brokers"]
            ],
        ),  # fmt: skip
        f"cli_version: {versions['cli_name']} {versions['cli_version']}\n",
        f"broker_software_version: {broker_version}\n",
        f"apis: {versions['api_versions_from']} advertises {len(apis)}, this CLI uses {used} "
        "(--format json lists every version range)\n",
    ]
    return "".join(lines)


def _partition_rows(topics: list[TopicMetadata]) -> list[dict[str, Any]]:
    rows = []
    for topic in sorted(topics, key=lambda t: t.name):
        for p in topic.partitions:
            rows.append(
                {
                    "topic": topic.name,
                    "partition": p.partition,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                    "offline_replicas": list(p.offline_replicas),
                }
            )
    return rows


def _under_replicated(row: dict[str, Any]) -> bool:
    return len(row["isr"]) < len(row["replicas"])


def _offline(row: dict[str, Any]) -> bool:
    return bool(row["leader"] == NO_LEADER)


def cluster_status(cluster: Cluster) -> dict[str, Any]:
    described = _describe_cluster(cluster)
    rows = _partition_rows(cluster.metadata(None))
    brokers = sorted(int(b["broker_id"]) for b in described["brokers"])
    leaders = {node_id: 0 for node_id in brokers}
    for row in rows:
        if row["leader"] in leaders:
            leaders[row["leader"]] += 1
    return {
        "cluster_id": described["cluster_id"],
        "controller_id": int(described["controller_id"]),
        "brokers_count": len(brokers),
        "topics_count": len({row["topic"] for row in rows}),
        "partitions_count": len(rows),
        "under_replicated_partitions_count": sum(1 for row in rows if _under_replicated(row)),
        "offline_partitions_count": sum(1 for row in rows if _offline(row)),
        "leaders_by_broker": {str(node_id): count for node_id, count in leaders.items()},
    }


def render_cluster_status(document: dict[str, Any]) -> str:
    lines = [
        f"cluster_id: {document['cluster_id']}",
        f"controller_id: {document['controller_id']}",
        f"brokers_count: {document['brokers_count']}",
        f"topics_count: {document['topics_count']}",
        f"partitions_count: {document['partitions_count']}",
        f"under_replicated_partitions_count: {document['under_replicated_partitions_count']}",
        f"offline_partitions_count: {document['offline_partitions_count']}",
        "leaders_by_broker: "
        + ", ".join(f"{n}={c}" for n, c in document["leaders_by_broker"].items()),
    ]
    return "\n".join(lines) + "\n"


def cluster_brokers(cluster: Cluster) -> dict[str, Any]:
    described = _describe_cluster(cluster)
    controller_id = int(described["controller_id"])
    rows = _partition_rows(cluster.metadata(None))
    brokers = []
    for broker in sorted(described["brokers"], key=lambda b: int(b["broker_id"])):
        node_id = int(broker["broker_id"])
        brokers.append(
            {
                "node_id": node_id,
                "host": broker["host"],
                "port": int(broker["port"]),
                "rack": broker.get("rack"),
                "is_controller": node_id == controller_id,
                "leaders": sum(1 for row in rows if row["leader"] == node_id),
                "replicas": sum(1 for row in rows if node_id in row["replicas"]),
            }
        )
    return {"brokers": brokers}


def render_cluster_brokers(document: dict[str, Any]) -> str:
    fields = ("node_id", "host", "port", "rack", "is_controller", "leaders", "replicas")
    rows = [tuple(b[f] for f in fields) for b in document["brokers"]]
    return render_table(headers_for(fields), rows)


def cluster_partitions(
    cluster: Cluster,
    *,
    topic: str | None = None,
    under_replicated: bool = False,
    offline: bool = False,
) -> dict[str, Any]:
    topics = cluster.metadata(None if topic is None else [topic])
    if topic is not None and not any(t.name == topic for t in topics):
        raise kafka_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic=topic)
    for described in topics:
        if described.error_code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
            raise kafka_error(described.error_code, topic=described.name)
    rows = _partition_rows(topics)
    if under_replicated:
        rows = [row for row in rows if _under_replicated(row)]
    if offline:
        rows = [row for row in rows if _offline(row)]
    return {"partitions": rows}


def render_cluster_partitions(document: dict[str, Any]) -> str:
    fields = ("topic", "partition", "leader", "leader_epoch", "replicas", "isr",
              "offline_replicas")  # fmt: skip
    rows = [tuple(row[f] for f in fields) for row in document["partitions"]]
    return render_table(headers_for(fields), rows) if rows else "no partitions\n"


# -- leadership and moves ---------------------------------------------------------------

ELECTION_TYPES = {"preferred": 0, "unclean": 1}


def elect_leaders(
    cluster: Cluster, *, topic: str | None, partition: int | None, election_type: str
) -> dict[str, Any]:
    if topic is None:
        wanted = None
    else:
        described = cluster.topic(topic, action="elect leaders")
        indexes = (
            [partition] if partition is not None else [p.partition for p in described.partitions]
        )
        wanted = [{"topic": topic, "partitions": indexes}]
    response = cluster.controller().request(
        ApiKey.ELECT_LEADERS,
        {
            "election_type": ELECTION_TYPES[election_type],
            "topic_partitions": wanted,
            "timeout_ms": 30_000,
        },  # fmt: skip
    )
    error = int(response.get("error_code", ErrorCode.NONE))
    if error != ErrorCode.NONE:
        raise failed_to("elect leaders", error, response.get("error_message"))
    results = [
        {
            "topic": topic_result["topic"],
            "partition": int(p["partition_id"]),
            "error": ErrorCode(int(p["error_code"])).name if int(p["error_code"]) else None,
            "message": p.get("error_message"),
        }
        for topic_result in response["replica_election_results"]
        for p in topic_result["partition_result"]
    ]
    return {"elections": sorted(results, key=lambda r: (r["topic"], r["partition"]))}


def render_elections(document: dict[str, Any]) -> str:
    rows = [
        (
            r["topic"],
            r["partition"],
            "elected" if r["error"] is None else r["error"],
            r["message"] or "",
        )  # fmt: skip
        for r in document["elections"]
    ]
    headers = ("TOPIC", "PARTITION", "RESULT", "MESSAGE")
    return render_table(headers, rows) if rows else "no partitions to elect\n"


def reassign(cluster: Cluster, moves: dict[tuple[str, int], list[int] | None]) -> dict[str, Any]:
    """Submit replica moves (None cancels one); the controller finishes each once
    its target replicas are in sync."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), replicas in sorted(moves.items()):
        by_topic.setdefault(topic, []).append({"partition_index": partition, "replicas": replicas})
    response = cluster.controller().request(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        {
            "timeout_ms": 30_000,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
        },  # fmt: skip
    )
    error = int(response["error_code"])
    if error != ErrorCode.NONE:
        raise failed_to("reassign partitions", error, response.get("error_message"))
    results = []
    failed = []
    for topic_result in response["responses"]:
        for p in topic_result["partitions"]:
            code = int(p["error_code"])
            row = {
                "topic": topic_result["name"],
                "partition": int(p["partition_index"]),
                "replicas": moves[(topic_result["name"], int(p["partition_index"]))],
                "error": ErrorCode(code).name if code else None,
                "message": p.get("error_message"),
            }
            results.append(row)
            if code:
                failed.append(row)
    if failed:
        first = failed[0]
        raise CliError(
            f"{len(failed)} of {len(results)} moves refused, e.g. {first['topic']}-"
            f"{first['partition']}: {first['message'] or first['error']} ({first['error']})"
        )
    return {"reassignments": results}


def render_reassign(document: dict[str, Any]) -> str:
    rows = [
        (r["topic"], r["partition"], r["replicas"] if r["replicas"] is not None else "cancelled")
        for r in document["reassignments"]
    ]
    return "submitted:\n" + render_table(("TOPIC", "PARTITION", "TARGET-REPLICAS"), rows)


def list_reassignments(cluster: Cluster) -> dict[str, Any]:
    response = cluster.controller().request(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 30_000, "topics": None}
    )
    error = int(response["error_code"])
    if error != ErrorCode.NONE:
        raise failed_to("list reassignments", error, response.get("error_message"))
    rows = [
        {
            "topic": t["name"],
            "partition": int(p["partition_index"]),
            "replicas": list(p["replicas"]),
            "adding_replicas": list(p["adding_replicas"]),
            "removing_replicas": list(p["removing_replicas"]),
        }
        for t in response["topics"]
        for p in t["partitions"]
    ]
    return {"reassignments": sorted(rows, key=lambda r: (r["topic"], r["partition"]))}


def render_reassignments(document: dict[str, Any]) -> str:
    fields = ("topic", "partition", "replicas", "adding_replicas", "removing_replicas")
    rows = [tuple(r[f] for f in fields) for r in document["reassignments"]]
    return render_table(headers_for(fields), rows) if rows else "no reassignment in progress\n"


def decommission_plan(cluster: Cluster, node_id: int) -> dict[tuple[str, int], list[int] | None]:
    """For every partition with a replica on `node_id`: the same replicas with that
    one replaced by the live broker holding the fewest replicas (not already one of
    them); the leader's position is kept."""
    described = _describe_cluster(cluster)
    live = sorted(int(b["broker_id"]) for b in described["brokers"])
    if node_id not in live:
        raise CliError(f"broker {node_id} is not a live broker of the cluster (live: {live})")
    others = [n for n in live if n != node_id]
    rows = _partition_rows(cluster.metadata(None))
    load = {n: sum(1 for row in rows if n in row["replicas"]) for n in others}
    plan: dict[tuple[str, int], list[int] | None] = {}
    for row in rows:
        replicas = list(row["replicas"])
        if node_id not in replicas:
            continue
        candidates = [n for n in others if n not in replicas]
        if not candidates:
            raise CliError(
                f"{row['topic']}-{row['partition']} has replicas on every other broker: "
                f"no broker can take broker {node_id}'s replica"
            )
        chosen = min(candidates, key=lambda n: (load[n], n))
        load[chosen] += 1
        replicas[replicas.index(node_id)] = chosen
        plan[(row["topic"], row["partition"])] = replicas
    return plan


def render_plan(document: dict[str, Any]) -> str:
    rows = [(r["topic"], r["partition"], r["replicas"]) for r in document["plan"]]
    return (render_table(("TOPIC", "PARTITION", "TARGET-REPLICAS"), rows) if rows
            else "nothing to move\n")  # fmt: skip
