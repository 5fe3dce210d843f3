"""Real etcd processes for tests (Debian's etcd-server): one member or a
three-member cluster on free loopback ports, with short election timeouts; or,
with a `placement`, each member at an address of its own behind a command prefix
(a network namespace of `netns.NetworkLab`, so the fault run can isolate one).
A member can be killed, stopped (`stop`), paused (`pause`: SIGSTOP) and resumed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from compat_tests.harness import _die_with_parent, free_ports

HEALTHY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


def etcd_executable() -> str:
    path = shutil.which("etcd")
    if path is None:
        raise RuntimeError("etcd is not on PATH: apt-get install etcd-server (scripts/test does)")
    return path


@dataclass(frozen=True)
class EtcdTlsFiles:
    """etcd's client port over TLS with client certificates: its certificate and key,
    the CA both sides trust, and a client certificate and key (the test's own)."""

    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


@dataclass
class EtcdMember:
    name: str
    client_url: str
    peer_url: str
    data_dir: Path
    initial_cluster: str
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = field(default=0)
    command_prefix: tuple[str, ...] = ()
    tls: EtcdTlsFiles | None = None

    def command(self) -> list[str]:
        tls_flags: list[str] = []
        if self.tls is not None:
            tls_flags = [
                "--cert-file", str(self.tls.cert), "--key-file", str(self.tls.key),
                "--client-cert-auth", "--trusted-ca-file", str(self.tls.ca),
            ]  # fmt: skip
        return [*self._base_command(), *tls_flags]

    def _base_command(self) -> list[str]:
        return [
            *self.command_prefix,
            etcd_executable(),
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.client_url,
            "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", self.peer_url,
            "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", self.initial_cluster,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", "weir-test",
            "--heartbeat-interval", "100",
            "--election-timeout", "1000",
        ]  # fmt: skip

    def start(self) -> None:
        assert not self.is_running()
        self.starts += 1
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                preexec_fn=_die_with_parent,  # no etcd outlives a killed test run
            )

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: the member neither answers nor votes until `resume`."""
        assert self.process is not None and self.process.poll() is None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def status(self) -> dict[str, object]:
        request = urllib.request.Request(
            self.client_url + "/v3/maintenance/status", data=b"{}", method="POST"
        )
        with urllib.request.urlopen(request, timeout=2, context=self._context()) as response:
            document = json.loads(response.read())
        assert isinstance(document, dict)
        return document

    def _context(self) -> ssl.SSLContext | None:
        return None if self.tls is None else self.tls.client_context()

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(
                self.client_url + "/health", timeout=2, context=self._context()
            ) as response:
                return bool(json.loads(response.read()).get("health") == "true")
        except (OSError, ValueError):
            return False


class EtcdCluster:
    def __init__(self, members: list[EtcdMember]) -> None:
        self.members = members

    @classmethod
    def start(
        cls,
        base_dir: Path,
        members_count: int = 1,
        host: str = "127.0.0.1",
        placement: Callable[[int], tuple[str, tuple[str, ...]]] | None = None,
        tls: EtcdTlsFiles | None = None,
    ) -> EtcdCluster:
        """`host`: the address the members listen on (the ports are free on loopback).
        `placement(index)`: (member index's own address, its command prefix such as
        `ip netns exec NS`) instead; each member then uses etcd's usual ports there."""
        base_dir.mkdir(parents=True, exist_ok=True)
        names = [f"etcd{i}" for i in range(members_count)]
        if placement is None:
            ports = free_ports(2 * members_count)
            hosts = [host] * members_count
            prefixes: list[tuple[str, ...]] = [()] * members_count
        else:
            ports = [2379, 2380] * members_count
            hosts, prefixes = [], []
            for index in range(members_count):
                member_host, prefix = placement(index)
                hosts.append(member_host)
                prefixes.append(prefix)
        peer_urls = [f"http://{hosts[i]}:{ports[2 * i + 1]}" for i in range(members_count)]
        initial = ",".join(f"{n}={u}" for n, u in zip(names, peer_urls, strict=True))
        members = [
            EtcdMember(
                name=names[i],
                client_url=f"{'https' if tls else 'http'}://{hosts[i]}:{ports[2 * i]}",
                peer_url=peer_urls[i],
                data_dir=base_dir / names[i],
                initial_cluster=initial,
                log_path=base_dir / f"{names[i]}.log",
                command_prefix=prefixes[i],
                tls=tls,
            )
            for i in range(members_count)
        ]
        cluster = cls(members)
        for member in members:
            member.start()
        try:
            cluster.wait_healthy()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    @property
    def client_urls(self) -> str:
        return ",".join(m.client_url for m in self.members)

    def wait_healthy(self, timeout_s: float = HEALTHY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(m.healthy() for m in self.members if m.is_running()):
                return
            time.sleep(0.1)  # polling other processes: no event to wait on
        logs = "\n".join(m.log_path.read_text(errors="replace")[-2000:] for m in self.members)
        raise RuntimeError(f"etcd not healthy within {timeout_s:.0f} s\n{logs}")

    def leader(self) -> EtcdMember:
        for member in self.members:
            if not member.is_running():
                continue
            status = member.status()
            header = status.get("header")
            assert isinstance(header, dict)
            if str(status.get("leader")) == str(header.get("member_id")):
                return member
        raise AssertionError("no etcd member reports itself leader")

    def stop(self) -> None:
        for member in self.members:
            member.resume()  # a paused member would ignore SIGTERM until killed
            member.stop()
