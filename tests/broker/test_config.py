from pathlib import Path

import pytest

from weir.broker.config import ConfigError, HostPort, check_data_dir, load_config


def test_defaults_match_the_external_contract() -> None:
    config = load_config([], {})
    assert config.data_dir == Path("./weir-data")
    assert config.kafka_listen == HostPort("127.0.0.1", 9092)
    assert config.http_listen == HostPort("127.0.0.1", 8090)
    assert config.node_id == 1
    assert config.etcd is None
    assert config.advertised == config.kafka_listen


def test_flags_override_environment_which_overrides_file(tmp_path: Path) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text('data_dir = "/from/file"\nnode_id = 7\n[limits]\nconnections_max = 5\n')
    environ = {"WEIR_CONFIG": str(settings), "WEIR_NODE_ID": "8"}
    config = load_config(["--node-id", "9"], environ)
    assert config.node_id == 9
    assert config.data_dir == Path("/from/file")
    assert config.limits.connections_max == 5
    config = load_config([], environ)
    assert config.node_id == 8


def test_advertised_address_defaults_to_listen_address() -> None:
    config = load_config(["--kafka-listen", "0.0.0.0:19092", "--kafka-advertise", "h:1"], {})
    assert config.kafka_listen == HostPort("0.0.0.0", 19092)
    assert config.advertised == HostPort("h", 1)


@pytest.mark.parametrize(
    "argv",
    [
        ["--kafka-listen", "nohostport"],
        ["--kafka-listen", "127.0.0.1:99999"],
        ["--http-listen", "127.0.0.1:http"],
        ["--node-id", "minus"],
        ["--node-id", "-1"],
    ],
)
def test_malformed_flag_is_a_config_error(argv: list[str]) -> None:
    with pytest.raises(ConfigError):
        load_config(argv, {})


def test_unknown_file_setting_is_rejected(tmp_path: Path) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text("no_such_setting = 1\n")
    with pytest.raises(ConfigError, match="no_such_setting"):
        load_config(["--config", str(settings)], {})


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(["--config", str(tmp_path / "absent.toml")], {})


def test_unusable_data_dir_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="not usable"):
        check_data_dir(blocker / "sub")


@pytest.mark.parametrize(
    "setting",
    [
        "group_consumer_session_timeout_ms = 44000",
        "group_consumer_session_timeout_ms = 61000",
        "group_consumer_heartbeat_interval_ms = 4000",
        "group_consumer_max_heartbeat_interval_ms = 4000",
    ],
)
def test_kip848_group_defaults_must_lie_within_their_bounds(tmp_path: Path, setting: str) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text(setting + "\n")
    with pytest.raises(ConfigError, match="must lie within"):
        load_config(["--config", str(settings)], {})


def test_lowering_a_bound_admits_a_shorter_kip848_session(tmp_path: Path) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text(
        "group_consumer_min_session_timeout_ms = 6000\ngroup_consumer_session_timeout_ms = 6000\n"
    )
    config = load_config(["--config", str(settings)], {})
    assert config.group_settings().consumer_session_timeout_ms == 6000
