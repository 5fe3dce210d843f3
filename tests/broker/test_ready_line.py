"""The start-up line of `weir serve` names every address the broker uses."""

from __future__ import annotations

from pathlib import Path

from weir.broker.app import ready_line
from weir.broker.config import load_config


def test_ready_line_names_listen_advertise_http_and_etcd_addresses() -> None:
    config = load_config(
        ["--kafka-listen", "0.0.0.0:0", "--kafka-advertise", "b1.example:9092",
         "--http-listen", "127.0.0.1:0", "--etcd", "http://e1:2379,http://e2:2379"],
        {},
    )  # fmt: skip
    line = ready_line(config, kafka_port=19092, http_port=18090, fsync_method="syncfs")
    assert "Kafka on 0.0.0.0:19092 (advertised as b1.example:9092)" in line
    assert "HTTP on 127.0.0.1:18090" in line
    assert "etcd http://e1:2379,http://e2:2379" in line


def test_single_node_ready_line_has_no_etcd() -> None:
    line = ready_line(load_config([], {}), kafka_port=9092, http_port=8090, fsync_method="auto")
    assert "etcd" not in line


def test_ready_line_names_every_listener_with_its_protocol(tmp_path: Path) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text(
        '[security]\nlisteners = "SASL_PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:9094"\n'
        'listener_security_protocol_map = "INTERNAL:PLAINTEXT"\n'
    )
    config = load_config(["--config", str(settings)], {})
    line = ready_line(config, 1, 2, "auto", {"SASL_PLAINTEXT": 41234, "INTERNAL": 9094})
    assert "SASL_PLAINTEXT (SASL_PLAINTEXT) 127.0.0.1:41234" in line
    assert "INTERNAL (PLAINTEXT) 127.0.0.1:9094 (advertised as 127.0.0.1:9094)" in line
