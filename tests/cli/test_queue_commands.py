"""`weir queue dead-letters` / `peek` / `redrive` against a real broker. The dead
letters are produced here with Kafka 4.4's headers (the broker writes the same ones:
compat_tests/test_dead_letters.py), mixed with another group's and with records
that are not dead letters."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.harness import WeirProcess, clean_environment, run_cli
from weir.sharecoord.dead_letter_records import dead_letter_headers
from weir.sharecoord.share_partition import ArchiveReason

pytestmark = pytest.mark.timeout(120)


def names() -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"src-{tag}", f"dlq.{tag}", f"g-{tag}"


def create(broker: WeirProcess, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def write_dead_letters(broker: WeirProcess, dlq: str, group: str, source: str, count: int) -> None:
    """`count` dead letters of `group` (source partitions 0 and 1 in turn), each
    followed by another group's dead letter and a plain record."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(count):
        reason = ArchiveReason.REJECTED if i % 2 == 0 else ArchiveReason.DELIVERY_LIMIT
        headers = dead_letter_headers(group, source, i % 2, 10 + i, 1 + i % 2, reason)
        producer.produce(dlq, key=f"k{i}", value=f"v{i}", headers=headers, partition=0)
        other = dead_letter_headers("someone-else", source, 0, i, 1, ArchiveReason.REJECTED)
        producer.produce(dlq, key=b"o", value=b"other", headers=other, partition=0)
        producer.produce(dlq, key=b"p", value=b"plain", partition=0)
    assert producer.flush(30) == 0


def read_all(broker: WeirProcess, topic: str, partitions: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = []
    misses = 0
    while misses < 6:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            misses += 1
            continue
        records.append(message)
    consumer.close()
    return records


def queue(broker: WeirProcess, *args: str, env: dict[str, str] | None = None) -> Any:
    return run_cli("queue", *args, "--bootstrap", broker.bootstrap, env=env)


def test_dead_letters_lists_the_groups_letters_with_their_source_and_reason(
    broker: WeirProcess,
) -> None:
    source, dlq, group = names()
    create(broker, dlq, 1)
    write_dead_letters(broker, dlq, group, source, 3)

    result = queue(broker, "dead-letters", "--group", group, "--from", dlq, "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    rows = document["dead_letters"]
    assert [(r["source_partition"], r["source_offset"]) for r in rows] == [
        (0, 10),
        (1, 11),
        (0, 12),
    ]
    assert [r["reason"] for r in rows] == ["rejected", "delivery_limit", "rejected"]
    assert rows[0]["message"] == "Offset rejected by client."
    assert [r["value"] for r in rows] == ["v0", "v1", "v2"]
    assert [r["offset"] for r in rows] == [0, 3, 6]

    text = queue(broker, "peek", "--group", group, "--from", dlq, "--max", "1")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"1 dead letter of share group '{group}' in {dlq}")
    assert f"{source}-0@10" in text.stdout


def test_redrive_writes_each_letter_back_to_its_source_partition_once(broker: WeirProcess) -> None:
    source, dlq, group = names()
    create(broker, source, 2)
    create(broker, dlq, 1)
    write_dead_letters(broker, dlq, group, source, 4)

    result = queue(broker, "redrive", "--group", group, "--from", dlq, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["redriven"] == 4
    again = queue(broker, "redrive", "--group", group, "--from", dlq, "--format", "json")
    assert json.loads(again.stdout)["redriven"] == 0

    records = read_all(broker, source, 2)
    assert sorted((m.partition(), m.value()) for m in records) == [
        (0, b"v0"),
        (0, b"v2"),
        (1, b"v1"),
        (1, b"v3"),
    ]
    headers = dict(records[0].headers())
    assert not any(name.startswith("__dlq.errors.") for name in headers)
    assert headers["weir.redrive.source"].startswith(f"{dlq}/0/".encode())


def test_redrive_to_another_topic_with_a_limit(broker: WeirProcess) -> None:
    source, dlq, group = names()
    target = f"retry-{uuid.uuid4().hex[:8]}"
    create(broker, dlq, 1)
    create(broker, target, 1)
    write_dead_letters(broker, dlq, group, source, 3)

    result = queue(broker, "redrive", "--group", group, "--from", dlq, "--to", target, "--max", "2")
    assert result.returncode == 0, result.stderr
    assert "redrove 2 dead letters" in result.stdout
    rest = queue(broker, "redrive", "--group", group, "--from", dlq, "--to", target)
    assert "redrove 1 dead letter " in rest.stdout
    assert sorted(m.value() for m in read_all(broker, target, 1)) == [b"v0", b"v1", b"v2"]


def test_a_redrive_killed_after_producing_does_not_write_twice(broker: WeirProcess) -> None:
    """The command SIGKILLs itself after producing its first batch, before the
    progress commit; the next run finds the letters by its intent and skips them."""
    source, dlq, group = names()
    target = f"retry-{uuid.uuid4().hex[:8]}"
    create(broker, dlq, 1)
    create(broker, target, 2)
    write_dead_letters(broker, dlq, group, source, 5)

    env = clean_environment(WEIR_REDRIVE_FAILPOINT="after-produce")
    killed = queue(broker, "redrive", "--group", group, "--from", dlq, "--to", target, env=env)
    assert killed.returncode == -9, killed.stderr
    assert len(read_all(broker, target, 2)) == 5

    result = queue(
        broker, "redrive", "--group", group, "--from", dlq, "--to", target, "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["redriven"], document["recovered"]) == (0, 5)
    assert sorted(m.value() for m in read_all(broker, target, 2)) == [
        b"v0",
        b"v1",
        b"v2",
        b"v3",
        b"v4",
    ]


def test_a_group_without_a_dead_letter_topic_is_an_error(broker: WeirProcess) -> None:
    result = queue(broker, "dead-letters", "--group", f"g-{uuid.uuid4().hex[:8]}")
    assert result.returncode != 0
    assert "has no dead-letter topic" in result.stderr
