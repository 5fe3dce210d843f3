"""What an open web console costs the Kafka request path: produce and fetch
throughput and the broker's CPU per message with no console open, side by side
(alternating rounds, one broker) with headless Chromium showing console pages
that refresh (their own polling, plus a reload every --reload-s).

    PYTHONPATH=. .venv/bin/python benchmarks/console_overhead.py --messages 1000000 --rounds 3

Each round produces --messages records of --value-bytes with confluent-kafka
(acks=all) to a fresh 4-partition topic, then reads them back with a consumer,
and reports records/s and the broker's CPU (user + system of its process) per
record for each phase. The console's cost is whatever the "open" rounds spend
beyond the "closed" ones: its API calls run on the same broker.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import rest_produce  # noqa: E402
from compat_tests.console_browser import console_browser  # noqa: E402

PARTITIONS = 4
CONSOLE_PAGES = ("/console/overview", "/console/topics", "/console/groups")


class Broker(rest_produce.Broker):
    """benchmarks/rest_produce.py's broker, with PARTITIONS-partition topics."""

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def topic(self, name: str) -> str:
        self.admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(timeout=10)
        return name

    def console_requests(self) -> float:
        text = urllib.request.urlopen(self.http_url + "/metrics", timeout=5).read().decode()
        return sum(
            float(row.rsplit(" ", 1)[1])
            for row in text.splitlines()
            if row.startswith('weir_http_requests_total{surface="console')
        )


def produce(broker: Broker, topic: str, count: int, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value, key=str(i % 1000).encode())
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(60) == 0


def consume(broker: Broker, topic: str, count: int) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "overhead-" + topic,
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    received = 0
    deadline = time.monotonic() + 120
    try:
        while received < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1.0):
                if message.error() is None:
                    received += 1
    finally:
        consumer.close()
    assert received == count, (received, count)


def measure(broker: Broker, run: object, count: int) -> tuple[float, float]:
    """(records/s, broker CPU µs per record) of one phase."""
    assert callable(run)
    cpu_before = rest_produce.cpu_seconds(broker.process.pid)
    started = time.perf_counter()
    run()
    elapsed_s = time.perf_counter() - started
    return count / elapsed_s, (
        rest_produce.cpu_seconds(broker.process.pid) - cpu_before
    ) / count * 1e6


@contextmanager
def console_open(broker: Broker, reload_s: float) -> Iterator[None]:
    """Chromium on the console, cycling its pages every reload_s until the block ends."""
    stop = threading.Event()
    with console_browser(broker.http_url, Path(tempfile.mkdtemp(prefix="chromium-"))) as browser:

        def cycle() -> None:
            i = 0
            while not stop.is_set():
                browser.open(CONSOLE_PAGES[i % len(CONSOLE_PAGES)])
                i += 1
                stop.wait(reload_s)

        thread = threading.Thread(target=cycle, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reload-s", type=float, default=5.0)
    args = parser.parse_args()
    value = b"v" * args.value_bytes
    broker = Broker()
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        produce(broker, broker.topic("warm-up"), args.messages // 4, value)
        for round_index in range(args.rounds):
            for console in ("closed", "open"):
                topic = broker.topic(f"overhead-{console}-{round_index}")
                requests_before = broker.console_requests()
                context = console_open(broker, args.reload_s) if console == "open" else None
                if context is not None:
                    context.__enter__()
                    time.sleep(2)  # the first pages loaded
                try:
                    for phase, run in (
                        ("produce", lambda t=topic: produce(broker, t, args.messages, value)),
                        ("fetch", lambda t=topic: consume(broker, t, args.messages)),
                    ):
                        rate, cpu_us = measure(broker, run, args.messages)
                        results.setdefault((console, phase), []).append((rate, cpu_us))
                        print(f"round {round_index + 1} console {console:6} {phase:7} "
                              f"{rate:9.0f} records/s  broker CPU {cpu_us:6.2f} µs/record",
                              flush=True)  # fmt: skip
                finally:
                    if context is not None:
                        context.__exit__(None, None, None)
                served = broker.console_requests() - requests_before
                print(f"round {round_index + 1} console {console:6} console requests: "
                      f"{served:.0f}", flush=True)  # fmt: skip
    finally:
        broker.stop()
    print(f"\nmedians ({args.messages} records of {args.value_bytes} B, {args.rounds} rounds):")
    for phase in ("produce", "fetch"):
        closed = results[("closed", phase)]
        opened = results[("open", phase)]
        rate_c = statistics.median(r for r, _ in closed)
        rate_o = statistics.median(r for r, _ in opened)
        cpu_c = statistics.median(c for _, c in closed)
        cpu_o = statistics.median(c for _, c in opened)
        print(f"  {phase:7} closed {rate_c:9.0f}/s {cpu_c:6.2f} µs  open {rate_o:9.0f}/s "
              f"{cpu_o:6.2f} µs  open/closed CPU {cpu_o / cpu_c:5.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
