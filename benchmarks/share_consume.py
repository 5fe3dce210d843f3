"""Share-group consumption, Weir next to Apache Kafka 4.4, in one run.

    .venv/bin/python benchmarks/share_consume.py --rounds 2 --profile

Both brokers are started once on free loopback ports, with their defaults (the same
start as `benchmarks/run.py`: `weir serve` on a fresh data dir; one KRaft node of
Kafka 4.4.0 through `kafka_peer.py`), both data dirs under `--data-root` (one disk).
Each gets one topic per value size (`--sizes`) and partition count (`--partitions`),
filled once with `--records` records. Every round then drains each topic with every
consumer count (`--consumers`) in every mode (`--modes`), each drain with a fresh
group, the brokers alternating (the order flips from one cell to the next and from
one round to the next):

- `share`: a share group (KIP-932), `share.auto.offset.reset=earliest` set first
  (IncrementalAlterConfigs), every record acknowledged ACCEPT explicitly;
- `classic`: a classic consumer group reading the same records (offsets committed);
- `consumer`: a KIP-848 consumer group, likewise.

`share` next to `classic` on the same broker and records is the cost of what a share
group adds per record: its acquisition lock, delivery count and acknowledgement.

The load generator is `benchmarks/share_consume` (Go, franz-go 1.22.2, built here into
`.cache/go/share_consume` with the module cache in `.cache/go`, as
`benchmarks/transactions.py` builds its own): `--consumers` clients of one group in one
process, a drain ends when every record was seen once (counted per partition and
offset, redeliveries apart) and every consumer has flushed its acknowledgements or
committed. Python's confluent-kafka ShareConsumer would run at most one core and share
it with the brokers; the generator's own CPU per record is reported next to theirs.

Broker CPU is read from /proc (the broker process, its threads and children: Weir's
syncfs helper, every JVM thread) between the first record's arrival (group joins left
out) and the end of the drain, and divided by the records drained. Throughput is
records over the same window. Results go to `benchmarks/results/share-<stamp>.json`;
the markdown table to stdout.

`--brokers weir,before=/tmp/weir-before --modes classic,consumer` measures another
source tree of Weir (started with PYTHONPATH=<tree>) instead of or next to Kafka:
classic and KIP-848 consumption before and after a change (share mode too when the
tree serves share groups). `--profile` records Weir under py-spy during one more share drain after
the rounds (not a measured one) and prints its top frames.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kafka_peer  # benchmarks/ is on sys.path when this script runs
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from go_build import GO_CACHE, build_go_tool
from side_by_side.brokers import REPO_ROOT, BrokerError, BrokerProcess, start_broker, tail
from side_by_side.confluent_load import create_topic
from side_by_side.cpu import idle_cpu_util, machine_cpu_seconds, proc_cpu_seconds
from side_by_side.profiling import py_spy_recording, summarize_py_spy
from side_by_side.progress import log

GENERATOR_DIR = REPO_ROOT / "benchmarks" / "share_consume"
GENERATOR_BIN = GO_CACHE / "share_consume"
MODES = ("share", "classic", "consumer")
METRICS = (
    "records_per_s",
    "broker_cpu_us_per_record",
    "broker_cpu_util",
    "client_cpu_us_per_record",
    "other_cpu_util",
    "join_s",
    "busy_consumers",
)
PROFILE_RATE_HZ = 100


@dataclass(frozen=True)
class Cell:
    """One drain: a topic (value size, partitions), a consumer count and a mode."""

    value_bytes: int
    partitions: int
    consumers: int
    mode: str

    @property
    def key(self) -> str:
        return f"{self.mode}/{self.value_bytes}B/{self.partitions}p/{self.consumers}c"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--brokers",
        dest="brokers_spec",
        default="weir,kafka",
        help="weir, kafka and NAME=WEIR_SOURCE_TREE (another Weir source tree)",
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sizes", default="100,1024", help="value bytes, one topic each")
    parser.add_argument(
        "--records",
        default="1000000,250000",
        help="records per topic, one count for every size or one per size",
    )
    parser.add_argument("--partitions", default="1,8", help="partition counts, one topic each")
    parser.add_argument("--consumers", default="1,16", help="consumers per group")
    parser.add_argument("--modes", default="share,classic", help="share, classic, consumer")
    parser.add_argument("--max-records", type=int, default=500, help="records per poll")
    parser.add_argument("--profile", action="store_true", help="py-spy Weir in one more drain")
    parser.add_argument("--idle-seconds", type=float, default=2)
    parser.add_argument("--phase-timeout", type=float, default=300)
    parser.add_argument("--startup-timeout", type=float, default=90)
    parser.add_argument("--java", default=os.environ.get("JAVA", "java"))
    parser.add_argument("--weir-bin", default=str(REPO_ROOT / ".venv" / "bin" / "weir"))
    parser.add_argument("--weir-extra-args", default="", help="appended to `weir serve`")
    parser.add_argument("--data-root", default=tempfile.gettempdir())
    parser.add_argument("--results-dir", default=str(REPO_ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    args.trees = {}
    args.brokers = []
    for spec in (s.strip() for s in str(args.brokers_spec).split(",") if s.strip()):
        name, sep, tree = spec.partition("=")
        if sep:
            args.trees[name] = Path(tree).resolve()
        elif name not in ("weir", "kafka"):
            parser.error(f"unknown broker {name!r} (weir, kafka or NAME=TREE)")
        args.brokers.append(name)
    args.sizes = [int(s) for s in args.sizes.split(",")]
    counts = [int(s) for s in args.records.split(",")]
    if len(counts) not in (1, len(args.sizes)):
        parser.error("--records: one count, or one per size")
    if len(counts) == 1:
        counts *= len(args.sizes)
    args.records = dict(zip(args.sizes, counts, strict=True))
    args.partitions = [int(s) for s in args.partitions.split(",")]
    args.consumers = [int(s) for s in args.consumers.split(",")]
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for mode in args.modes:
        if mode not in MODES:
            parser.error(f"unknown mode {mode!r} ({', '.join(MODES)})")
    args.data_root = Path(args.data_root)
    return args


def cells(args: argparse.Namespace) -> list[Cell]:
    return [
        Cell(size, partitions, consumers, mode)
        for size in args.sizes
        for partitions in args.partitions
        for consumers in args.consumers
        for mode in args.modes
    ]


def serves(broker: str, mode: str, args: argparse.Namespace) -> bool:
    """Builds named by a source tree are measured in share mode only when they serve
    share groups (a tree from before them: classic and consumer modes only)."""
    tree = args.trees.get(broker)
    return mode != "share" or tree is None or (tree / "weir" / "sharecoord").is_dir()


def build_generator() -> Path:
    return build_go_tool(GENERATOR_DIR)


@contextlib.contextmanager
def pythonpath(tree: Path | None) -> Iterator[None]:
    """`weir serve` (started by side_by_side.brokers) runs `tree`'s code: the venv's
    `weir` honours PYTHONPATH, and Popen passes this process's environment on."""
    if tree is None:
        yield
        return
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def start(name: str, args: argparse.Namespace, run_dir: Path) -> BrokerProcess:
    tree = args.trees.get(name)
    with pythonpath(tree):
        broker = start_broker("kafka" if name == "kafka" else "weir", args, run_dir, name)
    broker.name = name
    log(f"{name}: ready in {broker.startup_s:.1f} s at {broker.bootstrap} (pid {broker.proc.pid})")
    return broker


def topic_name(value_bytes: int, partitions: int) -> str:
    return f"drain-{value_bytes}b-{partitions}p"


def fill_topics(broker: BrokerProcess, args: argparse.Namespace) -> dict[str, Any]:
    """One topic per (size, partitions), `--records` records each (franz-go, acks=all)."""
    filled: dict[str, Any] = {}
    for size in args.sizes:
        for partitions in args.partitions:
            topic = topic_name(size, partitions)
            create_topic(broker.bootstrap, topic, partitions, args.phase_timeout)
            command = [
                str(GENERATOR_BIN), "-mode", "produce", "-bootstrap", broker.bootstrap,
                "-topic", topic, "-partitions", str(partitions), "-records",
                str(args.records[size]), "-value-bytes", str(size),
            ]  # fmt: skip
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=args.phase_timeout, check=False
            )
            if done.returncode != 0:
                raise BrokerError(f"filling {topic} failed: {done.stderr[-2000:]}")
            report = json.loads(done.stdout.strip().splitlines()[-1])
            filled[topic] = report
            log(
                f"  {broker.name}: {topic} filled, "
                f"{args.records[size] / report['elapsed_s']:,.0f} "
                "records/s"
            )
    return filled


def set_share_reset_earliest(bootstrap: str, group: str, timeout_s: float) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=timeout_s)


def drain(
    broker: BrokerProcess, cell: Cell, args: argparse.Namespace, group: str
) -> dict[str, Any]:
    """One timed drain of the cell's topic by a fresh group; broker CPU around it."""
    records = args.records[cell.value_bytes]
    if cell.mode == "share":
        set_share_reset_earliest(broker.bootstrap, group, args.phase_timeout)
    command = [
        str(GENERATOR_BIN), "-mode", cell.mode, "-bootstrap", broker.bootstrap,
        "-topic", topic_name(cell.value_bytes, cell.partitions), "-group", group,
        "-partitions", str(cell.partitions), "-consumers", str(cell.consumers),
        "-records", str(records), "-max-records", str(args.max_records),
        "-timeout", f"{int(args.phase_timeout)}s",
    ]  # fmt: skip
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            if proc.stdout.readline().strip() != "READY":
                raise BrokerError(f"share_consume did not start: {_stderr(proc, stderr)}")
            proc.stdin.write("go\n")
            proc.stdin.flush()
            if proc.stdout.readline().strip() != "FIRST":
                raise BrokerError(f"no record arrived: {_stderr(proc, stderr)}")
            broker0, client0 = proc_cpu_seconds(broker.proc.pid), proc_cpu_seconds(proc.pid)
            machine0, started = machine_cpu_seconds(), time.perf_counter()
            line = proc.stdout.readline()
            broker1, client1 = proc_cpu_seconds(broker.proc.pid), proc_cpu_seconds(proc.pid)
            machine1, wall_s = machine_cpu_seconds(), time.perf_counter() - started
            if not line:
                raise BrokerError(f"share_consume failed: {_stderr(proc, stderr)}")
            proc.wait(timeout=args.phase_timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    report: dict[str, Any] = json.loads(line)
    if report["timed_out"] or report["records"] < records:
        raise BrokerError(
            f"drained {report['records']} of {records} in {args.phase_timeout:g} s: errors "
            f"{report['errors']}, refused acknowledgements {report.get('ack_errors')}, "
            f"deliveries per consumer {report['per_consumer']}"
        )
    broker_s, client_s = sum(broker1) - sum(broker0), sum(client1) - sum(client0)
    elapsed_s = report["elapsed_s"]
    report.update(
        records_per_s=records / elapsed_s,
        broker_cpu_s=broker_s,
        broker_cpu_us_per_record=broker_s / records * 1e6,
        broker_cpu_util=broker_s / wall_s,
        client_cpu_us_per_record=client_s / records * 1e6,
        other_cpu_util=(machine1 - machine0 - broker_s - client_s) / wall_s,
        busy_consumers=sum(1 for n in report["per_consumer"] if n),
        loadavg=os.getloadavg(),
    )
    return report


def _stderr(proc: subprocess.Popen[str], stderr: Any) -> str:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    stderr.seek(0)
    return str(stderr.read().decode(errors="replace")[-2000:])


def run_round(
    brokers: dict[str, BrokerProcess], args: argparse.Namespace, round_no: int
) -> list[dict[str, Any]]:
    samples: list[dict[str, Any]] = []
    for index, cell in enumerate(cells(args)):
        order = list(brokers) if (round_no + index) % 2 else list(reversed(brokers))
        for name in order:
            if not serves(name, cell.mode, args):
                continue
            group = f"{cell.mode}-{cell.value_bytes}-{cell.partitions}-{cell.consumers}-r{round_no}"
            sample: dict[str, Any] = {"broker": name, "round": round_no, "cell": cell.key}
            try:
                sample.update(drain(brokers[name], cell, args, group))
            except (BrokerError, KafkaException, OSError, ValueError) as exc:
                sample["error"] = str(exc)
                log(f"  r{round_no} {cell.key} {name}: {exc}")
                brokers[name].check_alive()
            else:
                log(
                    f"  r{round_no} {cell.key:<24} {name:>7}: {sample['records_per_s']:>10,.0f} "
                    f"records/s, broker {sample['broker_cpu_us_per_record']:6.2f} µs/record "
                    f"({sample['broker_cpu_util'] * 100:3.0f}% CPU), generator "
                    f"{sample['client_cpu_us_per_record']:5.2f} µs/record, "
                    f"join {sample['join_s']:.1f} s, load {sample['loadavg'][0]:.1f}"
                )
                if sample.get("ack_errors") or sample["redelivered"]:
                    log(
                        f"    redelivered {sample['redelivered']}, refused acknowledgements "
                        f"{sample.get('ack_errors')}"
                    )
            samples.append(sample)
    return samples


def profile_share_drains(
    broker: BrokerProcess, args: argparse.Namespace, run_dir: Path
) -> list[dict[str, Any]]:
    """py-spy on Weir during one more share drain of the first size and consumer
    count, per partition count (not measured: py-spy slows what it samples)."""
    profiles = []
    for partitions in args.partitions:
        cell = Cell(args.sizes[0], partitions, args.consumers[0], "share")
        raw = run_dir / f"weir-share-drain-{partitions}p.pyspy.txt"
        log(f"profiling weir: {cell.key}")
        with py_spy_recording(broker.proc.pid, raw, PROFILE_RATE_HZ):
            sample = drain(broker, cell, args, f"share-profiled-{partitions}p")
        summary = summarize_py_spy(raw, 25)
        summary.update(cell=cell.key, records_per_s=sample["records_per_s"], raw=str(raw))
        profiles.append(summary)
    return profiles


def spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(samples: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Per cell: median and range per broker; per round: each broker against the first,
    and share against classic on the same broker (CPU µs per record added)."""
    ok = [s for s in samples if "error" not in s]
    out: dict[str, Any] = {}
    for cell in cells(args):
        entry: dict[str, Any] = {}
        for broker in args.brokers:
            mine = [s for s in ok if s["broker"] == broker and s["cell"] == cell.key]
            entry[broker] = {m: spread([s[m] for s in mine]) for m in METRICS}
            entry[broker]["rounds_ok"] = len(mine)
        reference = args.brokers[0]
        for other in args.brokers[1:]:
            pairs = _paired(ok, cell.key, cell.key, reference, other)
            entry[f"{reference}/{other}"] = {
                m: spread([a[m] / b[m] for a, b in pairs if b[m]])
                for m in ("records_per_s", "broker_cpu_us_per_record")
            }
        out[cell.key] = entry
    out["share_minus_classic"] = share_cost(ok, args)
    return out


def _paired(
    ok: list[dict[str, Any]], key_a: str, key_b: str, broker_a: str, broker_b: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    by_round: dict[int, dict[str, dict[str, Any]]] = {}
    for s in ok:
        if (s["broker"], s["cell"]) in ((broker_a, key_a), (broker_b, key_b)):
            by_round.setdefault(s["round"], {})[f"{s['broker']}|{s['cell']}"] = s
    a, b = f"{broker_a}|{key_a}", f"{broker_b}|{key_b}"
    return [(r[a], r[b]) for r in by_round.values() if a in r and b in r]


def share_cost(ok: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Broker CPU µs per record of a share drain minus a classic drain of the same
    records (same broker, same round): what the lock, delivery count and per-record
    acknowledgement cost."""
    if not {"share", "classic"} <= set(args.modes):
        return {}
    out: dict[str, Any] = {}
    for cell in cells(args):
        if cell.mode != "share":
            continue
        classic = Cell(cell.value_bytes, cell.partitions, cell.consumers, "classic")
        for broker in args.brokers:
            pairs = _paired(ok, cell.key, classic.key, broker, broker)
            out.setdefault(cell.key, {})[broker] = spread(
                [a["broker_cpu_us_per_record"] - b["broker_cpu_us_per_record"] for a, b in pairs]
            )
    return out


def fmt(cell: dict[str, float] | None, digits: int = 0, scale: float = 1) -> str:
    if not cell:
        return "—"
    median, low, high = (cell[k] * scale for k in ("median", "min", "max"))
    return f"{median:,.{digits}f} ({low:,.{digits}f}–{high:,.{digits}f})"


def markdown(summary: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        "Records per topic: "
        + ", ".join(f"{n:,} of {size} B" for size, n in args.records.items())
        + f"; median (min–max) over {args.rounds} rounds.",
        "",
        "| mode | value | partitions | consumers | broker | records/s | broker CPU µs/record "
        "| broker CPU | generator µs/record | consumers with records | rounds |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in cells(args):
        for broker in args.brokers:
            if not serves(broker, cell.mode, args):
                continue
            c = summary[cell.key][broker]
            lines.append(
                f"| {cell.mode} | {cell.value_bytes} B | {cell.partitions} | {cell.consumers} "
                f"| {broker} | {fmt(c['records_per_s'])} "
                f"| {fmt(c['broker_cpu_us_per_record'], 2)} "
                f"| {fmt(c['broker_cpu_util'], 0, 100)}% "
                f"| {fmt(c['client_cpu_us_per_record'], 2)} "
                f"| {fmt(c['busy_consumers'])} | {c['rounds_ok']} |"
            )
    reference = args.brokers[0]
    for other in args.brokers[1:]:
        ratio = f"{reference}/{other}"
        lines += [
            "",
            f"{reference} / {other}, the ratio of each round's pair (records/s above 1: "
            f"{reference} faster; CPU below 1: {reference} cheaper), median (min–max):",
            "",
            "| mode | value | partitions | consumers | records/s | broker CPU µs/record |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for cell in cells(args):
            if not serves(other, cell.mode, args) or not serves(reference, cell.mode, args):
                continue
            r = summary[cell.key][ratio]
            lines.append(
                f"| {cell.mode} | {cell.value_bytes} B | {cell.partitions} | {cell.consumers} "
                f"| {fmt(r['records_per_s'], 2)} | {fmt(r['broker_cpu_us_per_record'], 2)} |"
            )
    if summary["share_minus_classic"]:
        lines += [
            "",
            "Share minus classic, broker CPU µs per record (same broker, records and round):",
            "",
            "| value | partitions | consumers | " + " | ".join(args.brokers) + " |",
            "|---:|---:|---:|" + "---:|" * len(args.brokers),
        ]
        for key, per_broker in summary["share_minus_classic"].items():
            _mode, value, partitions, consumers = key.split("/")
            row = " | ".join(fmt(per_broker.get(b), 2) for b in args.brokers)
            lines.append(
                f"| {value.removesuffix('B')} B | {partitions.removesuffix('p')} "
                f"| {consumers.removesuffix('c')} | {row} |"
            )
    return "\n".join(lines)


def profile_text(profile: dict[str, Any]) -> str:
    if "error" in profile:
        return f"profile: {profile['error']}"
    lines = [
        f"\npy-spy, Weir during a share drain ({profile['cell']}, "
        f"{profile['records_per_s']:,.0f} records/s, {profile['samples']} samples):",
        "",
        "| function | self % | inclusive % |",
        "|---|---:|---:|",
    ]
    inclusive = {f: pct for f, _c, pct in profile["top_inclusive"]}
    for function, _count, pct in profile["top_self"][:15]:
        lines.append(f"| `{function}` | {pct} | {inclusive.get(function, '—')} |")
    lines += ["", "Inclusive (top 25):", ""]
    lines += [f"- {pct}% `{f}`" for f, _c, pct in profile["top_inclusive"]]
    return "\n".join(lines)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    """SIGTERM unwinds like an error, so the brokers are stopped (main's finally)."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    args = parse_args(argv)
    build_generator()
    args.kafka_jars = kafka_peer.ensure_jars(log) if "kafka" in args.brokers else None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results_dir = Path(args.results_dir)
    out_path = results_dir / f"share-{stamp}.json"
    run_dir = results_dir / f"share-run-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(sys.argv),
        "args": {k: v for k, v in vars(args).items() if k != "kafka_jars"},
        "loadavg_start": os.getloadavg(),
        "samples": [],
    }
    brokers: dict[str, BrokerProcess] = {}
    try:
        for name in args.brokers:
            brokers[name] = start(name, args, run_dir)
        result["filled"] = {name: fill_topics(b, args) for name, b in brokers.items()}
        result["idle_cpu_util"] = {
            name: idle_cpu_util(b.proc.pid, args.idle_seconds) for name, b in brokers.items()
        }
        for round_no in range(1, args.rounds + 1):
            log(f"round {round_no}")
            result["samples"] += run_round(brokers, args, round_no)
            out_path.write_text(json.dumps(result, indent=2, default=str))  # so far
        if args.profile and "weir" in brokers:
            result["profiles"] = profile_share_drains(brokers["weir"], args, run_dir)
    finally:
        for name, broker in brokers.items():
            result.setdefault("stop", {})[name] = broker.stop()
            result.setdefault("log_tail", {})[name] = tail(broker.log_path, 15)
            if broker.data_dir is not None:
                shutil.rmtree(broker.data_dir, ignore_errors=True)
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    result["loadavg_end"] = os.getloadavg()
    result["summary"] = summarize(result["samples"], args)
    result["markdown"] = markdown(result["summary"], args)
    out_path.write_text(json.dumps(result, indent=2, default=str))
    print(result["markdown"])
    for profile in result.get("profiles", []):
        print(profile_text(profile))
    idle = ", ".join(f"{n} {u * 100:.1f}%" for n, u in result["idle_cpu_util"].items())
    print(f"\nIdle broker CPU: {idle}. Load average {result['loadavg_start'][0]:.1f} at the start,")
    print(f"{result['loadavg_end'][0]:.1f} at the end.")
    log(f"results: {out_path} (broker logs in {run_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
