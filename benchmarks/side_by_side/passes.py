"""One broker's pass of a round: start it, warm it up (with kafka-tools), measure
its idle CPU, then for every message size the confluent phases (produce, consume,
paced) and the perf-tool phases, each on a fresh topic; stop it and record how."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from side_by_side.brokers import (
    BrokerError,
    BrokerProcess,
    counter_deltas,
    scrape_counters,
    start_broker,
    tail,
)
from side_by_side.confluent_load import consume_workload, create_topic, produce_workload
from side_by_side.cpu import idle_cpu_util
from side_by_side.perf_tools_load import tool_consume_workload, tool_produce_workload
from side_by_side.profiling import py_spy_recording, summarize_py_spy
from side_by_side.progress import log
from side_by_side.secured import PLAINTEXT


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{int(time.time() * 1000) % 10_000_000}"


def warm_up(broker: BrokerProcess, args: argparse.Namespace, tag: str) -> dict[str, Any]:
    """An unmeasured produce (perf tool) and consume (confluent-kafka, assign) at the smallest size.

    A fresh Kafka JVM runs its produce path at a fraction of its speed until the JIT
    has compiled it (seconds of CPU on this machine); every broker gets the same
    warm-up so none is measured cold. The consume uses assign(): no group join to wait
    for (Tansu's takes about 20 s).
    """
    topic = unique_topic(f"bench-warmup-{tag}")
    create_topic(broker.bootstrap, topic, args.partitions, args.phase_timeout, broker.login)
    size = min(args.sizes)
    log(f"{broker.name} {tag}: warm-up, {args.warmup_messages} records of {size} B")
    produced = tool_produce_workload(
        broker.bootstrap, topic, args, size, args.warmup_messages, broker.proc.pid, broker.login
    )
    consumed = consume_workload(
        broker.bootstrap,
        topic,
        args,
        args.warmup_messages,
        args.partitions,
        broker.proc.pid,
        broker.login,
    )
    log(
        f"  warm-up produce {produced['msgs_per_s']:,.0f} msgs/s, "
        f"consume {consumed['msgs_per_s']:,.0f} msgs/s"
    )
    return {"produce": produced, "consume": consumed}


def confluent_phases(
    broker: BrokerProcess,
    args: argparse.Namespace,
    run_dir: Path,
    size: int,
    tag: str,
    profile: bool,
    sample: dict[str, Any],
) -> None:
    """produce, consume and paced with confluent-kafka in this process; fills `sample`."""
    name, round_label = broker.name, tag
    topic = unique_topic(f"bench-{size}b-{tag}")
    sample["create_topic_s"] = create_topic(
        broker.bootstrap, topic, args.partitions, args.phase_timeout, broker.login
    )

    def spy(phase: str) -> contextlib.AbstractContextManager[None]:
        if not profile:
            return contextlib.nullcontext()
        raw_path = run_dir / f"py-spy-{name}-{broker.security}-{size}b-{phase}.txt"
        return py_spy_recording(broker.proc.pid, raw_path, args.py_spy_rate)

    with spy("produce"):
        log(f"{name} {round_label} {size}B: produce {args.messages} to {topic}")
        metrics_url = broker.extra.get("metrics_url")
        before = scrape_counters(metrics_url)
        sample["produce"] = produce_workload(
            broker.bootstrap,
            topic,
            args,
            size,
            args.messages,
            args.partitions,
            broker.proc.pid,
            login=broker.login,
        )
        sample["produce"]["broker_counters"] = counter_deltas(before, scrape_counters(metrics_url))
    broker.check_alive()
    log(
        f"  produce {sample['produce']['msgs_per_s']:,.0f} msgs/s "
        f"{sample['produce']['MB_per_s']:.1f} MB/s "
        f"p50 {sample['produce']['latency_p50_ms']:.2f} ms "
        f"p99 {sample['produce']['latency_p99_ms']:.2f} ms"
    )
    with spy("consume"):
        sample["consume"] = consume_workload(
            broker.bootstrap,
            topic,
            args,
            args.messages + args.partitions,
            args.partitions,
            broker.proc.pid,
            broker.login,
        )
    broker.check_alive()
    log(
        f"  consume {sample['consume']['msgs_per_s']:,.0f} msgs/s "
        f"{sample['consume']['MB_per_s']:.1f} MB/s"
    )
    if args.paced_rate > 0:
        paced_topic = topic + "-paced"
        create_topic(
            broker.bootstrap, paced_topic, args.partitions, args.phase_timeout, broker.login
        )
        paced_count = int(args.paced_rate * args.paced_seconds)
        with spy("paced"):
            sample["paced"] = produce_workload(
                broker.bootstrap,
                paced_topic,
                args,
                size,
                paced_count,
                args.partitions,
                broker.proc.pid,
                rate_per_s=args.paced_rate,
                login=broker.login,
            )
        log(
            f"  paced {args.paced_rate:.0f}/s: "
            f"p50 {sample['paced']['latency_p50_ms']:.2f} ms "
            f"p99 {sample['paced']['latency_p99_ms']:.2f} ms"
        )
    if profile:
        for phase in ("produce", "consume", "paced"):
            raw_path = run_dir / f"py-spy-{name}-{broker.security}-{size}b-{phase}.txt"
            sample[f"py_spy_{phase}"] = summarize_py_spy(raw_path, args.py_spy_top)
            sample[f"py_spy_{phase}"]["raw"] = str(raw_path)


def tool_phases(
    broker: BrokerProcess, args: argparse.Namespace, size: int, tag: str, sample: dict[str, Any]
) -> None:
    """produce and consume with Kafka's perf tools (their own JVMs); fills `sample`."""
    topic = unique_topic(f"bench-perf-{size}b-{tag}")
    create_topic(broker.bootstrap, topic, args.partitions, args.phase_timeout, broker.login)
    log(f"{broker.name} {tag} {size}B: producer perf test, {args.tool_messages} to {topic}")
    sample["tool_produce"] = tool_produce_workload(
        broker.bootstrap, topic, args, size, args.tool_messages, broker.proc.pid, broker.login
    )
    broker.check_alive()
    produced = sample["tool_produce"]
    log(
        f"  perf produce {produced['msgs_per_s']:,.0f} msgs/s {produced['MB_per_s']:.1f} MB/s, "
        f"broker {produced['broker_cpu_us_per_message']:.2f} µs CPU/msg"
    )
    sample["tool_consume"] = tool_consume_workload(
        broker.bootstrap, topic, args, size, args.tool_messages, broker.proc.pid, broker.login
    )
    broker.check_alive()
    consumed = sample["tool_consume"]
    log(
        f"  perf consume {consumed['msgs_per_s']:,.0f} msgs/s {consumed['MB_per_s']:.1f} MB/s, "
        f"broker {consumed['broker_cpu_us_per_message']:.2f} µs CPU/msg"
    )


def run_broker_pass(
    name: str,
    args: argparse.Namespace,
    run_dir: Path,
    round_no: int,
    profile: bool = False,
    security: str = PLAINTEXT,
) -> dict[str, Any]:
    tag = f"r{round_no}" if not profile else "profile"
    if security != PLAINTEXT:
        tag += f"-{security}"
    outcome: dict[str, Any] = {
        "broker": name,
        "security": security,
        "round": round_no,
        "sizes": {},
        "loadavg_start": os.getloadavg(),
    }
    try:
        broker = start_broker(name, args, run_dir, tag, security)
    except (BrokerError, OSError, KafkaException) as exc:
        outcome["error"] = f"start failed: {exc}"
        log(f"{name} {security} round {round_no}: {outcome['error']}")
        return outcome
    outcome["startup_s"] = broker.startup_s
    log(f"{name} ready in {broker.startup_s:.2f}s at {broker.bootstrap} ({security})")
    tools = "kafka-tools" in args.generators and not profile
    try:
        if tools and args.warmup_messages > 0:
            try:
                outcome["warmup"] = warm_up(broker, args, tag)
            except (BrokerError, KafkaException, OSError) as exc:
                outcome["warmup"] = {"error": str(exc)}
                log(f"{name} {tag} warm-up: {exc}")
        outcome["idle_cpu_util"] = idle_cpu_util(broker.proc.pid, args.idle_seconds)
        for size in args.sizes:
            sample: dict[str, Any] = {}
            outcome["sizes"][str(size)] = sample
            try:
                if "confluent" in args.generators or profile:
                    confluent_phases(broker, args, run_dir, size, tag, profile, sample)
                if tools:
                    tool_phases(broker, args, size, tag, sample)
            except (BrokerError, KafkaException, OSError) as exc:
                sample["error"] = str(exc)
                log(f"{name} {tag} size {size}: {exc}")
                if broker.proc.poll() is not None:
                    break
    finally:
        outcome["loadavg_end"] = os.getloadavg()
        outcome["stop"] = broker.stop()
        outcome["log_tail"] = tail(broker.log_path, 15)
        if broker.data_dir is not None:
            outcome["data_dir_bytes"] = sum(
                f.stat().st_size for f in broker.data_dir.rglob("*") if f.is_file()
            )
            if not args.keep_data:
                shutil.rmtree(broker.data_dir, ignore_errors=True)
    return outcome
