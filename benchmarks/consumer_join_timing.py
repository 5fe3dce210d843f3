"""When does each member of a new KIP-848 consumer group first get partitions?

    .venv/bin/python benchmarks/consumer_join_timing.py                  # this tree
    .venv/bin/python benchmarks/consumer_join_timing.py --tree /tmp/weir-before
    .venv/bin/python benchmarks/consumer_join_timing.py --bootstrap 127.0.0.1:19092  # Kafka

Starts `weir serve` on a fresh data dir (with `--tree`'s code on PYTHONPATH), or uses
the broker at `--bootstrap` (the Kafka peer of `benchmarks/kafka_peer.py`), creates a
fresh topic of `--partitions` partitions, and starts `--consumers` confluent-kafka
consumers of one group (`group.protocol=consumer`, one thread each) at once. Prints,
as one JSON line, the seconds from their start to each member's first non-empty
assignment (its `on_assign`) and what that assignment was, once `--partitions` members
have partitions or after `--wait-s`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parent.parent
WEIR_BIN = REPO_ROOT / ".venv" / "bin" / "weir"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO_ROOT, help="Weir source tree to run")
    parser.add_argument("--bootstrap", help="an already running broker instead of weir serve")
    parser.add_argument("--weir-bin", type=Path, default=WEIR_BIN)
    parser.add_argument("--consumers", type=int, default=16)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--wait-s", type=float, default=15.0)
    parser.add_argument("--kafka-port", type=int, default=29292)
    parser.add_argument("--http-port", type=int, default=29290)
    return parser.parse_args()


def start_weir(args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], str]:
    data_dir = tempfile.mkdtemp(prefix="weir-join-")
    bootstrap = f"127.0.0.1:{args.kafka_port}"
    with open(f"{data_dir}.log", "wb") as log_file:
        proc = subprocess.Popen(
            [str(args.weir_bin), "serve", "--data-dir", data_dir, "--kafka-listen", bootstrap,
             "--http-listen", f"127.0.0.1:{args.http_port}"],
            stdout=log_file, stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONPATH=str(args.tree.resolve())),
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{args.http_port}/health/ready", timeout=1
            ):
                return proc, bootstrap
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("weir did not become ready")


def join(bootstrap: str, args: argparse.Namespace) -> dict[int, tuple[float, list[int]]]:
    topic = f"join-{time.time_ns()}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
        future.result(30)
    time.sleep(1)  # the topic in every broker's metadata before the group forms
    first: dict[int, tuple[float, list[int]]] = {}
    stop = threading.Event()
    started = time.monotonic()

    def consume(index: int) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                             "group.protocol": "consumer"})  # fmt: skip

        def on_assign(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
            if partitions and index not in first:
                first[index] = (time.monotonic() - started, sorted(p.partition for p in partitions))

        consumer.subscribe([topic], on_assign=on_assign)
        while not stop.is_set():
            consumer.poll(0.1)
        consumer.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(args.consumers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + args.wait_s
    while time.monotonic() < deadline and len(first) < min(args.consumers, args.partitions):
        time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join()
    return first


def main() -> None:
    args = parse_args()
    proc, bootstrap = (None, args.bootstrap) if args.bootstrap else start_weir(args)
    try:
        first = join(bootstrap, args)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
    ordered = sorted(first.values())
    print(json.dumps({
        "members_with_partitions": len(first),
        "first_assignment_s": [round(at, 2) for at, _ in ordered],
        "assignments": [parts for _, parts in ordered],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
