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
# DESIGN.md's external contract: every flag of `weir serve`.
FLAGS = (
    "--config", "--data-dir", "--node-id", "--kafka-listen", "--kafka-advertise",
    "--http-listen", "--etcd",
)  # fmt: skip


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


def listen_args(data_dir: Path, kafka: str, http: str) -> tuple[str, ...]:
    return ("--data-dir", str(data_dir), "--kafka-listen", kafka, "--http-listen", http)


def taken_port(sock: socket.socket) -> str:
    """`sock` bound and listening on loopback: its address, which no broker can take."""
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return f"127.0.0.1:{sock.getsockname()[1]}"


def test_kafka_port_in_use_names_the_address_and_the_flag(tmp_path: Path) -> None:
    (http_port,) = free_ports(1)
    with socket.socket() as taken:
        address = taken_port(taken)
        result = run_serve(*listen_args(tmp_path / "d", address, f"127.0.0.1:{http_port}"))
    assert_one_line_error(
        result,
        f"weir serve: error: cannot listen for Kafka clients on {address} (--kafka-listen): "
        "address already in use",
    )


def test_http_port_in_use_names_the_address_and_the_flag(tmp_path: Path) -> None:
    (kafka_port,) = free_ports(1)
    with socket.socket() as taken:
        address = taken_port(taken)
        result = run_serve(*listen_args(tmp_path / "d", f"127.0.0.1:{kafka_port}", address))
    assert_one_line_error(
        result,
        f"weir serve: error: cannot listen for HTTP requests on {address} (--http-listen): "
        "address already in use",
    )


def test_port_in_use_from_a_variable_names_the_variable(tmp_path: Path) -> None:
    kafka_port, http_port = free_ports(2)
    with socket.socket() as taken:
        address = taken_port(taken)
        result = run_serve(
            "--data-dir", str(tmp_path / "d"), "--http-listen", f"127.0.0.1:{http_port}",
            env={"WEIR_KAFKA_LISTEN": address},
        )  # fmt: skip
    assert_one_line_error(result, f"on {address} (WEIR_KAFKA_LISTEN): address already in use")


def test_failed_start_removes_the_data_dir_it_created(tmp_path: Path) -> None:
    fresh = tmp_path / "new-parent" / "data"
    (http_port,) = free_ports(1)
    with socket.socket() as taken:
        address = taken_port(taken)
        result = run_serve(*listen_args(fresh, address, f"127.0.0.1:{http_port}"))
    assert_one_line_error(result, "address already in use")
    assert not (tmp_path / "new-parent").exists()


def test_failed_start_keeps_an_existing_data_dir_and_its_files(tmp_path: Path) -> None:
    existing = tmp_path / "data"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    (http_port,) = free_ports(1)
    with socket.socket() as taken:
        address = taken_port(taken)
        result = run_serve(*listen_args(existing, address, f"127.0.0.1:{http_port}"))
    assert_one_line_error(result, "address already in use")
    assert (existing / "notes.txt").read_text() == "mine"


def test_etcd_out_of_reach_is_one_line_and_leaves_no_data_dir(tmp_path: Path) -> None:
    kafka_port, http_port, etcd_port = free_ports(3)
    fresh = tmp_path / "data"
    result = run_serve(
        *listen_args(fresh, f"127.0.0.1:{kafka_port}", f"127.0.0.1:{http_port}"),
        "--etcd", f"http://127.0.0.1:{etcd_port}",
    )  # fmt: skip
    assert_one_line_error(result, "weir serve: error: etcd (--etcd): ", f"127.0.0.1:{etcd_port}")
    assert not fresh.exists()


def test_ready_line_shows_every_listen_and_advertise_address(tmp_path: Path) -> None:
    proc = WeirProcess(
        tmp_path / "data",
        tmp_path / "logs",
        extra_args=("--kafka-advertise", "kafka.example:19092"),
    )
    try:
        proc.start()
        ready = [line for line in proc.stderr_text().splitlines() if " ready: " in line]
        assert len(ready) == 1, proc.stderr_text()
        assert f"Kafka on 127.0.0.1:{proc.kafka_port}" in ready[0]
        assert "(advertised as kafka.example:19092)" in ready[0]
        assert f"HTTP on 127.0.0.1:{proc.http_port}" in ready[0]
    finally:
        proc.close()


def test_bad_file_setting_names_the_file_and_key(tmp_path: Path) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text('node_id = "x"\n')
    result = run_serve("--config", str(settings), "--data-dir", str(tmp_path / "d"))
    assert_one_line_error(
        result, f"weir serve: error: {settings}: node_id: expected an integer, got 'x'"
    )
    assert not (tmp_path / "d").exists()


def test_unknown_file_setting_names_the_file(tmp_path: Path) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text("no_such_setting = 1\n")
    result = run_serve("--config", str(settings), "--data-dir", str(tmp_path / "d"))
    assert_one_line_error(
        result, f"weir serve: error: {settings}: unknown setting 'no_such_setting'"
    )


def test_bad_variable_names_the_variable_not_the_flag(tmp_path: Path) -> None:
    result = run_serve("--data-dir", str(tmp_path / "d"), env={"WEIR_NODE_ID": "x"})
    assert_one_line_error(result, "weir serve: error: WEIR_NODE_ID: expected an integer, got 'x'")


def test_bad_flag_names_the_flag(tmp_path: Path) -> None:
    result = run_serve("--data-dir", str(tmp_path / "d"), "--node-id", "x")
    assert_one_line_error(result, "weir serve: error: --node-id: expected an integer, got 'x'")


def test_unknown_log_level_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run_serve("--data-dir", str(tmp_path / "d"), env={"WEIR_LOG_LEVEL": "TRACE"})
    assert_one_line_error(result, "WEIR_LOG_LEVEL", "'TRACE'")
    assert result.returncode == 2
    assert not (tmp_path / "d").exists()


def test_log_level_is_read_in_any_case(tmp_path: Path) -> None:
    proc = WeirProcess(tmp_path / "data", tmp_path / "logs", extra_env={"WEIR_LOG_LEVEL": "debug"})
    try:
        proc.start()
        assert " DEBUG " in proc.stderr_text()
    finally:
        proc.close()


def test_help_describes_every_flag_and_exits_zero() -> None:
    result = run_serve("--help")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    help_text = " ".join(result.stdout.split())  # argparse wraps lines
    for flag in FLAGS:
        variable = "WEIR_" + flag.removeprefix("--").upper().replace("-", "_")
        assert flag in help_text
        assert f"env {variable})" in help_text, f"{flag}: no default and variable in the help"
    assert "(default: 127.0.0.1:9092;" in help_text
    assert "docs/user-guide.md" in help_text


def test_repair_help_exits_zero() -> None:
    result = subprocess.run(
        [weir_executable(), "repair", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: weir repair")
