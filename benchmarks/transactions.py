"""Transactional produce, Weir next to Apache Kafka 4.4, in one run.

    .venv/bin/python benchmarks/transactions.py --rounds 3

For every round, each broker in turn (the order reversed in even rounds) is started
fresh on free loopback ports (the same start as `benchmarks/run.py`: `weir serve`
on a fresh data dir; one KRaft node of Kafka 4.4.0 through `kafka_peer.py`, its
defaults), warmed up, and then measured for each transaction size (`--txn-sizes`,
produce requests per transaction, default 1, 10 and 100) on a fresh topic.

The load generator is `benchmarks/txnload` (Go, franz-go, built here into
`.cache/go/txnload` with the module cache in `.cache/go`, as `scripts/test` builds the
Go suite): `--producers` transactional producers, one client each, each looping
begin, N x (produce `--records-per-request` records over `--partitions` partitions,
flush: one Produce request), commit. Python's confluent-kafka would spend more CPU
per record than the brokers do (it shares the 2 cores with them); franz-go's CPU
per record is reported next to the brokers' so that it can be checked.

Broker CPU is read from /proc (the broker process, its threads and children: Weir's
syncfs helper, every JVM thread) between the generator's start signal and its
report, and divided by the records committed in that window. Results go to
`benchmarks/results/txn-<stamp>.json`; the markdown table to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import kafka_peer  # benchmarks/ is on sys.path when this script runs
from confluent_kafka import KafkaException
from go_build import GO_CACHE, build_go_tool
from side_by_side.brokers import REPO_ROOT, BrokerError, BrokerProcess, start_broker, tail
from side_by_side.confluent_load import create_topic
from side_by_side.cpu import idle_cpu_util, machine_cpu_seconds, proc_cpu_seconds
from side_by_side.progress import log

GENERATOR_DIR = REPO_ROOT / "benchmarks" / "txnload"
GENERATOR_BIN = GO_CACHE / "txnload"
BROKERS = ("weir", "kafka")
METRICS = (
    "msgs_per_s",
    "txns_per_s",
    "produce_requests_per_s",
    "broker_cpu_us_per_msg",
    "broker_cpu_util",
    "client_cpu_us_per_msg",
    "other_cpu_util",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="weir,kafka")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--txn-sizes", default="1,10,100", help="produce requests per txn")
    parser.add_argument("--seconds", type=float, default=8, help="measured time per size")
    parser.add_argument("--warmup-seconds", type=float, default=8)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--records-per-request", type=int, default=100)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument(
        "--transaction-version",
        type=int,
        choices=[1, 2],
        default=1,
        help="1: AddPartitionsToTxn and EndTxn v4 (librdkafka's way); 2: KIP-890 part 2",
    )
    parser.add_argument("--idle-seconds", type=float, default=2)
    parser.add_argument("--phase-timeout", type=float, default=120)
    parser.add_argument("--startup-timeout", type=float, default=60)
    parser.add_argument("--java", default=os.environ.get("JAVA", "java"))
    parser.add_argument("--weir-bin", default=str(REPO_ROOT / ".venv" / "bin" / "weir"))
    parser.add_argument("--weir-extra-args", default="", help="appended to `weir serve`")
    parser.add_argument("--data-root", default=tempfile.gettempdir())
    parser.add_argument("--results-dir", default=str(REPO_ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    args.brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    for broker in args.brokers:
        if broker not in BROKERS:
            parser.error(f"unknown broker {broker!r} (weir, kafka)")
    args.txn_sizes = [int(s) for s in args.txn_sizes.split(",")]
    args.data_root = Path(args.data_root)
    return args


def build_generator() -> Path:
    return build_go_tool(GENERATOR_DIR)


def generator_command(
    args: argparse.Namespace, bootstrap: str, topic: str, txn_size: int, seconds: float, ids: str
) -> list[str]:
    return [
        str(GENERATOR_BIN),
        "-bootstrap", bootstrap, "-topic", topic, "-partitions", str(args.partitions),
        "-producers", str(args.producers), "-requests-per-txn", str(txn_size),
        "-records-per-request", str(args.records_per_request),
        "-value-bytes", str(args.value_bytes), "-seconds", str(seconds),
        "-transaction-version", str(args.transaction_version),
        "-transactional-id-prefix", ids,
    ]  # fmt: skip


def run_generator(
    broker: BrokerProcess,
    args: argparse.Namespace,
    txn_size: int,
    seconds: float,
    tag: str,
) -> dict[str, Any]:
    """One timed run of the generator on a fresh topic; broker CPU around it."""
    topic = f"txn-{tag}-{txn_size}-{int(time.time() * 1000) % 10_000_000}"
    create_topic(broker.bootstrap, topic, args.partitions, args.phase_timeout)
    command = generator_command(args, broker.bootstrap, topic, txn_size, seconds, topic)
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            if proc.stdout.readline().strip() != "READY":
                raise BrokerError(f"txnload did not start: {_stderr(proc, stderr)}")
            broker0, client0 = proc_cpu_seconds(broker.proc.pid), proc_cpu_seconds(proc.pid)
            machine0, started = machine_cpu_seconds(), time.perf_counter()
            proc.stdin.write("go\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            broker1, client1 = proc_cpu_seconds(broker.proc.pid), proc_cpu_seconds(proc.pid)
            machine1, wall_s = machine_cpu_seconds(), time.perf_counter() - started
            if not line:
                raise BrokerError(f"txnload failed: {_stderr(proc, stderr)}")
            proc.wait(timeout=args.phase_timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    report: dict[str, Any] = json.loads(line)
    broker_s, client_s = sum(broker1) - sum(broker0), sum(client1) - sum(client0)
    records, elapsed_s = report["records"], report["elapsed_s"]
    report.update(
        msgs_per_s=records / elapsed_s,
        txns_per_s=report["transactions"] / elapsed_s,
        produce_requests_per_s=report["requests"]["Produce"] / elapsed_s,
        broker_cpu_s=broker_s,
        broker_cpu_us_per_msg=broker_s / records * 1e6 if records else None,
        broker_cpu_util=broker_s / wall_s,
        client_cpu_us_per_msg=client_s / records * 1e6 if records else None,
        other_cpu_util=(machine1 - machine0 - broker_s - client_s) / wall_s,
        loadavg=os.getloadavg(),
    )
    return report


def _stderr(proc: subprocess.Popen[str], stderr: Any) -> str:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    stderr.seek(0)
    return str(stderr.read().decode(errors="replace")[-2000:])


def broker_pass(
    name: str, args: argparse.Namespace, run_dir: Path, round_no: int
) -> dict[str, Any]:
    tag = f"r{round_no}"
    outcome: dict[str, Any] = {
        "broker": name, "round": round_no, "sizes": {}, "loadavg_start": os.getloadavg()
    }  # fmt: skip
    try:
        broker = start_broker(name, args, run_dir, tag)
    except (BrokerError, OSError, KafkaException) as exc:
        outcome["error"] = f"start failed: {exc}"
        log(f"{name} {tag}: {outcome['error']}")
        return outcome
    log(f"{name} {tag}: ready in {broker.startup_s:.1f} s at {broker.bootstrap}")
    try:
        warm = run_generator(broker, args, 10, args.warmup_seconds, f"warmup-{name}-{tag}")
        log(f"  warm-up {warm['msgs_per_s']:,.0f} msgs/s")
        outcome["idle_cpu_util"] = idle_cpu_util(broker.proc.pid, args.idle_seconds)
        for txn_size in args.txn_sizes:
            try:
                sample = run_generator(broker, args, txn_size, args.seconds, f"{name}-{tag}")
            except (BrokerError, KafkaException, OSError, ValueError) as exc:
                outcome["sizes"][str(txn_size)] = {"error": str(exc)}
                log(f"  {txn_size} requests/txn: {exc}")
                continue
            outcome["sizes"][str(txn_size)] = sample
            log(
                f"  {txn_size:>3} requests/txn: {sample['msgs_per_s']:>9,.0f} msgs/s "
                f"{sample['txns_per_s']:>7,.1f} txns/s, broker "
                f"{sample['broker_cpu_us_per_msg']:.2f} µs/msg "
                f"({sample['broker_cpu_util'] * 100:.0f}% CPU), client "
                f"{sample['client_cpu_us_per_msg']:.2f} µs/msg, load {sample['loadavg'][0]:.1f}"
            )
    except (BrokerError, KafkaException, OSError) as exc:
        outcome["error"] = str(exc)
        log(f"{name} {tag}: {exc}")
    finally:
        outcome["loadavg_end"] = os.getloadavg()
        outcome["stop"] = broker.stop()
        outcome["log_tail"] = tail(broker.log_path, 15)
        if broker.data_dir is not None:
            shutil.rmtree(broker.data_dir, ignore_errors=True)
    return outcome


def spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(passes: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Median and range over rounds per broker and size; Weir/Kafka per round."""
    out: dict[str, Any] = {}
    for size in map(str, args.txn_sizes):
        cells: dict[str, Any] = {}
        for broker in args.brokers:
            samples = [
                p["sizes"][size]
                for p in passes
                if p["broker"] == broker and "error" not in p["sizes"].get(size, {"error": 1})
            ]
            cells[broker] = {
                metric: spread([s[metric] for s in samples if s.get(metric) is not None])
                for metric in METRICS
            }
            cells[broker]["rounds_ok"] = len(samples)
        if {"weir", "kafka"} <= set(args.brokers):
            by_round: dict[int, dict[str, Any]] = {}
            for p in passes:
                sample = p["sizes"].get(size, {})
                if "error" not in sample and sample:
                    by_round.setdefault(p["round"], {})[p["broker"]] = sample
            pairs = [r for r in by_round.values() if {"weir", "kafka"} <= set(r)]
            cells["weir/kafka"] = {
                metric: spread(
                    [
                        r["weir"][metric] / r["kafka"][metric]
                        for r in pairs
                        if r["kafka"].get(metric) and r["weir"].get(metric) is not None
                    ]
                )
                for metric in ("msgs_per_s", "txns_per_s", "broker_cpu_us_per_msg")
            }
        out[size] = cells
    return out


def fmt_range(cell: dict[str, float] | None, digits: int = 0, scale: float = 1) -> str:
    if not cell:
        return "—"
    median, low, high = (cell[k] * scale for k in ("median", "min", "max"))
    return f"{median:,.{digits}f} ({low:,.{digits}f}–{high:,.{digits}f})"


def markdown(summary: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"Transactional produce, {args.producers} producers, {args.partitions} partitions, "
        f"{args.records_per_request} records of {args.value_bytes} B per produce request, "
        f"transaction version {args.transaction_version}, {args.seconds:g} s per cell; "
        f"median (min–max) over {args.rounds} rounds.",
        "",
        "| requests/txn | broker | msgs/s | txns/s | broker CPU µs/msg | broker CPU "
        "| generator CPU µs/msg | other CPU | rounds |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, cells in summary.items():
        for broker in args.brokers:
            c = cells[broker]
            lines.append(
                f"| {size} | {broker} | {fmt_range(c['msgs_per_s'])} "
                f"| {fmt_range(c['txns_per_s'], 1)} | {fmt_range(c['broker_cpu_us_per_msg'], 2)} "
                f"| {fmt_range(c['broker_cpu_util'], 0, 100)}% "
                f"| {fmt_range(c['client_cpu_us_per_msg'], 2)} "
                f"| {fmt_range(c['other_cpu_util'], 0, 100)}% | {c['rounds_ok']} |"
            )
    if all("weir/kafka" in cells for cells in summary.values()):
        lines += [
            "",
            "Weir / Kafka, per round (throughput above 1: Weir faster; CPU below 1: Weir "
            "cheaper), median (min–max):",
            "",
            "| requests/txn | msgs/s | txns/s | broker CPU µs/msg |",
            "|---:|---:|---:|---:|",
        ]
        for size, cells in summary.items():
            r = cells["weir/kafka"]
            lines.append(
                f"| {size} | {fmt_range(r['msgs_per_s'], 2)} | {fmt_range(r['txns_per_s'], 2)} "
                f"| {fmt_range(r['broker_cpu_us_per_msg'], 2)} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    build_generator()
    args.kafka_jars = kafka_peer.ensure_jars(log) if "kafka" in args.brokers else None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results_dir = Path(args.results_dir)
    run_dir = results_dir / f"txn-run-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(sys.argv),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "loadavg_start": os.getloadavg(),
        "passes": [],
    }
    for round_no in range(1, args.rounds + 1):
        order = args.brokers if round_no % 2 else list(reversed(args.brokers))
        for name in order:
            result["passes"].append(broker_pass(name, args, run_dir, round_no))
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    result["loadavg_end"] = os.getloadavg()
    result["summary"] = summarize(result["passes"], args)
    result["markdown"] = markdown(result["summary"], args)
    out_path = results_dir / f"txn-{stamp}.json"
    out_path.write_text(json.dumps(result, indent=2, default=str))
    loads = ", ".join(
        f"{p['broker']} r{p['round']} {p['loadavg_start'][0]:.1f}" for p in result["passes"]
    )
    print(result["markdown"])
    print(f"\n1-minute load average when each pass started: {loads}.")
    log(f"results: {out_path} (broker logs in {run_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
