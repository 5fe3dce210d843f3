"""A client that only pings: ApiVersions v0 every 10 ms over its own connection,
measuring each round trip (issue 9's yardstick for event-loop stalls).

Hand-written bytes (nothing of Weir imported), on a thread of its own so the
test can drive real clients meanwhile. A closed or reset connection is recorded,
never retried: a well-behaved client must never be dropped.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

PING_INTERVAL_S = 0.01
API_VERSIONS_KEY = 18


def _api_versions_v0(correlation_id: int) -> bytes:
    client_id = b"pinger"
    body = struct.pack(">hhih", API_VERSIONS_KEY, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class LoopPinger:
    """Use as a context manager; `worst_ms` is the slowest round trip seen."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self._address = (host, int(port))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loop-pinger", daemon=True)
        self.worst_ms = 0.0
        self.count = 0
        self.error: BaseException | None = None

    def __enter__(self) -> LoopPinger:
        self._sock = socket.create_connection(self._address, timeout=10)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)
        self._sock.close()

    def _run(self) -> None:
        correlation_id = 0
        try:
            while not self._stop.is_set():
                correlation_id += 1
                started = time.monotonic()
                self._sock.sendall(_api_versions_v0(correlation_id))
                (size,) = struct.unpack(">i", _receive_exactly(self._sock, 4))
                payload = _receive_exactly(self._sock, size)
                (answered,) = struct.unpack(">i", payload[:4])
                assert answered == correlation_id, (answered, correlation_id)
                elapsed_s = time.monotonic() - started
                self.worst_ms = max(self.worst_ms, elapsed_s * 1000)
                self.count += 1
                self._stop.wait(max(PING_INTERVAL_S - elapsed_s, 0))
        except BaseException as exc:  # reported by check()
            self.error = exc

    def check(self) -> None:
        """Raise what ended the pings early (a reset, a close, a wrong answer)."""
        if self.error is not None:
            raise AssertionError(f"the pinger was cut off: {self.error!r}") from self.error
        assert self.count > 0
