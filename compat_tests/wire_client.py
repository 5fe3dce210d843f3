"""A minimal Kafka client for wire-level compatibility tests: requests encoded
with Weir's declared schemas (`weir.wire.protocol`), sent over a plain socket to
the real broker process, and the response decoded, so a test sees every field
of the answer (clients hide most of them)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from compat_tests.harness import WeirProcess
from weir.wire.protocol import decode_response, encode_request

IO_TIMEOUT_S = 10.0
CORRELATION_ID = 11


@contextmanager
def connect(broker: WeirProcess) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=IO_TIMEOUT_S) as sock:
        yield sock


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return bytes(data)


def round_trip(sock: socket.socket, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """Send one request and return its decoded response body."""
    sock.sendall(encode_request(api_key, version, CORRELATION_ID, "weir-wire-test", body))
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    correlation_id, response = decode_response(
        api_key, version, memoryview(_recv_exact(sock, size))
    )
    assert correlation_id == CORRELATION_ID
    return response
