"""Broker CPU per produce (or fetch) request for several builds, side by side in one run.

Starts one `weir serve` per source tree (each on its own ports and fresh data
dir), creates an 8-partition topic on each, then runs `request_cost.py` against
them in turn, `--rounds` times, and prints each round and the medians:

    git worktree add /tmp/weir-before <commit>
    .venv/bin/python benchmarks/compare_builds.py before=/tmp/weir-before after=. \\
        --value-bytes 100 --records-per-batch 32 --rounds 5

`--api fetch --isolation read_uncommitted,read_committed` measures every build at
both isolation levels in each round (alternating) and compares each against the
first build's first level: read_committed's cost next to read_uncommitted's. A
build from before transactions ignores the isolation level. `--transactional-data`
fills the topic with transactions instead (confluent-kafka, a third of them aborted),
so read_committed has aborted transactions to list and skip: for builds that serve
transactions only.

CPU includes the broker's threads and its child processes (the syncfs helper).
The builds alternate within each round because this machine's speed drifts by
10-30% over minutes: compare the medians, not one round.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from source_builds import (  # this directory
    PYTHON,
    REPO_ROOT,
    TOPIC,
    TOPIC_PARTITIONS,
    SourceBuild,
    parse_builds,
    start,
    stop,
)

COST_LINE = re.compile(r"([\d,]+) requests/s, broker CPU (\d+) µs/request")


@dataclass
class Measures:
    cpu_us: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)


def start_with_data(build: SourceBuild, args: argparse.Namespace) -> None:
    start(build)
    if args.api == "fetch" and args.transactional_data:
        fill_with_transactions(build, args)
    elif args.api == "fetch":  # something to read: the same produce load, once
        run_request_cost(build, args, "produce", requests=500)


def fill_with_transactions(build: SourceBuild, args: argparse.Namespace) -> None:
    """500 transactions of one batch per partition (`--records-per-batch` records of
    `--value-bytes`), every third aborted, then wait until no transaction is open."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap = f"127.0.0.1:{build.port}"
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"compare-{build.name}",
         "linger.ms": 50}
    )  # fmt: skip
    producer.init_transactions(30)
    value = b"x" * args.value_bytes
    for number in range(500):
        producer.begin_transaction()
        for partition in range(TOPIC_PARTITIONS):
            for _ in range(args.records_per_batch):
                producer.produce(TOPIC, value, partition=partition)
        if number % 3 == 2:
            producer.flush(30)  # the records reach the log before the abort
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    consumers = [
        Consumer({"bootstrap.servers": bootstrap, "group.id": "compare", "isolation.level": level})
        for level in ("read_uncommitted", "read_committed")
    ]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ends = [
            [
                c.get_watermark_offsets(TopicPartition(TOPIC, p), 10)[1]
                for p in range(TOPIC_PARTITIONS)
            ]
            for c in consumers
        ]
        if ends[0] == ends[1]:
            break
        time.sleep(0.1)
    for consumer in consumers:
        consumer.close()


def run_request_cost(
    build: SourceBuild,
    args: argparse.Namespace,
    api: str,
    requests: int,
    isolation: str = "read_uncommitted",
) -> str:
    assert build.process is not None
    result = subprocess.run(
        [str(PYTHON), str(REPO_ROOT / "benchmarks" / "request_cost.py"),
         "--port", str(build.port), "--pid", str(build.process.pid), "--api", api,
         "--value-bytes", str(args.value_bytes), "--records-per-batch",
         str(args.records_per_batch), "--all-partitions", "--requests", str(requests),
         "--depth", str(args.depth), "--isolation", isolation],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return result.stdout


def measure(
    build: SourceBuild, isolation: str, measures: Measures, args: argparse.Namespace
) -> None:
    stdout = run_request_cost(build, args, args.api, args.requests, isolation)
    match = COST_LINE.search(stdout)
    if match is None:
        raise SystemExit(f"{build.name}: unexpected output {stdout!r}")
    measures.rates.append(float(match[1].replace(",", "")))
    measures.cpu_us.append(float(match[2]))
    print(f"  {build.name:>10}: {stdout.strip().splitlines()[0]}", flush=True)


def labels(builds: list[SourceBuild], isolations: list[str]) -> list[tuple[SourceBuild, str, str]]:
    """(build, isolation level, label) for every measured pair, in measuring order."""
    if len(isolations) == 1:
        return [(build, isolations[0], build.name) for build in builds]
    return [
        (build, isolation, f"{build.name} {isolation.removeprefix('read_')}")
        for build in builds
        for isolation in isolations
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("builds", nargs="+", metavar="NAME=SOURCE_TREE")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--records-per-batch", type=int, default=32)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--api", choices=["produce", "fetch"], default="produce")
    parser.add_argument(
        "--isolation",
        default="read_uncommitted",
        help="fetch: read_uncommitted, read_committed, or both comma-separated",
    )
    parser.add_argument(
        "--transactional-data",
        action="store_true",
        help="fetch: fill the topic with transactions (a third aborted) instead",
    )
    parser.add_argument("--base-port", type=int, default=47100)
    args = parser.parse_args()
    isolations = [level.strip() for level in args.isolation.split(",") if level.strip()]
    if not set(isolations) <= {"read_uncommitted", "read_committed"}:
        parser.error(f"unknown isolation level in {args.isolation!r}")
    builds = parse_builds(args.builds, args.base_port, "compare")
    measured = labels(builds, isolations)
    measures = {label: Measures() for _, _, label in measured}
    try:
        for build in builds:
            start_with_data(build, args)
        for round_number in range(1, args.rounds + 1):
            print(f"round {round_number}", flush=True)
            for build, isolation, label in measured if round_number % 2 else measured[::-1]:
                measure(build, isolation, measures[label], args)
    finally:
        for build in builds:
            stop(build)
    print(
        f"\nmedians over {args.rounds} rounds ({args.value_bytes} B values, "
        f"{args.records_per_batch} records per batch, 8 partitions per request, "
        f"depth {args.depth}):"
    )
    first = measured[0][2]
    width = max(len(label) for _, _, label in measured)
    reference = statistics.median(measures[first].cpu_us)
    for _, _, label in measured:
        cpu = statistics.median(measures[label].cpu_us)
        rate = statistics.median(measures[label].rates)
        print(
            f"  {label:>{width}}: {rate:8,.0f} requests/s, "
            f"{cpu:5.0f} µs CPU/request ({cpu / reference:.2f}x of {first})"
        )


if __name__ == "__main__":
    sys.exit(main())
