"""The `kafka-tools` generator: Kafka's own kafka-producer-perf-test and
kafka-consumer-perf-test (`java -cp` over the kafka-tools jars, a JVM each), a
generator that is not Python, so it saturates the broker before itself. Broker,
tool and machine CPU are taken over each tool's whole run."""

from __future__ import annotations

import argparse
import resource
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import kafka_peer  # benchmarks/kafka_peer.py: benchmarks/ is on sys.path

from side_by_side.brokers import BrokerError
from side_by_side.cpu import machine_cpu_seconds, proc_cpu_seconds
from side_by_side.secured import PLAINTEXT_LOGIN, ClientLogin


@dataclass
class ToolRun:
    """One perf-tool JVM run: its stdout, and CPU over its whole run (JVM start included)."""

    stdout: str
    stderr: str
    wall_s: float
    broker_cpu_user_s: float
    broker_cpu_system_s: float
    tool_cpu_s: float
    machine_cpu_s: float


def run_tool(cmd: list[str], broker_pid: int, timeout_s: float, what: str) -> ToolRun:
    # the tool is the only child this process reaps meanwhile: RUSAGE_CHILDREN's delta
    # is its CPU (the broker is a child too, but it is reaped only when it stops)
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    broker_user0, broker_sys0 = proc_cpu_seconds(broker_pid)
    machine0 = machine_cpu_seconds()
    started = time.perf_counter()
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise BrokerError(f"{what}: no result after {timeout_s}s") from exc
    wall_s = time.perf_counter() - started
    broker_user1, broker_sys1 = proc_cpu_seconds(broker_pid)
    machine1 = machine_cpu_seconds()
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise BrokerError(
            f"{what} exited with code {done.returncode}: {(done.stderr or done.stdout)[-1500:]}"
        )
    return ToolRun(
        stdout=done.stdout,
        stderr=done.stderr,
        wall_s=wall_s,
        broker_cpu_user_s=broker_user1 - broker_user0,
        broker_cpu_system_s=broker_sys1 - broker_sys0,
        tool_cpu_s=(children1.ru_utime + children1.ru_stime)
        - (children0.ru_utime + children0.ru_stime),
        machine_cpu_s=machine1 - machine0,
    )


def login_arguments(login: ClientLogin) -> list[str]:
    """The tools' `--command-config`: the Java client's security settings. Not
    `--command-property`: the tools split a property at every `=`, and a
    `sasl.jaas.config` value holds several (the tool stops with "Invalid property")."""
    if login.java_properties is None:
        return []
    return ["--command-config", str(login.java_properties)]


def tool_cpu_figures(run: ToolRun, messages: int, active_s: float) -> dict[str, Any]:
    """Broker CPU over the tool's whole run, per message and per second of the tool's clock.

    The tool's JVM start and (consume) group join add wall time in which the broker
    only idles; `idle_cpu_util` of the pass bounds what that adds.
    """
    broker_cpu = run.broker_cpu_user_s + run.broker_cpu_system_s
    return {
        "wall_s": run.wall_s,
        "broker_cpu_s": broker_cpu,
        "broker_cpu_user_s": run.broker_cpu_user_s,
        "broker_cpu_system_s": run.broker_cpu_system_s,
        "broker_cpu_us_per_message": broker_cpu / messages * 1e6,
        "broker_cpu_util": broker_cpu / active_s,
        "client_cpu_s": run.tool_cpu_s,
        "client_cpu_us_per_message": run.tool_cpu_s / messages * 1e6,
        # everything else on the machine (other users' tests, this script): 100% = one CPU
        "other_cpu_util": max(0.0, run.machine_cpu_s - broker_cpu - run.tool_cpu_s) / run.wall_s,
    }


def producer_properties(args: argparse.Namespace) -> dict[str, str]:
    """The Java producer with the confluent workload's settings."""
    return {
        "acks": args.acks,
        "linger.ms": f"{args.linger_ms:g}",
        "batch.size": str(args.batch_size),
        "compression.type": "none",
        "enable.idempotence": "false",
    }


def producer_metric_figures(metrics: dict[str, float]) -> dict[str, Any]:
    return {
        "producer_metrics": metrics,
        "records_per_request": metrics.get("records-per-request-avg"),
        "request_latency_ms": metrics.get("request-latency-avg"),
    }


def tool_produce_workload(
    bootstrap: str,
    topic: str,
    args: argparse.Namespace,
    size: int,
    count: int,
    broker_pid: int,
    login: ClientLogin = PLAINTEXT_LOGIN,
) -> dict[str, Any]:
    """kafka-producer-perf-test: `count` records of `size` bytes, as fast as it goes."""
    cmd = [
        *kafka_peer.tool_command(
            args.kafka_jars, args.java, kafka_peer.PRODUCER_PERF_MAIN, args.tools_log4j
        ),
        *kafka_peer.producer_perf_args(bootstrap, topic, count, size, producer_properties(args)),
        *login_arguments(login),
    ]
    run = run_tool(cmd, broker_pid, args.phase_timeout, f"producer perf test to {topic}")
    try:
        summary = kafka_peer.parse_producer_perf(run.stdout)
    except kafka_peer.KafkaPeerError as exc:
        raise BrokerError(f"{exc}\nstderr: {run.stderr[-1500:]}") from exc
    if summary["records"] != count:
        raise BrokerError(f"producer perf test sent {summary['records']} of {count} records")
    rate = summary["records_per_s"]
    return {
        "messages": count,
        "msgs_per_s": rate,
        "MB_per_s": rate * size / 1e6,
        "elapsed_s": count / rate,
        "latency_p50_ms": summary["latency_p50_ms"],
        "latency_p99_ms": summary["latency_p99_ms"],
        "latency_max_ms": summary["latency_max_ms"],
        "latency_avg_ms": summary["latency_avg_ms"],
        **producer_metric_figures(kafka_peer.parse_producer_metrics(run.stdout)),
        **tool_cpu_figures(run, count, count / rate),
        "cmd": " ".join(cmd),
        "stderr_tail": run.stderr[-1000:],
    }


def tool_consume_workload(
    bootstrap: str,
    topic: str,
    args: argparse.Namespace,
    size: int,
    count: int,
    broker_pid: int,
    login: ClientLogin = PLAINTEXT_LOGIN,
) -> dict[str, Any]:
    """kafka-consumer-perf-test: one member subscribes in a fresh group, reads `count` records.

    Throughput is the tool's fetch figure, which leaves the group join out.
    """
    cmd = [
        *kafka_peer.tool_command(
            args.kafka_jars, args.java, kafka_peer.CONSUMER_PERF_MAIN, args.tools_log4j
        ),
        *kafka_peer.consumer_perf_args(
            bootstrap, topic, count, f"bench-perf-{topic}", timeout_ms=30_000
        ),
        *login_arguments(login),
    ]
    run = run_tool(cmd, broker_pid, args.phase_timeout, f"consumer perf test of {topic}")
    try:
        summary = kafka_peer.parse_consumer_perf(run.stdout)
    except kafka_peer.KafkaPeerError as exc:
        raise BrokerError(f"{exc}\nstderr: {run.stderr[-1500:]}") from exc
    if summary["records"] < count:
        raise BrokerError(f"consumer perf test read {summary['records']} of {count} records")
    rate = summary["fetch_records_per_s"]
    return {
        "messages": summary["records"],
        "msgs_per_s": rate,
        "MB_per_s": rate * size / 1e6,
        "elapsed_s": summary["fetch_ms"] / 1e3,
        "rebalance_ms": summary["rebalance_ms"],
        **tool_cpu_figures(run, count, summary["fetch_ms"] / 1e3),
        "cmd": " ".join(cmd),
        "stderr_tail": run.stderr[-1000:],
    }
