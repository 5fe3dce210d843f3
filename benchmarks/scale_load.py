"""The load `scale_broker.py` puts on one broker: topics whose partitions all take
part, segments made small on purpose, produce and fetch spread over every
partition (confluent-kafka, librdkafka), consumer groups, and idle client
connections held by raw sockets (5,000 librdkafka clients would be 5,000 sets of
threads in the generator)."""

from __future__ import annotations

import socket
import statistics
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from side_by_side.cpu import proc_cpu_seconds

ADMIN_TIMEOUT_S = 290.0
CREATE_BATCH_TOPICS = 10
PHASE_TIMEOUT_S = 600.0
# The smallest segment.bytes Weir accepts. A batch larger than segment.bytes is
# refused (RECORD_TOO_LARGE, as Kafka does); one of one 800 B record (~870 B) is
# more than half of it, so each round of one record per partition rolls every
# partition once.
SEGMENT_BYTES_MIN = 1024
SEGMENT_BYTES_DEFAULT = 1 << 30
FILL_VALUE_BYTES = 800
SEGMENT_BYTES_CONFIG = "segment.bytes"

_SIZE = struct.Struct(">i")
API_VERSIONS_KEY = 18
METADATA_KEY = 3


@dataclass(frozen=True)
class Layout:
    """`topics` topics of `partitions_per_topic` partitions each, named scale-NNNN."""

    topics: int
    partitions_per_topic: int

    @property
    def partitions(self) -> int:
        return self.topics * self.partitions_per_topic

    def topic_names(self, first: int = 0) -> list[str]:
        return [f"scale-{index:04d}" for index in range(first, first + self.topics)]

    def spread(self) -> list[tuple[str, int]]:
        """Every (topic, partition), partitions of one topic interleaved with the others'."""
        names = self.topic_names()
        return [(name, p) for p in range(self.partitions_per_topic) for name in names]


def admin_client(bootstrap: str) -> AdminClient:
    # Creating a batch of topics takes longer than librdkafka's default 60 s socket timeout.
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})


def create_topics(bootstrap: str, layout: Layout, segment_bytes: int, first: int = 0) -> float:
    """Creates the layout's topics (numbered from `first`) with `segment.bytes`; returns
    the seconds it took."""
    admin = admin_client(bootstrap)
    topics = [
        NewTopic(name, layout.partitions_per_topic, 1,
                 config={SEGMENT_BYTES_CONFIG: str(segment_bytes)})
        for name in layout.topic_names(first)
    ]  # fmt: skip
    started = time.perf_counter()
    for start in range(0, len(topics), CREATE_BATCH_TOPICS):
        batch = topics[start : start + CREATE_BATCH_TOPICS]
        futures = admin.create_topics(batch, operation_timeout=ADMIN_TIMEOUT_S - 10)
        for future in futures.values():
            future.result(timeout=ADMIN_TIMEOUT_S)
    return time.perf_counter() - started


def reset_segment_bytes(bootstrap: str, layout: Layout) -> None:
    """Back to the broker's default segment.bytes (the throughput phases are not about rolls)."""
    admin = admin_client(bootstrap)
    resources = [
        ConfigResource(
            ConfigResource.Type.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry(SEGMENT_BYTES_CONFIG, None,
                            incremental_operation=AlterConfigOpType.DELETE)
            ],
        )
        for name in layout.topic_names()
    ]  # fmt: skip
    for future in admin.incremental_alter_configs(resources).values():
        future.result(timeout=ADMIN_TIMEOUT_S)


def _producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "none",
            "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "message.timeout.ms": int(PHASE_TIMEOUT_S * 1000),
        }
    )


def fill_segments(bootstrap: str, layout: Layout, rounds: int) -> float:
    """`rounds` rounds of one ~1 KiB record per partition, each round delivered before
    the next: with segment.bytes at its minimum every round rolls every partition,
    so each partition ends with `rounds` segments. Returns the seconds it took."""
    producer = _producer(bootstrap)
    value = b"\x5a" * FILL_VALUE_BYTES
    spread = layout.spread()
    errors: list[str] = []
    started = time.perf_counter()
    for _ in range(rounds):
        for topic, partition in spread:
            producer.produce(topic, value, partition=partition, on_delivery=errors_to(errors))
            producer.poll(0)
        _flush_all(producer, "fill", errors)
    return time.perf_counter() - started


def errors_to(errors: list[str]) -> Callable[[KafkaError | None, object], None]:
    def on_delivery(err: KafkaError | None, _message: object) -> None:
        if err is not None:
            errors.append(str(err))

    return on_delivery


def _flush_all(producer: Producer, what: str, errors: list[str]) -> None:
    remaining = producer.flush(PHASE_TIMEOUT_S)
    if remaining:
        raise RuntimeError(f"{what}: {remaining} messages undelivered after {PHASE_TIMEOUT_S} s")
    if errors:
        raise RuntimeError(f"{what}: {len(errors)} delivery errors, the first: {errors[0]}")


def produce_spread(
    bootstrap: str, layout: Layout, messages: int, value_bytes: int, broker_pid: int
) -> dict[str, Any]:
    """`messages` records of `value_bytes`, round-robin over every partition, as fast
    as the producer goes (acks=all, linger 5 ms)."""
    producer = _producer(bootstrap)
    value = b"\xab" * value_bytes
    spread = layout.spread()
    errors: list[str] = []
    on_delivery = errors_to(errors)
    produce, poll = producer.produce, producer.poll
    cpu_before = sum(proc_cpu_seconds(broker_pid))
    started = time.perf_counter()
    for index in range(messages):
        topic, partition = spread[index % len(spread)]
        while True:
            try:
                produce(topic, value, partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                poll(0.001)
        poll(0)
    _flush_all(producer, "produce", errors)
    elapsed_s = time.perf_counter() - started
    return _rate("produce", messages, messages * value_bytes, elapsed_s, broker_pid, cpu_before)


def _rate(
    what: str, messages: int, payload_bytes: int, elapsed_s: float, pid: int, cpu_before: float
) -> dict[str, Any]:
    broker_cpu_s = sum(proc_cpu_seconds(pid)) - cpu_before
    return {
        "messages": messages,
        "elapsed_s": elapsed_s,
        "msgs_per_s": messages / elapsed_s,
        "MB_per_s": payload_bytes / elapsed_s / 1e6,
        "broker_cpu_util": broker_cpu_s / elapsed_s,
        "broker_cpu_us_per_message": broker_cpu_s / messages * 1e6,
        "what": what,
    }


def fetch_spread(bootstrap: str, layout: Layout, expected: int, broker_pid: int) -> dict[str, Any]:
    """One consumer assigned every partition from the beginning (no group), until it
    has `expected` records."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "scale-fetch",  # required by the client; assign() skips the group
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            # see side_by_side/confluent_load.py: the default parks partitions for 1 s
            "fetch.queue.backoff.ms": 10,
        }
    )
    received = payload_bytes = 0
    consumer.list_topics(timeout=PHASE_TIMEOUT_S)  # leaders known before the clock
    cpu_before = sum(proc_cpu_seconds(broker_pid))
    started = time.perf_counter()
    deadline_s = time.monotonic() + PHASE_TIMEOUT_S
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in layout.spread()])
        while received < expected and time.monotonic() < deadline_s:
            for message in consumer.consume(min(10_000, expected - received), timeout=0.5):
                if message.error() is None:
                    received += 1
                    payload_bytes += len(message.value() or b"")
        elapsed_s = time.perf_counter() - started
    finally:
        consumer.close()
    if received < expected:
        raise RuntimeError(f"fetch: {received} of {expected} records in {PHASE_TIMEOUT_S} s")
    return _rate("fetch", received, payload_bytes, elapsed_s, broker_pid, cpu_before)


# -- raw connections and requests -----------------------------------------------------------


def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client_id = b"scale"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    frame = header + body
    return _SIZE.pack(len(frame)) + frame


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks, left = [], count
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _round_trip(sock: socket.socket, request: bytes) -> int:
    """Sends one request, reads its whole response; returns the response's size."""
    sock.sendall(request)
    (size,) = _SIZE.unpack(_read_exactly(sock, 4))
    _read_exactly(sock, size)
    return size


def _connect(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def open_connections(bootstrap: str, count: int) -> list[socket.socket]:
    """`count` client connections, each having made one ApiVersions round trip (so the
    broker holds a served connection, not just an accepted socket), left open."""
    host, port = bootstrap.rsplit(":", 1)
    connections = []
    request = _request(API_VERSIONS_KEY, 0, 1, b"")
    for _ in range(count):
        sock = _connect(host, int(port))
        _round_trip(sock, request)
        connections.append(sock)
    return connections


def close_connections(connections: list[socket.socket]) -> None:
    for sock in connections:
        sock.close()


def metadata_all_topics_ms(bootstrap: str, runs: int) -> dict[str, float]:
    """Metadata v1 for every topic (a null topic array) on one connection: median and
    max of `runs` round trips after a warm-up, and the response's size."""
    host, port = bootstrap.rsplit(":", 1)
    with _connect(host, int(port)) as sock:
        request = _request(METADATA_KEY, 1, 2, _SIZE.pack(-1))
        size = _round_trip(sock, request)
        times_ms = [_timed_ms(lambda: _round_trip(sock, request)) for _ in range(runs)]
    return {"median_ms": statistics.median(times_ms), "max_ms": max(times_ms),
            "response_bytes": float(size)}  # fmt: skip


def _timed_ms(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000
