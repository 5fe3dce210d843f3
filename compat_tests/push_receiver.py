"""A real HTTP receiver for push subscriptions, for tests and benchmarks: a threaded
http.server on 127.0.0.1 that records every delivery (with whether its signature
verified) and answers as its `behaviour` says: 200, slowly, 500, not at all until
the client times out, or flapping between failing and succeeding."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from weir.broker.push.signing import verify


@dataclass
class Delivery:
    headers: dict[str, str]
    body: dict[str, Any]
    verified: bool
    status: int
    received_s: float


# (the receiver, the delivery's parsed body and headers) -> (status, seconds to wait)
Behaviour = Callable[["PushReceiver", dict[str, Any], dict[str, str]], tuple[int, float]]


def accept_all(
    receiver: PushReceiver, body: dict[str, Any], headers: dict[str, str]
) -> tuple[int, float]:
    return 200, 0.0


@dataclass
class PushReceiver:
    behaviour: Behaviour = accept_all
    secret: str = ""
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    # Delivery attempts being answered now (for in-flight bounds).
    active: int = 0
    active_max: int = 0

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    def start(self) -> PushReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                headers = {k: v for k, v in self.headers.items()}
                with receiver.lock:
                    receiver.active += 1
                    receiver.active_max = max(receiver.active_max, receiver.active)
                try:
                    body = json.loads(raw)
                    verified = bool(receiver.secret) and verify(
                        receiver.secret,
                        headers.get("Weir-Timestamp", ""),
                        headers.get("Weir-Signature", ""),
                        raw,
                        now_s=time.time(),
                    )
                    status, wait_s = receiver.behaviour(receiver, body, headers)
                    if wait_s:
                        time.sleep(wait_s)
                    with receiver.lock:
                        receiver.deliveries.append(
                            Delivery(headers, body, verified, status, time.monotonic())
                        )
                    payload = b"{}"
                    try:
                        self.send_response(status)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(payload)))
                        self.end_headers()
                        self.wfile.write(payload)
                    except OSError:
                        pass  # the client timed out and went away
                finally:
                    with receiver.lock:
                        receiver.active -= 1

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def snapshot(self) -> list[Delivery]:
        with self.lock:
            return list(self.deliveries)

    def accepted_values(self) -> list[str]:
        """Values of the records in deliveries answered 2xx, in arrival order."""
        return [
            str(record["value"])
            for delivery in self.snapshot()
            if 200 <= delivery.status < 300
            for record in delivery.body["records"]
        ]
