"""The end-to-end run: generator → broker → streaming job → broker, then the batch report.

Prints records/s for each stage; `end_to_end` is input events divided by the time from
the first event produced to the last window read back from the output topic, so it
includes Spark's trigger interval and the watermark's wait for the last windows (but
not the query's start: events are produced once its first, empty, micro-batch ran).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_demo import batch, events, streaming


@dataclass(frozen=True)
class RunSettings:
    bootstrap: str
    events: int
    partitions: int
    trigger_ms: int
    work_dir: Path
    report_format: str
    rate_per_s: float | None
    wait_s: float


def create_topics(bootstrap: str, partitions_by_topic: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=count) for name, count in partitions_by_topic.items()],
        request_timeout=30,
    )
    for future in futures.values():
        future.result(timeout=30)


def expected_window_keys(views: Sequence[events.PageView], window_ms: int) -> set[str]:
    """The output keys the job must write: one per page and window with any view."""
    return {
        f"{view.event_time_ms - view.event_time_ms % window_ms}|{view.page}"
        for view in views
        if view.page != events.END_PAGE
    }


def wait_for_keys(bootstrap: str, topic: str, keys: set[str], timeout_s: float) -> float:
    """Read `topic` until every key of `keys` was seen; returns when the last arrived."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"spark-demo-check-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    missing = set(keys)
    last_arrival = time.monotonic()
    deadline = last_arrival + timeout_s
    try:
        consumer.subscribe([topic])
        while missing and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            key = (message.key() or b"").decode()
            if key in missing:
                missing.discard(key)
                last_arrival = time.monotonic()
    finally:
        consumer.close()
    if missing:
        raise TimeoutError(f"{len(missing)} of {len(keys)} windows not written in {timeout_s}s")
    return last_arrival


def run(settings: RunSettings, spark: SparkSession) -> Path:
    """The whole run in `spark`; returns the report's directory."""
    run_id = uuid.uuid4().hex[:8]
    source_topic, sink_topic = f"page-views-{run_id}", f"page-view-windows-{run_id}"
    create_topics(settings.bootstrap, {source_topic: settings.partitions, sink_topic: 2})

    query = streaming.start_windowed_page_views(
        spark,
        bootstrap=settings.bootstrap,
        source_topic=source_topic,
        sink_topic=sink_topic,
        checkpoint_dir=str(settings.work_dir / f"checkpoint-{run_id}"),
        trigger_ms=settings.trigger_ms,
    )
    _wait_first_batch(query, settings.wait_s)
    views = events.page_views(settings.events, start_ms=int(time.time() * 1000) - 3_600_000)
    feed = events.paced(views, settings.rate_per_s) if settings.rate_per_s else views
    produce_started = time.monotonic()
    events.produce(settings.bootstrap, source_topic, feed)
    produce_s = time.monotonic() - produce_started
    events.produce(settings.bootstrap, source_topic, [events.end_of_run(views)])
    keys = expected_window_keys(views, streaming.WINDOW_MS)
    try:
        last_window_at = wait_for_keys(settings.bootstrap, sink_topic, keys, settings.wait_s)
    finally:
        query.stop()
    end_to_end_s = last_window_at - produce_started
    print(f"generator: {len(views)} page views to {source_topic} in {produce_s:.2f}s")
    print(f"generator records/s: {len(views) / produce_s:,.0f}")
    print(f"streaming: {len(keys)} windows to {sink_topic}; last one {end_to_end_s:.2f}s after")
    print("            the first event was produced")
    print(f"end-to-end records/s: {len(views) / end_to_end_s:,.0f}")

    report_started = time.monotonic()
    rows = batch.read_range(spark, settings.bootstrap, source_topic).cache()
    read_count = rows.count()
    report_path = settings.work_dir / f"report-{run_id}"
    batch.write_report(batch.page_report(rows), str(report_path), settings.report_format)
    report_s = time.monotonic() - report_started
    print(f"batch report: {read_count} records read in {report_s:.2f}s")
    print(f"batch records/s: {read_count / report_s:,.0f}; report in {report_path}")
    return report_path


def _wait_first_batch(query: StreamingQuery, timeout_s: float) -> None:
    """Wait for the query's first micro-batch (over the empty topic): it plans, compiles
    and opens the state store, which the end-to-end figure should not include."""
    deadline = time.monotonic() + timeout_s
    while query.lastProgress is None:
        if not query.isActive:
            raise RuntimeError(f"the streaming query stopped: {query.exception()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no micro-batch in {timeout_s}s")
        time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def local_weir(bootstrap: str, data_dir: Path) -> Iterator[None]:
    """`weir serve` on `bootstrap` (the installed command, as a user runs it), ready
    before this yields and stopped (SIGTERM) after; its log goes to `weir.log` beside
    `data_dir`."""
    weir = shutil.which("weir") or str(Path(sys.executable).parent / "weir")
    http = f"127.0.0.1:{_free_port()}"
    log_path = data_dir.parent / "weir.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [weir, "serve", "--data-dir", str(data_dir), "--kafka-listen", bootstrap],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env={"WEIR_HTTP_LISTEN": http, **_path_environment()},
        )
    try:
        _wait_ready(f"http://{http}/health/ready", process, log_path)
        print(f"weir serve on {bootstrap} (pid {process.pid}, data in {data_dir}, log {log_path})")
        yield
    finally:
        process.terminate()
        process.wait(timeout=15)


def _path_environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if not key.startswith("WEIR_")}


def _wait_ready(
    url: str, process: subprocess.Popen[bytes], log_path: Path, timeout_s: float = 30.0
) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"weir serve exited with code {process.returncode}: {log_path.read_text()[-2000:]}"
            )
        try:
            with opener.open(url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"weir not ready at {url} after {timeout_s}s")


def default_work_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="spark-demo-"))
