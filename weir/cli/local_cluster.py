"""`weir cluster up`: a local cluster for trying Weir, in the foreground: an etcd
(Debian's etcd-server) and N `weir serve` processes on loopback, each with its
own data dir and log file under one directory; Ctrl-C or SIGTERM stops them all.

Like `rpk container start -n 3`, without containers. For production, start etcd
and each broker yourself (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from weir.cli.arguments import add_format_option
from weir.cli.formatting import JSON

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 12.0
POLL_INTERVAL_S = 0.2
LOG_TAIL_LINES = 15


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    kafka: str = ""
    http: str = ""
    data_dir: Path | None = None
    node_id: int = 0
    command: tuple[str, ...] = ()


class ClusterUpError(Exception):
    pass


def build_up_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="weir cluster up",
        description="Start etcd and a local Weir cluster in the foreground; Ctrl-C stops it.",
    )
    parser.add_argument("--brokers", type=int, default=3, help="brokers to start (default 3)")
    parser.add_argument("--data-dir", type=Path, default=Path("./weir-cluster"),
                        help="where etcd's and each broker's data and logs go "
                             "(default ./weir-cluster)")  # fmt: skip
    parser.add_argument("--base-port", type=int, default=9092,
                        help="Kafka port of broker 1, N's is base+N-1 (default 9092)")  # fmt: skip
    parser.add_argument("--http-base-port", type=int, default=8090,
                        help="HTTP port of broker 1 (default 8090)")  # fmt: skip
    parser.add_argument("--etcd", metavar="URLS",
                        help="use this etcd (client URLs) instead of starting one")  # fmt: skip
    parser.add_argument("--etcd-port", type=int, default=2379,
                        help="client port of the etcd started here, its peer port the next "
                             "(default 2379)")  # fmt: skip
    add_format_option(parser)
    return parser


def parse_up_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = build_up_parser()
    args = parser.parse_args(list(argv))
    if not 1 <= args.brokers <= 9:
        parser.error("--brokers: from 1 to 9")
    return args


def main_cluster_up(argv: Sequence[str]) -> int:
    try:
        args = parse_up_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    children: list[Child] = []
    stopping = False

    def request_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        args.data_dir.mkdir(parents=True, exist_ok=True)
        etcd_urls = args.etcd
        if etcd_urls is None:
            etcd = _start_etcd(args.data_dir, args.etcd_port)
            children.append(etcd)
            etcd_urls = etcd.http
            _wait_etcd(etcd)
        for node_id in range(1, args.brokers + 1):
            children.append(_start_broker(args, node_id, etcd_urls))
        for child in children:
            if child.node_id:
                _wait_ready(child, lambda: stopping)
        _report_ready(args, children, etcd_urls)
        reported: set[str] = set()
        while not stopping:
            _check_alive(children, reported)
            time.sleep(POLL_INTERVAL_S)  # waiting for a signal; children polled
        return 0
    except ClusterUpError as exc:
        print(f"weir cluster up: error: {exc}", file=sys.stderr)
        return 1
    finally:
        _stop_all(children, args.data_dir)


def _start_etcd(data_dir: Path, client_port: int) -> Child:
    executable = shutil.which("etcd")
    if executable is None:
        raise ClusterUpError(
            "etcd is not installed: apt-get install etcd-server (or pass --etcd URLS)"
        )
    client_url = f"http://127.0.0.1:{client_port}"
    peer_url = f"http://127.0.0.1:{client_port + 1}"
    log_path = data_dir / "etcd.log"
    command = [
        executable, "--name", "weir-local", "--data-dir", str(data_dir / "etcd"),
        "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
        "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", f"weir-local={peer_url}",
    ]  # fmt: skip
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file,
                                   stderr=log_file, start_new_session=True)  # fmt: skip
    return Child("etcd", process, log_path, http=client_url, command=tuple(command))


def _wait_etcd(etcd: Child) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if etcd.process.poll() is not None:
            raise ClusterUpError(f"etcd exited with code {etcd.process.returncode}:\n"
                                 + _tail(etcd.log_path))  # fmt: skip
        try:
            with urllib.request.urlopen(etcd.http + "/health", timeout=2) as response:
                if json.loads(response.read()).get("health") == "true":
                    return
        except (OSError, ValueError):
            pass
        time.sleep(POLL_INTERVAL_S)
    raise ClusterUpError(f"etcd not healthy within {READY_TIMEOUT_S:.0f} s:\n"
                         + _tail(etcd.log_path))  # fmt: skip


def _start_broker(args: argparse.Namespace, node_id: int, etcd_urls: str) -> Child:
    kafka = f"127.0.0.1:{args.base_port + node_id - 1}"
    http = f"127.0.0.1:{args.http_base_port + node_id - 1}"
    data_dir = args.data_dir / f"broker-{node_id}"
    log_path = args.data_dir / f"broker-{node_id}.log"
    command = [
        sys.executable, "-m", "weir.cli.main", "serve", "--node-id", str(node_id),
        "--etcd", etcd_urls, "--data-dir", str(data_dir), "--kafka-listen", kafka,
        "--kafka-advertise", kafka, "--http-listen", http,
    ]  # fmt: skip
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file,
                                   stderr=log_file, start_new_session=True)  # fmt: skip
    return Child(
        f"broker {node_id}", process, log_path, kafka, http, data_dir, node_id, tuple(command)
    )


def _wait_ready(child: Child, stopping: object) -> None:
    assert callable(stopping)
    deadline = time.monotonic() + READY_TIMEOUT_S
    next_note = time.monotonic() + 10
    while time.monotonic() < deadline and not stopping():
        if child.process.poll() is not None:
            raise ClusterUpError(
                f"{child.name} exited with code {child.process.returncode}; the end of "
                f"{child.log_path}:\n{_tail(child.log_path)}"
            )
        try:
            with urllib.request.urlopen(f"http://{child.http}/health/ready", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > next_note:
            print(f"waiting for {child.name} ({child.log_path})...", file=sys.stderr)
            next_note = time.monotonic() + 10
        time.sleep(POLL_INTERVAL_S)
    if not stopping():
        raise ClusterUpError(f"{child.name} not ready within {READY_TIMEOUT_S:.0f} s; "
                             f"the end of {child.log_path}:\n{_tail(child.log_path)}")  # fmt: skip


def _report_ready(args: argparse.Namespace, children: list[Child], etcd_urls: str) -> None:
    brokers = [c for c in children if c.node_id]
    bootstrap = ",".join(c.kafka for c in brokers)
    if args.output_format == JSON:
        document = {
            "bootstrap": bootstrap,
            "etcd": etcd_urls,
            # None when --etcd named one this command did not start.
            "etcd_pid": next((c.process.pid for c in children if not c.node_id), None),
            "brokers": [
                {
                    "node_id": c.node_id,
                    "kafka": c.kafka,
                    "http": c.http,
                    "data_dir": str(c.data_dir),
                    "pid": c.process.pid,
                    "log": str(c.log_path),
                }
                for c in brokers
            ],  # fmt: skip
        }
        print(json.dumps(document), flush=True)
        return
    print(f"Weir cluster of {len(brokers)} brokers is ready (etcd {etcd_urls}).")
    for child in brokers:
        print(f"  broker {child.node_id}: kafka {child.kafka}, http {child.http}, "
              f"log {child.log_path}")  # fmt: skip
    print(f"\nbootstrap: {bootstrap}\n\nTry:\n"
          f"  weir --bootstrap {brokers[0].kafka} cluster status\n"
          f"  weir --bootstrap {brokers[0].kafka} topic create events --partitions 3 "
          f"--replication-factor {min(3, len(brokers))}\n"
          f"  weir --bootstrap {brokers[0].kafka} cluster partitions\n"
          "\nCtrl-C stops the cluster (its data stays in "
          f"{args.data_dir}).", flush=True)  # fmt: skip


def _check_alive(children: list[Child], reported: set[str]) -> None:
    """Report (once) a child that exited: the others keep running, so that killing
    a broker to watch the cluster fail over does not stop the cluster."""
    for child in children:
        code = child.process.poll()
        if code is None or child.name in reported:
            continue
        reported.add(child.name)
        command = " ".join(child.command)
        print(f"{child.name} exited with code {code}; the end of {child.log_path}:\n"
              f"{_tail(child.log_path)}\nrestart it with:\n  {command}",
              file=sys.stderr, flush=True)  # fmt: skip


def _stop_all(children: list[Child], data_dir: Path) -> None:
    """Brokers first (SIGTERM, then SIGKILL after the grace), etcd last; each one's
    fate is said on stderr, as is where the data stays."""
    if not children:
        return
    running = [c for c in children if c.process.poll() is None]
    if running:
        print(f"stopping {_names(running)}...", file=sys.stderr, flush=True)
    for group in ([c for c in children if c.node_id], [c for c in children if not c.node_id]):
        already_exited = {c.name for c in group if c.process.poll() is not None}
        for child in group:
            if child.name not in already_exited:
                child.process.send_signal(signal.SIGTERM)
        for child in group:
            killed = False
            try:
                child.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
                killed = True
            print(_stop_note(child, child.name in already_exited, killed), file=sys.stderr,
                  flush=True)  # fmt: skip
    print(f"data and logs kept in {data_dir}", file=sys.stderr, flush=True)


def _names(children: list[Child]) -> str:
    names = [c.name for c in children if c.node_id] + [c.name for c in children if not c.node_id]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _stop_note(child: Child, already_exited: bool, killed: bool) -> str:
    pid = child.process.pid
    ending = _ending(child.process.returncode)
    if already_exited:
        return f"{child.name} (pid {pid}) had already exited ({ending})"
    if killed:
        return f"killed {child.name} (pid {pid}): not stopped within {STOP_TIMEOUT_S:.0f} s"
    return f"stopped {child.name} (pid {pid}, {ending})"


def _ending(returncode: int) -> str:
    """`exit code 0`, or `ended by SIGTERM` (Popen's negative code: the signal)."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        return f"ended by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"ended by signal {-returncode}"


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-LOG_TAIL_LINES:])
