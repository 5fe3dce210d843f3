"""The batch report: page views of one range of a topic, per page and country.

The range is given the two ways Spark's Kafka source takes one:
- offsets: `startingOffsets`/`endingOffsets` as JSON per partition,
  `{"views": {"0": 120, "1": -2}}` (-2: earliest, -1: latest; the end is exclusive);
- time: `startingOffsetsByTimestamp`/`endingOffsetsByTimestamp`, JSON per partition
  of epoch milliseconds; each resolves to the first offset whose record timestamp is
  at or after it (Kafka's ListOffsets by timestamp).

Reads are read_committed (`streaming.READ_COMMITTED`): records of aborted transactions
are skipped, and "latest" is the last stable offset, so a transaction still open ends
the range before its first record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from spark_demo.streaming import READ_COMMITTED, parse_page_views

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True)
class OffsetRange:
    """Per-partition bounds: offsets (`by_timestamp` False) or timestamps in ms."""

    starting: Mapping[int, int]
    ending: Mapping[int, int]
    by_timestamp: bool = False

    def options(self, topic: str) -> dict[str, str]:
        start_key, end_key = (
            ("startingOffsetsByTimestamp", "endingOffsetsByTimestamp")
            if self.by_timestamp
            else ("startingOffsets", "endingOffsets")
        )
        return {
            start_key: partition_json(topic, self.starting),
            end_key: partition_json(topic, self.ending),
        }


def partition_json(topic: str, per_partition: Mapping[int, int]) -> str:
    """`{"topic": {"0": 5, ...}}`, the JSON Spark's Kafka source takes for bounds."""
    return json.dumps({topic: {str(p): value for p, value in sorted(per_partition.items())}})


def read_range(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    bounds: OffsetRange | None = None,
    extra_options: Mapping[str, str] | None = None,
) -> DataFrame:
    """The Kafka rows (Kafka's source schema, headers included) of `bounds` in `topic`
    (the whole topic when None), committed records only. `extra_options` add to or
    override the reader's."""
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
    )
    options = {**READ_COMMITTED, **(bounds.options(topic) if bounds else {})}
    options.update(extra_options or {})
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def page_report(kafka_rows: DataFrame) -> DataFrame:
    """Views, distinct users and dwell per page and country, busiest first."""
    views = parse_page_views(kafka_rows)
    return (
        views.groupBy("page", "country")
        .agg(
            sf.count(sf.lit(1)).alias("views"),
            sf.countDistinct("user_id").alias("users"),
            sf.round(sf.avg("dwell_ms")).cast("long").alias("dwell_ms_avg"),
            sf.min("event_time").alias("first_seen"),
            sf.max("event_time").alias("last_seen"),
        )
        .orderBy(sf.col("views").desc(), "page", "country")
    )


def write_report(report: DataFrame, path: str, output_format: str = "csv") -> None:
    """One file (`coalesce(1)`) of `output_format` (csv with a header, or parquet)."""
    writer = report.coalesce(1).write.mode("overwrite")
    if output_format == "csv":
        writer.option("header", "true").csv(path)
    elif output_format == "parquet":
        writer.parquet(path)
    else:
        raise ValueError(f"unknown report format {output_format!r} (csv or parquet)")
