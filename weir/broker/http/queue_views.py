"""Queue depth you can see: `GET /v1/queues` and the share-group metrics.

Each share partition is served by its topic partition's leader, so each broker
shows the share partitions it leads (a cluster's whole picture is every broker's
view; a share partition no one has fetched from since the leader started is not
loaded and not shown). Per share group, topic and partition:

- `start_offset`: the share-partition start offset (everything below is done);
- `available`: records a consumer may be given now or once fetched, up to the
  high watermark; `acquired`: locked by a member; `delayed`: not to be delivered
  yet (a delay header or a release backoff; not in `available`); `acknowledged` and
  `archived`: done, not yet below the start offset;
- `dead_letter_pending`: archived records waiting for their dead letters (in
  `archived` too); `dead_lettered`: dead letters this broker wrote for the share
  partition since it started (a count, not durable: the dead-letter topic is the
  record);
- `delivery_counts`: the records not finished with (available, delayed, acquired)
  by their delivery count so far (a JSON object, the count as a string key; the
  records not yet fetched count 0);
- `oldest_unacknowledged_age_ms`: the age of the batch holding the start offset's
  record (its first timestamp), None when that batch is not in the page cache
  (the view never reads the disk on the event loop) or nothing is waiting.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.coordinators.share_partitions import ShareLeader
from weir.broker.coordinators.share_service import ShareService
from weir.format.record_batch import InvalidBatch, parse_batch_header
from weir.log.errors import LogError
from weir.log.page_cache import ReadNotCached

# A batch header's bytes: enough of the log to read the first batch's timestamp.
BATCH_HEADER_BYTES = 61


def queue_rows(service: ShareService, group_id: str | None = None) -> list[dict[str, Any]]:
    """One row per share partition led here (of `group_id` only, when given)."""
    rows = []
    now_ms = wall_clock_ms()
    for key, leader in sorted(
        service.partitions.leaders.items(),
        key=lambda item: (item[0].group_id, item[1].replica.topic.name, item[0].partition),
    ):
        if group_id is not None and key.group_id != group_id:
            continue
        replica = leader.replica
        depth = leader.partition.depth(replica.high_watermark)
        rows.append(
            {
                "group": key.group_id,
                "topic": replica.topic.name,
                "partition": key.partition,
                "start_offset": depth.start_offset,
                "high_watermark": replica.high_watermark,
                "available": depth.available,
                "acquired": depth.acquired,
                "delayed": depth.delayed,
                "acknowledged": depth.acknowledged,
                "archived": depth.archived,
                "dead_letter_pending": depth.archiving,
                "dead_lettered": service.dead_letters.written_by_key.get(key, 0),
                "oldest_unacknowledged_age_ms": _oldest_age_ms(leader, now_ms),
                "delivery_counts": {
                    str(count): records
                    for count, records in leader.partition.delivery_counts(
                        replica.high_watermark
                    ).items()
                },
            }
        )
    return rows


def _oldest_age_ms(leader: ShareLeader, now_ms: int) -> int | None:
    replica = leader.replica
    start_offset = leader.partition.start_offset
    if start_offset >= replica.high_watermark:
        return None
    try:
        result = replica.log.read(
            start_offset,
            bytes_max=BATCH_HEADER_BYTES,
            end_offset=replica.high_watermark,
            cached_only=True,
        )
        if len(result.records) < BATCH_HEADER_BYTES:
            return None
        header = parse_batch_header(memoryview(result.records), 0)
    except (ReadNotCached, LogError, InvalidBatch):
        return None
    return max(0, now_ms - header.base_timestamp)


# The share-partition gauges: (name, help, the row's field).
QUEUE_GAUGES = (
    ("weir_share_dead_letter_pending_records",
     "Archived records of a share partition led here waiting for their dead letters.",
     "dead_letter_pending"),
    ("weir_share_dead_lettered_records",
     "Dead letters written for a share partition by this broker since it started.",
     "dead_lettered"),
    ("weir_share_start_offset", "A share partition's start offset.", "start_offset"),
)  # fmt: skip
RECORD_STATES = ("available", "acquired", "delayed", "acknowledged", "archived")
PARTITION_LABELS = ["group", "topic", "partition"]


def register_queue_metrics(broker: Broker, service: ShareService) -> None:
    broker.metrics.register_collector(lambda: queue_families(service))


def queue_families(service: ShareService) -> list[Metric]:
    """The share-partition metric families, from one pass over the rows."""
    rows = queue_rows(service)
    records = GaugeMetricFamily(
        "weir_share_records",
        "Records of a share partition led here, by state (available: not yet fetched too).",
        labels=[*PARTITION_LABELS, "state"],
    )
    gauges = [
        (GaugeMetricFamily(name, help_text, labels=PARTITION_LABELS), field)
        for name, help_text, field in QUEUE_GAUGES
    ]
    oldest = GaugeMetricFamily(
        "weir_share_oldest_unacknowledged_age_seconds",
        "Age of the oldest record a share group has not finished with.",
        labels=PARTITION_LABELS,
    )
    for row in rows:
        labels = [row["group"], row["topic"], str(row["partition"])]
        for state in RECORD_STATES:
            records.add_metric([*labels, state], float(row[state]))
        for family, field in gauges:
            family.add_metric(labels, float(row[field]))
        if row["oldest_unacknowledged_age_ms"] is not None:
            oldest.add_metric(labels, row["oldest_unacknowledged_age_ms"] / 1000)
    return [records, *(family for family, _ in gauges), oldest]
