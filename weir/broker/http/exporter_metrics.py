"""kafka_exporter's topic and broker families, under its names, so dashboards
built for it graph a Weir cluster (the group families are in group_views.py).

Each broker reports what it can know without asking another: `kafka_brokers`
from the cluster membership (every broker reports the same count), and the
offsets and replication state of the partitions it leads, so summing a family
over the brokers counts each partition once.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from weir.broker.broker import Broker
from weir.broker.partition_replica import PartitionReplica

PARTITION_LABELS = ["topic", "partition"]


def register_exporter_metrics(broker: Broker) -> None:
    broker.metrics.register_collector(lambda: exporter_families(broker))


def exporter_families(broker: Broker) -> Iterator[Metric]:
    cluster = broker.cluster
    brokers = 1 if cluster is None else len(cluster.live_brokers())
    yield GaugeMetricFamily(
        "kafka_brokers", "Number of Brokers in the Kafka Cluster.", value=float(brokers)
    )
    current = GaugeMetricFamily(
        "kafka_topic_partition_current_offset",
        "Current Offset of a Broker at Topic/Partition",
        labels=PARTITION_LABELS,
    )
    oldest = GaugeMetricFamily(
        "kafka_topic_partition_oldest_offset",
        "Oldest Offset of a Broker at Topic/Partition",
        labels=PARTITION_LABELS,
    )
    under_replicated = GaugeMetricFamily(
        "kafka_topic_partition_under_replicated_partition",
        "1 if Topic/Partition is under Replicated",
        labels=PARTITION_LABELS,
    )
    for (topic, index), replica in sorted(broker.partitions.items()):
        if not replica.is_leader:
            continue
        labels = [topic, str(index)]
        current.add_metric(labels, float(replica.high_watermark))
        oldest.add_metric(labels, float(replica.log.log_start_offset))
        under_replicated.add_metric(labels, 1.0 if _under_replicated(broker, replica) else 0.0)
    yield from (current, oldest, under_replicated)


def _under_replicated(broker: Broker, replica: PartitionReplica) -> bool:
    cluster = broker.cluster
    if cluster is None:
        return False
    state = cluster.partition_state(replica.topic, replica.index)
    return len(state.isr) < len(replica.topic.replicas(replica.index, broker.config.node_id))
