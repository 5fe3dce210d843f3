"""Replicated produce: a three-broker Weir cluster (replication factor 3, acks=all)
against one broker (replication factor 1, acks=all) and against two brokers each
leading half the partitions (replication factor 1), same load, same run; what a
follower's fetch costs the leader per byte next to a consumer's; and failover time.

Run from the repository root (needs etcd: `apt-get install etcd-server`):

    PYTHONPATH=. .venv/bin/python benchmarks/cluster_throughput.py \\
        [--setups single,rf3,pair] [--sizes 100,1024] [--seconds 10] [--producers 2] \\
        [--rounds 2] [--fetch-cost-mb 400] [--profile] [--failovers 0]

Each round starts every setup fresh (etcd and `weir serve` processes on loopback,
all on this machine), the order alternating from one round to the next; each setup
produces, per size, for `--seconds` after a warm-up of a quarter of that, from
`--producers` confluent-kafka processes (idempotent, acks=all, linger 5 ms,
delivery reports for errors only, each record to the next of 8 partitions), so
the generator is several processes in C and Python rather than one. Throughput
is acknowledged records over the time from the start to the last flush; broker CPU
(every broker process with its threads and children, from /proc) and the
generator's own CPU are over the same window.

- `single`: one broker, replication factor 1 (no etcd);
- `rf3`: etcd and three brokers, replication factor 3, leaders spread by placement;
- `pair`: etcd and two brokers, replication factor 1: each leads half the
  partitions (one machine's second core used by a second broker).

`--fetch-cost-mb`: a cluster whose broker 1 leads all 8 partitions (replicas
[1, 2, 3]) takes that many MB while brokers 2 and 3 are down (acks=1); then two
consumer processes read it all from broker 1, brokers 2 and 3 are started and
catch up (two followers fetching the same bytes), and two consumers read it all
again. Broker 1's CPU per byte served, its idle CPU subtracted, is the cost of a
consumer's fetch and of a follower's fetch of the same data.

`--profile`: py-spy records the leader and a follower of one more `rf3` run
(1 KiB), and prints their top functions.

`--failovers N`: N times, a fresh cluster takes a steady produce load, the leader
of partition 0 is SIGKILLed, and the time from the kill to the first acknowledged
write on a partition it led is recorded.

Prints markdown tables (medians over rounds) for BENCHMARKS.md and writes the
measurements to benchmarks/results/cluster-throughput-<stamp>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from side_by_side.cpu import proc_cpu_seconds  # noqa: E402
from side_by_side.profiling import py_spy_recording, summarize_py_spy  # noqa: E402

from compat_tests.cluster_harness import TEST_CLUSTER_SETTINGS, running_cluster  # noqa: E402
from compat_tests.harness import WeirProcess  # noqa: E402

PARTITIONS = 8
RESULTS_DIR = Path(__file__).resolve().parent / "results"
DOCS_DIR = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
SETUPS = {
    "single": "1 broker, RF 1",
    "rf3": "3 brokers, RF 3",
    "pair": "2 brokers, RF 1 (each leads half)",
}
PRODUCE_BATCH = 1000  # records between clock checks
FLUSH_TIMEOUT_S = 120.0
PROFILE_RATE_HZ = 97


# -- the load: producer processes ------------------------------------------------------------


@dataclass(frozen=True)
class ProduceJob:
    bootstrap: str
    topic: str
    size: int
    seconds: float
    acks: str = "all"


def producer_main(job: ProduceJob, go: EventType, results: Any) -> None:
    """One producer process: connect, wait for `go`, produce for `job.seconds`, flush."""
    failures = 0

    def on_error(error: KafkaError | None, _message: object) -> None:
        nonlocal failures
        if error is not None:
            failures += 1

    idempotent = job.acks == "all"
    producer = Producer(
        {
            "bootstrap.servers": job.bootstrap,
            "enable.idempotence": idempotent,
            "acks": job.acks,
            "linger.ms": 5,
            # A bounded backlog: the flush after the run drains it in seconds.
            "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": 65_536,
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
    )
    producer.list_topics(job.topic, timeout=20)
    payload = b"x" * job.size
    go.wait()
    cpu_started_s = time.process_time()
    started = time.perf_counter()
    deadline = started + job.seconds
    sent = 0
    while time.perf_counter() < deadline:
        for _ in range(PRODUCE_BATCH):
            try:
                producer.produce(job.topic, payload, partition=sent % PARTITIONS)
            except BufferError:
                producer.poll(0.005)
                continue
            sent += 1
        producer.poll(0)
    unsent = producer.flush(FLUSH_TIMEOUT_S)
    elapsed_s = time.perf_counter() - started
    cpu_s = time.process_time() - cpu_started_s  # librdkafka's threads included
    results.put({"sent": sent, "failed": failures + unsent, "elapsed_s": elapsed_s, "cpu_s": cpu_s})


def run_producers(job: ProduceJob, processes: int, watched_pids: list[int]) -> dict[str, float]:
    """`processes` producers at once; records/s, bytes/s and the CPU of `watched_pids`
    (brokers, etcd) and of the producers over the window."""
    context = multiprocessing.get_context("spawn")
    go = context.Event()
    results = context.Queue()
    children = [
        context.Process(target=producer_main, args=(job, go, results), daemon=True)
        for _ in range(processes)
    ]
    for child in children:
        child.start()
    time.sleep(2.0)  # every producer connected and fetched metadata
    cpu_before = {pid: sum(proc_cpu_seconds(pid)) for pid in watched_pids}
    started = time.perf_counter()
    go.set()
    reports = [results.get(timeout=job.seconds + FLUSH_TIMEOUT_S + 30) for _ in children]
    elapsed_s = time.perf_counter() - started
    cpu_after = {pid: sum(proc_cpu_seconds(pid)) for pid in watched_pids}
    for child in children:
        child.join(30)
    acked = sum(r["sent"] - r["failed"] for r in reports)
    return {
        "records_per_s": acked / elapsed_s,
        "mb_per_s": acked * job.size / elapsed_s / 1e6,
        "records": float(acked),
        "failed": float(sum(r["failed"] for r in reports)),
        "elapsed_s": elapsed_s,
        "cpu_s": {str(pid): cpu_after[pid] - cpu_before[pid] for pid in watched_pids},
        "generator_cpu_s": sum(r["cpu_s"] for r in reports),
    }  # type: ignore[dict-item]


# -- the setups -------------------------------------------------------------------------------


@dataclass
class Deployment:
    bootstrap: str
    brokers: list[WeirProcess]
    etcd_pids: list[int]
    replication_factor: int

    @property
    def pids(self) -> list[int]:
        return [b.pid for b in self.brokers] + self.etcd_pids


@contextlib.contextmanager
def deployed(setup: str, base: Path, extra_settings: str = "") -> Iterator[Deployment]:
    """`extra_settings`: settings file lines added for every broker (TOML)."""
    if setup == "single":
        broker = WeirProcess.configured(base / "single", extra_settings)
        broker.start()
        try:
            yield Deployment(broker.bootstrap, [broker], [], 1)
        finally:
            broker.stop()
        return
    brokers_count, replication_factor = {"rf3": (3, 3), "pair": (2, 1)}[setup]
    settings = TEST_CLUSTER_SETTINGS + extra_settings
    with running_cluster(base / setup, brokers_count=brokers_count, settings=settings) as cluster:
        etcd_pids = [m.process.pid for m in cluster.etcd.members if m.process is not None]
        yield Deployment(
            cluster.bootstrap, list(cluster.brokers.values()), etcd_pids, replication_factor
        )


def create_topic(
    bootstrap: str,
    topic: str,
    replication_factor: int = 1,
    assignment: list[list[int]] | None = None,
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = (
        NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)
        if assignment
        else NewTopic(topic, PARTITIONS, replication_factor)
    )
    admin.create_topics([new])[topic].result(timeout=30)
    wait_led(bootstrap, topic, replication_factor if assignment is None else len(assignment[0]))


def wait_led(bootstrap: str, topic: str, replicas: int, timeout_s: float = 60.0) -> None:
    """Until every partition has a leader and a full ISR, as the cluster reports it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=10).topics.get(topic)
        if described is not None and described.error is None and described.partitions:
            parts = described.partitions.values()
            if all(p.leader >= 0 and len(p.isrs) == replicas for p in parts):
                return
        time.sleep(0.2)
    raise RuntimeError(f"{topic}: not every partition led with a full ISR in {timeout_s} s")


def measure_setup(setup: str, base: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with deployed(setup, base, args.extra_settings) as deployment:
        for size in args.sizes:
            topic = f"bench-{size}"
            create_topic(deployment.bootstrap, topic, deployment.replication_factor)
            warm = ProduceJob(deployment.bootstrap, topic, size, max(1.0, args.seconds / 4))
            run_producers(warm, args.producers, deployment.pids)
            job = ProduceJob(deployment.bootstrap, topic, size, args.seconds)
            result = run_producers(job, args.producers, deployment.pids)
            broker_pids = {str(b.pid) for b in deployment.brokers}
            cpu = result["cpu_s"]
            result["broker_cpu_s"] = sum(v for k, v in cpu.items() if k in broker_pids)
            result["etcd_cpu_s"] = sum(v for k, v in cpu.items() if k not in broker_pids)
            out[str(size)] = result
            print(
                f"  {setup} {size} B: {result['records_per_s']:,.0f} records/s, "
                f"{result['mb_per_s']:.1f} MB/s, broker CPU "
                f"{1e6 * result['broker_cpu_s'] / max(1.0, result['records']):.2f} µs/record, "
                f"failed {result['failed']:.0f}",
                flush=True,
            )
    return out


# -- follower fetches against consumer fetches -----------------------------------------------


def consumer_main(bootstrap: str, topic: str, ends: dict[int, int], results: Any) -> None:
    """Read every partition of `topic` from its start to `ends` (no group)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    left = {p: end for p, end in ends.items() if end > 0}
    count = 0
    while left:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error() is not None:
                continue
            count += 1
            partition, offset = message.partition(), message.offset()
            if partition in left and offset + 1 >= left[partition]:
                del left[partition]
    consumer.close()
    results.put(count)


def log_bytes(broker: WeirProcess, topic: str) -> int:
    return sum(p.stat().st_size for p in broker.data_dir.rglob(f"{topic}-*/*.log"))


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    ends = {}
    for partition in range(PARTITIONS):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        ends[partition] = high
    consumer.close()
    return ends


def idle_rate(pid: int, seconds: float = 3.0) -> float:
    before = sum(proc_cpu_seconds(pid))
    time.sleep(seconds)
    return (sum(proc_cpu_seconds(pid)) - before) / seconds


def consumers_cost(leader: WeirProcess, topic: str, readers: int) -> dict[str, float]:
    ends = end_offsets(leader.bootstrap, topic)
    idle = idle_rate(leader.pid)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    before = sum(proc_cpu_seconds(leader.pid))
    started = time.perf_counter()
    children = [
        context.Process(
            target=consumer_main, args=(leader.bootstrap, topic, ends, results), daemon=True
        )
        for _ in range(readers)
    ]
    for child in children:
        child.start()
    counts = [results.get(timeout=600) for _ in children]
    elapsed_s = time.perf_counter() - started
    cpu_s = sum(proc_cpu_seconds(leader.pid)) - before
    for child in children:
        child.join(30)
    return {"cpu_s": cpu_s - idle * elapsed_s, "elapsed_s": elapsed_s, "records": sum(counts)}


def followers_cost(cluster: Any, topic: str) -> dict[str, float]:
    leader = cluster.brokers[1]
    idle = idle_rate(leader.pid)
    before = sum(proc_cpu_seconds(leader.pid))
    started = time.perf_counter()
    for node in (2, 3):
        cluster.brokers[node].spawn()
    for node in (2, 3):
        cluster.brokers[node].wait_ready(120)
    wait_led(leader.bootstrap, topic, 3, timeout_s=600)
    elapsed_s = time.perf_counter() - started
    cpu_s = sum(proc_cpu_seconds(leader.pid)) - before
    return {"cpu_s": cpu_s - idle * elapsed_s, "elapsed_s": elapsed_s}


def fetch_cost(base: Path, megabytes: int, producers: int) -> dict[str, Any]:
    """Broker 1 leads every partition; its CPU per byte serving consumers and followers."""
    size = 1024
    with running_cluster(base / "fetch-cost") as cluster:
        leader = cluster.brokers[1]
        topic = "fetch-cost"
        create_topic(cluster.bootstrap, topic, assignment=[[1, 2, 3]] * PARTITIONS)
        for node in (2, 3):
            cluster.brokers[node].stop()
        wait_led(leader.bootstrap, topic, 1, timeout_s=60)
        # acks=1 into broker 1 alone, until `megabytes` are in its log.
        seconds_per_mb = 0.004
        while log_bytes(leader, topic) < megabytes * 1e6:
            job = ProduceJob(leader.bootstrap, topic, size, seconds_per_mb * megabytes, acks="1")
            run_producers(job, producers, [])
        stored = log_bytes(leader, topic)
        print(f"  fetch cost: {stored / 1e6:.0f} MB on broker 1", flush=True)
        results: dict[str, Any] = {"stored_bytes": stored}
        results["consumers_before"] = consumers_cost(leader, topic, 2)
        results["followers"] = followers_cost(cluster, topic)
        results["consumers_after"] = consumers_cost(leader, topic, 2)
        for name in ("consumers_before", "followers", "consumers_after"):
            entry = results[name]
            entry["cpu_ns_per_byte"] = 1e9 * entry["cpu_s"] / (2 * stored)
            entry["mb_per_s"] = 2 * stored / entry["elapsed_s"] / 1e6
            print(f"  fetch cost, {name}: {entry}", flush=True)
        return results


# -- the profile ------------------------------------------------------------------------------


def profile_rf3(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    with deployed("rf3", base) as deployment:
        create_topic(deployment.bootstrap, "profiled", 3)
        led = AdminClient({"bootstrap.servers": deployment.bootstrap}).list_topics(
            "profiled", timeout=10
        )
        leader_id = led.topics["profiled"].partitions[0].leader
        by_id = {int(b.extra_args[1]): b for b in deployment.brokers}
        leader = by_id[leader_id]
        follower = next(b for node, b in by_id.items() if node != leader_id)
        job = ProduceJob(deployment.bootstrap, "profiled", 1024, args.seconds)
        run_producers(ProduceJob(job.bootstrap, job.topic, job.size, 2.0), args.producers, [])
        profiles = base / "profiles"
        profiles.mkdir(parents=True, exist_ok=True)
        with (
            py_spy_recording(leader.pid, profiles / "leader.txt", PROFILE_RATE_HZ),
            py_spy_recording(follower.pid, profiles / "follower.txt", PROFILE_RATE_HZ),
        ):
            result = run_producers(job, args.producers, deployment.pids)
        return {
            "run": result,
            "leader": summarize_py_spy(profiles / "leader.txt", 25),
            "follower": summarize_py_spy(profiles / "follower.txt", 25),
        }


# -- failover ---------------------------------------------------------------------------------


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


# -- the report -------------------------------------------------------------------------------


def produce_table(runs: dict[str, list[dict[str, Any]]], sizes: list[int]) -> list[str]:
    lines = [
        "| setup | size | records/s | MB/s | vs 1 broker | broker CPU µs/record "
        "| etcd CPU µs/record | generator CPU µs/record | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        key = str(size)
        single = [r[key] for r in runs.get("single", [])]
        base_rate = statistics.median(r["records_per_s"] for r in single) if single else 0.0
        for setup, rounds in runs.items():
            cells = [r[key] for r in rounds]
            rate = statistics.median(c["records_per_s"] for c in cells)
            mb = statistics.median(c["mb_per_s"] for c in cells)

            def per_record(field: str, cells: list[dict[str, Any]] = cells) -> float:
                return statistics.median(1e6 * c[field] / max(1.0, c["records"]) for c in cells)

            ratio = f"{rate / base_rate:.2f}×" if base_rate else "-"
            failed = sum(c["failed"] for c in cells)
            lines.append(
                f"| {SETUPS[setup]} | {size} B | {rate:,.0f} | {mb:,.1f} | {ratio} "
                f"| {per_record('broker_cpu_s'):.2f} | {per_record('etcd_cpu_s'):.3f} "
                f"| {per_record('generator_cpu_s'):.2f} | {failed:.0f} |"
            )
    return lines


def plot_produce(runs: dict[str, list[dict[str, Any]]], sizes: list[int]) -> Path:
    """docs/benchmarks/cluster-produce.png: each setup's MB/s per size (median, and
    every round as a dot), relative to one broker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 3.8), squeeze=False)
    for axis, size in zip(axes[0], sizes, strict=True):
        names = list(runs)
        medians = [statistics.median(r[str(size)]["mb_per_s"] for r in runs[n]) for n in names]
        axis.bar(range(len(names)), medians, color="#8aa")
        for position, name in enumerate(names):
            axis.plot(
                [position] * len(runs[name]), [r[str(size)]["mb_per_s"] for r in runs[name]],
                "k.",
            )  # fmt: skip
        axis.set_xticks(range(len(names)), [SETUPS[n].split(" (")[0] for n in names], fontsize=8)
        axis.set(ylabel="MB/s acknowledged (acks=all)", title=f"{size} B records")
    figure.tight_layout()
    path = DOCS_DIR / "cluster-produce.png"
    DOCS_DIR.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--setups", default="single,rf3,pair")
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fetch-cost-mb", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--failovers", type=int, default=0)
    parser.add_argument(
        "--plot-from", type=Path, help="only draw docs/benchmarks/cluster-produce.png from a "
        "results file of an earlier run",
    )  # fmt: skip
    parser.add_argument(
        "--fsync-method", choices=("auto", "syncfs", "fdatasync"), default="auto",
        help="every broker's fsync_method (syncfs also writes back the other brokers' "
        "files when they share a filesystem)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.extra_settings = f'fsync_method = "{args.fsync_method}"\n'

    args.setups = [s for s in args.setups.split(",") if s]
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    unknown = set(args.setups) - set(SETUPS)
    if unknown:
        parser.error(f"unknown setups {sorted(unknown)}; known: {sorted(SETUPS)}")
    return args


def main() -> int:
    args = parse_args()
    if args.plot_from is not None:
        earlier = json.loads(args.plot_from.read_text())
        print(plot_produce(earlier["produce"], earlier["args"]["sizes"]))
        return 0
    report: dict[str, Any] = {"args": {k: v for k, v in vars(args).items()}}
    runs: dict[str, list[dict[str, Any]]] = {setup: [] for setup in args.setups}
    for round_index in range(args.rounds):
        order = args.setups if round_index % 2 == 0 else list(reversed(args.setups))
        for setup in order:
            print(f"round {round_index + 1}: {setup}", flush=True)
            with tempfile.TemporaryDirectory(prefix="weir-cluster-bench-") as tmp:
                runs[setup].append(measure_setup(setup, Path(tmp), args))
    report["produce"] = runs
    if args.fetch_cost_mb:
        with tempfile.TemporaryDirectory(prefix="weir-fetch-cost-") as tmp:
            report["fetch_cost"] = fetch_cost(Path(tmp), args.fetch_cost_mb, args.producers)
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="weir-cluster-profile-") as tmp:
            report["profile"] = profile_rf3(Path(tmp), args)
        for role in ("leader", "follower"):
            print(f"\n{role} (py-spy, 1 KiB, rf3):")
            print(json.dumps(report["profile"][role], indent=1)[:6000])
    failovers_s = []
    for attempt in range(args.failovers):
        with tempfile.TemporaryDirectory(prefix="weir-failover-") as tmp:
            failovers_s.append(failover_once(Path(tmp)))
            print(f"failover {attempt + 1}: {failovers_s[-1]:.2f} s", flush=True)
    report["failovers_s"] = failovers_s
    RESULTS_DIR.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS_DIR / f"cluster-throughput-{stamp}.json").write_text(json.dumps(report, indent=1))
    if args.rounds:
        print(f"\n{args.producers} producer processes, {args.seconds:.0f} s per run, acks=all, "
              f"idempotent, {PARTITIONS} partitions, medians of {args.rounds} alternating "
              "rounds\n")  # fmt: skip
        print("\n".join(produce_table(runs, args.sizes)))
        print(plot_produce(runs, args.sizes))
    if failovers_s:
        print(f"failover (kill -9 to first acknowledged write on its partitions): median "
              f"{statistics.median(failovers_s):.2f} s, worst {max(failovers_s):.2f} s "
              f"over {len(failovers_s)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
