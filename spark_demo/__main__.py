"""`python -m spark_demo COMMAND`: see `--help` and docs/spark.md."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spark_demo", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser(
        "fetch-connector",
        help="resolve Spark's Kafka connector into the Ivy cache (.cache/ivy) and exit",
    )

    run = commands.add_parser("run", help="the whole pipeline end to end, with records/s")
    run.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP)
    run.add_argument("--start-weir", action="store_true", help="start `weir serve` there first")
    run.add_argument("--events", type=int, default=100_000)
    run.add_argument("--partitions", type=int, default=4)
    run.add_argument("--trigger-ms", type=int, default=500)
    run.add_argument("--rate", type=float, default=None, help="events/s (default: flat out)")
    run.add_argument("--work-dir", type=Path, default=None, help="checkpoint, report, weir data")
    run.add_argument("--report-format", choices=("csv", "parquet"), default="csv")
    run.add_argument("--wait-s", type=float, default=300.0)

    generate = commands.add_parser("generate", help="produce page views to a topic")
    generate.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP)
    generate.add_argument("--topic", required=True)
    generate.add_argument("--events", type=int, default=10_000)
    generate.add_argument("--rate", type=float, default=None, help="events/s (default: flat out)")
    generate.add_argument("--end-of-run", action="store_true", help="then the end-of-run marker")

    stream = commands.add_parser("stream", help="run the streaming job until Ctrl-C")
    stream.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP)
    stream.add_argument("--source-topic", required=True)
    stream.add_argument("--sink-topic", required=True)
    stream.add_argument("--checkpoint", type=Path, required=True)
    stream.add_argument("--trigger-ms", type=int, default=1_000)

    report = commands.add_parser("report", help="batch report over a range of a topic")
    report.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP)
    report.add_argument("--topic", required=True)
    report.add_argument(
        "--starting", type=json.loads, default=None, help='per partition: {"0": 100, "1": -2}'
    )
    report.add_argument(
        "--ending", type=json.loads, default=None, help='per partition: {"0": 200, "1": -1}'
    )
    report.add_argument(
        "--by-timestamp", action="store_true", help="--starting/--ending are epoch ms"
    )
    report.add_argument("--output", type=Path, required=True)
    report.add_argument("--format", choices=("csv", "parquet"), default="csv")
    return parser


def _fetch_connector(_args: argparse.Namespace) -> None:
    from spark_demo import session

    spark = session.build_session("spark-demo-fetch-connector")
    print(f"{session.connector_coordinate()} resolved in {session.ivy_dir()}")
    spark.stop()


def _run(args: argparse.Namespace) -> None:
    from spark_demo import pipeline, session

    work_dir = args.work_dir or pipeline.default_work_dir()
    work_dir.mkdir(parents=True, exist_ok=True)
    settings = pipeline.RunSettings(
        bootstrap=args.bootstrap,
        events=args.events,
        partitions=args.partitions,
        trigger_ms=args.trigger_ms,
        work_dir=work_dir,
        report_format=args.report_format,
        rate_per_s=args.rate,
        wait_s=args.wait_s,
    )
    started = time.monotonic()
    spark = session.build_session("spark-demo-run")
    startup_s = time.monotonic() - started
    print(f"SparkSession with {session.connector_coordinate()} in {startup_s:.1f}s")
    try:
        if args.start_weir:
            with pipeline.local_weir(args.bootstrap, work_dir / "weir-data"):
                pipeline.run(settings, spark)
        else:
            pipeline.run(settings, spark)
    finally:
        spark.stop()


def _generate(args: argparse.Namespace) -> None:
    from spark_demo import events

    views = events.page_views(args.events, start_ms=int(time.time() * 1000) - 3_600_000)
    feed = events.paced(views, args.rate) if args.rate else views
    count = events.produce(args.bootstrap, args.topic, feed)
    if args.end_of_run:
        count += events.produce(args.bootstrap, args.topic, [events.end_of_run(views)])
    print(f"{count} events produced to {args.topic}")


def _stream(args: argparse.Namespace) -> None:
    from spark_demo import session, streaming

    spark = session.build_session("spark-demo-stream")
    query = streaming.start_windowed_page_views(
        spark,
        bootstrap=args.bootstrap,
        source_topic=args.source_topic,
        sink_topic=args.sink_topic,
        checkpoint_dir=str(args.checkpoint),
        trigger_ms=args.trigger_ms,
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()


def _report(args: argparse.Namespace) -> None:
    from spark_demo import batch, session

    if (args.starting is None) != (args.ending is None):
        raise SystemExit("report: give both --starting and --ending, or neither")
    bounds = None
    if args.starting is not None:
        bounds = batch.OffsetRange(
            starting={int(p): value for p, value in args.starting.items()},
            ending={int(p): value for p, value in args.ending.items()},
            by_timestamp=args.by_timestamp,
        )
    spark = session.build_session("spark-demo-report")
    rows = batch.read_range(spark, args.bootstrap, args.topic, bounds)
    batch.write_report(batch.page_report(rows), str(args.output), args.format)
    print(f"report of {args.topic} written to {args.output}")
    spark.stop()


# Each command imports what it needs, so that `--help` answers without loading Spark.
COMMANDS = {
    "fetch-connector": _fetch_connector,
    "run": _run,
    "generate": _generate,
    "stream": _stream,
    "report": _report,
}


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    COMMANDS[args.command](args)


if __name__ == "__main__":
    main()
