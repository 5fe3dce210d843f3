"""One `weir serve` broker as the count of things grows (issue 26): partitions,
client connections, consumer groups and segments, at fractions of the issue's
full size (10,000 partitions, 5,000 connections, 1,000 groups, 100,000 segments).

For each size, on a fresh data dir:

1. start (process start to /health/ready) on an empty data dir; RSS;
2. create the topics (50 partitions each) with segment.bytes at its minimum; RSS;
3. fill: rounds of one ~1 KiB record per partition, each round rolling every
   partition, so every partition ends with `segments / partitions` segments; RSS;
4. segment.bytes back to the default; produce `--messages` records of 1,000 B
   round-robin over every partition (confluent-kafka, acks=all), then fetch
   everything from the beginning with one consumer assigned every partition;
5. consumer groups (one consumer joins, commits, leaves: an empty group with
   offsets); RSS;
6. client connections (raw sockets, one ApiVersions each, left open); RSS;
7. with them open: idle CPU over `--idle-s`, Metadata of every topic (v1, raw)
   and GET /metrics times; SIGTERM to exit;
8. restart on that data (recovery: process start to /health/ready); RSS, idle
   CPU, Metadata; SIGTERM to exit.

Each size's record is added to `--results` (JSON, one entry a size, replaced when
measured again), so sizes may be measured in separate runs; `--plot` then draws
docs/benchmarks/scale-*.png and prints the markdown tables. On demand, not in CI:

    PYTHONPATH=. .venv/bin/python \
        benchmarks/scale_broker.py --fractions 0.1,0.2
    PYTHONPATH=. .venv/bin/python benchmarks/scale_broker.py --plot

Two narrower modes isolate what the sizes mix: `--idle-connections 0,1000,5000`
(an empty broker's idle CPU and RSS with that many idle connections, for each of
`--trees`, source trees run alternately) and `--metadata-steps 1000,5000` (Metadata
and /metrics as topics alone grow on one broker).

The broker's open-files limit is raised to the hard limit; a size whose
partitions do not fit its descriptor budget (weir/broker/descriptor_budget.py) is
refused before it starts, with the arithmetic.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from console_scale import make_groups
from scale_load import (
    SEGMENT_BYTES_DEFAULT,
    SEGMENT_BYTES_MIN,
    Layout,
    close_connections,
    create_topics,
    fetch_spread,
    fill_segments,
    metadata_all_topics_ms,
    open_connections,
    produce_spread,
    reset_segment_bytes,
)
from scale_report import (
    plot_idle_connections,
    plot_metadata_steps,
    plot_results,
    print_side_tables,
    print_tables,
)
from side_by_side.cpu import idle_cpu_util
from side_by_side.profiling import py_spy_recording, summarize_py_spy

from compat_tests.harness import WeirProcess
from weir.broker.config import Limits
from weir.broker.descriptor_budget import DescriptorBudget

FULL_PARTITIONS = 10_000
FULL_CONNECTIONS = 5_000
FULL_GROUPS = 1_000
FULL_SEGMENTS = 100_000
PARTITIONS_PER_TOPIC = 50
VALUE_BYTES = 1_000
# __consumer_offsets and __transaction_state, counted by the budget before they exist.
INTERNAL_PARTITIONS = 100
CONNECTIONS_SPARE = 100
# The broker reads the bytecode compile_bytecode() wrote.
BROKER_ENV = {"PYTHONDONTWRITEBYTECODE": ""}
READY_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 600.0
REPO = Path(__file__).resolve().parent.parent
RESULTS_PATH = REPO / "benchmarks" / "results" / "scale_broker.json"
SETTINGS = """\
group_initial_rebalance_delay_ms = 0

[limits]
connections_max = {connections_max}
connections_per_address_max = {connections_max}
"""


@dataclass(frozen=True)
class Size:
    fraction: float
    partitions: int
    connections: int
    groups: int
    segments: int

    @classmethod
    def of(cls, fraction: float) -> Size:
        topics = max(1, round(FULL_PARTITIONS * fraction / PARTITIONS_PER_TOPIC))
        return cls(
            fraction,
            topics * PARTITIONS_PER_TOPIC,
            round(FULL_CONNECTIONS * fraction),
            round(FULL_GROUPS * fraction),
            round(FULL_SEGMENTS * fraction),
        )

    @property
    def layout(self) -> Layout:
        return Layout(self.partitions // PARTITIONS_PER_TOPIC, PARTITIONS_PER_TOPIC)

    @property
    def connections_max(self) -> int:
        return self.connections + CONNECTIONS_SPARE


def hard_open_files_limit() -> int:
    """The hard RLIMIT_NOFILE; this process's soft limit raised to it too (its sockets)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def compile_bytecode(tree: Path) -> None:
    """Compiles the tree's `weir` package once (into its ignored __pycache__), so no
    start measures Python compiling it: an environment with PYTHONDONTWRITEBYTECODE
    set (this machine's) would otherwise add about 3 s to every start."""
    command = [sys.executable, "-m", "compileall", "-q", str(tree / "weir")]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def budget_refusal(size: Size, limit: int) -> str | None:
    budget = DescriptorBudget.plan(limit, Limits(connections_max=size.connections_max))
    return budget.refusal(size.partitions, INTERNAL_PARTITIONS)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def segments_on_disk(data_dir: Path) -> int:
    return sum(1 for _ in data_dir.glob("scale-*/*.log"))


def timed_s(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def metrics_ms(broker: WeirProcess, runs: int) -> dict[str, float]:
    with httpx.Client(base_url=broker.http_url, timeout=120) as client:
        size = len(client.get("/metrics").content)
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            client.get("/metrics").raise_for_status()
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"median_ms": times[len(times) // 2], "max_ms": times[-1], "response_bytes": size}


def idle_profile(broker: WeirProcess, args: argparse.Namespace, name: str) -> dict[str, Any]:
    """py-spy over another idle window (after the measured one: it costs CPU itself)."""
    raw = args.results.parent / f"scale_idle_{name}.txt"
    with py_spy_recording(broker.pid, raw, 100):
        time.sleep(args.idle_s)
    return summarize_py_spy(raw, 15)


def note(started_s: float, text: str) -> None:
    print(f"[{time.monotonic() - started_s:7.1f} s] {text}", flush=True)


def measure(size: Size, args: argparse.Namespace, limit: int) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="weir-scale-", dir=args.work_dir))
    settings = SETTINGS.format(connections_max=size.connections_max)
    (base / "weir.toml").write_text(settings)
    broker = WeirProcess(base / "data", base / "logs", open_files_limit=limit,
                         extra_args=("--config", str(base / "weir.toml")),
                         extra_env=BROKER_ENV)  # fmt: skip
    layout = size.layout
    rounds = max(1, round(size.segments / size.partitions))
    out: dict[str, Any] = {"size": size.__dict__, "open_files_limit": limit,
                           "uptime_before": load_average()}  # fmt: skip
    rss: dict[str, float] = {}
    t0 = time.monotonic()
    connections = []
    try:
        out["start_empty_s"] = timed_s(lambda: broker.start(READY_TIMEOUT_S))
        time.sleep(1)
        rss["empty"] = rss_mb(broker.pid)
        note(t0, f"{size}: started empty in {out['start_empty_s']:.2f} s")
        out["create_topics_s"] = create_topics(broker.bootstrap, layout, SEGMENT_BYTES_MIN)
        rss["topics"] = rss_mb(broker.pid)
        note(t0, f"{layout.topics} topics, {layout.partitions} partitions created "
                 f"in {out['create_topics_s']:.1f} s")  # fmt: skip
        out["fill_s"] = fill_segments(broker.bootstrap, layout, rounds)
        out["segments_on_disk"] = segments_on_disk(broker.data_dir)
        rss["segments"] = rss_mb(broker.pid)
        note(t0, f"{rounds} fill rounds in {out['fill_s']:.1f} s: "
                 f"{out['segments_on_disk']} segments")  # fmt: skip
        reset_segment_bytes(broker.bootstrap, layout)
        out["produce"] = produce_spread(
            broker.bootstrap, layout, args.messages, VALUE_BYTES, broker.pid
        )
        note(t0, f"produce {out['produce']['msgs_per_s']:,.0f} msg/s")
        expected = args.messages + rounds * layout.partitions
        out["fetch"] = fetch_spread(broker.bootstrap, layout, expected, broker.pid)
        rss["data"] = rss_mb(broker.pid)
        note(t0, f"fetch {out['fetch']['msgs_per_s']:,.0f} msg/s")
        out["groups_s"] = timed_s(lambda: make_groups(broker.bootstrap, "scale-0000", size.groups))
        rss["groups"] = rss_mb(broker.pid)
        note(t0, f"{size.groups} groups in {out['groups_s']:.1f} s")
        started = time.perf_counter()
        connections = open_connections(broker.bootstrap, size.connections)
        out["connections_s"] = time.perf_counter() - started
        time.sleep(1)
        rss["connections"] = rss_mb(broker.pid)
        note(t0, f"{size.connections} connections open in {out['connections_s']:.1f} s")
        time.sleep(2)
        out["idle_cpu_util"] = idle_cpu_util(broker.pid, args.idle_s)
        if args.profile:
            out["idle_profile"] = idle_profile(broker, args, f"{size.partitions}_loaded")
        out["metadata"] = metadata_all_topics_ms(broker.bootstrap, args.runs)
        out["metrics"] = metrics_ms(broker, args.runs)
        note(t0, f"idle CPU {out['idle_cpu_util']:.3f}, metadata "
                 f"{out['metadata']['median_ms']:.1f} ms, /metrics "
                 f"{out['metrics']['median_ms']:.1f} ms")  # fmt: skip
        out["open_files"] = len(os.listdir(f"/proc/{broker.pid}/fd"))
        out["shutdown_s"] = timed_s(lambda: broker.stop(STOP_TIMEOUT_S))
        close_connections(connections)
        connections = []
        note(t0, f"shut down in {out['shutdown_s']:.2f} s")
        out["recovery_start_s"] = timed_s(lambda: broker.start(READY_TIMEOUT_S))
        time.sleep(1)
        rss["after_restart"] = rss_mb(broker.pid)
        out["idle_cpu_util_after_restart"] = idle_cpu_util(broker.pid, args.idle_s)
        if args.profile:
            out["idle_profile_after_restart"] = idle_profile(
                broker, args, f"{size.partitions}_restarted"
            )
        out["metadata_after_restart"] = metadata_all_topics_ms(broker.bootstrap, args.runs)
        out["shutdown_after_restart_s"] = timed_s(lambda: broker.stop(STOP_TIMEOUT_S))
        note(t0, f"restarted in {out['recovery_start_s']:.2f} s, idle CPU "
                 f"{out['idle_cpu_util_after_restart']:.3f}, shut down in "
                 f"{out['shutdown_after_restart_s']:.2f} s")  # fmt: skip
    finally:
        close_connections(connections)
        broker.kill()
        out["rss_mb"] = rss
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return out


def measure_idle_connections(
    counts: list[int], args: argparse.Namespace, limit: int, tree: Path
) -> dict[str, Any]:
    """One empty broker of source tree `tree`: idle CPU and RSS with each count of
    idle client connections open (opened cumulatively, in ascending order)."""
    base = Path(tempfile.mkdtemp(prefix="weir-scale-conn-", dir=args.work_dir))
    (base / "weir.toml").write_text(
        SETTINGS.format(connections_max=max(counts) + CONNECTIONS_SPARE)
    )
    broker = WeirProcess(base / "data", base / "logs", open_files_limit=limit,
                         extra_args=("--config", str(base / "weir.toml")),
                         extra_env={**BROKER_ENV, "PYTHONPATH": str(tree)})  # fmt: skip
    points: list[dict[str, float]] = []
    connections: list[Any] = []
    try:
        broker.start(READY_TIMEOUT_S)
        time.sleep(2)
        for count in sorted(counts):
            connections += open_connections(broker.bootstrap, count - len(connections))
            time.sleep(2)
            idle = idle_cpu_util(broker.pid, args.idle_s)
            points.append(
                {"connections": count, "idle_cpu_util": idle, "rss_mb": rss_mb(broker.pid)}
            )
            print(f"{tree}: {count} idle connections: idle CPU {idle:.3f}", flush=True)
        broker.stop(STOP_TIMEOUT_S)
    finally:
        close_connections(connections)
        broker.kill()
        shutil.rmtree(base, ignore_errors=True)
    return {"tree": str(tree), "uptime_before": load_average(), "points": points}


def measure_metadata_steps(
    counts: list[int], args: argparse.Namespace, limit: int
) -> dict[str, Any]:
    """One broker, topics only (no data, no connections, no groups): Metadata of every
    topic and GET /metrics as its partitions grow to each count; with --profile,
    py-spy over `--runs` Metadata requests at the largest."""
    base = Path(tempfile.mkdtemp(prefix="weir-scale-meta-", dir=args.work_dir))
    (base / "weir.toml").write_text(SETTINGS.format(connections_max=CONNECTIONS_SPARE))
    broker = WeirProcess(base / "data", base / "logs", open_files_limit=limit,
                         extra_args=("--config", str(base / "weir.toml")),
                         extra_env=BROKER_ENV)  # fmt: skip
    points: list[dict[str, Any]] = []
    created = 0
    try:
        broker.start(READY_TIMEOUT_S)
        for count in sorted(counts):
            layout = Layout((count - created) // PARTITIONS_PER_TOPIC, PARTITIONS_PER_TOPIC)
            create_topics(
                broker.bootstrap,
                layout,
                SEGMENT_BYTES_DEFAULT,
                first=created // PARTITIONS_PER_TOPIC,
            )
            created = count
            time.sleep(2)
            point = {"partitions": count, "rss_mb": rss_mb(broker.pid),
                     "metadata": metadata_all_topics_ms(broker.bootstrap, args.runs),
                     "metrics": metrics_ms(broker, args.runs)}  # fmt: skip
            points.append(point)
            print(f"{count} partitions: metadata {point['metadata']['median_ms']:.1f} ms, "
                  f"/metrics {point['metrics']['median_ms']:.0f} ms", flush=True)  # fmt: skip
        if args.profile:
            raw = args.results.parent / "scale_metadata_profile.txt"
            with py_spy_recording(broker.pid, raw, 200):
                metadata_all_topics_ms(broker.bootstrap, args.runs)
            points[-1]["metadata_profile"] = summarize_py_spy(raw, 25)
        broker.stop(STOP_TIMEOUT_S)
    finally:
        broker.kill()
        shutil.rmtree(base, ignore_errors=True)
    return {"uptime_before": load_average(), "points": points}


def load_average() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def save(results_path: Path, record: dict[str, Any]) -> None:
    results = json.loads(results_path.read_text()) if results_path.exists() else []
    fraction = record["size"]["fraction"]
    results = [r for r in results if r["size"]["fraction"] != fraction] + [record]
    results.sort(key=lambda r: r["size"]["fraction"])
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(results, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fractions", default="", help="comma-separated, e.g. 0.1,0.2,0.5")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--results", type=Path, default=RESULTS_PATH)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the data dirs")
    parser.add_argument("--profile", action="store_true", help="py-spy the idle broker")
    parser.add_argument(
        "--idle-connections",
        default="",
        help="comma-separated counts: only idle CPU with that many connections",
    )
    parser.add_argument(
        "--trees",
        default=str(REPO),
        help="comma-separated source trees for --idle-connections, alternating",
    )
    parser.add_argument(
        "--metadata-steps",
        default="",
        help="comma-separated partition counts: only Metadata and /metrics",
    )
    parser.add_argument(
        "--tree-labels",
        default="",
        help="comma-separated: tree=label, names the trees in the plots",
    )
    parser.add_argument("--plot", action="store_true", help="draw the PNGs, print the tables")
    args = parser.parse_args()
    limit = hard_open_files_limit()
    args.results.parent.mkdir(parents=True, exist_ok=True)
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    for tree in trees:
        compile_bytecode(tree)
    counts = [int(c) for c in args.idle_connections.split(",") if c]
    if counts:
        runs = [measure_idle_connections(counts, args, limit, tree) for tree in trees]
        path = args.results.parent / "scale_idle_connections.json"
        path.write_text(json.dumps(runs, indent=1) + "\n")
    steps = [int(c) for c in args.metadata_steps.split(",") if c]
    if steps:
        path = args.results.parent / "scale_metadata_steps.json"
        path.write_text(json.dumps(measure_metadata_steps(steps, args, limit), indent=1) + "\n")
    for fraction in [float(f) for f in args.fractions.split(",") if f]:
        size = Size.of(fraction)
        refusal = budget_refusal(size, limit)
        if refusal is not None:
            print(f"{size}: does not fit: {refusal}", flush=True)
            continue
        save(args.results, measure(size, args, limit))
    if args.plot:
        names = dict(pair.split("=", 1) for pair in args.tree_labels.split(",") if pair)
        plot_all(args.results, names)


def plot_all(results_path: Path, names: dict[str, str]) -> None:
    out_dir = REPO / "docs" / "benchmarks"
    results = json.loads(results_path.read_text())
    plot_results(results, out_dir)
    print_tables(results)
    connections_path = results_path.parent / "scale_idle_connections.json"
    runs = json.loads(connections_path.read_text()) if connections_path.exists() else []
    labels = [names.get(r["tree"], "this tree" if Path(r["tree"]) == REPO else r["tree"])
              for r in runs]  # fmt: skip
    if runs:
        plot_idle_connections(runs, out_dir, labels)
    steps_path = results_path.parent / "scale_metadata_steps.json"
    steps = json.loads(steps_path.read_text()) if steps_path.exists() else {}
    if steps:
        plot_metadata_steps(steps, out_dir)
    print_side_tables(runs, labels, steps)


if __name__ == "__main__":
    main()
