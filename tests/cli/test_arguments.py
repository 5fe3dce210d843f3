import sys
import types

import pytest

from weir.cli import main as cli_main
from weir.cli.arguments import parse_args
from weir.cli.offset_specs import OffsetKind, OffsetSpec


def test_topic_create_collects_one_config_per_repeated_flag() -> None:
    args = parse_args(
        [
            "topic", "create", "--partitions", "3", "--replication-factor", "1",
            "--config", "retention.ms=1000", "--config", "cleanup.policy=compact",
            "--config", "a=b=c", "orders",
        ]
    )  # fmt: skip
    assert (args.command, args.topic_command, args.name) == ("topic", "create", "orders")
    assert args.partitions == 3
    assert args.replication_factor == 1
    assert args.config == [("retention.ms", "1000"), ("cleanup.policy", "compact"), ("a", "b=c")]


def test_a_second_value_after_config_is_not_taken_as_a_config() -> None:
    with pytest.raises(SystemExit):
        parse_args(["topic", "create", "t", "--config", "a=1", "b=2"])


def test_topic_create_defaults_leave_counts_to_the_broker() -> None:
    args = parse_args(["topic", "create", "t"])
    assert args.partitions == -1
    assert args.replication_factor == -1
    assert args.config == []


def test_global_options_work_before_and_after_the_subcommand() -> None:
    before = parse_args(["--format", "json", "--bootstrap", "h:1", "topic", "list"])
    after = parse_args(["topic", "list", "--format", "json", "--bootstrap", "h:1"])
    for args in (before, after):
        assert args.output_format == "json"
        assert args.bootstrap == "h:1"
    plain = parse_args(["topic", "list"])
    assert plain.output_format == "text"
    assert parse_args(["topic", "list", "--format", "table"]).output_format == "text"
    assert plain.bootstrap is None
    assert plain.request_timeout_ms == 10_000


def test_bootstrap_server_is_kafka_tools_spelling_of_bootstrap_before_and_after_the_command() -> (
    None
):
    before = parse_args(["--bootstrap-server", "h:1", "topic", "list"])
    after = parse_args(["topic", "list", "--bootstrap-server", "h:2"])
    joined = parse_args(["produce", "t", "--bootstrap-server=h:3"])
    assert (before.bootstrap, after.bootstrap, joined.bootstrap) == ("h:1", "h:2", "h:3")


def test_produce_options() -> None:
    args = parse_args(
        ["produce", "t", "--key-separator", ":", "--partition", "2", "--acks", "1",
         "--compression", "zstd"]
    )  # fmt: skip
    assert args.key_separator == ":"
    assert args.partition == 2
    assert args.acks == "1"
    assert args.compression == "zstd"
    defaults = parse_args(["produce", "t"])
    assert (defaults.acks, defaults.compression, defaults.key_separator) == ("all", "none", None)


def test_consume_options() -> None:
    args = parse_args(
        ["consume", "t", "--partition", "1", "--offset", "5", "-n", "10", "--timeout-ms", "300",
         "--print-key"]
    )  # fmt: skip
    assert (args.partitions, args.max_records, args.timeout_ms) == ([1], 10, 300)
    assert args.offset_specs == {None: OffsetSpec(OffsetKind.ABSOLUTE, 5)}
    assert args.print_key
    assert not args.from_beginning


def test_consume_takes_kcat_short_flags_and_per_partition_offsets() -> None:
    args = parse_args(
        ["consume", "-b", "h:1", "-t", "t", "-p", "0", "-p", "2", "-o", "0:-3",
         "-o", "2:@1700000000000", "-o", "+4", "-e", "-c", "7", "-f", "%p %o %k %v\\n"]
    )  # fmt: skip
    assert (args.bootstrap, args.topic, args.partitions) == ("h:1", "t", [0, 2])
    assert args.offset_specs == {
        0: OffsetSpec(OffsetKind.BEFORE_END, 3),
        2: OffsetSpec(OffsetKind.TIMESTAMP, 1700000000000),
        None: OffsetSpec(OffsetKind.AFTER_BEGINNING, 4),
    }
    assert args.exit_at_end and args.max_records == 7
    assert args.record_tokens is not None


def test_produce_takes_kcat_short_flags() -> None:
    args = parse_args(
        ["produce", "-t", "t", "-k", "fixed", "-H", "a=1", "-H", "b=", "-p", "1", "-z", "lz4",
         "-c", "3"]
    )  # fmt: skip
    assert (args.topic, args.key, args.partition, args.compression) == ("t", "fixed", 1, "lz4")
    assert args.headers == [("a", b"1"), ("b", b"")]
    assert args.max_records == 3


@pytest.mark.parametrize(
    "argv",
    [
        ["consume", "t", "--partition", "0", "--offset", "5", "--from-beginning"],
        ["consume", "t", "-o", "0:5", "-o", "0:end"],
        ["consume", "t", "-o", "x:5"],
        ["consume", "t", "-o", "-x"],
        ["consume", "t", "-g", "g", "-p", "0"],
        ["consume", "t", "-f", "%q"],
        ["consume", "t", "-f", "%v", "--format", "json"],
        ["consume"],
        ["consume", "t", "-t", "u"],
        ["produce", "t", "-f", "%k%v"],
        ["produce", "t", "-f", "%k:%o"],
        ["produce", "t", "-f", "%k"],
        ["produce", "t", "-f", "%k:%v", "-K", ":"],
        ["produce", "t", "-H", "novalue"],
        ["consume", "t", "-n", "0"],
        ["produce", "t", "--acks", "2"],
        ["produce", "t", "--compression", "brotli"],
        ["produce", "t", "--key-separator", ""],
        ["topic", "create", "t", "--partitions", "0"],
        ["topic", "create", "t", "--config", "novalue"],
        ["topic", "alter-config", "t"],
        ["topic", "alter-config", "t", "--set", "a=1", "--delete", "a"],
        ["topic", "alter-config", "t", "--delete", "a=1"],
        ["topic"],
        [],
    ],
)
def test_misuse_exits_with_usage_code(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(argv) == 2
    assert "error" in capsys.readouterr().err


def test_alter_config_takes_one_set_or_delete_per_flag() -> None:
    args = parse_args(
        ["topic", "alter-config", "--set", "a=1", "--set", "b=2", "--delete", "c",
         "--delete", "d", "t"]
    )  # fmt: skip
    assert args.name == "t"
    assert args.set_configs == [("a", "1"), ("b", "2")]
    assert args.delete_configs == ["c", "d"]


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("serve", "topic", "produce", "consume"):
        assert command in out


def test_serve_hands_every_argument_untouched_to_the_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received: list[list[str]] = []

    def fake_main_serve(argv: list[str]) -> int:
        received.append(argv)
        return 7

    fake_app = types.ModuleType("weir.broker.app")
    fake_app.main_serve = fake_main_serve  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "weir.broker.app", fake_app)
    argv = ["serve", "--data-dir", "/x", "--format", "json", "--help", "--bogus"]
    assert cli_main.main(argv) == 7
    assert received == [argv[1:]]


def test_bad_bootstrap_address_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["--bootstrap", "host:notaport", "topic", "list"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --bootstrap:")
    assert err.count("\n") == 1


def test_reset_offsets_takes_a_topic_or_all_topics_and_a_negative_shift() -> None:
    args = parse_args(["group", "reset-offsets", "g", "--all-topics", "--shift-by", "-3"])
    assert (args.all_topics, args.topic, args.shift_by) == (True, None, -3)
    for scope in ([], ["--topic", "t", "--all-topics"]):
        with pytest.raises(SystemExit):
            parse_args(["group", "reset-offsets", "g", "--to-latest", *scope])


def test_times_are_milliseconds_or_iso_8601_in_utc_by_default() -> None:
    args = parse_args(["topic", "trim", "t", "--before-timestamp", "2021-01-01T00:00:00"])
    assert args.before_timestamp_ms == 1_609_459_200_000
    args = parse_args(["topic", "trim", "t", "--before-timestamp", "1609459200000"])
    assert args.before_timestamp_ms == 1_609_459_200_000
