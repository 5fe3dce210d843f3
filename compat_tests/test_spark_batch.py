"""Spark's Kafka connector (spark-sql-kafka-0-10 at PySpark's exact version, with the
kafka-clients it pulls) reading Weir in batch, through spark_demo's public jobs.

One SparkSession for the module (a JVM start costs ~15 s); records are produced and
checked with confluent-kafka, an independent client.
"""

from __future__ import annotations

import csv
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.spark_harness import (
    Outgoing,
    Sent,
    begin_transaction,
    produce,
    produce_transaction,
    wait_stable,
)
from spark_demo import batch, events
from spark_demo.session import build_session

pytestmark = pytest.mark.timeout(300)

# Kafka's source schema as Spark documents it (includeHeaders=true).
KAFKA_SOURCE_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = build_session("compat-tests-spark-batch")
    yield session
    session.stop()


@pytest.fixture
def weir(broker: WeirProcess) -> Iterator[WeirProcess]:
    """The shared broker, checked for request errors and closed connections after."""
    yield broker
    assert broker.connection_trouble() == {}


def an_hour_ago_ms() -> int:
    """A base for record timestamps: recent enough that retention (7 days by default,
    by record timestamp, as on Kafka) never deletes the records under a test."""
    return int(time.time() * 1000) - 3_600_000


def kafka_rows(frame: DataFrame) -> list[dict[str, object]]:
    """Every column, the timestamp also as epoch ms (the Python datetime is zone-naive)."""
    rows = frame.withColumn("timestamp_ms", sf.unix_millis("timestamp")).collect()
    return [row.asDict(recursive=True) for row in rows]


def as_row(sent: Sent, timestamp_type: int) -> dict[str, object]:
    return {
        "key": sent.key,
        "value": sent.value,
        "topic": sent.topic,
        "partition": sent.partition,
        "offset": sent.offset,
        "timestamp_ms": sent.timestamp_ms,
        "timestampType": timestamp_type,
        "headers": [{"key": k, "value": v} for k, v in sent.headers],
    }


def comparable(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """`rows` without Spark's datetime column, bytearrays as bytes, in offset order."""
    result = []
    for row in rows:
        clean = {k: v for k, v in row.items() if k != "timestamp"}
        for name in ("key", "value"):
            if isinstance(clean[name], bytearray):
                clean[name] = bytes(clean[name])
        headers = clean["headers"] or []
        assert isinstance(headers, list)
        clean["headers"] = [
            {"key": h["key"], "value": None if h["value"] is None else bytes(h["value"])}
            for h in headers
        ]
        result.append(clean)
    return sorted(result, key=lambda r: (r["partition"], r["offset"]))  # type: ignore[arg-type]


def varied_records(base_ms: int) -> list[Outgoing]:
    """Null keys, a null value (tombstone), empty bytes, repeated and null-valued
    headers, no headers, explicit timestamps, both partitions."""
    return [
        Outgoing(b"user-1", b'{"n":1}', [("trace-id", b"a1")], base_ms, 0),
        Outgoing(None, b"no key", [], base_ms + 1, 0),
        Outgoing(b"user-2", None, [("deleted", b"yes")], base_ms + 2, 1),
        Outgoing(b"", b"", [("dup", b"1"), ("dup", b"2"), ("empty", None)], base_ms + 3, 1),
        Outgoing(b"user-1", b"\x00\xffbinary", [("trace-id", b"a2")], base_ms + 4, 0),
        Outgoing(b"user-3", b"x" * 5000, [("h", b"")], base_ms + 5, 1),
    ]


def test_batch_read_returns_every_column_of_kafka_source_schema(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str]
) -> None:
    topic = unique_topic()
    create_topic(weir.bootstrap, topic, partitions=2)
    sent = produce(weir.bootstrap, topic, varied_records(an_hour_ago_ms()))

    frame = batch.read_range(spark, weir.bootstrap, topic)

    assert frame.schema == KAFKA_SOURCE_SCHEMA
    assert comparable(kafka_rows(frame)) == comparable([as_row(s, 0) for s in sent])


def values_of(frame: DataFrame) -> list[bytes]:
    return sorted(bytes(row["value"]) for row in frame.select("value").collect())


def test_batch_read_returns_committed_transactions_only_up_to_an_open_one(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str]
) -> None:
    """The demo reads read_committed: an aborted transaction's records are skipped, and
    "latest" is the last stable offset, so the read stops before a transaction still
    open (and the records after it) until that transaction ends."""
    topic = unique_topic()
    create_topic(weir.bootstrap, topic, partitions=2)

    def records(label: str) -> list[Outgoing]:
        return [Outgoing(None, f"{label}-{i}".encode(), [], None, i % 2) for i in range(4)]

    transactional_id = unique_topic()
    produce_transaction(weir.bootstrap, topic, records("first"), transactional_id, commit=True)
    produce_transaction(weir.bootstrap, topic, records("aborted"), transactional_id, commit=False)
    produce_transaction(weir.bootstrap, topic, records("second"), transactional_id, commit=True)
    wait_stable(weir.bootstrap, topic, partitions=2)
    committed = sorted(r.value for r in records("first") + records("second") if r.value)

    assert values_of(batch.read_range(spark, weir.bootstrap, topic)) == committed

    still_open = begin_transaction(weir.bootstrap, topic, records("open"), unique_topic())
    produce(weir.bootstrap, topic, records("after"))
    assert values_of(batch.read_range(spark, weir.bootstrap, topic)) == committed

    still_open.abort_transaction(30)
    wait_stable(weir.bootstrap, topic, partitions=2)
    after = sorted(r.value for r in records("after") if r.value)
    assert values_of(batch.read_range(spark, weir.bootstrap, topic)) == sorted(committed + after)


def test_log_append_time_topic_reads_broker_timestamps_with_type_1(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str]
) -> None:
    topic = unique_topic()
    create_topic(
        weir.bootstrap, topic, partitions=2, config={"message.timestamp.type": "LogAppendTime"}
    )
    before_ms = int(time.time() * 1000)
    # The producer's CreateTime (a day ago) is replaced by the broker's clock.
    sent = produce(weir.bootstrap, topic, varied_records(an_hour_ago_ms() - 82_800_000))
    after_ms = int(time.time() * 1000)

    rows = kafka_rows(batch.read_range(spark, weir.bootstrap, topic))

    assert {row["timestampType"] for row in rows} == {1}
    assert all(before_ms <= int(str(row["timestamp_ms"])) <= after_ms for row in rows)
    # The delivery reports carry the broker's LogAppendTime too: the same value.
    assert comparable(rows) == comparable([as_row(s, 1) for s in sent])


def test_per_partition_offset_json_reads_exactly_that_range(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str]
) -> None:
    topic = unique_topic()
    create_topic(weir.bootstrap, topic, partitions=2)
    records = [Outgoing(f"k{i}".encode(), f"v{i}".encode(), [], None, i % 2) for i in range(40)]
    sent = produce(weir.bootstrap, topic, records)

    bounds = batch.OffsetRange(starting={0: 5, 1: batch.EARLIEST}, ending={0: 12, 1: batch.LATEST})
    rows = batch.read_range(spark, weir.bootstrap, topic, bounds).select("partition", "offset")

    got = sorted((row["partition"], row["offset"]) for row in rows.collect())
    expected = sorted(
        (s.partition, s.offset) for s in sent if s.partition == 1 or 5 <= s.offset < 12
    )
    assert got == expected
    assert len(got) == 7 + 20


def timed_records(base_ms: int) -> list[Outgoing]:
    """Ten records per partition: partition 0 at base + 0 s, 1 s, ...; partition 1 at
    base + 0.5 s, 1.5 s, ..."""
    return [
        Outgoing(None, f"p{p}-{i}".encode(), [], base_ms + i * 1000 + p * 500, p)
        for i in range(10)
        for p in (0, 1)
    ]


def test_offsets_by_timestamp_resolve_to_first_record_at_or_after(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str]
) -> None:
    topic = unique_topic()
    create_topic(weir.bootstrap, topic, partitions=2)
    base_ms = an_hour_ago_ms()
    produce(weir.bootstrap, topic, timed_records(base_ms))

    bounds = batch.OffsetRange(
        starting={0: base_ms + 3_500, 1: base_ms + 3_500},
        ending={0: base_ms + 7_000, 1: base_ms + 7_000},
        by_timestamp=True,
    )
    rows = batch.read_range(spark, weir.bootstrap, topic, bounds).collect()

    # Partition 0: 4 s is the first at/after 3.5 s (offset 4); the end, 7 s, is offset 7,
    # exclusive. Partition 1: 3.5 s is offset 3; 7.5 s (offset 7) is the end.
    got = sorted((row["partition"], row["offset"]) for row in rows)
    assert got == [(0, o) for o in range(4, 7)] + [(1, o) for o in range(3, 7)]


def test_timestamp_past_the_last_record_follows_the_strategy(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str]
) -> None:
    """No record at or after the timestamp: Kafka answers offset -1; Spark then fails
    (strategy "error", the default) or starts at the latest offset ("latest"), and an
    ending timestamp past the end reads to the end."""
    topic = unique_topic()
    create_topic(weir.bootstrap, topic, partitions=2)
    base_ms = an_hour_ago_ms()
    produce(weir.bootstrap, topic, timed_records(base_ms))
    future_ms = base_ms + 3_600_000

    to_the_end = batch.OffsetRange(
        starting={0: base_ms + 8_000, 1: base_ms + 8_000},
        ending={0: future_ms, 1: future_ms},
        by_timestamp=True,
    )
    tail = batch.read_range(spark, weir.bootstrap, topic, to_the_end).collect()
    assert sorted((r["partition"], r["offset"]) for r in tail) == [(0, 8), (0, 9), (1, 8), (1, 9)]

    past_the_end = {"startingTimestamp": str(future_ms)}
    with pytest.raises(Exception, match="(?i)timestamp"):
        batch.read_range(spark, weir.bootstrap, topic, None, past_the_end).collect()

    latest = {**past_the_end, "startingOffsetsByTimestampStrategy": "latest"}
    assert batch.read_range(spark, weir.bootstrap, topic, None, latest).count() == 0


def test_min_partitions_splits_offset_ranges_and_reads_each_record_once(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str]
) -> None:
    topic = unique_topic()
    create_topic(weir.bootstrap, topic, partitions=2)
    records = [Outgoing(None, f"v{i}".encode(), [], None, i % 2) for i in range(100)]
    sent = produce(weir.bootstrap, topic, records)

    frame = batch.read_range(spark, weir.bootstrap, topic, None, {"minPartitions": "6"})

    assert frame.rdd.getNumPartitions() == 6
    got = Counter((row["partition"], row["offset"]) for row in frame.collect())
    assert got == Counter((s.partition, s.offset) for s in sent)


def test_max_offsets_per_trigger_caps_every_micro_batch(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str], tmp_path: Path
) -> None:
    topic = unique_topic()
    create_topic(weir.bootstrap, topic, partitions=2)
    produce(weir.bootstrap, topic, [Outgoing(None, b"v", [], None, i % 2) for i in range(60)])

    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", weir.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "25")
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the availableNow query did not finish in 120 s"
    assert query.exception() is None

    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 60
    assert max(sizes) <= 25
    assert len(sizes) >= 3
    assert spark.read.parquet(str(tmp_path / "out")).count() == 60


def test_page_report_counts_views_and_users_per_page_and_country(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str], tmp_path: Path
) -> None:
    topic = unique_topic()
    create_topic(weir.bootstrap, topic, partitions=3)
    views = events.page_views(3_000, start_ms=an_hour_ago_ms())
    events.produce(weir.bootstrap, topic, views)

    out = tmp_path / "report"
    batch.write_report(batch.page_report(batch.read_range(spark, weir.bootstrap, topic)), str(out))

    (csv_file,) = out.glob("part-*.csv")
    with csv_file.open() as handle:
        report = {(row["page"], row["country"]): row for row in csv.DictReader(handle)}
    bodies = [json.loads(view.value()) for view in views]
    expected_views = Counter((b["page"], b["country"]) for b in bodies)
    expected_users = {
        group: len({b["user_id"] for b in bodies if (b["page"], b["country"]) == group})
        for group in expected_views
    }
    assert {group: int(row["views"]) for group, row in report.items()} == expected_views
    assert {group: int(row["users"]) for group, row in report.items()} == expected_users
