"""The budget's limits are settings, checked to nest when the broker starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.broker.config import ConfigError, Limits, load_config


def limits_from(tmp_path: Path, text: str) -> Limits:
    settings = tmp_path / "weir.toml"
    settings.write_text(f"[limits]\n{text}\n")
    return load_config(["--config", str(settings)], {}).limits


def test_budget_and_connection_limits_are_settings(tmp_path: Path) -> None:
    limits = limits_from(
        tmp_path,
        "in_flight_bytes_max = 200000000\nconnection_in_flight_bytes_max = 2000000\n"
        "connection_in_flight_bytes_min = 1000\nconnections_per_address_max = 7\n"
        "http_connections_max = 3\nhttp_request_timeout_ms = 100\n",
    )
    assert (limits.in_flight_bytes_max, limits.connection_in_flight_bytes_max) == (
        200_000_000,
        2_000_000,
    )
    assert limits.connection_in_flight_bytes_min == 1000
    assert (limits.connections_per_address_max, limits.http_connections_max) == (7, 3)
    assert limits.http_request_timeout_ms == 100


def test_defaults_keep_one_address_below_the_global_connection_limit() -> None:
    limits = Limits()
    assert limits.connections_per_address_max < limits.connections_max
    assert limits.frame_bytes_max <= limits.in_flight_bytes_max
    assert (
        limits.connection_in_flight_bytes_min
        <= limits.connection_in_flight_bytes_max
        <= limits.in_flight_bytes_max
    )


@pytest.mark.parametrize(
    "text,named",
    [
        ("connection_in_flight_bytes_min = 20000000", "connection_in_flight_bytes_min"),
        ("connection_in_flight_bytes_max = 300000000", "connection_in_flight_bytes_max"),
        ("in_flight_bytes_max = 50000000", "frame_bytes_max"),
    ],
)
def test_limits_that_do_not_nest_are_refused(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        limits_from(tmp_path, text)
