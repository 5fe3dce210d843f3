"""Running the real `weir serve` process and the `weir` CLI for end-to-end tests.

Both run as subprocesses of the test environment's `weir` console script, exactly
as a user runs them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
CLI_TIMEOUT_S = 60.0
# Loopback HTTP must never go through an http_proxy from the environment.
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def weir_command() -> list[str]:
    script = Path(sys.prefix) / "bin" / "weir"
    if script.exists():
        return [str(script)]
    found = shutil.which("weir")
    return [found] if found else [sys.executable, "-m", "weir.cli.main"]


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def clean_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class BrokerProcess:
    process: subprocess.Popen[bytes]
    bootstrap: str
    stderr_path: Path

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def start_broker(base: Path) -> BrokerProcess:
    kafka_port, http_port = free_ports(2)
    data_dir = base / "data"
    stderr_path = base / "broker.stderr"
    command = [
        *weir_command(), "serve",
        "--data-dir", str(data_dir),
        "--kafka-listen", f"127.0.0.1:{kafka_port}",
        "--http-listen", f"127.0.0.1:{http_port}",
    ]  # fmt: skip
    with open(base / "broker.stdout", "wb") as out, open(stderr_path, "wb") as err:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=clean_environment()
        )
    broker = BrokerProcess(process, f"127.0.0.1:{kafka_port}", stderr_path)
    deadline = time.monotonic() + READY_TIMEOUT_S
    url = f"http://127.0.0.1:{http_port}/health/ready"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"weir serve exited with {process.returncode}:\n{broker.stderr_text()}"
            )
        try:
            with _HTTP.open(url, timeout=1.0) as response:
                if response.status == 200:
                    return broker
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.05)
    stop_broker(broker)
    raise RuntimeError(f"weir serve was not ready within {READY_TIMEOUT_S} s")


def stop_broker(broker: BrokerProcess) -> None:
    if broker.process.poll() is None:
        broker.process.send_signal(signal.SIGTERM)
        try:
            broker.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            broker.process.kill()
            broker.process.wait()


def run_cli(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> CliResult:
    completed = subprocess.run(
        [*weir_command(), *args],
        input=stdin,
        capture_output=True,
        env=env if env is not None else clean_environment(),
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    return CliResult(
        completed.returncode,
        completed.stdout.decode("utf-8", errors="replace"),
        completed.stderr.decode("utf-8", errors="replace"),
    )
