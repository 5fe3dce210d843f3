"""spark_demo's Structured Streaming job on Spark's real Kafka connector against the real
`weir`: its output against a plain-Python computation over the same input, a query
stopped mid-batch, a commit lost after the sink's write, and a broker SIGKILLed
mid-stream (no input lost; duplicates only from micro-batches Spark replays), and
failOnDataLoss after retention deleted data.

Why duplicates are bounded: Spark writes a micro-batch's offsets to the checkpoint's
offset log before running it and its id to the commit log after the sink's write
returned. On restart it runs the batch that is planned but not committed again, with the
same offsets, watermark and state, so it writes the same rows. The Kafka sink is
at-least-once: each output row is written once, plus once more for each replay of the
micro-batch that wrote it. So duplicates <= the rows the replayed batches write (Spark
reports them as the replay's `numOutputRows`); without a query restart they are 0,
because the sink's producer is idempotent and Weir drops its retried batches.
"""

from __future__ import annotations

import csv
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.spark_harness import (
    Outgoing,
    committed_batches,
    committed_input_records,
    low_watermark,
    output_windows,
    planned_batches,
    produce,
    produce_transaction,
    read_topic,
    windowed_totals,
)
from spark_demo import events, pipeline, streaming
from spark_demo.session import build_session

WINDOW_MS = streaming.WINDOW_MS
QUERY_TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = build_session("compat-tests-spark-streaming")
    yield session
    session.stop()


@pytest.fixture
def weir(broker: WeirProcess) -> Iterator[WeirProcess]:
    """The shared broker, checked for request errors and closed connections after."""
    yield broker
    assert broker.connection_trouble() == {}


def page_view_batches(count: int, parts: int) -> list[list[events.PageView]]:
    """`count` page views over `count` * 20 ms of event time an hour ago, in `parts`."""
    views = events.page_views(
        count, start_ms=int(time.time() * 1000) - 3_600_000, spacing_ms=20, seed=count
    )
    size = -(-count // parts)
    return [views[i : i + size] for i in range(0, count, size)]


def input_totals(bootstrap: str, topic: str) -> dict[str, dict[str, object]]:
    """The expected output, computed in plain Python from the source topic as stored."""
    bodies = [json.loads(m.value()) for m in read_topic(bootstrap, topic)]
    return windowed_totals([b for b in bodies if b["page"] != events.END_PAGE], WINDOW_MS)


def start_job(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: Path,
    **source_options: str,
) -> StreamingQuery:
    return streaming.start_windowed_page_views(
        spark,
        bootstrap=bootstrap,
        source_topic=source,
        sink_topic=sink,
        checkpoint_dir=str(checkpoint),
        trigger_ms=100,
        source_options=source_options,
    )


def run_until_written(query: StreamingQuery, bootstrap: str, sink: str, keys: set[str]) -> None:
    """Wait until `sink` holds every key of `keys` (the query must stay up meanwhile)."""
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while time.monotonic() < deadline:
        assert query.isActive, f"query stopped: {query.exception()}"
        if keys <= set(output_windows(read_topic(bootstrap, sink))):
            query.processAllAvailable()
            return
        time.sleep(0.5)
    raise AssertionError(f"not every window was written within {QUERY_TIMEOUT_S}s")


def stop_mid_batch(query: StreamingQuery, checkpoint: Path) -> set[int]:
    """Stop `query` while a micro-batch is running (planned, not committed) after at
    least two committed ones; returns the batch ids Spark will run again."""
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while time.monotonic() < deadline:
        assert query.isActive, f"query stopped: {query.exception()}"
        committed = committed_batches(checkpoint)
        if len(committed) >= 2 and planned_batches(checkpoint) - committed:
            query.stop()
            return planned_batches(checkpoint) - committed_batches(checkpoint)
        time.sleep(0.01)
    raise AssertionError("no micro-batch was caught running")


def replayed_rows(query: StreamingQuery, replayed: set[int]) -> int:
    """Rows the restarted `query` wrote in the batches it ran again."""
    rows = [p["sink"]["numOutputRows"] for p in query.recentProgress if p["batchId"] in replayed]
    assert all(count >= 0 for count in rows), "the Kafka sink did not report its output rows"
    return sum(rows)


def assert_output_is_input_totals(
    bootstrap: str, source: str, sink: str, duplicates_max: int
) -> int:
    """Every window of the input is in the output with its exact totals; copies of a
    window beyond the first are at most `duplicates_max`. Returns the duplicates."""
    expected = input_totals(bootstrap, source)
    copies = output_windows(read_topic(bootstrap, sink))
    assert set(copies) == set(expected)
    for key, written in copies.items():
        assert all(value == expected[key] for value in written), key
    duplicates = sum(len(written) - 1 for written in copies.values())
    assert duplicates <= duplicates_max
    return duplicates


@pytest.mark.timeout(180)
def test_windowed_totals_equal_plain_python_over_the_same_input(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str], tmp_path: Path
) -> None:
    source, sink = unique_topic(), unique_topic()
    create_topic(weir.bootstrap, source, partitions=3)
    create_topic(weir.bootstrap, sink, partitions=2)
    query = start_job(spark, weir.bootstrap, source, sink, tmp_path / "checkpoint")
    try:
        produced = []
        for part in page_view_batches(3_000, 3):
            events.produce(weir.bootstrap, source, part)
            produced += part
            time.sleep(0.3)
        events.produce(weir.bootstrap, source, [events.end_of_run(produced)])
        run_until_written(query, weir.bootstrap, sink, set(input_totals(weir.bootstrap, source)))
    finally:
        query.stop()

    assert assert_output_is_input_totals(weir.bootstrap, source, sink, duplicates_max=0) == 0


def as_records(views: list[events.PageView]) -> list[Outgoing]:
    return [Outgoing(v.key(), v.value(), v.headers(), v.event_time_ms) for v in views]


@pytest.mark.timeout(180)
def test_windowed_totals_count_committed_transactions_only(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str], tmp_path: Path
) -> None:
    """Page views written in transactions, one of them aborted (views in the same
    windows): the job reads committed data only, so its totals leave the aborted views
    out."""
    source, sink = unique_topic(), unique_topic()
    create_topic(weir.bootstrap, source, partitions=3)
    create_topic(weir.bootstrap, sink, partitions=2)
    first, second = page_view_batches(2_000, 2)
    start_ms = min(view.event_time_ms for view in first)
    aborted = events.page_views(600, start_ms=start_ms, spacing_ms=60, seed=99)
    committed = first + second
    expected = windowed_totals([json.loads(v.value()) for v in committed], WINDOW_MS)
    transactional_id = unique_topic()
    query = start_job(spark, weir.bootstrap, source, sink, tmp_path / "checkpoint")
    try:
        for views, commit in ((first, True), (aborted, False), (second, True)):
            produce_transaction(
                weir.bootstrap, source, as_records(views), transactional_id, commit=commit
            )
        end = events.end_of_run(committed + aborted)
        produce_transaction(
            weir.bootstrap, source, as_records([end]), transactional_id, commit=True
        )
        run_until_written(query, weir.bootstrap, sink, set(expected))
    finally:
        query.stop()

    copies = output_windows(read_topic(weir.bootstrap, sink))
    assert set(copies) == set(expected)
    for key, written in copies.items():
        assert written == [expected[key]], key


@pytest.mark.timeout(240)
def test_query_stopped_mid_batch_resumes_from_checkpoint_losing_nothing(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str], tmp_path: Path
) -> None:
    source, sink = unique_topic(), unique_topic()
    create_topic(weir.bootstrap, source, partitions=3)
    create_topic(weir.bootstrap, sink, partitions=2)
    checkpoint = tmp_path / "checkpoint"
    first, second = page_view_batches(3_000, 2)
    events.produce(weir.bootstrap, source, first)

    # Small micro-batches, so that the stop lands in a running one.
    query = start_job(spark, weir.bootstrap, source, sink, checkpoint, maxOffsetsPerTrigger="250")
    replayed = stop_mid_batch(query, checkpoint)
    assert len(replayed) <= 1, f"more than one batch planned ahead of the commit log: {replayed}"

    events.produce(weir.bootstrap, source, [*second, events.end_of_run(first + second)])
    restarted = start_job(
        spark, weir.bootstrap, source, sink, checkpoint, maxOffsetsPerTrigger="250"
    )
    try:
        run_until_written(
            restarted, weir.bootstrap, sink, set(input_totals(weir.bootstrap, source))
        )
        if replayed:
            assert restarted.recentProgress[0]["batchId"] == min(replayed)
        bound = replayed_rows(restarted, replayed)
    finally:
        restarted.stop()

    duplicates = assert_output_is_input_totals(weir.bootstrap, source, sink, bound)
    print(f"replayed batches {sorted(replayed)}: {bound} rows rewritten, {duplicates} duplicates")


@pytest.mark.timeout(240)
def test_batch_whose_commit_was_lost_is_written_again_and_only_it(
    spark: SparkSession, weir: WeirProcess, unique_topic: Callable[[], str], tmp_path: Path
) -> None:
    """The at-least-once window itself: a micro-batch whose rows reached the sink but
    whose commit-log entry was never written (a crash between the two) is run again on
    restart, so exactly its rows are duplicated, and nothing else is.

    The lost commit is made by putting a file where the commit log's directory was
    (the test runs as root, so permissions would not stop Spark): the next commit
    fails after that batch's sink write returned, and the query stops."""
    source, sink = unique_topic(), unique_topic()
    create_topic(weir.bootstrap, source, partitions=3)
    create_topic(weir.bootstrap, sink, partitions=2)
    checkpoint = tmp_path / "checkpoint"
    views = page_view_batches(4_000, 1)[0]
    events.produce(weir.bootstrap, source, [*views, events.end_of_run(views)])
    # 500 views are 10 s of event time, one window: each batch's watermark closes one.
    options = {"maxOffsetsPerTrigger": "500"}

    query = start_job(spark, weir.bootstrap, source, sink, checkpoint, **options)
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while not (
        len(committed_batches(checkpoint)) >= 2
        and planned_batches(checkpoint) - committed_batches(checkpoint)
    ):  # a batch is running: it has passed the commit log's read at planning
        assert time.monotonic() < deadline and query.isActive, query.exception()
        time.sleep(0.005)
    commits = checkpoint / "commits"
    commits.rename(checkpoint / "commits-kept")
    commits.write_text("not a directory\n")
    with pytest.raises(Exception, match="(?i)commits"):
        query.awaitTermination(QUERY_TIMEOUT_S)
    commits.unlink()
    (checkpoint / "commits-kept").rename(commits)
    replayed = planned_batches(checkpoint) - committed_batches(checkpoint)
    assert len(replayed) == 1, replayed

    restarted = start_job(spark, weir.bootstrap, source, sink, checkpoint, **options)
    try:
        run_until_written(
            restarted, weir.bootstrap, sink, set(input_totals(weir.bootstrap, source))
        )
        rewritten = replayed_rows(restarted, replayed)
    finally:
        restarted.stop()

    duplicates = assert_output_is_input_totals(weir.bootstrap, source, sink, rewritten)
    print(f"batch {sorted(replayed)} replayed: {rewritten} rows, {duplicates} duplicates")
    assert rewritten > 0, "the replayed batch closed no window: nothing to duplicate"
    assert duplicates == rewritten


@pytest.mark.timeout(240)
def test_broker_sigkilled_mid_stream_loses_no_input(
    spark: SparkSession, own_broker: WeirProcess, unique_topic: Callable[[], str], tmp_path: Path
) -> None:
    weir = own_broker
    source, sink = unique_topic(), unique_topic()
    create_topic(weir.bootstrap, source, partitions=3)
    create_topic(weir.bootstrap, sink, partitions=2)
    checkpoint = tmp_path / "checkpoint"
    first, second = page_view_batches(3_000, 2)
    events.produce(weir.bootstrap, source, first)

    query = start_job(spark, weir.bootstrap, source, sink, checkpoint, maxOffsetsPerTrigger="250")
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while len(committed_batches(checkpoint)) < 2:
        assert time.monotonic() < deadline and query.isActive, query.exception()
        time.sleep(0.05)
    weir.kill()
    assert committed_input_records(checkpoint) < len(first), "the kill came after the input"
    time.sleep(1.0)
    weir.start()  # same port and data dir
    events.produce(weir.bootstrap, source, [*second, events.end_of_run(first + second)])

    replayed: set[int] = set()
    queries = [query]
    keys = set(input_totals(weir.bootstrap, source))
    try:
        while True:
            try:
                run_until_written(queries[-1], weir.bootstrap, sink, keys)
                break
            except AssertionError:
                if queries[-1].isActive or len(queries) > 3:
                    raise
            # The query failed while the broker was away: restart it from the checkpoint.
            replayed |= planned_batches(checkpoint) - committed_batches(checkpoint)
            queries.append(
                start_job(
                    spark, weir.bootstrap, source, sink, checkpoint, maxOffsetsPerTrigger="250"
                )
            )
        bound = sum(replayed_rows(q, replayed) for q in queries[1:])
    finally:
        for q in queries:
            q.stop()

    duplicates = assert_output_is_input_totals(weir.bootstrap, source, sink, bound)
    print(f"{len(queries) - 1} restarts, {bound} rows rewritten, {duplicates} duplicates")
    assert weir.connection_trouble() == {}


def set_retention(bootstrap: str, topic: str, retention_ms: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "retention.ms", str(retention_ms), incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)


def copy_offsets_query(
    spark: SparkSession, bootstrap: str, topic: str, out: Path, checkpoint: Path, **options: str
) -> StreamingQuery:
    """Every record's offset into Parquet files (an exactly-once sink), until caught up."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .select("offset")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


@pytest.fixture
def fast_retention_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WeirProcess]:
    config = tmp_path / "weir.toml"
    config.write_text("retention_check_interval_ms = 200\n")
    proc = WeirProcess(
        tmp_path / "weir-data", tmp_path / "weir-logs", extra_args=("--config", str(config))
    )
    request.node.__dict__.setdefault("_weir_processes", []).append(proc)
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


@pytest.mark.timeout(180)
def test_fail_on_data_loss_when_retention_deleted_unread_records(
    spark: SparkSession,
    fast_retention_broker: WeirProcess,
    unique_topic: Callable[[], str],
    tmp_path: Path,
) -> None:
    weir = fast_retention_broker
    topic = unique_topic()
    create_topic(weir.bootstrap, topic, config={"segment.bytes": "1024"})

    def produce_each(count: int) -> None:  # a batch per record: a segment every ~4
        produce(weir.bootstrap, topic, [Outgoing(None, b"x" * 200, [])] * count, batch_each=True)

    def offsets_in(out: Path) -> list[int]:
        """The offsets in `out`'s Parquet files (a glob: the sink's log is not read)."""
        files = spark.read.parquet(str(out / "*.parquet"))
        return sorted(row["offset"] for row in files.collect())

    produce_each(20)
    first_run = copy_offsets_query(spark, weir.bootstrap, topic, tmp_path / "out", tmp_path / "cp")
    assert first_run.awaitTermination(QUERY_TIMEOUT_S) and first_run.exception() is None
    assert offsets_in(tmp_path / "out") == list(range(20))
    # The query stopped at offset 20; 20 more arrive, then retention drops old segments.
    produce_each(20)
    set_retention(weir.bootstrap, topic, 100)
    deadline = time.monotonic() + 30
    while low_watermark(weir.bootstrap, topic, 0) <= 20:
        assert time.monotonic() < deadline, "retention kept offset 20 for 30 s"
        time.sleep(0.2)
    # Retention off again, and once a check has passed the log start stays put; 10
    # more records, so the lenient query surely has something after the gap.
    set_retention(weir.bootstrap, topic, -1)
    time.sleep(1.0)  # five retention checks
    log_start = low_watermark(weir.bootstrap, topic, 0)
    produce_each(10)
    shutil.copytree(tmp_path / "cp", tmp_path / "cp-lenient")

    strict = copy_offsets_query(
        spark, weir.bootstrap, topic, tmp_path / "out", tmp_path / "cp", failOnDataLoss="true"
    )
    # KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE: the broker answered the fetch at 20
    # with OFFSET_OUT_OF_RANGE, as Kafka does below the log start offset.
    with pytest.raises(Exception, match=r"(?s)Some data may have been lost.*offset \[20, 50\)"):
        strict.awaitTermination(QUERY_TIMEOUT_S)

    lenient = copy_offsets_query(
        spark,
        weir.bootstrap,
        topic,
        tmp_path / "out-lenient",
        tmp_path / "cp-lenient",
        failOnDataLoss="false",
    )
    assert lenient.awaitTermination(QUERY_TIMEOUT_S) and lenient.exception() is None
    # It went on from the log start offset: what retention kept, each record once.
    assert offsets_in(tmp_path / "out-lenient") == list(range(log_start, 50))
    assert weir.connection_trouble() == {}


@pytest.mark.timeout(180)
def test_demo_run_writes_every_window_and_a_report_of_every_event(
    spark: SparkSession,
    weir: WeirProcess,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`python -m spark_demo run`'s pipeline, in this module's SparkSession."""
    settings = pipeline.RunSettings(
        bootstrap=weir.bootstrap,
        events=2_000,
        partitions=3,
        trigger_ms=200,
        work_dir=tmp_path,
        report_format="csv",
        rate_per_s=None,
        wait_s=QUERY_TIMEOUT_S,
    )

    report_dir = pipeline.run(settings, spark)

    printed = capsys.readouterr().out
    assert "end-to-end records/s:" in printed
    (report,) = report_dir.glob("part-*.csv")
    with report.open() as handle:
        views = sum(int(row["views"]) for row in csv.DictReader(handle))
    assert views == 2_000 + 1  # and the end-of-run marker
