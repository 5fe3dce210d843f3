"""Broker CPU per consumed message for several builds side by side in one run.

Each `NAME=SOURCE_TREE[,SETTING=VALUE...]` gets its own `weir serve` (SETTING is a
broker setting given as its `WEIR_*` variable, e.g. `page_cache_window_bytes=-1`)
and an 8-partition topic, filled once by one confluent-kafka producer
(`--messages` of `--value-bytes`). Then, `--rounds` times, builds alternating
(reversed every other round), a fresh confluent-kafka (librdkafka) consumer
process assigns all partitions from the start and reads every message; the
broker's CPU over that read (its threads and child processes, from /proc) is
divided by the messages:

    .venv/bin/python benchmarks/consume_cost.py before=/tmp/weir-before after=. \\
        keep-all=.,page_cache_window_bytes=-1 --value-bytes 1024 --rounds 3

The fill leaves most of each partition outside the page cache with the default
`page_cache_window_bytes` (16 MiB per partition), so the read is a backlog drain
through the disk executor's cold reads; `page_cache_window_bytes=-1` keeps
everything cached, as Kafka does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from dataclasses import dataclass, field

from request_cost import cpu_ticks  # this directory
from source_builds import PYTHON, TOPIC, TOPIC_PARTITIONS, SourceBuild, parse_builds, start, stop

PRODUCER = """
import sys
from confluent_kafka import Producer
port, total, size, partitions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 20,
                     "batch.size": 1048576})
value = b"x" * size
for number in range(total):
    while True:
        try:
            producer.produce(sys.argv[5], value, partition=number % partitions)
            break
        except BufferError:
            producer.poll(0.05)
producer.flush()
"""

CONSUMER = """
import sys, time
from confluent_kafka import Consumer, TopicPartition
port, total, partitions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
timeout_s = float(sys.argv[5])
consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "consume-cost",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 100})
consumer.assign([TopicPartition(sys.argv[4], p, 0) for p in range(partitions)])
received, started = 0, time.monotonic()
while received < total and time.monotonic() - started < timeout_s:
    for message in consumer.consume(10000, 1.0):
        if not message.error():
            received += 1
print(received, time.monotonic() - started)
consumer.close()
"""
CONSUME_TIMEOUT_S = 180


@dataclass
class Measured:
    cpu_us_per_message: list[float] = field(default_factory=list)
    messages_per_s: list[float] = field(default_factory=list)


def with_settings(spec: str) -> tuple[str, dict[str, str]]:
    """`NAME=TREE,setting=value,...` -> (`NAME=TREE`, {WEIR_SETTING: value})."""
    build, *settings = spec.split(",")
    variables = {}
    for setting in settings:
        name, _, value = setting.partition("=")
        variables[f"WEIR_{name.upper()}"] = value
    return build, variables


def start_with(build: SourceBuild, variables: dict[str, str]) -> None:
    saved = dict(os.environ)
    os.environ.update(variables)
    try:
        start(build)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def consume_once(build: SourceBuild, args: argparse.Namespace) -> tuple[float, float]:
    """(broker CPU µs per message, messages/s) of one full read."""
    assert build.process is not None
    pid = build.process.pid
    before = sum(cpu_ticks(pid))
    result = subprocess.run(
        [str(PYTHON), "-c", CONSUMER, str(build.port), str(args.messages),
         str(TOPIC_PARTITIONS), TOPIC, str(CONSUME_TIMEOUT_S)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    ticks = sum(cpu_ticks(pid)) - before
    received, seconds = result.stdout.split()
    if int(received) != args.messages:
        raise SystemExit(f"{build.name}: the consumer read {received} of {args.messages}")
    cpu_us = ticks / os.sysconf("SC_CLK_TCK") * 1e6 / args.messages
    return cpu_us, args.messages / float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("builds", nargs="+", metavar="NAME=SOURCE_TREE[,SETTING=VALUE]")
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base-port", type=int, default=47300)
    args = parser.parse_args()
    specs = [with_settings(spec) for spec in args.builds]
    builds = parse_builds([build for build, _ in specs], args.base_port, "consume")
    measured = {build.name: Measured() for build in builds}
    print(f"uptime: {os.getloadavg()} load; {time.strftime('%H:%M:%S')}", flush=True)
    try:
        for build, (_, variables) in zip(builds, specs, strict=True):
            start_with(build, variables)
            subprocess.run(
                [str(PYTHON), "-c", PRODUCER, str(build.port), str(args.messages),
                 str(args.value_bytes), str(TOPIC_PARTITIONS), TOPIC],
                check=True,
            )  # fmt: skip
        for round_index in range(args.rounds):
            order = builds if round_index % 2 == 0 else builds[::-1]
            for build in order:
                cpu_us, rate = consume_once(build, args)
                measured[build.name].cpu_us_per_message.append(cpu_us)
                measured[build.name].messages_per_s.append(rate)
                print(f"round {round_index + 1} {build.name:>10}: {cpu_us:.2f} µs/message "
                      f"broker CPU, {rate:,.0f} messages/s", flush=True)  # fmt: skip
    finally:
        for build in builds:
            stop(build)
    print(f"\nmedians over {args.rounds} rounds ({args.messages:,} messages of "
          f"{args.value_bytes} B, {TOPIC_PARTITIONS} partitions):")  # fmt: skip
    base = statistics.median(measured[builds[0].name].cpu_us_per_message)
    for build in builds:
        cpu_us = statistics.median(measured[build.name].cpu_us_per_message)
        rate = statistics.median(measured[build.name].messages_per_s)
        print(f"  {build.name:>10}: {cpu_us:.2f} µs/message ({cpu_us / base:.2f}x of "
              f"{builds[0].name}), {rate:,.0f} messages/s")  # fmt: skip


if __name__ == "__main__":
    main()
