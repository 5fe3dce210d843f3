"""The `weir` CLI as a user runs it, against a real `weir serve` process."""

from __future__ import annotations

import json
from collections import Counter

from compat_tests.harness import WeirProcess, clean_environment, free_ports, run_cli
from weir.format.partitioner import partition_for_key

CONSUME_TIMEOUT_MS = "5000"


def cli(broker: WeirProcess, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    result = run_cli("--bootstrap", broker.bootstrap, *args, stdin=stdin)
    return result.returncode, result.stdout, result.stderr


def ok(broker: WeirProcess, *args: str, stdin: bytes = b"") -> str:
    code, out, err = cli(broker, *args, stdin=stdin)
    assert code == 0, f"weir {' '.join(args)} exited {code}\nstdout: {out}\nstderr: {err}"
    assert err == "", err
    return out


def describe(broker: WeirProcess, topic: str) -> dict:  # type: ignore[type-arg]
    return json.loads(ok(broker, "topic", "describe", topic, "--format", "json"))


def assert_one_error_line(err: str, expected: str) -> None:
    assert err.count("\n") == 1, err
    assert err == f"error: {expected}\n"
    assert "Traceback" not in err


def test_topic_create_list_describe_alter_delete(broker: WeirProcess, topic_name: str) -> None:
    out = ok(
        broker, "topic", "create", topic_name, "--partitions", "3", "--replication-factor", "1",
        "--config", "retention.ms=3600000",
    )  # fmt: skip
    assert out == f"created topic '{topic_name}' (3 partitions, replication factor 1)\n"

    listed = json.loads(ok(broker, "topic", "list", "--format", "json"))
    mine = [t for t in listed["topics"] if t["name"] == topic_name]
    assert len(mine) == 1
    assert (mine[0]["partitions"], mine[0]["replication_factor"]) == (3, 1)
    table = ok(broker, "topic", "list")
    assert table.splitlines()[0].split() == ["TOPIC", "PARTITIONS", "REPLICATION", "INTERNAL"]
    assert any(line.split()[:3] == [topic_name, "3", "1"] for line in table.splitlines())

    described = describe(broker, topic_name)
    assert described["name"] == topic_name
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    for partition in described["partitions"]:
        assert partition["leader"] == 1
        assert partition["replicas"] == [1]
        assert partition["isr"] == [1]
        assert (partition["log_start_offset"], partition["log_end_offset"]) == (0, 0)
        assert partition["error"] is None
    assert described["configs"].get("retention.ms") == "3600000"
    text = ok(broker, "topic", "describe", topic_name)
    assert "retention.ms=3600000" in text
    assert "PARTITION  LEADER  REPLICAS  ISR  LOG-START-OFFSET  LOG-END-OFFSET" in text

    out = ok(
        broker, "topic", "alter-config", topic_name, "--set", "segment.ms=600000",
        "--delete", "retention.ms",
    )  # fmt: skip
    assert out == f"updated topic '{topic_name}': set segment.ms=600000, deleted retention.ms\n"
    configs = describe(broker, topic_name)["configs"]
    assert configs.get("segment.ms") == "600000"
    assert "retention.ms" not in configs

    assert ok(broker, "topic", "delete", topic_name) == f"deleted topic '{topic_name}'\n"
    listed = json.loads(ok(broker, "topic", "list", "--format", "json"))
    assert topic_name not in [t["name"] for t in listed["topics"]]


def test_keyed_lines_are_produced_to_murmur2_partitions_and_consumed_back(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "3")
    lines = [f"key-{i}:value {i}" for i in range(40)]
    out = ok(
        broker, "produce", topic_name, "--key-separator", ":", "--format", "json",
        stdin=("\n".join(lines) + "\n").encode(),
    )  # fmt: skip
    summary = json.loads(out)
    assert summary["records_acknowledged"] == 40
    assert summary["lines_acknowledged"] == "1-40"
    assert summary["errors"] == []
    expected_counts = Counter(partition_for_key(f"key-{i}".encode(), 3) for i in range(40))
    assert {p["partition"]: p["records_acknowledged"] for p in summary["partitions"]} == dict(
        expected_counts
    )

    ends = {p["partition"]: p["log_end_offset"] for p in describe(broker, topic_name)["partitions"]}
    assert ends == {p: expected_counts.get(p, 0) for p in range(3)}

    out = ok(
        broker, "consume", topic_name, "--from-beginning", "-n", "40", "--print-key",
        "--timeout-ms", CONSUME_TIMEOUT_MS,
    )  # fmt: skip
    assert sorted(out.splitlines()) == sorted(line.replace(":", "\t", 1) for line in lines)

    out = ok(
        broker, "consume", topic_name, "--from-beginning", "-n", "40", "--format", "json",
        "--timeout-ms", CONSUME_TIMEOUT_MS,
    )  # fmt: skip
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 40
    for record in records:
        assert record["partition"] == partition_for_key(record["key"].encode(), 3)
        assert record["value"] == "value " + record["key"].removeprefix("key-")
    per_partition: dict[int, list[int]] = {}
    for record in records:
        per_partition.setdefault(record["partition"], []).append(record["offset"])
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))


def test_consume_stops_after_n_records_and_after_idle_timeout(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    ok(broker, "produce", topic_name, stdin=b"a\nb\nc\nd\n")
    out = ok(broker, "consume", topic_name, "--from-beginning", "-n", "2", "--timeout-ms", "5000")
    assert out == "a\nb\n"
    out = ok(broker, "consume", topic_name, "--from-beginning", "--timeout-ms", "700")
    assert out == "a\nb\nc\nd\n"
    # Default start is the end of the log: nothing new arrives, so nothing is printed.
    assert ok(broker, "consume", topic_name, "--timeout-ms", "500") == ""
    out = ok(
        broker, "consume", topic_name, "--partition", "0", "--offset", "2", "-n", "2",
        "--timeout-ms", "5000",
    )  # fmt: skip
    assert out == "c\nd\n"


def test_every_compression_codec_round_trips(broker: WeirProcess, topic_name: str) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    for codec in codecs:
        payload = "".join(f"{codec}-{i}-{'x' * 50}\n" for i in range(20)).encode()
        out = ok(broker, "produce", topic_name, "--compression", codec, stdin=payload)
        assert out == f"wrote 20 records to topic '{topic_name}'\n"
    out = ok(
        broker, "consume", topic_name, "--from-beginning", "-n", "100",
        "--timeout-ms", CONSUME_TIMEOUT_MS,
    )  # fmt: skip
    assert out.splitlines() == [f"{c}-{i}-{'x' * 50}" for c in codecs for i in range(20)]


def test_acks_zero_and_fixed_partition(broker: WeirProcess, topic_name: str) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "2")
    out = ok(broker, "produce", topic_name, "--acks", "0", "--partition", "1", stdin=b"x\ny\n")
    assert out == f"sent 2 records to topic '{topic_name}' (acks=0: the broker does not confirm)\n"
    out = ok(
        broker, "consume", topic_name, "--partition", "1", "--from-beginning", "-n", "2",
        "--timeout-ms", CONSUME_TIMEOUT_MS,
    )  # fmt: skip
    assert out == "x\ny\n"


def test_bootstrap_comes_from_the_environment(broker: WeirProcess, topic_name: str) -> None:
    env = clean_environment(WEIR_BOOTSTRAP=broker.bootstrap)
    result = run_cli("topic", "create", topic_name, "--partitions", "1", env=env)
    assert result.returncode == 0, result.stderr
    result = run_cli("topic", "list", env=env)
    assert topic_name in result.stdout


def test_kafka_tools_bootstrap_server_flag_reaches_the_broker(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name)
    for argv in (
        ("--bootstrap-server", broker.bootstrap, "topic", "list"),
        ("topic", "list", "--bootstrap-server", broker.bootstrap),
    ):
        result = run_cli(*argv, env=clean_environment())
        assert result.returncode == 0, result.stderr
        assert topic_name in result.stdout.split()


def test_unknown_topic_is_one_error_line(broker: WeirProcess) -> None:
    expected = "topic 'no-such-topic' does not exist (UNKNOWN_TOPIC_OR_PARTITION)"
    for args in (
        ["topic", "describe", "no-such-topic"],
        ["topic", "delete", "no-such-topic"],
        ["topic", "alter-config", "no-such-topic", "--set", "retention.ms=1"],
        ["consume", "no-such-topic", "--timeout-ms", "100"],
    ):
        code, out, err = cli(broker, *args, stdin=b"x\n")
        assert code == 1, (args, out, err)
        assert_one_error_line(err, expected)
    # Asking about it must not have created it.
    listed = json.loads(ok(broker, "topic", "list", "--format", "json"))
    assert "no-such-topic" not in [t["name"] for t in listed["topics"]]


def test_kafka_errors_from_topic_admin_are_one_line(broker: WeirProcess, topic_name: str) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    code, _, err = cli(broker, "topic", "create", topic_name)
    assert code == 1
    assert_one_error_line(err, f"topic '{topic_name}' already exists (TOPIC_ALREADY_EXISTS)")

    code, _, err = cli(broker, "topic", "create", "bad/name")
    assert code == 1
    assert err.startswith("error: cannot create topic 'bad/name': ")
    assert err.rstrip().endswith("(INVALID_TOPIC_EXCEPTION)")
    assert err.count("\n") == 1

    code, _, err = cli(
        broker, "topic", "create", topic_name + "-cfg", "--config", "retention.ms=soon"
    )
    assert code == 1
    assert err.rstrip().endswith("(INVALID_CONFIG)"), err
    assert err.count("\n") == 1


def test_produce_errors_are_reported(broker: WeirProcess, topic_name: str) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "2")
    code, out, err = cli(broker, "produce", topic_name, "--partition", "5", stdin=b"x\n")
    assert code == 1
    assert_one_error_line(err, f"topic '{topic_name}' has no partition 5 (it has 2: 0..1)")

    code, out, err = cli(
        broker, "produce", topic_name, "--key-separator", ":", stdin=b"k:v\nnokey\nk:w\n"
    )
    assert code == 1
    assert_one_error_line(err, "line 2: no key separator ':'; nothing was sent")
    assert out == f"wrote 0 records to topic '{topic_name}'\nnot sent: lines 1-2\n"


def test_consume_out_of_range_offset_is_an_error(broker: WeirProcess, topic_name: str) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    code, _, err = cli(
        broker, "consume", topic_name, "--partition", "0", "--offset", "99", "--timeout-ms", "2000"
    )
    assert code == 1
    assert_one_error_line(
        err,
        f"offset 99 is out of range for topic '{topic_name}' partition 0: it holds no records; "
        "the next offset is 0 (OFFSET_OUT_OF_RANGE)",
    )


def test_broker_down_is_one_error_line() -> None:
    (port,) = free_ports(1)
    for args in (["topic", "list"], ["produce", "t"], ["consume", "t"]):
        result = run_cli("--bootstrap", f"127.0.0.1:{port}", *args, stdin=b"x\n")
        assert result.returncode == 1
        assert_one_error_line(
            result.stderr, f"cannot connect to broker at 127.0.0.1:{port}: connection refused"
        )
        assert result.stdout == ""
