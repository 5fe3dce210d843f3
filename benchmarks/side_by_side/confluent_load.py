"""The `confluent` generator: confluent-kafka (librdkafka) in this process.
Topics created with the AdminClient; a produce (as fast as it goes, or paced at
a fixed rate) whose every payload carries its produce() time, so the delivery
callback has its latency; a consume with assign() from the beginning."""

from __future__ import annotations

import argparse
import json
import struct
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from side_by_side.brokers import BrokerError
from side_by_side.cpu import proc_cpu_seconds, self_cpu_seconds
from side_by_side.secured import PLAINTEXT_LOGIN, ClientLogin

TIMESTAMP_BYTES = 8  # every payload starts with perf_counter_ns() at produce()
_TS = struct.Struct(">Q")


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, int(round(fraction * len(sorted_values))) - 1))
    return sorted_values[rank]


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    timeout_s: float,
    login: ClientLogin = PLAINTEXT_LOGIN,
) -> float:
    admin = AdminClient({**login.librdkafka, "bootstrap.servers": bootstrap})
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


def producer_config(
    args: argparse.Namespace, bootstrap: str, login: ClientLogin = PLAINTEXT_LOGIN
) -> dict[str, Any]:
    return {
        **login.librdkafka,
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
    login: ClientLogin = PLAINTEXT_LOGIN,
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
    producer = Producer({**producer_config(args, bootstrap, login), "stats_cb": stats})
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
    login: ClientLogin = PLAINTEXT_LOGIN,
) -> dict[str, Any]:
    consumer = Consumer(
        {
            **login.librdkafka,
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
