"""`weir group describe | delete | reset-offsets` against a real `weir serve` process,
with live confluent-kafka consumers (classic and KIP-848) as the group's members."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer

from compat_tests.harness import WeirProcess

from .test_cli_end_to_end import assert_one_error_line, cli, ok
from .test_group_cli import commit

ASSIGNMENT_WAIT_S = 30


@contextmanager
def member(
    broker: WeirProcess, group: str, topic: str, *, protocol: str = "classic"
) -> Iterator[Consumer]:
    """A consumer in `group`, subscribed to `topic`, that has its assignment."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "client.id": f"member-of-{group}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + ASSIGNMENT_WAIT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, f"no assignment in {group}"
            consumer.poll(0.2)
        yield consumer
    finally:
        consumer.close()


def topic_with_records(broker: WeirProcess, topic: str, counts: list[int]) -> None:
    ok(broker, "topic", "create", topic, "--partitions", str(len(counts)))
    for partition, count in enumerate(counts):
        lines = b"".join(b"r%d\n" % i for i in range(count))
        ok(broker, "produce", topic, "--partition", str(partition), stdin=lines)


def describe_json(broker: WeirProcess, group: str) -> dict:  # type: ignore[type-arg]
    return json.loads(ok(broker, "group", "describe", group, "--format", "json"))


def test_describe_shows_each_members_client_and_assigned_partitions(
    broker: WeirProcess, topic_name: str
) -> None:
    topic_with_records(broker, topic_name, [3, 1])
    group = f"g-{topic_name}"
    commit(broker, group, topic_name, {0: 1})
    with member(broker, group, topic_name):
        described = describe_json(broker, group)
        text = ok(broker, "group", "describe", group)
    assert (described["group_id"], described["type"], described["state"]) == (
        group, "classic", "Stable",
    )  # fmt: skip
    assert described["protocol_type"] == "consumer"
    [only] = described["members"]
    assert only["client_id"] == f"member-of-{group}"
    assert only["client_host"] == "/127.0.0.1"
    assert only["assignment"] == [{"topic": topic_name, "partitions": [0, 1]}]
    assert [(r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"], r["member_id"])
            for r in described["offsets"]] == [
        (0, 1, 3, 2, only["member_id"]),
        (1, None, 1, None, only["member_id"]),
    ]  # fmt: skip
    assert described["lag"] == 2

    lines = text.splitlines()
    assert lines[0].startswith(f"group '{group}': Stable, classic (")
    assert lines[0].endswith(", 1 member, total lag 2")
    assert lines[1].split() == ["MEMBER-ID", "CLIENT-ID", "CLIENT-HOST", "ASSIGNMENT"]
    assert lines[2].split()[1:] == [f"member-of-{group}", "/127.0.0.1", f"{topic_name}:0,1"]
    assert lines[3].split() == [
        "TOPIC", "PARTITION", "COMMITTED-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID",
    ]  # fmt: skip


def test_describe_a_kip848_consumer_group(broker: WeirProcess, topic_name: str) -> None:
    topic_with_records(broker, topic_name, [2])
    group = f"g-{topic_name}"
    with member(broker, group, topic_name, protocol="consumer"):
        described = describe_json(broker, group)
        text = ok(broker, "group", "describe", group)
    assert (described["type"], described["state"]) == ("consumer", "Stable")
    assert described["generation"] >= 1
    [only] = described["members"]
    assert only["client_id"] == f"member-of-{group}"
    assert only["client_host"] == "/127.0.0.1"
    assert only["assignment"] == [{"topic": topic_name, "partitions": [0]}]
    assert f"group '{group}': Stable, consumer" in text


def test_deleting_a_group_with_active_members_says_to_stop_them(
    broker: WeirProcess, topic_name: str
) -> None:
    topic_with_records(broker, topic_name, [1])
    group = f"g-{topic_name}"
    with member(broker, group, topic_name):
        code, out, err = cli(broker, "group", "delete", group)
    assert (code, out) == (1, "")
    assert_one_error_line(
        err,
        f"group '{group}' still has active members; stop them (or wait for their session "
        "to expire) before deleting it (NON_EMPTY_GROUP)",
    )
    assert ok(broker, "group", "delete", group) == f"deleted group '{group}'\n"


def test_reset_offsets_execute_on_an_active_group_says_to_stop_its_members(
    broker: WeirProcess, topic_name: str
) -> None:
    topic_with_records(broker, topic_name, [4])
    group = f"g-{topic_name}"
    commit(broker, group, topic_name, {0: 3})
    with member(broker, group, topic_name):
        dry_run = ok(broker, "group", "reset-offsets", group, "--topic", topic_name,
                     "--to-earliest")  # fmt: skip
        code, _, err = cli(broker, "group", "reset-offsets", group, "--topic", topic_name,
                           "--to-earliest", "--execute")  # fmt: skip
    assert "note: the group has 1 active member; --execute needs them stopped first" in dry_run
    assert code == 1
    assert_one_error_line(
        err,
        f"group '{group}' still has active members; stop them (or wait for their session "
        "to expire) before resetting its offsets (NON_EMPTY_GROUP)",
    )
    assert describe_json(broker, group)["offsets"][0]["committed_offset"] == 3


def test_an_unknown_group_does_not_exist(broker: WeirProcess) -> None:
    for action in ("describe", "delete"):
        code, out, err = cli(broker, "group", action, "no-such-group")
        assert (code, out) == (1, "")
        assert_one_error_line(err, "group 'no-such-group' does not exist (GROUP_ID_NOT_FOUND)")


def test_shift_by_moves_committed_offsets_within_the_log(
    broker: WeirProcess, topic_name: str
) -> None:
    topic_with_records(broker, topic_name, [10, 10])
    ok(broker, "topic", "trim", topic_name, "--partition", "1", "--before-offset", "4")
    group = f"g-{topic_name}"
    commit(broker, group, topic_name, {0: 8, 1: 6})

    plan = json.loads(ok(broker, "group", "reset-offsets", group, "--topic", topic_name,
                         "--shift-by", "-5", "--format", "json"))  # fmt: skip
    assert plan == {
        "group_id": group,
        "executed": False,
        "active_members": 0,
        "plan": [
            {"topic": topic_name, "partition": 0, "current_offset": 8, "new_offset": 3},
            {"topic": topic_name, "partition": 1, "current_offset": 6, "new_offset": 4},
        ],
    }  # the second is clamped to the log start
    ok(broker, "group", "reset-offsets", group, "--topic", topic_name, "--shift-by", "-5",
       "--execute")  # fmt: skip
    ok(broker, "group", "reset-offsets", group, "--topic", topic_name, "--shift-by", "+4",
       "--execute")  # fmt: skip
    offsets = describe_json(broker, group)["offsets"]
    assert [r["committed_offset"] for r in offsets] == [7, 8]
    ok(
        broker,
        "group",
        "reset-offsets",
        group,
        "--topic",
        topic_name,
        "--shift-by",
        "100",
        "--execute",
    )  # fmt: skip  (clamped to the high watermark)
    assert describe_json(broker, group)["lag"] == 0


def test_shift_by_without_a_committed_offset_says_what_to_use_instead(
    broker: WeirProcess, topic_name: str
) -> None:
    topic_with_records(broker, topic_name, [2, 2])
    group = f"g-{topic_name}"
    commit(broker, group, topic_name, {0: 1})
    code, _, err = cli(broker, "group", "reset-offsets", group, "--topic", topic_name,
                       "--shift-by", "1")  # fmt: skip
    assert code == 1
    assert_one_error_line(
        err,
        f"group '{group}' has no committed offset on topic '{topic_name}' partition 1, so "
        "there is nothing to shift; reset it with --to-earliest, --to-latest or --to-offset",
    )


def test_all_topics_resets_every_topic_the_group_committed_to(
    broker: WeirProcess, topic_name: str
) -> None:
    other = f"{topic_name}-b"
    topic_with_records(broker, topic_name, [5])
    topic_with_records(broker, other, [3, 3])
    group = f"g-{topic_name}"
    commit(broker, group, topic_name, {0: 5})
    commit(broker, group, other, {1: 3})  # partition 0 of `other` never committed

    text = ok(broker, "group", "reset-offsets", group, "--all-topics", "--to-earliest",
              "--execute")  # fmt: skip
    assert text.splitlines()[0].split() == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    assert text.endswith(f"committed the new offsets of group '{group}'\n")
    offsets = describe_json(broker, group)["offsets"]
    assert [(r["topic"], r["partition"], r["committed_offset"]) for r in offsets] == [
        (topic_name, 0, 0),
        (other, 1, 0),
    ]


def test_all_topics_without_committed_offsets_asks_for_a_topic(broker: WeirProcess) -> None:
    code, _, err = cli(broker, "group", "reset-offsets", "fresh-group", "--all-topics",
                       "--to-latest")  # fmt: skip
    assert code == 1
    assert_one_error_line(
        err,
        "group 'fresh-group' has no committed offsets, so --all-topics finds nothing to reset; "
        "name a topic with --topic",
    )


def test_group_tables_and_json_use_the_http_apis_names(
    broker: WeirProcess, topic_name: str
) -> None:
    topic_with_records(broker, topic_name, [1])
    group = f"g-{topic_name}"
    commit(broker, group, topic_name, {0: 1})
    listed = json.loads(ok(broker, "group", "list", "--format", "json"))
    assert {"group_id": group, "type": "classic", "state": "Empty", "protocol_type": ""} in listed[
        "groups"
    ]
    assert ok(broker, "group", "list").splitlines()[0].split() == ["GROUP-ID", "TYPE", "STATE"]
    described = describe_json(broker, group)
    assert list(described) == [
        "group_id", "type", "state", "protocol_type", "assignor", "generation", "members",
        "offsets", "lag",
    ]  # fmt: skip
    assert "0 members" in ok(broker, "group", "describe", group)
