"""The blocking client against tiny in-process servers: framing, deadlines, negotiation."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from weir.cli.errors import BrokerConnectionError, BrokerProtocolError
from weir.cli.kafka_client import (
    CLIENT_VERSIONS,
    HANDSHAKE_TIMEOUT_MS,
    Address,
    KafkaClient,
    parse_address,
)
from weir.wire.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    decode_request,
    encode_response,
    parse_request_header,
)

Behaviour = Callable[[socket.socket], object]


@contextmanager
def serving(behaviour: Behaviour) -> Iterator[Address]:
    listener = socket.create_server(("127.0.0.1", 0))
    address = Address("127.0.0.1", listener.getsockname()[1])

    def run() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            behaviour(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield address
    finally:
        listener.close()
        thread.join(timeout=5)


def read_frame(conn: socket.socket) -> bytes | None:
    def exactly(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    size = exactly(4)
    return None if size is None else exactly(struct.unpack(">i", size)[0])


def answer_api_versions(ranges: dict[int, tuple[int, int]]) -> Behaviour:
    def behaviour(conn: socket.socket) -> None:
        while (frame := read_frame(conn)) is not None:
            header = parse_request_header(memoryview(frame))
            decode_request(header, memoryview(frame))
            body = {
                "error_code": 0,
                "api_keys": [
                    {"api_key": k, "min_version": lo, "max_version": hi}
                    for k, (lo, hi) in ranges.items()
                ],
                "throttle_time_ms": 0,
            }
            conn.sendall(
                encode_response(header.api_key, header.api_version, header.correlation_id, body)
            )

    return behaviour


def test_parse_address() -> None:
    assert parse_address("h:1") == Address("h", 1)
    assert parse_address("h") == Address("h", 9092)
    assert parse_address("[::1]:9093") == Address("::1", 9093)
    for bad in ("h:x", ":1", "h:0", "h:70000", "[::1"):
        with pytest.raises(ValueError):
            parse_address(bad)


def test_connection_refused_is_a_clear_error() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))  # bound, never listening: connecting is refused
        address = Address("127.0.0.1", unused.getsockname()[1])
        with pytest.raises(BrokerConnectionError) as info:
            KafkaClient.connect(address, request_timeout_ms=1000)
    assert info.value.message == f"cannot connect to broker at {address}: connection refused"


def test_silent_broker_times_out() -> None:
    release = threading.Event()
    with serving(lambda conn: release.wait(5)) as address:
        with pytest.raises(BrokerConnectionError) as info:
            KafkaClient.connect(address, request_timeout_ms=200)
        release.set()
    assert info.value.message == (
        f"broker at {address} did not answer ApiVersions within 200 ms "
        "(is it a Kafka port? check --bootstrap)"
    )


def test_broker_closing_the_connection_is_reported() -> None:
    with serving(lambda conn: None) as address, pytest.raises(BrokerConnectionError) as info:
        KafkaClient.connect(address, request_timeout_ms=2000)
    assert "closed the connection" in info.value.message


def test_oversized_first_answer_is_not_kafka() -> None:
    def huge(conn: socket.socket) -> None:
        read_frame(conn)
        conn.sendall(struct.pack(">i", 2**31 - 1))

    with serving(huge) as address, pytest.raises(BrokerProtocolError) as info:
        KafkaClient.connect(address, request_timeout_ms=2000)
    assert info.value.message == (
        f"{address} does not speak the Kafka protocol: it answered '....' "
        "(is it a Kafka port? check --bootstrap)"
    )


def test_a_server_that_speaks_first_is_named_as_not_kafka() -> None:
    def ssh(conn: socket.socket) -> None:
        conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    with serving(ssh) as address, pytest.raises(BrokerProtocolError) as info:
        KafkaClient.connect(address, request_timeout_ms=2000)
    assert info.value.message.startswith(
        f"{address} does not speak the Kafka protocol: it answered 'SSH-2.0-OpenSSH_9.2..'"
    )


def test_a_silent_port_fails_within_the_handshake_timeout_not_the_request_timeout() -> None:
    release = threading.Event()
    started = time.monotonic()
    with serving(lambda conn: release.wait(HANDSHAKE_TIMEOUT_MS / 1000 + 5)) as address:
        with pytest.raises(BrokerConnectionError, match="is it a Kafka port"):
            KafkaClient.connect(address, request_timeout_ms=60_000)
        release.set()
    assert time.monotonic() - started < HANDSHAKE_TIMEOUT_MS / 1000 + 2


def test_negotiates_highest_common_version() -> None:
    metadata_max = min(CLIENT_VERSIONS[ApiKey.METADATA][1], SUPPORTED_VERSIONS[ApiKey.METADATA][1])
    ranges: dict[int, tuple[int, int]] = {
        ApiKey.API_VERSIONS: SUPPORTED_VERSIONS[ApiKey.API_VERSIONS],
        ApiKey.METADATA: (0, metadata_max - 1),
        ApiKey.FETCH: (0, 3),
    }
    with (
        serving(answer_api_versions(ranges)) as address,
        KafkaClient.connect(address, request_timeout_ms=2000) as client,
    ):
        assert client.version(ApiKey.METADATA) == metadata_max - 1
        with pytest.raises(BrokerProtocolError, match="supports Fetch v0-v3"):
            client.version(ApiKey.FETCH)
        with pytest.raises(BrokerProtocolError, match="does not support Produce"):
            client.version(ApiKey.PRODUCE)


def test_an_http_answer_is_recognised() -> None:
    def http(conn: socket.socket) -> None:
        read_frame(conn)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    with (
        serving(http) as address,
        pytest.raises(BrokerProtocolError, match="answered in HTTP, not the Kafka protocol"),
    ):
        KafkaClient.connect(address, request_timeout_ms=2000)
