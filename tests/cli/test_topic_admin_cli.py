"""`weir topic add-partitions | trim`, `--config` parsing, `weir cluster info` and
`weir --version`, run as a user runs them against a real `weir serve` process."""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer

from compat_tests.harness import WeirProcess, run_cli
from weir.cli.kafka_client import client_software_version

from .test_cli_end_to_end import assert_one_error_line, cli, describe, ok

OLD_TIMESTAMP_MS = 1_600_000_000_000  # 2020-09-13
BETWEEN_TIMESTAMP_ISO = "2021-01-01T00:00:00Z"


def produce_with_timestamps(broker: WeirProcess, topic: str, timestamps_ms: list[int]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i, timestamp_ms in enumerate(timestamps_ms):
        producer.produce(topic, value=f"v{i}".encode(), partition=0, timestamp=timestamp_ms)
    assert producer.flush(10) == 0


def log_offsets(broker: WeirProcess, topic: str) -> list[tuple[int, int]]:
    return [
        (p["log_start_offset"], p["log_end_offset"]) for p in describe(broker, topic)["partitions"]
    ]


# -- version --------------------------------------------------------------------------------


def test_version_flag_prints_weir_and_the_version() -> None:
    result = run_cli("--version")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"weir {client_software_version()}\n"
    assert client_software_version().count(".") == 2


# -- add-partitions ---------------------------------------------------------------------------


def test_add_partitions_by_number_and_to_a_total(broker: WeirProcess, topic_name: str) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    out = ok(broker, "topic", "add-partitions", topic_name, "--num", "1")
    assert out == f"added 1 partition to topic '{topic_name}' (now 2 partitions)\n"
    document = json.loads(
        ok(broker, "topic", "add-partitions", topic_name, "--total", "5", "--format", "json")
    )
    assert document == {
        "name": topic_name,
        "previous_partition_count": 2,
        "partition_count": 5,
        "added_partition_count": 3,
    }
    assert describe(broker, topic_name)["partition_count"] == 5


def test_add_partitions_refuses_a_total_that_is_not_larger(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "3")
    for total in ("3", "2"):
        code, out, err = cli(broker, "topic", "add-partitions", topic_name, "--total", total)
        assert (code, out) == (1, "")
        assert_one_error_line(
            err,
            f"topic '{topic_name}' already has 3 partitions: --total must be more than 3 "
            "(partitions can be added, never removed) (INVALID_PARTITIONS)",
        )
    assert describe(broker, topic_name)["partition_count"] == 3


def test_add_partitions_needs_exactly_one_of_num_and_total(
    broker: WeirProcess, topic_name: str
) -> None:
    code, _, err = cli(broker, "topic", "add-partitions", topic_name)
    assert code == 2 and "one of the arguments -n/--num --total is required" in err
    code, _, err = cli(broker, "topic", "add-partitions", topic_name, "-n", "1", "--total", "4")
    assert code == 2 and "not allowed with argument" in err


# -- trim -------------------------------------------------------------------------------------


def test_trim_before_offset_moves_the_log_start_of_one_partition(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "2")
    ok(broker, "produce", topic_name, "--partition", "0", stdin=b"a\nb\nc\nd\n")
    ok(broker, "produce", topic_name, "--partition", "1", stdin=b"e\nf\n")

    out = ok(broker, "topic", "trim", topic_name, "--before-offset", "3", "--partition", "0")
    assert out.splitlines() == [
        f"trimmed topic '{topic_name}'",
        "PARTITION  PREVIOUS-LOG-START-OFFSET  LOG-START-OFFSET  LOG-END-OFFSET",
        "0          0                          3                 4",
    ]
    assert log_offsets(broker, topic_name) == [(3, 4), (0, 2)]
    consumed = ok(broker, "consume", topic_name, "--partition", "0", "--from-beginning",
                  "-n", "1", "--timeout-ms", "5000")  # fmt: skip
    assert consumed == "d\n"


def test_trim_every_partition_reports_each_new_log_start_in_json(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "2")
    ok(broker, "produce", topic_name, "--partition", "0", stdin=b"a\nb\nc\n")
    ok(broker, "produce", topic_name, "--partition", "1", stdin=b"d\ne\n")
    document = json.loads(
        ok(broker, "topic", "trim", topic_name, "--before-offset", "2", "--format", "json")
    )
    assert document == {
        "name": topic_name,
        "partitions": [
            {"partition": 0, "previous_log_start_offset": 0, "log_start_offset": 2,
             "log_end_offset": 3},
            {"partition": 1, "previous_log_start_offset": 0, "log_start_offset": 2,
             "log_end_offset": 2},
        ],
    }  # fmt: skip


def test_trim_before_a_time_deletes_only_the_older_records(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    now_ms = int(time.time() * 1000)
    produce_with_timestamps(broker, topic_name, [OLD_TIMESTAMP_MS] * 3 + [now_ms] * 2)

    ok(broker, "topic", "trim", topic_name, "--before-timestamp", BETWEEN_TIMESTAMP_ISO)
    assert log_offsets(broker, topic_name) == [(3, 5)]
    # A time after every record (as milliseconds) trims the whole partition.
    ok(broker, "topic", "trim", topic_name, "--before-timestamp", str(now_ms + 60_000))
    assert log_offsets(broker, topic_name) == [(5, 5)]


def test_trim_past_the_high_watermark_is_refused_before_anything_is_deleted(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "2")
    ok(broker, "produce", topic_name, "--partition", "0", stdin=b"a\nb\nc\n")
    code, out, err = cli(broker, "topic", "trim", topic_name, "--before-offset", "2")
    assert (code, out) == (1, "")
    assert_one_error_line(
        err,
        f"cannot trim topic '{topic_name}' before offset 2: partition 1 ends at offset 0 "
        "(its high watermark); give an offset up to 0, or pick the partition with "
        "--partition (OFFSET_OUT_OF_RANGE)",
    )
    assert log_offsets(broker, topic_name) == [(0, 3), (0, 0)]


def test_trim_explains_why_a_compacted_topic_is_refused(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--config", "cleanup.policy=compact")
    code, _, err = cli(broker, "topic", "trim", topic_name, "--before-offset", "0")
    assert code == 1
    assert_one_error_line(
        err,
        f"cannot trim topic '{topic_name}': its cleanup.policy does not include delete, and a "
        "compacted topic keeps every key's latest record; add delete to cleanup.policy first "
        "(POLICY_VIOLATION)",
    )


def test_trim_an_unknown_partition_names_the_partitions_there_are(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    code, _, err = cli(broker, "topic", "trim", topic_name, "--partition", "4",
                       "--before-offset", "0")  # fmt: skip
    assert code == 1
    assert_one_error_line(
        err,
        f"topic '{topic_name}' has no partition 4 (it has 1 partition, numbered from 0) "
        "(UNKNOWN_TOPIC_OR_PARTITION)",
    )


def test_trim_rejects_a_time_that_is_neither_milliseconds_nor_iso(
    broker: WeirProcess, topic_name: str
) -> None:
    code, _, err = cli(broker, "topic", "trim", topic_name, "--before-timestamp", "yesterday")
    assert code == 2
    assert "expected milliseconds since the epoch or an ISO-8601 time" in err


# -- one config pair per flag ---------------------------------------------------------------


def test_config_flag_takes_one_pair_so_the_topic_name_may_follow(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", "--config", "retention.ms=60000",
       "--config", "segment.ms=600000", topic_name)  # fmt: skip
    configs = describe(broker, topic_name)["configs"]
    assert (configs["retention.ms"], configs["segment.ms"]) == ("60000", "600000")

    ok(broker, "topic", "alter-config", "--set", "retention.ms=120000",
       "--delete", "segment.ms", topic_name)  # fmt: skip
    configs = describe(broker, topic_name)["configs"]
    assert configs["retention.ms"] == "120000"
    assert "segment.ms" not in configs


# -- cluster info -----------------------------------------------------------------------------


def test_cluster_info_shows_brokers_controller_and_versions(broker: WeirProcess) -> None:
    info = json.loads(ok(broker, "cluster", "info", "--format", "json"))
    assert info["controller_id"] == 1
    assert isinstance(info["cluster_id"], str) and info["cluster_id"]
    assert info["brokers"] == [
        {"node_id": 1, "host": "127.0.0.1", "port": broker.kafka_port, "rack": None,
         "is_controller": True}
    ]  # fmt: skip
    versions = info["versions"]
    assert versions["cli_version"] == client_software_version()
    assert versions["broker_software_version"] is None
    apis = {api["name"]: api for api in versions["apis"]}
    assert apis["DeleteRecords"]["min_version"] == 0
    assert apis["DeleteRecords"]["cli_version"] == apis["DeleteRecords"]["max_version"]
    assert apis["OffsetForLeaderEpoch"]["cli_version"] is None  # advertised, not used by the CLI

    lines = ok(broker, "cluster", "info").splitlines()
    assert lines[:3] == [
        f"cluster_id: {info['cluster_id']}",
        "controller_id: 1",
        "NODE-ID  HOST       PORT   RACK  CONTROLLER",
    ]
    assert lines[3].split() == ["1", "127.0.0.1", str(broker.kafka_port), "-", "yes"]
    assert f"cli_version: weir-cli {client_software_version()}" in lines
    assert any(line.startswith(f"apis: {broker.bootstrap} advertises {len(apis)}, ")
               for line in lines)  # fmt: skip


def test_every_table_header_is_upper_case_with_dashes(broker: WeirProcess, topic_name: str) -> None:
    ok(broker, "topic", "create", topic_name)
    tables = [
        ok(broker, "topic", "list"),
        ok(broker, "cluster", "brokers"),
        ok(broker, "cluster", "partitions", "--topic", topic_name),
        ok(broker, "cluster", "info").splitlines()[2] + "\n",
        ok(broker, "topic", "describe", topic_name).splitlines()[1] + "\n",
    ]
    for table in tables:
        header = table.splitlines()[0]
        assert header == header.upper() and "_" not in header, header
