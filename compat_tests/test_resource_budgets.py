"""Memory and connections stay bounded whatever clients do (issue 8).

Peers that pipeline big fetches and never read the answers, idle sockets from one
address, idle HTTP connections: the broker's RSS stays under the bound
docs/user-guide.md derives from the limits, and well-behaved clients are still
served. Fetch requests are encoded by hand (Fetch v4) so nothing here imports Weir.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.harness import WeirProcess, create_topic, unique_topic_name

MIB = 1024 * 1024
# docs/user-guide.md, "Limits and memory": the RSS bound with the default limits.
DEFAULT_RSS_BOUND_BYTES = 512 * MIB
FETCH = 1
FETCH_VERSION = 4
BIG_PARTITIONS = 8
BIG_PARTITION_BYTES = 4 * MIB
FETCH_ASK_BYTES = 16_000_000


# -- raw Fetch v4 -----------------------------------------------------------------------------


def fetch_v4(correlation_id: int, topic: str, partitions: int, max_bytes: int) -> bytes:
    """A Fetch v4 frame asking `max_bytes` in all, spread evenly over the partitions."""
    client = b"budget-test"
    header = struct.pack(">hhih", FETCH, FETCH_VERSION, correlation_id, len(client)) + client
    name = topic.encode()
    body = struct.pack(">iiiib", -1, 0, 1, max_bytes, 0)
    body += struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", partitions)
    for index in range(partitions):
        body += struct.pack(">iqi", index, 0, max_bytes // partitions)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def stuck_fetcher(broker: WeirProcess, topic: str, pipelined: int) -> socket.socket:
    """A connection that pipelines big fetches and never reads a byte back."""
    sock = socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    frames = b"".join(fetch_v4(i, topic, BIG_PARTITIONS, FETCH_ASK_BYTES) for i in range(pipelined))
    sock.sendall(frames)
    return sock


# -- fixtures and helpers ---------------------------------------------------------------------


def start_broker(base: Path, limits: str = "", settings: str = "") -> WeirProcess:
    proc = WeirProcess.configured(base, f"{settings}\n[limits]\n{limits}\n")
    proc.start()
    return proc


@pytest.fixture
def default_broker(tmp_path: Path) -> Iterator[WeirProcess]:
    proc = start_broker(tmp_path)
    try:
        yield proc
    finally:
        proc.close()


def fill_big_topic(broker: WeirProcess) -> str:
    topic = unique_topic_name("big")
    create_topic(broker.bootstrap, topic, partitions=BIG_PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    value = b"v" * 100_000
    for index in range(BIG_PARTITIONS):
        for _ in range(BIG_PARTITION_BYTES // len(value)):
            producer.produce(topic, value, partition=index)
            producer.poll(0)
    assert producer.flush(30) == 0
    return topic


def produce_small(broker: WeirProcess, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"small-{i}".encode(), partition=0)
    assert producer.flush(20) == 0, "a well-behaved producer could not deliver"


def consume_small(broker: WeirProcess, topic: str, count: int, timeout_s: float) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_topic_name("budget-group"),
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
        return values
    finally:
        consumer.close()


def metric(broker: WeirProcess, name: str) -> float:
    status, body = broker.http_get("/metrics")
    assert status == 200
    match = re.search(rf"^{name} (\S+)$", body.decode(), re.MULTILINE)
    assert match is not None, f"no {name} in /metrics"
    return float(match.group(1))


def wait_for_metric(broker: WeirProcess, name: str, value: float, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    current = metric(broker, name)
    while current != value and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the real broker's /metrics
        current = metric(broker, name)
    return current


def closed_by_peer(sock: socket.socket, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


# -- memory -----------------------------------------------------------------------------------


def test_rss_stays_bounded_while_peers_pipeline_big_fetches_they_never_read(
    default_broker: WeirProcess,
) -> None:
    broker = default_broker
    big = fill_big_topic(broker)
    small = unique_topic_name("small")
    create_topic(broker.bootstrap, small)
    rss_before = broker.rss_bytes()
    stuck: list[socket.socket] = []
    peak_rss = rss_before
    try:
        for _ in range(24):  # 24 x 16 x 16 MB asked: 6 GB, against a 256 MiB pool
            stuck.append(stuck_fetcher(broker, big, pipelined=16))
            time.sleep(0.1)  # let the broker take in what this fetcher asked for
            peak_rss = max(peak_rss, broker.rss_bytes())
            assert peak_rss < DEFAULT_RSS_BOUND_BYTES, (
                f"RSS {peak_rss / MIB:.0f} MiB with {len(stuck)} stuck fetchers"
            )
        time.sleep(1.0)  # the behaviour under test: memory stays bounded over time
        held = metric(broker, "weir_in_flight_bytes")
        assert 200 * MIB < held <= 256 * MIB + 24 * 64 * 1024 + 2 * MIB, held
        produce_small(broker, small, 50)
        values = consume_small(broker, small, 50, timeout_s=15)
        assert len(values) == 50, "a well-behaved consumer starved beside the stuck fetchers"
        peak_rss = max(peak_rss, broker.rss_bytes())
    finally:
        for sock in stuck:
            sock.close()
    print(f"RSS before {rss_before / MIB:.0f} MiB, peak {peak_rss / MIB:.0f} MiB")
    assert peak_rss < DEFAULT_RSS_BOUND_BYTES
    assert wait_for_metric(broker, "weir_in_flight_bytes", 0.0, timeout_s=5) == 0.0, (
        "bytes of closed connections are still charged"
    )


def test_a_peer_that_keeps_asking_but_reads_no_responses_is_closed_after_the_idle_timeout(
    tmp_path: Path,
) -> None:
    """The peer is never idle as a sender, so only the writer's own timeout (no
    byte of a response taken for connection_idle_timeout_ms) can close it."""
    broker = start_broker(tmp_path, limits="connection_idle_timeout_ms = 1000")
    try:
        big = fill_big_topic(broker)
        started = time.monotonic()
        closed_after_s = None
        with stuck_fetcher(broker, big, pipelined=1) as sock:
            for i in range(40):
                time.sleep(0.2)  # the behaviour under test: a client that never reads, over time
                try:
                    sock.sendall(fetch_v4(100 + i, big, BIG_PARTITIONS, FETCH_ASK_BYTES))
                except OSError:
                    closed_after_s = time.monotonic() - started
                    break
        assert closed_after_s is not None, "the broker kept a peer that never reads for 8 s"
        assert closed_after_s < 5.0
        assert wait_for_metric(broker, "weir_connections_open", 0.0, timeout_s=3) == 0.0
        assert metric(broker, "weir_in_flight_bytes") == 0.0
    finally:
        broker.close()


# -- connections ------------------------------------------------------------------------------


def idle_socket_from(address: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((address, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    return sock


def test_one_address_cannot_take_every_connection_slot(tmp_path: Path) -> None:
    """Idle sockets from 127.0.0.2 fill their address's share; a producer and a
    consumer from 127.0.0.1 still connect. Refusals are logged once, not per socket."""
    broker = start_broker(tmp_path, limits="connections_max = 60\nconnections_per_address_max = 20")
    idle: list[socket.socket] = []
    try:
        for _ in range(80):
            idle.append(idle_socket_from("127.0.0.2", broker.kafka_port))
        refused = [sock for sock in idle[20:] if closed_by_peer(sock, timeout_s=5)]
        assert len(refused) == 60, f"{len(refused)} of 60 sockets over the limit were closed"
        assert not any(closed_by_peer(sock, timeout_s=0.05) for sock in idle[:20])
        topic = unique_topic_name("per-address")
        produce_small(broker, topic, 10)
        assert len(consume_small(broker, topic, 10, timeout_s=15)) == 10
        assert metric(broker, "weir_connections_rejected_per_address_total") == 60
        lines = [line for line in broker.stderr_text().splitlines() if "127.0.0.2" in line]
        assert len(lines) == 1, lines
        assert "connections_per_address_max is 20" in lines[0]
    finally:
        for sock in idle:
            sock.close()
        broker.close()


# -- HTTP -------------------------------------------------------------------------------------


def test_health_endpoints_answer_while_idle_http_connections_are_held(
    default_broker: WeirProcess,
) -> None:
    broker = default_broker
    idle: list[socket.socket] = []
    try:
        for i in range(100):
            sock = socket.create_connection(("127.0.0.1", broker.http_port), timeout=5)
            if i % 2:
                sock.sendall(b"GET /health/live HTTP/1.1\r\n")  # headers never finished
            idle.append(sock)
        for path in ("/health/live", "/health/ready", "/health/live", "/health/ready"):
            started = time.monotonic()
            status, _ = broker.http_get(path, timeout_s=2)
            assert status == 200, path
            assert time.monotonic() - started < 1.0
        assert metric(broker, "weir_http_connections_evicted_total") >= 36
        assert closed_by_peer(idle[0], timeout_s=1), "the oldest idle connection was kept"
    finally:
        for sock in idle:
            with contextlib.suppress(OSError):
                sock.close()
