"""`weir cluster status | brokers | partitions`: the cluster as a Kafka client sees
it (Metadata and DescribeCluster), in text tables or JSON with the same names."""

from __future__ import annotations

from typing import Any

from weir.cli.cluster import NO_LEADER, Cluster, TopicMetadata
from weir.cli.errors import kafka_error
from weir.cli.formatting import render_table
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey


def _describe_cluster(cluster: Cluster) -> dict[str, Any]:
    response = cluster.any_broker().request(
        ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False}
    )
    error = int(response["error_code"])
    if error != ErrorCode.NONE:
        raise kafka_error(error, action="describe the cluster")
    return dict(response)


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
    headers = ("node_id", "host", "port", "rack", "is_controller", "leaders", "replicas")
    rows = [tuple(b[h] for h in headers) for b in document["brokers"]]
    return render_table(headers, rows)


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
    headers = ("topic", "partition", "leader", "leader_epoch", "replicas", "isr",
               "offline_replicas")  # fmt: skip
    rows = [tuple(row[h] for h in headers) for row in document["partitions"]]
    return render_table(headers, rows) if rows else "no partitions\n"
