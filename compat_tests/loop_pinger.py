"""A client that only pings: ApiVersions v0 every 10 ms over its own connection,
measuring each round trip (issue 9's yardstick for event-loop stalls).

Hand-written bytes (nothing of Weir imported), in a process of its own so that
the test's other clients (their Python code holds this process's GIL) cannot
delay it. A closed or reset connection is recorded, never retried: a
well-behaved client must never be dropped.
"""

from __future__ import annotations

import multiprocessing
import socket
import struct
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

# round trips, the slowest few in ms (slowest first), what ended them
PingResult = tuple[int, list[float], str | None]
SLOWEST_KEPT = 3

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


def _ping(
    address: tuple[str, int], stop: Event, connected: Event, results: Queue[PingResult]
) -> None:
    """(Child process) Ping until `stop`; put (count, slowest_ms, error) on `results`."""
    count, slowest_ms, error = 0, [0.0], None
    try:
        sock = socket.create_connection(address, timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connected.set()
        correlation_id = 0
        while not stop.is_set():
            correlation_id += 1
            started = time.monotonic()
            sock.sendall(_api_versions_v0(correlation_id))
            (size,) = struct.unpack(">i", _receive_exactly(sock, 4))
            (answered,) = struct.unpack(">i", _receive_exactly(sock, size)[:4])
            if answered != correlation_id:
                raise AssertionError(f"answer {answered} to request {correlation_id}")
            elapsed_s = time.monotonic() - started
            slowest_ms = sorted([*slowest_ms, elapsed_s * 1000], reverse=True)[:SLOWEST_KEPT]
            count += 1
            stop.wait(max(PING_INTERVAL_S - elapsed_s, 0))
        sock.close()
    except BaseException as exc:  # reported by check()
        error = repr(exc)
    results.put((count, slowest_ms, error))


class LoopPinger:
    """Use as a context manager; then `worst_ms` is the slowest round trip seen."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._connected = context.Event()
        self._results: Queue[PingResult] = context.Queue()
        self._process = context.Process(
            target=_ping,
            args=((host, int(port)), self._stop, self._connected, self._results),
            name="loop-pinger",
            daemon=True,
        )
        self.slowest_ms: list[float] = [0.0]
        self.count = 0
        self.error: str | None = None

    def __enter__(self) -> LoopPinger:
        self._process.start()
        if not self._connected.wait(30):
            self._process.kill()
            raise AssertionError("the pinger did not connect")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.count, self.slowest_ms, self.error = self._results.get(timeout=30)
        self._process.join(10)

    @property
    def worst_ms(self) -> float:
        return self.slowest_ms[0]

    @property
    def second_worst_ms(self) -> float:
        """The slowest but one. On a 2-core machine one round trip may lose its core to
        the test's own client threads; reads on the event loop stall it again and again,
        so they show here too (and a single long stall in the broker's own lag meter)."""
        return self.slowest_ms[1] if len(self.slowest_ms) > 1 else 0.0

    def check(self) -> None:
        """Raise what ended the pings early (a reset, a close, a wrong answer)."""
        if self.error is not None:
            raise AssertionError(f"the pinger was cut off: {self.error}")
        assert self.count > 0
