"""The external contract of `weir serve` (DESIGN.md): flags and WEIR_* variables, the
HTTP endpoints, clean SIGTERM shutdown, and one-line errors for bad settings."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

from compat_tests.harness import WeirProcess, free_ports, weir_executable

EXIT_TIMEOUT_S = 15


def run_serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `weir serve ARGS` expecting it to exit on its own (it must not serve)."""
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    base_env.update(env or {})
    return subprocess.run(
        [weir_executable(), "serve", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S,
        env=base_env,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode != 0, f"exited 0; stderr: {result.stderr!r}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line error, got {len(lines)} lines:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"


def test_health_live_ready_and_metrics_answer(broker: WeirProcess) -> None:
    assert broker.http_get("/health/live")[0] == 200
    assert broker.http_get("/health/ready")[0] == 200
    status, body = broker.http_get("/metrics")
    assert status == 200
    text = body.decode()
    assert "# TYPE " in text
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert samples, "no samples in /metrics"
    sample = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? -?[0-9.eE+-]+|NaN|[+-]Inf$")
    bad = [line for line in samples if not sample.match(line)]
    assert bad == [], f"lines that are not Prometheus samples: {bad[:5]}"


def test_unknown_http_path_is_404(broker: WeirProcess) -> None:
    assert broker.http_get("/no/such/path")[0] == 404


def test_sigterm_with_connected_clients_exits_zero_within_10s(own_broker: WeirProcess) -> None:
    idle = [
        socket.create_connection(("127.0.0.1", own_broker.kafka_port), timeout=5) for _ in range(5)
    ]
    try:
        started = time.monotonic()
        code = own_broker.stop(timeout_s=10)
        assert code == 0, f"exit code {code} after SIGTERM\n{own_broker.stderr_text()}"
        assert time.monotonic() - started < 10
    finally:
        for sock in idle:
            sock.close()


def test_sigint_exits_zero(own_broker: WeirProcess) -> None:
    assert own_broker.process is not None
    own_broker.process.send_signal(signal.SIGINT)
    assert own_broker.process.wait(timeout=10) == 0


def test_restart_on_same_data_dir_and_ports_becomes_ready(own_broker: WeirProcess) -> None:
    own_broker.restart()
    assert own_broker.http_get("/health/ready")[0] == 200


def test_weir_environment_variables_configure_the_broker(tmp_path: Path) -> None:
    proc = WeirProcess(tmp_path / "from-env", tmp_path / "logs", settings_via_env=True)
    try:
        proc.start()  # no flags at all: WEIR_DATA_DIR, WEIR_KAFKA_LISTEN, WEIR_HTTP_LISTEN
        assert "--data-dir" not in proc.command
        assert (tmp_path / "from-env").is_dir()
        with socket.create_connection(("127.0.0.1", proc.kafka_port), timeout=5):
            pass
    finally:
        proc.close()


def test_flags_override_environment_variables(tmp_path: Path) -> None:
    (env_kafka_port,) = free_ports(1)
    proc = WeirProcess(
        tmp_path / "data",
        tmp_path / "logs",
        extra_env={
            "WEIR_KAFKA_LISTEN": f"127.0.0.1:{env_kafka_port}",
            "WEIR_DATA_DIR": str(tmp_path / "env-data"),
        },
    )
    try:
        proc.start()
        with socket.create_connection(("127.0.0.1", proc.kafka_port), timeout=5):
            pass
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", env_kafka_port)) != 0, "listening on env port"
        assert not (tmp_path / "env-data").exists()
    finally:
        proc.close()


def test_unknown_flag_is_a_one_line_error() -> None:
    assert_one_line_error(run_serve("--no-such-flag", "x"), "--no-such-flag")


def test_malformed_listen_address_is_a_one_line_error(tmp_path: Path) -> None:
    result = run_serve("--data-dir", str(tmp_path / "d"), "--kafka-listen", "nonsense")
    assert_one_line_error(result, "--kafka-listen")


def test_data_dir_that_is_a_file_is_a_one_line_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "plain-file"
    not_a_dir.write_text("x")
    kafka_port, http_port = free_ports(2)
    result = run_serve(
        "--data-dir", str(not_a_dir),
        "--kafka-listen", f"127.0.0.1:{kafka_port}",
        "--http-listen", f"127.0.0.1:{http_port}",
    )  # fmt: skip
    assert_one_line_error(result, str(not_a_dir))


def test_second_broker_on_the_same_data_dir_is_refused(own_broker: WeirProcess) -> None:
    kafka_port, http_port = free_ports(2)
    result = run_serve(
        "--data-dir", str(own_broker.data_dir),
        "--kafka-listen", f"127.0.0.1:{kafka_port}",
        "--http-listen", f"127.0.0.1:{http_port}",
    )  # fmt: skip
    assert_one_line_error(result, str(own_broker.data_dir))
    assert own_broker.is_running()


def test_kafka_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        (http_port,) = free_ports(1)
        result = run_serve(
            "--data-dir", str(tmp_path / "d"),
            "--kafka-listen", f"127.0.0.1:{taken.getsockname()[1]}",
            "--http-listen", f"127.0.0.1:{http_port}",
        )  # fmt: skip
    assert_one_line_error(result)
