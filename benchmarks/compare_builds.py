"""Broker CPU per produce (or fetch) request for several builds, side by side in one run.

Starts one `weir serve` per source tree (each on its own ports and fresh data
dir), creates an 8-partition topic on each, then runs `request_cost.py` against
them in turn, `--rounds` times, and prints each round and the medians:

    git worktree add /tmp/weir-before <commit>
    .venv/bin/python benchmarks/compare_builds.py before=/tmp/weir-before after=. \\
        --value-bytes 100 --records-per-batch 32 --rounds 5

`--api fetch --isolation-levels 0,1` measures each build's read_uncommitted
and read_committed fetches side by side (as `NAME/ru` and `NAME/rc`).

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
from dataclasses import dataclass, field

from source_builds import (  # this directory
    PYTHON,
    REPO_ROOT,
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
    if args.api == "fetch":  # something to read: the same produce load, once
        run_request_cost(build, args, "produce", requests=500)


def run_request_cost(
    build: SourceBuild, args: argparse.Namespace, api: str, requests: int, isolation_level: int = 0
) -> str:
    assert build.process is not None
    result = subprocess.run(
        [str(PYTHON), str(REPO_ROOT / "benchmarks" / "request_cost.py"),
         "--port", str(build.port), "--pid", str(build.process.pid), "--api", api,
         "--value-bytes", str(args.value_bytes), "--records-per-batch",
         str(args.records_per_batch), "--all-partitions", "--requests", str(requests),
         "--depth", str(args.depth), "--isolation-level", str(isolation_level)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return result.stdout


def measure(
    build: SourceBuild, measures: Measures, args: argparse.Namespace, isolation_level: int
) -> None:
    stdout = run_request_cost(build, args, args.api, args.requests, isolation_level)
    match = COST_LINE.search(stdout)
    if match is None:
        raise SystemExit(f"{build.name}: unexpected output {stdout!r}")
    measures.rates.append(float(match[1].replace(",", "")))
    measures.cpu_us.append(float(match[2]))
    name = measure_name(build.name, isolation_level, args)
    print(f"  {name:>10}: {stdout.strip().splitlines()[0]}", flush=True)


def measure_name(build_name: str, isolation_level: int, args: argparse.Namespace) -> str:
    if len(args.isolation_levels) == 1:
        return build_name
    return f"{build_name}/{'rc' if isolation_level else 'ru'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("builds", nargs="+", metavar="NAME=SOURCE_TREE")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--records-per-batch", type=int, default=32)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--api", choices=["produce", "fetch"], default="produce")
    parser.add_argument("--base-port", type=int, default=47100)
    parser.add_argument(
        "--isolation-levels", default="0",
        help="fetch: comma-separated isolation levels (0 read_uncommitted, 1 read_committed)",
    )  # fmt: skip
    args = parser.parse_args()
    args.isolation_levels = [int(level) for level in args.isolation_levels.split(",")]
    builds = parse_builds(args.builds, args.base_port, "compare")
    names = [
        (build, level, measure_name(build.name, level, args))
        for build in builds
        for level in args.isolation_levels
    ]
    measures = {name: Measures() for _, _, name in names}
    try:
        for build in builds:
            start_with_data(build, args)
        for round_number in range(1, args.rounds + 1):
            print(f"round {round_number}", flush=True)
            for build, level, name in names if round_number % 2 else reversed(names):
                measure(build, measures[name], args, level)
    finally:
        for build in builds:
            stop(build)
    print(
        f"\nmedians over {args.rounds} rounds ({args.value_bytes} B values, "
        f"{args.records_per_batch} records per batch, 8 partitions per request, "
        f"depth {args.depth}):"
    )
    first = names[0][2]
    reference = statistics.median(measures[first].cpu_us)
    for _, _, name in names:
        cpu = statistics.median(measures[name].cpu_us)
        rate = statistics.median(measures[name].rates)
        print(
            f"  {name:>10}: {rate:8,.0f} requests/s, "
            f"{cpu:5.0f} µs CPU/request ({cpu / reference:.2f}x of {first})"
        )


if __name__ == "__main__":
    sys.exit(main())
