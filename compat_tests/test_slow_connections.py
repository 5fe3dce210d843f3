"""Idle and slow peers on raw sockets: a connection that sends nothing for
`connection_idle_timeout_ms`, or takes longer than `request_receive_timeout_ms`
to finish a frame it started, is closed; a peer that keeps talking is not."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import WeirProcess

TIMEOUT_MS = 1000
# A timeout fires up to one check interval (a tenth of it) late, plus scheduling.
CLOSE_WITHIN_S = 3 * TIMEOUT_MS / 1000
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 4) + b"slow"


@pytest.fixture(scope="module")
def slow_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    base = tmp_path_factory.mktemp("weir-slow")
    proc = WeirProcess.configured(
        base,
        "[limits]\n"
        f"connection_idle_timeout_ms = {TIMEOUT_MS}\n"
        f"request_receive_timeout_ms = {TIMEOUT_MS}\n",
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


def connect(broker: WeirProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def seconds_until_closed(sock: socket.socket, limit_s: float) -> float:
    """Seconds until the broker closes `sock` (EOF or reset); fails after `limit_s`."""
    started = time.monotonic()
    sock.settimeout(limit_s)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the broker kept the connection open for {limit_s} s")
    return time.monotonic() - started


def api_versions_round_trip(sock: socket.socket) -> None:
    sock.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    body = recv_exact(sock, size)
    assert struct.unpack(">i", body[:4])[0] == 7  # correlation id


def recv_exact(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def timeouts_closed(broker: WeirProcess) -> float:
    samples = broker.metric_samples("weir_connections_closed_by_broker_total")
    return samples.get('reason="timeout"', 0.0)


def test_an_idle_connection_is_closed_and_counted_as_a_timeout(slow_broker: WeirProcess) -> None:
    closed_before = timeouts_closed(slow_broker)
    with connect(slow_broker) as sock:
        elapsed_s = seconds_until_closed(sock, CLOSE_WITHIN_S + 5)
    assert TIMEOUT_MS / 1000 * 0.9 <= elapsed_s <= CLOSE_WITHIN_S
    assert timeouts_closed(slow_broker) == closed_before + 1


def test_an_unfinished_frame_is_closed_after_the_receive_timeout(
    slow_broker: WeirProcess,
) -> None:
    with connect(slow_broker) as sock:
        sock.sendall(struct.pack(">i", 1000) + b"\x00" * 100)
        elapsed_s = seconds_until_closed(sock, CLOSE_WITHIN_S + 5)
    assert TIMEOUT_MS / 1000 * 0.9 <= elapsed_s <= CLOSE_WITHIN_S


def test_a_frame_trickled_a_byte_at_a_time_is_cut_off(slow_broker: WeirProcess) -> None:
    """Slowloris: every byte resets nothing; the whole frame must arrive in time."""
    frame = struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0
    with connect(slow_broker) as sock:
        started = time.monotonic()
        sent = 0
        try:
            for byte in frame:
                sock.sendall(bytes([byte]))
                sent += 1
                time.sleep(0.2)  # the behaviour under test: one byte every 200 ms
        except (BrokenPipeError, ConnectionResetError):
            pass
        remaining_s = CLOSE_WITHIN_S + 5 - (time.monotonic() - started)
        if sent == len(frame):
            seconds_until_closed(sock, max(remaining_s, 0.1))
        elapsed_s = time.monotonic() - started
    assert elapsed_s <= CLOSE_WITHIN_S + 0.5
    assert sent < len(frame), "the broker accepted a frame trickled over several seconds"


def test_a_connection_that_keeps_talking_stays_open(slow_broker: WeirProcess) -> None:
    with connect(slow_broker) as sock:
        started = time.monotonic()
        while time.monotonic() - started < 3 * TIMEOUT_MS / 1000:
            api_versions_round_trip(sock)
            time.sleep(TIMEOUT_MS / 1000 / 3)  # the behaviour under test: idle gaps
        api_versions_round_trip(sock)


def test_the_broker_serves_others_while_closing_slow_peers(slow_broker: WeirProcess) -> None:
    slow = [connect(slow_broker) for _ in range(20)]
    try:
        for sock in slow[:10]:
            sock.sendall(struct.pack(">i", 5000) + b"\x00" * 10)
        with connect(slow_broker) as sock:
            api_versions_round_trip(sock)
        for sock in slow:
            seconds_until_closed(sock, CLOSE_WITHIN_S + 5)
        with connect(slow_broker) as sock:
            api_versions_round_trip(sock)
    finally:
        for sock in slow:
            sock.close()


def test_settings_file_names_the_timeouts(tmp_path: Path) -> None:
    """The limits this module relies on are real settings (a typo would be rejected)."""
    from weir.broker.config import load_config

    config = tmp_path / "weir.toml"
    config.write_text("[limits]\nconnection_idle_timeout_ms = 5\nrequest_receive_timeout_ms = 6\n")
    limits = load_config(["--config", str(config)], {}).limits
    assert (limits.connection_idle_timeout_ms, limits.request_receive_timeout_ms) == (5, 6)
