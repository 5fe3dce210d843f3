"""A three-broker Weir cluster (replication factor 3, acks=all) against one broker
(replication factor 1, acks=all), same client, same run; and failover time.

Run from the repository root (needs etcd: `apt-get install etcd-server`):

    .venv/bin/python benchmarks/cluster_throughput.py [--messages 200000] [--size 100]
                                                      [--rounds 3] [--failovers 5]

Each round starts a fresh single broker and a fresh cluster (etcd plus three
`weir serve` on loopback, all on this machine), alternating which goes first,
and produces `--messages` records of `--size` bytes with confluent-kafka
(idempotent, acks=all, linger 5 ms) round-robin over 8 partitions, recording
throughput and each record's latency from produce() to its delivery report.
Then, `--failovers` times, a fresh cluster takes a steady produce load, the
leader of partition 0 is SIGKILLed, and the time from the kill to the first
acknowledged write on a partition that broker led is recorded.

Prints a markdown table (medians over rounds) for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compat_tests.cluster_harness import running_cluster  # noqa: E402
from compat_tests.harness import WeirProcess  # noqa: E402

PARTITIONS = 8


def produce_run(bootstrap: str, topic: str, messages: int, size: int) -> dict[str, float]:
    latencies_s: list[float] = []
    failures = 0

    def report(error: KafkaError | None, message: Message, sent_at: float) -> None:
        nonlocal failures
        if error is not None:
            failures += 1
        else:
            latencies_s.append(time.perf_counter() - sent_at)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = b"x" * size
    started = time.perf_counter()
    for seq in range(messages):
        sent_at = time.perf_counter()
        while True:
            try:
                producer.produce(
                    topic,
                    payload,
                    partition=seq % PARTITIONS,
                    on_delivery=lambda e, m, t=sent_at: report(e, m, t),
                )
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed_s = time.perf_counter() - started
    latencies_s.sort()
    return {
        "messages_per_s": messages / elapsed_s,
        "p50_ms": 1000 * latencies_s[len(latencies_s) // 2],
        "p99_ms": 1000 * latencies_s[int(len(latencies_s) * 0.99)],
        "failures": float(failures),
    }


def create_topic(bootstrap: str, topic: str, replication_factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, replication_factor)])
    futures[topic].result(timeout=30)
    time.sleep(1)  # leaders and ISR settle


def single_round(base: Path, messages: int, size: int) -> dict[str, float]:
    broker = WeirProcess(base / "single" / "data", base / "single" / "logs")
    broker.start()
    try:
        create_topic(broker.bootstrap, "bench", 1)
        return produce_run(broker.bootstrap, "bench", messages, size)
    finally:
        broker.stop()


def cluster_round(base: Path, messages: int, size: int) -> dict[str, float]:
    with running_cluster(base / "cluster") as cluster:
        create_topic(cluster.bootstrap, "bench", 3)
        cluster.wait_full_isr("bench")
        return produce_run(cluster.bootstrap, "bench", messages, size)


def failover_once(base: Path) -> float:
    with running_cluster(base / "cluster") as cluster:
        create_topic(cluster.bootstrap, "failover", 3)
        cluster.wait_full_isr("failover")
        partitions = cluster.partitions("failover")
        victim = partitions[0].leader
        victim_partitions = {p for p, d in partitions.items() if d.leader == victim}
        acked: list[tuple[float, int]] = []
        stop = threading.Event()

        def load() -> None:
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 1})  # fmt: skip
            seq = 0
            while not stop.is_set():
                producer.produce("failover", b"v", partition=seq % PARTITIONS,
                                 on_delivery=lambda e, m: e is None and acked.append(
                                     (time.monotonic(), m.partition())))  # fmt: skip
                seq += 1
                producer.poll(0.002)
            producer.flush(60)

        thread = threading.Thread(target=load, daemon=True)
        thread.start()
        time.sleep(2)
        killed_at = time.monotonic()
        cluster.brokers[victim].kill()
        deadline = killed_at + 60
        while time.monotonic() < deadline:
            after = [t for t, p in list(acked) if t > killed_at and p in victim_partitions]
            if after:
                break
            time.sleep(0.01)
        stop.set()
        thread.join(70)
        firsts = [t for t, p in acked if t > killed_at and p in victim_partitions]
        return (min(firsts) - killed_at) if firsts else float("inf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--failovers", type=int, default=5)
    args = parser.parse_args()
    single: list[dict[str, float]] = []
    clustered: list[dict[str, float]] = []
    for round_index in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="weir-cluster-bench-") as tmp:
            base = Path(tmp)
            order = ["single", "cluster"] if round_index % 2 == 0 else ["cluster", "single"]
            for kind in order:
                if kind == "single":
                    single.append(single_round(base, args.messages, args.size))
                else:
                    clustered.append(cluster_round(base, args.messages, args.size))
                print(f"round {round_index + 1} {kind}: "
                      f"{(single if kind == 'single' else clustered)[-1]}", flush=True)  # fmt: skip
    failovers_s = []
    for attempt in range(args.failovers):
        with tempfile.TemporaryDirectory(prefix="weir-failover-") as tmp:
            failovers_s.append(failover_once(Path(tmp)))
            print(f"failover {attempt + 1}: {failovers_s[-1]:.2f} s", flush=True)

    def median(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    ratio = median(clustered, "messages_per_s") / median(single, "messages_per_s")
    print(f"\n{args.messages} x {args.size} B, acks=all, idempotent, {PARTITIONS} partitions, "
          f"medians of {args.rounds} alternating rounds\n")  # fmt: skip
    print("| setup | messages/s | p50 ms | p99 ms | failed |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in (("1 broker, RF 1", single), ("3 brokers, RF 3", clustered)):
        failed = sum(r["failures"] for r in runs)
        print(f"| {name} | {median(runs, 'messages_per_s'):,.0f} | {median(runs, 'p50_ms'):.1f} "
              f"| {median(runs, 'p99_ms'):.1f} | {failed:.0f} |")  # fmt: skip
    print(f"\ncluster / single throughput: {ratio:.2f}")
    if failovers_s:
        print(f"failover (kill -9 to first acknowledged write on its partitions): median "
              f"{statistics.median(failovers_s):.2f} s, worst {max(failovers_s):.2f} s "
              f"over {len(failovers_s)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
