"""The start-up line of `weir serve` names every address the broker uses."""

from __future__ import annotations

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
