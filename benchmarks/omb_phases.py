"""One broker's pass of an `omb.py` round: start it, warm it up, then the workloads
(max-rate produce per size and partition count, a backlog fill and drain per size,
a fixed-rate produce at a fraction of the broker's own max rate, and one with
consumers reading along for end-to-end latency), every one with `benchmarks/loadgen`
on a fresh topic; stop it.

The generator prints "MARK <phase> start|end" around each measured window; the CPU
of the broker (its process tree), of the generator and of the machine is read from
/proc at those lines, and Weir's fsync-round histogram from its `/metrics`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from go_build import GO_CACHE, build_go_tool
from side_by_side.brokers import (
    REPO_ROOT,
    BrokerError,
    BrokerProcess,
    scrape_counters,
    start_broker,
    tail,
)
from side_by_side.confluent_load import create_topic
from side_by_side.cpu import idle_cpu_util, machine_cpu_seconds, proc_cpu_seconds
from side_by_side.progress import log

GENERATOR_DIR = REPO_ROOT / "benchmarks" / "loadgen"
GENERATOR_BIN = GO_CACHE / "loadgen"
FSYNC_SERIES = "weir_fsync_round_seconds"


def build_generator() -> Path:
    return build_go_tool(GENERATOR_DIR)


@dataclass(frozen=True)
class Reading:
    """CPU seconds and the clock at one MARK line."""

    broker_s: float
    generator_s: float
    machine_s: float
    wall_s: float
    fsync: dict[str, float]


def read_now(broker: BrokerProcess, generator_pid: int, fsync: dict[str, float]) -> Reading:
    return Reading(
        sum(proc_cpu_seconds(broker.proc.pid)),
        sum(proc_cpu_seconds(generator_pid)),
        machine_cpu_seconds(),
        time.perf_counter(),
        fsync,
    )


def fsync_series(broker: BrokerProcess) -> dict[str, float]:
    """Weir's fsync-round histogram series (buckets, _sum, _count); {} for the others."""
    url = broker.extra.get("metrics_url")
    return {k: v for k, v in scrape_counters(url).items() if k.startswith(FSYNC_SERIES)}


def fsync_figures(before: dict[str, float], after: dict[str, float]) -> dict[str, float] | None:
    """Rounds, mean and p99 (bucket upper bound) of the fsync rounds between two scrapes."""
    rounds = after.get(f"{FSYNC_SERIES}_count", 0) - before.get(f"{FSYNC_SERIES}_count", 0)
    if rounds <= 0:
        return None
    seconds = after[f"{FSYNC_SERIES}_sum"] - before.get(f"{FSYNC_SERIES}_sum", 0)
    buckets = sorted(
        (float(name.split('le="')[1].rstrip('"}')), after[name] - before.get(name, 0))
        for name in after
        if name.startswith(f"{FSYNC_SERIES}_bucket")
    )
    p99_s = next((le for le, count in buckets if count >= 0.99 * rounds), float("inf"))
    return {"rounds": rounds, "mean_ms": seconds / rounds * 1e3, "p99_le_ms": p99_s * 1e3}


def window_figures(start: Reading, end: Reading, records: int, cpus: int) -> dict[str, Any]:
    wall_s = end.wall_s - start.wall_s
    broker_s = end.broker_s - start.broker_s
    generator_s = end.generator_s - start.generator_s
    figures: dict[str, Any] = {
        "window_s": wall_s,
        "broker_cpu_s": broker_s,
        "broker_cpu_util": broker_s / wall_s,
        "generator_cpu_util": generator_s / wall_s,
        "machine_idle_util": cpus - (end.machine_s - start.machine_s) / wall_s,
        "broker_cpu_us_per_msg": broker_s / records * 1e6 if records else None,
        "generator_cpu_us_per_msg": generator_s / records * 1e6 if records else None,
    }
    fsync = fsync_figures(start.fsync, end.fsync)
    if fsync:
        figures["fsync"] = fsync
    return figures


def run_generator(
    broker: BrokerProcess, options: list[str], timeout_s: float
) -> tuple[dict[str, Any], dict[str, tuple[Reading, Reading]]]:
    """Run the generator; returns its report and a (start, end) Reading per phase."""
    command = [str(GENERATOR_BIN), "-bootstrap", broker.bootstrap, *options]
    command += ["-timeout", f"{int(timeout_s)}s"]
    starts: dict[str, Reading] = {}
    windows: dict[str, tuple[Reading, Reading]] = {}
    report: dict[str, Any] | None = None
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
        assert proc.stdout is not None
        watchdog = threading.Timer(timeout_s + 30, proc.kill)
        watchdog.start()
        try:
            for line in proc.stdout:
                if line.startswith("MARK "):
                    _mark, phase, edge = line.split()
                    # the scrapes sit outside the CPU readings: before a start, after an end
                    if edge == "start":
                        starts[phase] = read_now(broker, proc.pid, fsync_series(broker))
                    else:
                        end = read_now(broker, proc.pid, {})
                        windows[phase] = (starts[phase], replace(end, fsync=fsync_series(broker)))
                elif line.startswith("{"):
                    report = json.loads(line)
            code = proc.wait()
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if code != 0 or report is None:
            stderr.seek(0)
            message = stderr.read().decode(errors="replace")[-1500:]
            raise BrokerError(f"loadgen {' '.join(options)} exited {code}: {message}")
    return report, windows


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{int(time.time() * 1000) % 10_000_000}"


def generator_options(
    args: argparse.Namespace, topic: str, size: int, partitions: int
) -> list[str]:
    return [
        "-topic", topic, "-partitions", str(partitions), "-value-bytes", str(size),
        "-producers", str(args.producers), "-consumers", str(args.consumers),
        "-linger", f"{args.linger_ms}ms", "-batch-bytes", str(args.batch_bytes),
        "-inflight", str(args.inflight), "-max-versions", args.max_versions,
    ]  # fmt: skip


def raw_options(args: argparse.Namespace) -> list[str]:
    """loadgen's -raw (batches built by the generator, fetches counted from batch
    headers) unless --client-produce (franz-go's producer and consumer)."""
    return [] if args.client_produce else ["-raw"]


class Pass:
    """One broker, one round: the workloads in order, each a sample dict."""

    def __init__(self, broker: BrokerProcess, args: argparse.Namespace, round_no: int) -> None:
        self.broker, self.args, self.round_no = broker, args, round_no
        self.cpus = os.cpu_count() or 1
        self.samples: list[dict[str, Any]] = []

    def topic(self, prefix: str, partitions: int) -> str:
        topic = unique_topic(f"{prefix}-r{self.round_no}")
        create_topic(self.broker.bootstrap, topic, partitions, self.args.phase_timeout)
        return topic

    def measure(
        self, workload: str, size: int, partitions: int, options: list[str], prefix: str
    ) -> dict[str, Any]:
        """Run one generator invocation on a fresh topic; one sample per window."""
        topic = self.topic(prefix, partitions)
        opts = generator_options(self.args, topic, size, partitions) + options
        report, windows = run_generator(self.broker, opts, self.args.phase_timeout)
        for phase, (start, end) in windows.items():
            result = report[phase if phase in report else "produce"]
            sample = {
                "broker": self.broker.name,
                "round": self.round_no,
                "workload": workload,
                "phase": phase,
                "value_bytes": size,
                "partitions": partitions,
                **{k: v for k, v in result.items() if k not in ("per_consumer",)},
                **window_figures(start, end, int(result["records"]), self.cpus),
                "loadavg": os.getloadavg()[0],
            }
            if "consume" in report and workload == "e2e":
                sample["e2e_latency"] = report["consume"].get("latency")
                sample["e2e_records"] = report["consume"]["records"]
            self.samples.append(sample)
            log(sample_line(sample))
        return report

    def warm_up(self) -> None:
        """Unmeasured: a fill and drain of the smallest size (the JVM's JIT, caches)."""
        size = min(self.args.sizes)
        topic = self.topic("warmup", self.args.main_partitions)
        opts = generator_options(self.args, topic, size, self.args.main_partitions)
        opts += ["-mode", "backlog", "-records", str(self.args.warmup_records), "-duration", "10s"]
        opts += raw_options(self.args)
        run_generator(self.broker, opts, self.args.phase_timeout)

    def max_rate(self) -> dict[int, float]:
        """Produce as fast as the broker takes it; returns records/s per size at
        the main partition count (the fixed-rate phase runs at a fraction of it)."""
        rates: dict[int, float] = {}
        for size in self.args.sizes:
            for partitions in self.args.partitions:
                opts = ["-mode", "produce", "-duration", f"{self.args.produce_seconds}s"]
                opts += raw_options(self.args)
                report = self.measure("max-rate", size, partitions, opts, f"max-{size}b")
                if partitions == self.args.main_partitions:
                    rates[size] = report["produce"]["records_per_s"]
        return rates

    def backlog(self) -> None:
        for size in self.args.sizes:
            records = self.args.backlog_records[size]
            opts = ["-mode", "backlog", "-records", str(records), *raw_options(self.args)]
            report = self.measure("backlog", size, self.args.main_partitions, opts, f"bl-{size}b")
            drain, fill = report["drain"], report["fill"]
            if drain["timed_out"] or drain["records"] < fill["records"] + fill["primed"]:
                raise BrokerError(f"backlog {size} B: drained {drain['records']} of {fill}")

    def paced(self, workload: str, mode: str, fraction: float, max_rates: dict[int, float]) -> None:
        """A produce at `fraction` of this broker's max rate (same round, same size)."""
        for size in self.args.sizes:
            rate = max_rates[size] * fraction
            opts = [
                "-mode", mode, "-rate", f"{rate:.0f}",
                "-duration", f"{self.args.fixed_seconds + self.args.fixed_warmup_seconds}s",
                "-warmup", f"{self.args.fixed_warmup_seconds}s", *raw_options(self.args),
            ]  # fmt: skip
            self.measure(workload, size, self.args.main_partitions, opts, f"{workload}-{size}b")

    def fixed_rate(self, max_rates: dict[int, float]) -> None:
        """Produce latency at --fixed-rate-fraction of the max rate, nobody consuming."""
        self.paced("fixed-rate", "produce", self.args.fixed_rate_fraction, max_rates)

    def end_to_end(self, max_rates: dict[int, float]) -> None:
        """Send -> receive at --e2e-rate-fraction, consumers reading along."""
        self.paced("e2e", "e2e", self.args.e2e_rate_fraction, max_rates)


def sample_line(s: dict[str, Any]) -> str:
    latency = s.get("latency") or {}
    e2e = s.get("e2e_latency") or {}
    text = (
        f"  r{s['round']} {s['broker']:>5} {s['workload']:<10} {s['phase']:<7} "
        f"{s['value_bytes']:>5} B {s['partitions']:>3} p: {s['records_per_s']:>10,.0f} msg/s "
        f"{s['mb_per_s']:7.1f} MB/s, broker {s['broker_cpu_us_per_msg'] or 0:5.2f} µs/msg "
        f"({s['broker_cpu_util'] * 100:3.0f}%), generator {s['generator_cpu_util'] * 100:3.0f}%"
    )
    if latency:
        text += f", p99 {latency['p99_ms']:.1f} ms, p99.9 {latency['p99_9_ms']:.1f} ms"
    if e2e:
        text += f", e2e p99 {e2e['p99_ms']:.1f} ms"
    if "fsync" in s:
        text += f", fsync mean {s['fsync']['mean_ms']:.2f} ms"
    return text


def broker_pass(
    name: str, args: argparse.Namespace, run_dir: Path, round_no: int
) -> list[dict[str, Any]]:
    """Start `name`, run every workload, stop it; failures become an error sample."""
    broker = start_broker(name, args, run_dir, f"r{round_no}")
    log(f"{name}: ready in {broker.startup_s:.1f} s at {broker.bootstrap}")
    work = Pass(broker, args, round_no)
    try:
        work.warm_up()
        idle = idle_cpu_util(broker.proc.pid, args.idle_seconds)
        max_rates = work.max_rate()
        work.backlog()
        work.fixed_rate(max_rates)
        work.end_to_end(max_rates)
        work.samples.append(
            {"broker": name, "round": round_no, "workload": "idle", "broker_cpu_util": idle}
        )
    except (BrokerError, KafkaException, OSError, ValueError, KeyError) as exc:
        message = f"{type(exc).__name__}: {exc}"
        log(f"  r{round_no} {name}: {message}")
        work.samples.append({"broker": name, "round": round_no, "error": message})
    finally:
        stopped = broker.stop()
        if broker.proc.returncode not in (0, -15, 143):
            log(f"{name} stop: {stopped}; log tail:\n{tail(broker.log_path, 10)}")
        if broker.data_dir is not None:
            shutil.rmtree(broker.data_dir, ignore_errors=True)
    return work.samples


def write_json(path: Path, result: dict[str, Any]) -> None:
    path.write_text(json.dumps(result, indent=2, default=str))
