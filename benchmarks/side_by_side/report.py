"""What a run reports: the machine's facts, medians over the rounds per broker and
size (and of the limits), and the markdown tables printed to stdout and kept in
the results JSON."""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
from pathlib import Path
from typing import Any

import kafka_peer  # benchmarks/kafka_peer.py: benchmarks/ is on sys.path
from confluent_kafka import libversion as rdkafka_libversion
from confluent_kafka import version as ck_version

from side_by_side.brokers import REPO_ROOT


def machine_facts(args: argparse.Namespace) -> dict[str, Any]:
    cpu_model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    fs = subprocess.run(
        ["findmnt", "-n", "-o", "SOURCE,FSTYPE,OPTIONS", "-T", str(args.data_root)],
        capture_output=True,
        text=True,
    ).stdout.strip()

    def version_of(cmd: list[str]) -> str:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (done.stdout or done.stderr).strip().splitlines()[0]
        return "unavailable"

    git = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    )
    return {
        "cpu_model": cpu_model,
        "cpus": os.cpu_count(),
        "mem_GiB": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "confluent_kafka": ck_version()[0] if isinstance(ck_version(), tuple) else ck_version(),
        "librdkafka": rdkafka_libversion()[0],
        "data_root": str(args.data_root),
        "data_root_fs": fs,
        "fio": version_of(["fio", "--version"]),
        "iperf3": version_of(["iperf3", "--version"]),
        "tansu": version_of([str(args.tansu_bin), "--version"]) if args.tansu_bin else None,
        "java": version_of([args.java, "-version"]) if args.kafka_jars else None,
        "kafka": kafka_peer.KAFKA_VERSION if "kafka" in args.brokers else None,
        "kafka_tools": kafka_peer.TOOLS_VERSION if "kafka-tools" in args.generators else None,
        "weir_git": git.stdout.strip() if git.returncode == 0 else "no commit (working tree)",
    }


METRICS = [
    ("produce", "msgs_per_s"),
    ("produce", "MB_per_s"),
    ("produce", "latency_p50_ms"),
    ("produce", "latency_p99_ms"),
    ("produce", "latency_max_ms"),
    ("produce", "broker_cpu_util"),
    ("consume", "msgs_per_s"),
    ("consume", "MB_per_s"),
    ("consume", "broker_cpu_util"),
    ("produce", "client_cpu_util"),
    ("produce", "produce_requests_per_s"),
    ("produce", "records_per_request"),
    ("produce", "broker_cpu_us_per_request"),
    ("produce", "broker_cpu_system_s"),
    ("produce", "broker_cpu_s"),
    ("paced", "produce_requests_per_s"),
    ("paced", "broker_cpu_us_per_request"),
    ("paced", "broker_cpu_util"),
    ("consume", "client_cpu_util"),
    ("paced", "latency_p50_ms"),
    ("paced", "latency_p99_ms"),
    ("paced", "latency_max_ms"),
    ("produce", "broker_cpu_us_per_message"),
    ("consume", "broker_cpu_us_per_message"),
    ("tool_produce", "msgs_per_s"),
    ("tool_produce", "MB_per_s"),
    ("tool_produce", "latency_p50_ms"),
    ("tool_produce", "latency_p99_ms"),
    ("tool_produce", "broker_cpu_us_per_message"),
    ("tool_produce", "broker_cpu_util"),
    ("tool_produce", "client_cpu_us_per_message"),
    ("tool_consume", "msgs_per_s"),
    ("tool_consume", "MB_per_s"),
    ("tool_consume", "broker_cpu_us_per_message"),
    ("tool_consume", "broker_cpu_util"),
    ("tool_consume", "client_cpu_us_per_message"),
    ("tool_consume", "rebalance_ms"),
    ("tool_produce", "other_cpu_util"),
    ("tool_produce", "records_per_request"),
    ("tool_produce", "request_latency_ms"),
    ("tool_consume", "other_cpu_util"),
]


def median_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def medians(passes: list[dict[str, Any]], brokers: list[str], sizes: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for broker in brokers:
        out[broker] = {}
        for size in sizes:
            samples = [
                p["sizes"].get(str(size), {})
                for p in passes
                if p["broker"] == broker and not p.get("profile")
            ]
            cell: dict[str, Any] = {"rounds_ok": 0, "errors": []}
            for sample in samples:
                if "error" in sample:
                    cell["errors"].append(sample["error"])
                if sample and "error" not in sample:
                    cell["rounds_ok"] += 1
            for phase, metric in METRICS:
                values = [s[phase][metric] for s in samples if phase in s and metric in s[phase]]
                cell[f"{phase}.{metric}"] = median_or_none(values)
            out[broker][str(size)] = cell
        start_errors = [p["error"] for p in passes if p["broker"] == broker and "error" in p]
        start_errors += [
            f"warm-up: {p['warmup']['error']}"
            for p in passes
            if p["broker"] == broker and "error" in p.get("warmup", {})
        ]
        out[broker]["start_errors"] = start_errors
        out[broker]["idle_cpu_util"] = median_or_none(
            [p.get("idle_cpu_util") for p in passes if p["broker"] == broker]
        )
    return out


def limit_medians(limits: list[dict[str, Any]], block_sizes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"fio": {}, "iperf3": None}
    for block_size in block_sizes:
        runs = [
            f
            for lim in limits
            for f in lim.get("fio", [])
            if f.get("block_size") == block_size and "error" not in f
        ]
        if runs:
            out["fio"][block_size] = {
                key: median_or_none([r[key] for r in runs])
                for key in (
                    "write_MBps",
                    "write_iops",
                    "fdatasync_p50_ms",
                    "fdatasync_p99_ms",
                    "fdatasync_max_ms",
                )
            }
    gbps = [
        lim["iperf3"]["loopback_Gbps"]
        for lim in limits
        if lim.get("iperf3") and "loopback_Gbps" in lim["iperf3"]
    ]
    if gbps:
        out["iperf3"] = {
            "loopback_Gbps": statistics.median(gbps),
            "loopback_MBps": statistics.median(gbps) * 1e9 / 8 / 1e6,
        }
    return out


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def percent(fraction: float | None) -> float | None:
    return None if fraction is None else fraction * 100


def ratio_text(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or not denominator:
        return "—"
    return f"{numerator / denominator:.2f}×"


def tool_report_lines(result: dict[str, Any]) -> list[str]:
    """kafka-producer-perf-test / kafka-consumer-perf-test figures and broker CPU per message."""
    args = result["args"]
    brokers, sizes = args["brokers"], args["sizes"]
    med = result["medians"]
    lines = [
        "",
        f"Kafka's perf tools (kafka-tools {kafka_peer.TOOLS_VERSION}, own JVMs), median of "
        f"{args['rounds']} rounds, {args['tool_messages']:,} records per size, "
        f"{args['partitions']} partitions, acks={args['acks']}, linger.ms={args['linger_ms']}, "
        f"batch.size={args['batch_size']}, no idempotence. Consume = the tool's fetch rate "
        "(group join excluded). Broker CPU µs/msg = broker CPU over the tool's whole run / "
        "records. Tool CPU = the perf tool's JVM over its whole run (start and JIT "
        "included) / records.",
        "",
        "| broker | size | produce msgs/s | produce MB/s | p50 ms | p99 ms | consume msgs/s "
        "| consume MB/s | broker CPU µs/msg produce | broker CPU µs/msg consume "
        "| tool CPU µs/msg produce / consume | rounds ok |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    for size in sizes:
        for broker in brokers:
            cell = med[broker][str(size)]
            lines.append(
                f"| {broker} | {size} B | {fmt(cell['tool_produce.msgs_per_s'])} "
                f"| {fmt(cell['tool_produce.MB_per_s'], 1)} "
                f"| {fmt(cell['tool_produce.latency_p50_ms'])} "
                f"| {fmt(cell['tool_produce.latency_p99_ms'])} "
                f"| {fmt(cell['tool_consume.msgs_per_s'])} "
                f"| {fmt(cell['tool_consume.MB_per_s'], 1)} "
                f"| {fmt(cell['tool_produce.broker_cpu_us_per_message'], 2)} "
                f"| {fmt(cell['tool_consume.broker_cpu_us_per_message'], 2)} "
                f"| {fmt(cell['tool_produce.client_cpu_us_per_message'], 2)} / "
                f"{fmt(cell['tool_consume.client_cpu_us_per_message'], 2)} "
                f"| {cell['rounds_ok']}/{args['rounds']} |"
            )
    lines += [
        "",
        "The Java producer's own view (--print-metrics, its last 30 s) and the CPU every other "
        "process on the machine used meanwhile (100% = one CPU):",
        "",
        "| broker | size | records/request | request latency ms | other CPU produce "
        "| other CPU consume |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        for broker in brokers:
            cell = med[broker][str(size)]
            lines.append(
                f"| {broker} | {size} B | {fmt(cell['tool_produce.records_per_request'])} "
                f"| {fmt(cell['tool_produce.request_latency_ms'], 1)} "
                f"| {fmt(percent(cell['tool_produce.other_cpu_util']))}% "
                f"| {fmt(percent(cell['tool_consume.other_cpu_util']))}% |"
            )
    idle = [
        f"{broker} {med[broker]['idle_cpu_util'] * 100:.1f}%"
        for broker in brokers
        if med[broker]["idle_cpu_util"] is not None
    ]
    if idle:
        lines += ["", f"Idle broker CPU (after the warm-up): {', '.join(idle)}."]
    return lines


def ratio_lines(result: dict[str, Any]) -> list[str]:
    """Weir / each peer: throughput and broker CPU per message, for every generator."""
    args = result["args"]
    brokers, sizes, generators = args["brokers"], args["sizes"], args["generators"]
    med = result["medians"]
    peers = [b for b in brokers if b != "weir"]
    if "weir" not in brokers or not peers:
        return []
    phases = []
    if "confluent" in generators:
        phases += [("confluent", "produce"), ("confluent", "consume")]
    if "kafka-tools" in generators:
        phases += [("kafka-tools", "tool_produce"), ("kafka-tools", "tool_consume")]
    lines = [
        "",
        "Weir / peer (throughput: above 1 = Weir faster; broker CPU per message: "
        "below 1 = Weir cheaper):",
        "",
        "| peer | generator | size | produce msgs/s | consume msgs/s "
        "| broker CPU/msg produce | broker CPU/msg consume |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for peer in peers:
        for generator in dict.fromkeys(g for g, _ in phases):
            produce, consume = [phase for g, phase in phases if g == generator]
            for size in sizes:
                w, p = med["weir"][str(size)], med[peer][str(size)]

                def ratio(key: str, w: dict[str, Any] = w, p: dict[str, Any] = p) -> str:
                    return ratio_text(w[key], p[key])

                lines.append(
                    f"| Weir/{peer} | {generator} | {size} B "
                    f"| {ratio(f'{produce}.msgs_per_s')} | {ratio(f'{consume}.msgs_per_s')} "
                    f"| {ratio(f'{produce}.broker_cpu_us_per_message')} "
                    f"| {ratio(f'{consume}.broker_cpu_us_per_message')} |"
                )
    return lines


def confluent_report_lines(result: dict[str, Any]) -> list[str]:
    """The confluent-kafka workloads: throughput, latency, requests, paced latency."""
    args = result["args"]
    brokers, sizes = args["brokers"], args["sizes"]
    med = result["medians"]
    lines = [
        f"confluent-kafka in this process, median of {args['rounds']} rounds, "
        f"{args['messages']:,} messages per size, {args['partitions']} partitions, "
        f"acks={args['acks']}, linger.ms={args['linger_ms']}, "
        f"batch.size={args['batch_size']}. MB = 10^6 bytes of message payload.",
        "",
        "| broker | size | produce msgs/s | produce MB/s | p50 ms | p99 ms | max ms "
        "| consume msgs/s | consume MB/s | CPU broker/client produce "
        "| CPU broker/client consume | broker CPU µs/msg produce / consume | rounds ok |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def cpu(cell: dict[str, Any], phase: str) -> str:
        broker_cpu, client_cpu = cell[f"{phase}.broker_cpu_util"], cell[f"{phase}.client_cpu_util"]
        if broker_cpu is None or client_cpu is None:
            return "—"
        return f"{broker_cpu * 100:.0f}% / {client_cpu * 100:.0f}%"

    for size in sizes:
        for broker in brokers:
            cell = med[broker][str(size)]
            lines.append(
                f"| {broker} | {size} B | {fmt(cell['produce.msgs_per_s'])} "
                f"| {fmt(cell['produce.MB_per_s'], 1)} | {fmt(cell['produce.latency_p50_ms'], 2)} "
                f"| {fmt(cell['produce.latency_p99_ms'], 2)} "
                f"| {fmt(cell['produce.latency_max_ms'], 1)} "
                f"| {fmt(cell['consume.msgs_per_s'])} | {fmt(cell['consume.MB_per_s'], 1)} "
                f"| {cpu(cell, 'produce')} | {cpu(cell, 'consume')} "
                f"| {fmt(cell['produce.broker_cpu_us_per_message'], 2)} / "
                f"{fmt(cell['consume.broker_cpu_us_per_message'], 2)} "
                f"| {cell['rounds_ok']}/{args['rounds']} |"
            )
    lines += [
        "",
        "CPU = process CPU time / wall time (100% = one core of "
        f"{result['machine']['cpus']}); client = this Python process incl. librdkafka threads.",
    ]
    lines += [
        "",
        "Produce requests (librdkafka's count) and the broker CPU they cost:",
        "",
        "| broker | size | workload | requests/s | records/request | broker CPU µs/request "
        "| kernel share of broker CPU |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for size in sizes:
        for broker in brokers:
            cell = med[broker][str(size)]
            cpu_total, cpu_sys = cell["produce.broker_cpu_s"], cell["produce.broker_cpu_system_s"]
            kernel = (
                f"{cpu_sys / cpu_total * 100:.0f}%" if cpu_total and cpu_sys is not None else "—"
            )
            requests_per_s = fmt(cell["produce.produce_requests_per_s"])
            lines.append(
                f"| {broker} | {size} B | throughput | {requests_per_s} "
                f"| {fmt(cell['produce.records_per_request'])} "
                f"| {fmt(cell['produce.broker_cpu_us_per_request'])} | {kernel} |"
            )
            if args["paced_rate"] > 0:
                lines.append(
                    f"| {broker} | {size} B | paced | {fmt(cell['paced.produce_requests_per_s'])} "
                    f"| — | {fmt(cell['paced.broker_cpu_us_per_request'])} | — |"
                )
    if args["paced_rate"] > 0:
        lines += [
            "",
            f"Latency at a fixed {args['paced_rate']:,.0f} msgs/s for {args['paced_seconds']} s "
            "(produce() to delivery callback):",
            "",
            "| broker | size | p50 ms | p99 ms | max ms | broker CPU |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for size in sizes:
            for broker in brokers:
                cell = med[broker][str(size)]
                lines.append(
                    f"| {broker} | {size} B | {fmt(cell['paced.latency_p50_ms'], 2)} "
                    f"| {fmt(cell['paced.latency_p99_ms'], 2)} "
                    f"| {fmt(cell['paced.latency_max_ms'], 1)} "
                    f"| {fmt((cell['paced.broker_cpu_util'] or 0) * 100)}% |"
                )
    return lines


def markdown_report(result: dict[str, Any]) -> str:
    args = result["args"]
    brokers, sizes = args["brokers"], args["sizes"]
    med = result["medians"]
    lines: list[str] = []
    if "confluent" in args["generators"]:
        lines += confluent_report_lines(result)
    if "kafka-tools" in args["generators"]:
        lines += tool_report_lines(result)
    lines += ratio_lines(result)
    loads = [
        f"{p['broker']} r{p['round']} {p['loadavg_start'][0]:.1f}"
        for p in result["passes"]
        if p.get("loadavg_start")
    ]
    if loads:
        lines += ["", f"1-minute load average when each pass started: {', '.join(loads)}."]
    limits = result["limit_medians"]
    if limits["fio"] or limits["iperf3"]:
        lines += ["", "Physical limits measured in the same run (median of rounds):", ""]
        if limits["fio"]:
            lines += [
                "| fio seq write + fdatasync | MB/s | fdatasyncs/s | fdatasync p50 ms "
                "| fdatasync p99 ms | fdatasync max ms |",
                "|---|---:|---:|---:|---:|---:|",
            ]
            for block_size, f in limits["fio"].items():
                lines.append(
                    f"| bs={block_size} | {fmt(f['write_MBps'], 1)} | {fmt(f['write_iops'])} "
                    f"| {fmt(f['fdatasync_p50_ms'], 3)} | {fmt(f['fdatasync_p99_ms'], 3)} "
                    f"| {fmt(f['fdatasync_max_ms'], 2)} |"
                )
        if limits["iperf3"]:
            lines += [
                "",
                f"iperf3 loopback, 1 stream: {limits['iperf3']['loopback_Gbps']:.1f} Gbit/s "
                f"({limits['iperf3']['loopback_MBps']:,.0f} MB/s)",
            ]
    for broker in brokers:
        errors = med[broker]["start_errors"] + [
            e for size in sizes for e in med[broker][str(size)]["errors"]
        ]
        if errors:
            lines += ["", f"**{broker} errors:**", ""]
            lines += [f"- {e.splitlines()[0][:300]}" for e in errors]
    for p in result["passes"]:
        if not p.get("profile"):
            continue
        for size, sample in p["sizes"].items():
            for phase in ("produce", "consume", "paced"):
                spy = sample.get(f"py_spy_{phase}")
                if not spy or not spy.get("samples"):
                    continue
                threads = ", ".join(f"{t}: {c}" for t, c in spy["threads"].items())
                lines += [
                    "",
                    f"py-spy, {p['broker']} {p.get('security', 'plaintext').upper()} "
                    f"{size} B {phase} ({spy['samples']} busy samples; "
                    f"{threads}). Top self time on the event-loop thread:",
                    "",
                    "| % of loop samples | samples | function |",
                    "|---:|---:|---|",
                ]
                lines += [
                    f"| {pct} | {c} | `{f}` |"
                    for f, c, pct in spy["top_self_event_loop"][: args["py_spy_top"]]
                ]
    return "\n".join(lines)
