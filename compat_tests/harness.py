"""Runs the real `weir serve` process and the `weir` CLI, for every suite that needs
them: the compatibility suite (compat_tests/) and the CLI's end-to-end tests
(tests/cli/). The one broker-process harness: both run the test environment's
`weir` console script exactly as a user runs it.

Nothing here imports Weir: the suites talk to the broker only over its external
contract (the command line, the Kafka port and the HTTP port).
"""

from __future__ import annotations

import base64
import ctypes
import functools
import os
import re
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
CLI_TIMEOUT_S = 60.0
LOG_TAIL_CHARS = 6000

_PR_SET_PDEATHSIG = 1
# Loopback HTTP must never go through an http_proxy from the environment.
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def weir_executable() -> str:
    """The `weir` console script of the environment running the tests (or the program
    named by COMPAT_WEIR_EXECUTABLE, to run the suite against another build)."""
    override = os.environ.get("COMPAT_WEIR_EXECUTABLE")
    if override:
        return override
    candidate = Path(sys.prefix) / "bin" / "weir"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("weir")
    if found is None:
        raise RuntimeError(
            f"no `weir` executable in {candidate.parent} or on PATH; run `pip install -e .`"
        )
    return found


def free_ports(count: int) -> list[int]:
    """Distinct TCP ports that were free a moment ago (bound to port 0, then released)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def unique_topic_name(prefix: str = "t") -> str:
    """A topic name no other test uses: the prefix (sanitised, shortened) and a random tail."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", prefix).strip("-.")[:60] or "t"
    return f"{cleaned}-{uuid.uuid4().hex[:10]}"


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without any WEIR_* variable, unbuffered, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL if the test runner dies, so no broker leaks."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def interruptible_child() -> None:
    """In the child before exec (`preexec_fn`): take Ctrl-C's SIGINT as a terminal
    user's program does. A suite started in the background by a non-interactive
    shell (`scripts/test &`, CI) runs with SIGINT ignored, which children inherit:
    a test that sends SIGINT would otherwise find it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _prepare_child(open_files_limit: int | None) -> None:
    """In the child before exec: die with the parent; with `open_files_limit`, set
    RLIMIT_NOFILE's soft and hard limits to it (as `ulimit -n` would). "The parent"
    is the thread that started the child (PR_SET_PDEATHSIG): start children from a
    thread that outlives them."""
    _die_with_parent()
    if open_files_limit is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files_limit, open_files_limit))


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "<no output file>"
    if len(text) > LOG_TAIL_CHARS:
        return "...\n" + text[-LOG_TAIL_CHARS:]
    return text or "<empty>"


def _https_opener(cafile: Path) -> urllib.request.OpenerDirector:
    context = ssl.create_default_context(cafile=str(cafile))
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )


SETTINGS_FILE_NAME = "weir.toml"


class WeirProcess:
    """One `weir serve` process with fixed ports and data dir, restartable."""

    def __init__(
        self,
        data_dir: Path,
        log_dir: Path,
        *,
        kafka_port: int | None = None,
        http_port: int | None = None,
        extra_args: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
        settings_via_env: bool = False,
        open_files_limit: int | None = None,
        host: str = "127.0.0.1",
        command_prefix: tuple[str, ...] = (),
        http_cafile: Path | None = None,
    ) -> None:
        """`settings_via_env` passes data dir and listen addresses as WEIR_* environment
        variables instead of flags; `extra_env` adds variables (WEIR_* ones included);
        `open_files_limit` sets the broker's RLIMIT_NOFILE (soft and hard); `host` is
        the address it listens on and `command_prefix` runs it through another command
        (`ip netns exec NS`, which execs it: the pid stays the broker's). With
        `http_cafile` the HTTP listener is spoken to over https, trusting that CA
        (a broker with `security.http_tls`)."""
        if kafka_port is None or http_port is None:
            kafka_port, http_port = free_ports(2)
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.kafka_port = kafka_port
        self.http_port = http_port
        self.extra_args = extra_args
        self.extra_env = dict(extra_env or {})
        self.settings_via_env = settings_via_env
        self.open_files_limit = open_files_limit
        self.host = host
        self.command_prefix = command_prefix
        self.bootstrap = f"{host}:{kafka_port}"
        self.http_url = f"{'https' if http_cafile else 'http'}://{host}:{http_port}"
        self._http = _HTTP if http_cafile is None else _https_opener(http_cafile)
        # (user, password) for the HTTP endpoints of a broker with security on.
        self.http_credentials: tuple[str, str] | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_dir.mkdir(parents=True, exist_ok=True)

    @classmethod
    def configured(
        cls,
        base: Path,
        settings_toml: str,
        *,
        open_files_limit: int | None = None,
        http_cafile: Path | None = None,
    ) -> WeirProcess:
        """A broker (not started) with its data and logs under `base`, started with
        `--config base/weir.toml`, a settings file holding `settings_toml`."""
        base.mkdir(parents=True, exist_ok=True)
        settings_file = base / SETTINGS_FILE_NAME
        settings_file.write_text(settings_toml)
        return cls(
            base / "data",
            base / "logs",
            extra_args=("--config", str(settings_file)),
            open_files_limit=open_files_limit,
            http_cafile=http_cafile,
        )

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def settings(self) -> dict[str, str]:
        return {
            "data-dir": str(self.data_dir),
            "kafka-listen": self.bootstrap,
            "http-listen": f"{self.host}:{self.http_port}",
        }

    @property
    def command(self) -> list[str]:
        flags: list[str] = []
        if not self.settings_via_env:
            for name, value in self.settings.items():
                flags += [f"--{name}", value]
        return [*self.command_prefix, weir_executable(), "serve", *flags, *self.extra_args]

    @property
    def environment(self) -> dict[str, str]:
        env = clean_environment()
        if self.settings_via_env:
            for name, value in self.settings.items():
                env["WEIR_" + name.upper().replace("-", "_")] = value
        env.update(self.extra_env)
        return env

    @property
    def stdout_path(self) -> Path:
        return self.log_dir / f"weir-{self.starts}.stdout"

    @property
    def stderr_path(self) -> Path:
        return self.log_dir / f"weir-{self.starts}.stderr"

    @property
    def pid(self) -> int:
        assert self.process is not None, "broker was never started"
        return self.process.pid

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start the process and wait until GET /health/ready answers 200."""
        self.spawn()
        self.wait_ready(ready_timeout_s)

    def spawn(self) -> None:
        """Start the process without waiting for it (then `wait_ready`): brokers of a
        cluster start side by side."""
        assert not self.is_running(), "broker is already running"
        self.starts += 1
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=self.environment,
                # Only prctl and setrlimit: no locks taken.
                preexec_fn=functools.partial(_prepare_child, self.open_files_limit),
            )

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until GET /health/ready answers 200 (the process killed and RuntimeError
        after `timeout_s`, or at once when it exits)."""
        deadline = time.monotonic() + timeout_s
        url = f"{self.http_url}/health/ready"
        last_error = "no answer yet"
        assert self.process is not None
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(
                    f"`{' '.join(self.command)}` exited with code {code} before becoming ready.\n"
                    f"--- stderr ---\n{self.stderr_text()}"
                )
            try:
                with self._http.open(url, timeout=1.0) as response:
                    if response.status == 200:
                        return
                    last_error = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:
                last_error = f"HTTP {exc.code}"
            except (OSError, urllib.error.URLError) as exc:
                last_error = repr(exc)
            time.sleep(0.05)  # polling another process: no event to wait on
        self.kill()
        raise RuntimeError(
            f"broker not ready after {timeout_s:.0f}s ({url}: {last_error}).\n"
            f"command: {' '.join(self.command)}\n--- stderr ---\n{self.stderr_text()}"
        )

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then wait up to `timeout_s`; asserts the process exited. Returns its code."""
        assert self.process is not None, "broker was never started"
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(
                    f"broker did not exit within {timeout_s:.0f}s of SIGTERM (SIGKILLed it).\n"
                    f"--- stderr ---\n{self.stderr_text()}"
                ) from None
        code = self.process.returncode
        assert code is not None
        return code

    def kill(self) -> None:
        """SIGKILL (a crash: no chance to flush or clean up) and reap."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self, ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        """Stop (SIGTERM) if running, then start again on the same data dir and ports."""
        if self.is_running():
            self.stop()
        self.start(ready_timeout_s)

    def close(self) -> None:
        self.kill()

    # -- observation -------------------------------------------------------------------------

    def stderr_text(self) -> str:
        return _tail(self.stderr_path)

    def stdout_text(self) -> str:
        return _tail(self.stdout_path)

    def open_files_count(self) -> int:
        """Descriptors the process holds now (/proc/PID/fd)."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_bytes(self) -> int:
        """Resident set size from /proc/PID/status (VmRSS)."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        match = re.search(r"^VmRSS:\s+(\d+)\s+kB$", status, re.MULTILINE)
        assert match is not None, f"no VmRSS in /proc/{self.pid}/status"
        return int(match.group(1)) * 1024

    def http_get(self, path: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
        """GET `path`, with HTTP Basic as `http_credentials` when those are set."""
        request = urllib.request.Request(self.http_url + path)
        if self.http_credentials is not None:
            token = base64.b64encode(":".join(self.http_credentials).encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with self._http.open(request, timeout=timeout_s) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def metric_samples(self, name: str) -> dict[str, float]:
        """Every sample of the Prometheus family `name`, keyed by its label
        text (`reason="timeout"`; "" for a sample without labels)."""
        status, body = self.http_get("/metrics")
        assert status == 200, f"/metrics answered {status}"
        samples: dict[str, float] = {}
        pattern = re.compile(rf"^{re.escape(name)}(?:{{(.*)}})? (\S+)$", re.MULTILINE)
        for match in pattern.finditer(body.decode()):
            samples[match.group(1) or ""] = float(match.group(2))
        return samples

    def connection_trouble(self) -> dict[str, float]:
        """Request errors and connections the broker closed, by label: what a
        client suite asserts stays empty (a client the broker cannot serve
        shows up here even when the client retries and passes)."""
        trouble = {
            f"request_errors {key}": value
            for key, value in self.metric_samples("weir_request_errors_total").items()
        }
        trouble.update(
            (f"closed_by_broker {key}", value)
            for key, value in self.metric_samples("weir_connections_closed_by_broker_total").items()
        )
        return {key: value for key, value in trouble.items() if value}

    def describe(self) -> str:
        state = "running" if self.is_running() else "not running"
        return f"weir pid {self.process.pid if self.process else '-'} ({state}) on {self.bootstrap}"


def create_topic(
    bootstrap: str,
    name: str,
    *,
    partitions: int = 1,
    config: dict[str, str] | None = None,
    timeout_s: float = 15.0,
) -> None:
    """Create a topic through confluent-kafka's AdminClient (raises on any error)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        request_timeout=timeout_s,
    )
    futures[name].result(timeout=timeout_s)


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> CliResult:
    """Run `weir ARGS...` to completion (the client commands: topic, produce, consume...)."""
    completed = subprocess.run(
        [weir_executable(), *args],
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
