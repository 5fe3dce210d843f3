import logging
import re
from pathlib import Path

import pytest

from weir.broker.config import (
    ConfigError,
    HostPort,
    build_argument_parser,
    check_data_dir,
    load_config,
    load_config_and_sources,
    log_level,
    remove_new_data_dir,
)


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


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("group_share_delivery_count_limit = 11", "must be from 2 to 10, got 11"),
        (
            "group_share_max_delivery_count_limit = 5\ngroup_share_delivery_count_limit = 6",
            "group_share_delivery_count_limit (6) must lie within",
        ),
        (
            "group_share_min_record_lock_duration_ms = 30000\n"
            "group_share_record_lock_duration_ms = 20000",
            "must lie within",
        ),
        ("group_share_max_heartbeat_interval_ms = 4000", "must lie within"),
        ("group_share_min_assignment_interval_ms = 2000", "must lie within"),
        ("group_share_max_delivery_count_limit = 26", "must be from 5 to 25, got 26"),
        ("group_share_min_delivery_count_limit = 1", "must be from 2 to 5, got 1"),
        ("group_share_record_lock_duration_ms = 999", "must be from 1000 to 3600000"),
        ("group_share_max_size = 1001", "must be from 1 to 1000"),
        ("group_share_assignment_interval_ms = -1", "must be >= 0, got -1"),
        ("group_share_session_timeout_ms = 0", "must be positive"),
        ('share_auto_offset_reset = "by_duration:-P1D"', "The value must be either 'earliest'"),
        ('share_isolation_level = "serializable"', "String must be one of"),
        ('share_renew_acknowledge_enable = "yes"', "expected true or false"),
        ("errors_deadletterqueue_topic_name_prefix = 1", "expected a string"),
    ],
)
def test_share_group_settings_are_checked_as_kafka_checks_them_at_start(
    tmp_path: Path, setting: str, message: str
) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text(setting + "\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(["--config", str(settings)], {})


def test_share_group_settings_reach_the_group_settings(tmp_path: Path) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text(
        "group_share_max_delivery_count_limit = 25\n"
        "group_share_delivery_count_limit = 8\n"
        'share_auto_offset_reset = " by_duration:PT1H "\n'
        'share_isolation_level = "read_committed"\n'
        'errors_deadletterqueue_topic_name_prefix = ""\n'
        "errors_deadletterqueue_auto_create_topics_enable = true\n"
    )
    group = load_config(["--config", str(settings)], {}).group_settings()
    assert (group.share_delivery_count_limit, group.share_delivery_count_limit_max) == (8, 25)
    assert group.share_auto_offset_reset == "by_duration:PT1H"
    assert group.share_isolation_level == "read_committed"
    assert (group.dead_letter_topic_prefix, group.dead_letter_auto_create_topics) == ("", True)


def test_bad_file_value_names_the_file_and_key(tmp_path: Path) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text('node_id = "x"\n')
    with pytest.raises(ConfigError) as raised:
        load_config(["--config", str(settings)], {})
    assert str(raised.value) == f"{settings}: node_id: expected an integer, got 'x'"


def test_bad_variable_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config([], {"WEIR_NODE_ID": "x"})
    assert str(raised.value) == "WEIR_NODE_ID: expected an integer, got 'x'"


def test_bad_flag_names_the_flag() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(["--node-id", "x"], {"WEIR_NODE_ID": "2"})
    assert str(raised.value) == "--node-id: expected an integer, got 'x'"


def test_unreadable_config_file_names_the_variable_that_gave_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^WEIR_CONFIG: cannot read "):
        load_config([], {"WEIR_CONFIG": str(tmp_path / "absent.toml")})


@pytest.mark.parametrize(
    "text,message",
    [
        ("[limits]\nno_such = 1\n", "unknown setting 'limits.no_such'"),
        ("[limits]\nconnections_max = 0\n", "limits.connections_max: must be positive, got 0"),
        ("limits = 3\n", "limits: expected a table"),
        ("group_consumer_session_timeout_ms = 61000\n", "group_consumer_session_timeout_ms"),
    ],
)
def test_file_only_settings_errors_name_the_file(tmp_path: Path, text: str, message: str) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_config(["--config", str(settings)], {})
    assert str(raised.value).startswith(f"{settings}: ")
    assert message in str(raised.value)


def test_sources_name_where_each_setting_was_given(tmp_path: Path) -> None:
    settings = tmp_path / "weir.toml"
    settings.write_text('data_dir = "/from/file"\nrack = "r1"\n')
    environ = {"WEIR_CONFIG": str(settings), "WEIR_HTTP_LISTEN": "127.0.0.1:1"}
    _, sources = load_config_and_sources(["--kafka-listen", "127.0.0.1:2"], environ)
    assert sources.of("kafka_listen") == "--kafka-listen"
    assert sources.of("http_listen") == "WEIR_HTTP_LISTEN"
    assert sources.of("data_dir") == f"{settings}: data_dir"
    assert sources.of("etcd") == "--etcd"  # not given: the flag that would set it


@pytest.mark.parametrize("text,level", [("debug", logging.DEBUG), ("Warning", logging.WARNING)])
def test_log_level_names_are_read_in_any_case(text: str, level: int) -> None:
    assert log_level({"WEIR_LOG_LEVEL": text}) == level


def test_log_level_defaults_to_info() -> None:
    assert log_level({}) == log_level({"WEIR_LOG_LEVEL": ""}) == logging.INFO


def test_unknown_log_level_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^WEIR_LOG_LEVEL: expected one of .*, got 'TRACE'$"):
        log_level({"WEIR_LOG_LEVEL": "TRACE"})


def test_help_gives_each_flag_its_default_and_variable() -> None:
    help_text = " ".join(build_argument_parser().format_help().split())
    assert "--node-id N this broker's id, unique in a cluster (default: 1; env WEIR_NODE_ID)" in (
        help_text
    )
    assert "(default: 127.0.0.1:8090; env WEIR_HTTP_LISTEN)" in help_text


def test_check_data_dir_returns_the_outermost_directory_it_created(tmp_path: Path) -> None:
    assert check_data_dir(tmp_path / "a" / "b") == tmp_path / "a"
    assert check_data_dir(tmp_path / "a" / "b") is None


def test_removing_a_new_data_dir_removes_what_the_start_put_in_it(tmp_path: Path) -> None:
    created = check_data_dir(tmp_path / "a" / "b")
    (tmp_path / "a" / "b" / ".lock").write_bytes(b"")
    remove_new_data_dir(created)
    assert list(tmp_path.iterdir()) == []


def test_removing_keeps_a_data_dir_that_existed(tmp_path: Path) -> None:
    remove_new_data_dir(check_data_dir(tmp_path))
    assert tmp_path.is_dir()
