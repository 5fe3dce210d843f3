"""The Structured Streaming job: page views per page and event-time window.

Kafka in (`readStream.format("kafka")`), JSON parsed against `PAGE_VIEW_SCHEMA`,
tumbling event-time windows with a watermark, Kafka out
(`writeStream.format("kafka")`) in append mode: each window is written once, when
the watermark passes its end, as one record keyed `<window start ms>|<page>` whose
JSON value holds the window, the page and its totals.

Delivery: the source reads committed data only (`kafka.isolation.level=read_committed`,
`READ_COMMITTED`: records of aborted and still-open transactions are never read) and is
exactly-once with the checkpoint (offsets are logged before a micro-batch runs, state
is versioned per batch); Spark's Kafka sink is at-least-once:
a micro-batch that was running when the query died is run again on restart, with the
same offsets and state, so its output records may be written twice. Downstream
readers deduplicate by key (a window's totals are final when written).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType

PAGE_VIEW_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("user_id", StringType()),
        StructField("page", StringType()),
        StructField("event_time_ms", LongType()),
        StructField("dwell_ms", LongType()),
        StructField("country", StringType()),
        StructField("device", StringType()),
    ]
)
# Passed to the connector's consumers (kafka.* options lose their prefix): read only
# committed transactional records, up to the last stable offset. The driver's
# AdminClient lists "latest" offsets at the same isolation level.
READ_COMMITTED = {"kafka.isolation.level": "read_committed"}
WINDOW_MS = 10_000
WATERMARK_DELAY_MS = 5_000


def read_page_views(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    source_options: dict[str, str] | None = None,
) -> DataFrame:
    """The page-view stream of `topic` (committed records only), parsed; Kafka's
    columns kept alongside. `source_options` add to or override the reader's."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
    )
    for key, value in {**READ_COMMITTED, **(source_options or {})}.items():
        reader = reader.option(key, value)
    return parse_page_views(reader.load())


def parse_page_views(kafka_rows: DataFrame) -> DataFrame:
    """Kafka rows (binary value) → one row per page view with an `event_time` timestamp."""
    parsed = kafka_rows.select(
        sf.from_json(sf.col("value").cast("string"), PAGE_VIEW_SCHEMA).alias("view"),
        sf.col("partition"),
        sf.col("offset"),
    )
    return parsed.select("view.*", "partition", "offset").withColumn(
        "event_time", sf.timestamp_millis(sf.col("event_time_ms"))
    )


def windowed_totals(
    views: DataFrame,
    *,
    window_ms: int = WINDOW_MS,
    watermark_delay_ms: int = WATERMARK_DELAY_MS,
) -> DataFrame:
    """Views, total and longest dwell per page and tumbling event-time window."""
    window = sf.window(sf.col("event_time"), f"{window_ms} milliseconds")
    totals = (
        views.withWatermark("event_time", f"{watermark_delay_ms} milliseconds")
        .groupBy(window.alias("window"), sf.col("page"))
        .agg(
            sf.count(sf.lit(1)).alias("views"),
            sf.sum("dwell_ms").alias("dwell_ms_total"),
            sf.max("dwell_ms").alias("dwell_ms_max"),
        )
    )
    return totals.select(
        sf.unix_millis(sf.col("window.start")).alias("window_start_ms"),
        sf.unix_millis(sf.col("window.end")).alias("window_end_ms"),
        "page",
        "views",
        "dwell_ms_total",
        "dwell_ms_max",
    )


def as_kafka_records(totals: DataFrame) -> DataFrame:
    """The (key, value) columns the Kafka sink writes."""
    key: Column = sf.concat_ws("|", sf.col("window_start_ms").cast("string"), sf.col("page"))
    value: Column = sf.to_json(sf.struct(*[sf.col(name) for name in totals.columns]))
    return totals.select(key.alias("key"), value.alias("value"))


def start_windowed_page_views(
    spark: SparkSession,
    *,
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    checkpoint_dir: str,
    trigger_ms: int = 1_000,
    source_options: dict[str, str] | None = None,
    sink_bootstrap: str | None = None,
    query_name: str | None = None,
) -> StreamingQuery:
    """Start the job; it runs until stopped (`query.stop()`) or it fails."""
    totals = windowed_totals(read_page_views(spark, bootstrap, source_topic, source_options))
    writer = (
        as_kafka_records(totals)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", sink_bootstrap or bootstrap)
        .option("topic", sink_topic)
        .option("checkpointLocation", checkpoint_dir)
        .outputMode("append")
        .trigger(processingTime=f"{trigger_ms} milliseconds")
    )
    if query_name:
        writer = writer.queryName(query_name)
    return writer.start()
