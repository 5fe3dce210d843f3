"""The HTTP listener's guarantees (weir/broker/http/listener.py), against a real `weir`:
HTTP/1.1 keep-alive, a deadline per exchange (slow and idle peers are closed),
bounded requests (431 for a big head, 413 for a body), a pool of its own that
keeps health checks answerable, apart from the Kafka connections; and /metrics
in OpenMetrics when asked."""

from __future__ import annotations

import contextlib
import http.client
import socket
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from compat_tests.harness import WeirProcess, unique_topic_name

pytestmark = pytest.mark.timeout(120)

HTTP_CONNECTIONS_MAX = 8
HTTP_REQUEST_TIMEOUT_MS = 1500
HTTP_REQUEST_BYTES_MAX = 4096
KAFKA_CONNECTIONS_MAX = 4
# Time past a deadline for the broker to act on it (a loaded CI machine).
SLACK_S = 1.5


@pytest.fixture(scope="module")
def http_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    base = tmp_path_factory.mktemp("http")
    proc = WeirProcess.configured(
        base,
        f"""
[limits]
http_connections_max = {HTTP_CONNECTIONS_MAX}
http_request_timeout_ms = {HTTP_REQUEST_TIMEOUT_MS}
http_request_bytes_max = {HTTP_REQUEST_BYTES_MAX}
connections_max = {KAFKA_CONNECTIONS_MAX}
connections_per_address_max = {KAFKA_CONNECTIONS_MAX}
""",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def connect(broker: WeirProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.http_port), timeout=5)


def closed_within(sock: socket.socket, timeout_s: float) -> float | None:
    """Seconds until the broker closed `sock` (reading and dropping what it sent),
    None if it stayed open for `timeout_s`."""
    started = time.monotonic()
    deadline = started + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if sock.recv(65536) == b"":
                return time.monotonic() - started
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
        except TimeoutError:
            return None
    return None


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def test_keep_alive_serves_several_requests_on_one_connection(http_broker: WeirProcess) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", http_broker.http_port, timeout=5)
    try:
        sockets = []
        for path in ("/health/live", "/health/ready", "/metrics", "/health/live"):
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            assert response.status == 200, path
            assert not response.will_close, f"{path} closed the connection"
            sockets.append(connection.sock)
        assert len({id(s) for s in sockets}) == 1, "a new connection was opened"
    finally:
        connection.close()


def test_a_peer_sending_its_request_slowly_is_closed_at_the_request_timeout(
    http_broker: WeirProcess,
) -> None:
    sock = connect(http_broker)
    started = time.monotonic()
    request = b"GET /health/live HTTP/1.1\r\nHost: weir\r\nX-Slow: " + b"s" * 200
    closed = False
    try:
        for byte in request:  # a byte every 50 ms: no single read waits long
            sock.sendall(bytes([byte]))
            time.sleep(0.05)
            if time.monotonic() - started > HTTP_REQUEST_TIMEOUT_MS / 1000 + SLACK_S:
                break
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    if not closed:
        closed = closed_within(sock, 0.1) is not None
    elapsed = time.monotonic() - started
    sock.close()
    assert closed, f"still open after {elapsed:.1f} s"
    assert elapsed < HTTP_REQUEST_TIMEOUT_MS / 1000 + SLACK_S


def test_an_idle_keep_alive_connection_is_closed_at_the_request_timeout(
    http_broker: WeirProcess,
) -> None:
    with connect(http_broker) as sock:
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: weir\r\n\r\n")
        assert status_of(sock.recv(4096)) == 200
        closed_after_s = closed_within(sock, HTTP_REQUEST_TIMEOUT_MS / 1000 + SLACK_S)
        assert closed_after_s is not None, "the idle connection was kept open"


def test_a_request_head_over_the_byte_limit_is_answered_431_and_closed(
    http_broker: WeirProcess,
) -> None:
    with connect(http_broker) as sock:
        head = b"GET /health/live HTTP/1.1\r\nHost: weir\r\n"
        head += b"".join(b"X-Filler-%d: %s\r\n" % (i, b"f" * 100) for i in range(200))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(head + b"\r\n")
        assert status_of(sock.recv(4096)) == 431
        assert closed_within(sock, SLACK_S) is not None


def test_a_request_body_over_the_byte_limit_is_answered_413_unread_and_closed(
    http_broker: WeirProcess,
) -> None:
    rss_before = http_broker.rss_bytes()
    with connect(http_broker) as sock:
        sock.sendall(
            b"GET /health/live HTTP/1.1\r\nHost: weir\r\nContent-Length: 1000000000\r\n\r\n"
        )
        sent_bytes = 0
        chunk = b"b" * 65536
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, TimeoutError):
            sock.settimeout(2)
            while sent_bytes < 256 * 1024 * 1024:
                sock.sendall(chunk)
                sent_bytes += len(chunk)
        # The body is not read: the broker closes once it has answered.
        assert sent_bytes < 64 * 1024 * 1024, f"the broker took {sent_bytes} bytes of the body"
        sock.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            assert status_of(sock.recv(4096)) == 413
    assert http_broker.rss_bytes() - rss_before < 32 * 1024 * 1024


def test_health_answers_while_keep_alive_peers_hold_every_slot(http_broker: WeirProcess) -> None:
    evicted_before = http_broker.metric_samples("weir_http_connections_evicted_total")[""]
    held: list[socket.socket] = []
    try:
        for _ in range(3 * HTTP_CONNECTIONS_MAX):
            sock = connect(http_broker)
            sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: weir\r\n\r\n")
            assert status_of(sock.recv(4096)) == 200
            held.append(sock)  # answered, kept alive, idle
        started = time.monotonic()
        status, body = http_broker.http_get("/health/ready", timeout_s=2)
        assert status == 200, body
        assert time.monotonic() - started < 1.0
        assert closed_within(held[0], 1) is not None, "the oldest idle connection was kept"
        evicted = http_broker.metric_samples("weir_http_connections_evicted_total")[""]
        assert evicted - evicted_before >= 2 * HTTP_CONNECTIONS_MAX
    finally:
        for sock in held:
            sock.close()


def test_the_http_pool_and_the_kafka_connections_are_budgeted_apart(
    http_broker: WeirProcess,
) -> None:
    kafka = [
        socket.create_connection(("127.0.0.1", http_broker.kafka_port), timeout=5)
        for _ in range(KAFKA_CONNECTIONS_MAX)
    ]
    try:
        time.sleep(0.2)  # every Kafka slot is taken
        assert http_broker.http_get("/health/ready", timeout_s=2)[0] == 200
    finally:
        for sock in kafka:
            sock.close()
    held = [connect(http_broker) for _ in range(2 * HTTP_CONNECTIONS_MAX)]
    try:
        producer = Producer({"bootstrap.servers": http_broker.bootstrap, "linger.ms": 0})
        producer.produce(unique_topic_name("http-budget"), b"v")
        assert producer.flush(20) == 0, "Kafka clients were refused while HTTP was full"
    finally:
        for sock in held:
            sock.close()


def test_metrics_answer_openmetrics_when_the_scraper_asks(http_broker: WeirProcess) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", http_broker.http_port, timeout=5)
    try:
        connection.request(
            "GET", "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        )
        response = connection.getresponse()
        body = response.read().decode()
        assert response.status == 200
        assert response.getheader("Content-Type", "").startswith("application/openmetrics-text")
        assert body.endswith("# EOF\n")
        assert "# TYPE weir_requests counter" in body
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        plain = response.read().decode()
        assert response.getheader("Content-Type", "").startswith("text/plain; version=0.0.4")
        assert "# TYPE weir_requests_total counter" in plain
        assert "# EOF" not in plain
    finally:
        connection.close()


def test_a_method_other_than_get_is_405(http_broker: WeirProcess) -> None:
    with connect(http_broker) as sock:
        sock.sendall(b"DELETE /health/live HTTP/1.1\r\nHost: weir\r\n\r\n")
        assert status_of(sock.recv(4096)) == 405


def stuck_reader(broker: WeirProcess) -> socket.socket:
    """A connection that pipelines /metrics requests and never reads an answer:
    the broker's write to it blocks once the socket buffers are full."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(5)
    sock.connect(("127.0.0.1", broker.http_port))
    with contextlib.suppress(TimeoutError, BrokenPipeError, ConnectionResetError):
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: weir\r\n\r\n" * 4000)
    return sock


def test_peers_that_never_read_their_answers_are_closed_at_the_request_timeout(
    http_broker: WeirProcess,
) -> None:
    stuck = [stuck_reader(http_broker) for _ in range(HTTP_CONNECTIONS_MAX)]
    try:
        time.sleep(HTTP_REQUEST_TIMEOUT_MS / 1000 + SLACK_S)
        status, body = http_broker.http_get("/health/ready", timeout_s=2)
        assert status == 200, body
    finally:
        for sock in stuck:
            sock.close()
