"""`weir group` against a real `weir serve` process: the lag it shows matches the commits."""

from __future__ import annotations

import json

from confluent_kafka import Consumer, TopicPartition

from compat_tests.harness import WeirProcess

from .test_cli_end_to_end import assert_one_error_line, cli, ok


def commit(broker: WeirProcess, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        wanted = [TopicPartition(topic, p, o) for p, o in offsets.items()]
        consumer.commit(offsets=wanted, asynchronous=False)
    finally:
        consumer.close()


def test_list_describe_reset_and_delete_a_group(broker: WeirProcess, topic_name: str) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "2")
    ok(broker, "produce", topic_name, "--partition", "0", stdin=b"a\nb\nc\nd\n")
    ok(broker, "produce", topic_name, "--partition", "1", stdin=b"e\nf\n")
    group = f"cli-{topic_name}"
    commit(broker, group, topic_name, {0: 1, 1: 2})

    listed = json.loads(ok(broker, "group", "list", "--format", "json"))
    assert {"group_id": group, "type": "classic", "state": "Empty", "protocol_type": ""} in listed[
        "groups"
    ]

    described = json.loads(ok(broker, "group", "describe", group, "--format", "json"))
    assert [(r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"])
            for r in described["offsets"]] == [(0, 1, 4, 3), (1, 2, 2, 0)]  # fmt: skip
    assert described["lag"] == 3
    assert "total lag 3" in ok(broker, "group", "describe", group)

    plan = ok(broker, "group", "reset-offsets", group, "--topic", topic_name, "--to-earliest")
    assert "dry run" in plan
    assert json.loads(ok(broker, "group", "describe", group, "--format", "json"))["lag"] == 3

    ok(broker, "group", "reset-offsets", group, "--topic", topic_name, "--to-latest", "--execute")
    assert json.loads(ok(broker, "group", "describe", group, "--format", "json"))["lag"] == 0

    assert ok(broker, "group", "delete", group) == f"deleted group '{group}'\n"
    code, _, err = cli(broker, "group", "describe", group)
    assert code == 1
    assert_one_error_line(err, f"group '{group}' does not exist (GROUP_ID_NOT_FOUND)")


def test_reset_needs_exactly_one_target(broker: WeirProcess, topic_name: str) -> None:
    ok(broker, "topic", "create", topic_name)
    code, _, err = cli(broker, "group", "reset-offsets", "g", "--topic", topic_name)
    assert code == 1
    assert "give exactly one of" in err
