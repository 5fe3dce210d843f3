"""The automatic leader rebalance settings: defaults, and the ranges a file may set."""

from pathlib import Path

import pytest

from weir.broker.config import BrokerConfig, ConfigError, load_config


def config_from(tmp_path: Path, text: str) -> BrokerConfig:
    settings = tmp_path / "weir.toml"
    settings.write_text(text)
    return load_config(["--config", str(settings)], {})


def test_automatic_leader_rebalance_is_on_by_default_checking_every_30_s_at_10_percent() -> None:
    config = load_config([], {})
    assert config.auto_leader_rebalance_enable is True
    assert config.leader_imbalance_per_broker_percentage == 10
    assert config.leader_imbalance_check_interval_ms == 30_000


def test_the_rebalance_settings_are_read_from_the_file(tmp_path: Path) -> None:
    config = config_from(
        tmp_path,
        "auto_leader_rebalance_enable = false\n"
        "leader_imbalance_per_broker_percentage = 0\n"
        "leader_imbalance_check_interval_ms = 1000\n",
    )
    assert config == BrokerConfig(
        auto_leader_rebalance_enable=False,
        leader_imbalance_per_broker_percentage=0,
        leader_imbalance_check_interval_ms=1000,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('auto_leader_rebalance_enable = "yes"', "expected true or false, got 'yes'"),
        (
            "leader_imbalance_per_broker_percentage = 101",
            "must be a percentage from 0 to 100, got 101",
        ),
        (
            "leader_imbalance_per_broker_percentage = -1",
            "must be a percentage from 0 to 100, got -1",
        ),
        ("leader_imbalance_check_interval_ms = 0", "must be positive, got 0"),
    ],
)
def test_out_of_range_rebalance_settings_are_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        config_from(tmp_path, text + "\n")
    key = text.split(" ")[0]
    assert str(raised.value) == f"{tmp_path / 'weir.toml'}: {key}: {message}"
