"""`weir queue describe` and `weir queue purge` against a real broker, on a share group
a confluent-kafka ShareConsumer consumed part of."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat_tests.harness import WeirProcess, run_cli

pytestmark = pytest.mark.timeout(120)

RECORDS = 10
ACCEPTED = 4


def queue(broker: WeirProcess, *args: str) -> Any:
    return run_cli("queue", *args, "--bootstrap", broker.bootstrap)


def share_group_with_progress(broker: WeirProcess) -> tuple[str, str]:
    """A topic of RECORDS records and a share group that accepted the first ACCEPTED
    (and released the rest), then left."""
    tag = uuid.uuid4().hex[:8]
    topic, group = f"jobs-{tag}", f"workers-{tag}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for index in range(RECORDS):
        producer.produce(topic, value=str(index).encode())
    assert producer.flush(30) == 0
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})  # fmt: skip
    consumer.subscribe([topic])
    try:
        stop = time.monotonic() + 30
        seen = 0
        while seen < RECORDS and time.monotonic() < stop:
            for message in consumer.poll(1.0):
                if message.error() is None:
                    accept = message.offset() < ACCEPTED
                    consumer.acknowledge(
                        message, AcknowledgeType.ACCEPT if accept else AcknowledgeType.RELEASE
                    )
                    seen += 1
            consumer.commit_sync(10.0)
        assert seen >= RECORDS
    finally:
        consumer.close()
    return topic, group


def described(broker: WeirProcess, group: str) -> dict[str, Any]:
    result = queue(broker, "describe", "--group", group, "--format", "json")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_describe_shows_the_start_offset_and_what_the_group_has_not_finished(
    broker: WeirProcess,
) -> None:
    topic, group = share_group_with_progress(broker)
    document = described(broker, group)
    assert document["state"] == "Empty" and document["members"] == []
    (row,) = document["partitions"]
    assert (row["topic"], row["partition"]) == (topic, 0)
    assert row["start_offset"] == ACCEPTED
    assert row["end_offset"] == RECORDS
    assert row["lag"] == RECORDS - ACCEPTED
    text = queue(broker, "describe", "--group", group)
    assert text.returncode == 0 and f"{RECORDS - ACCEPTED} records not finished" in text.stdout


def test_describe_with_the_brokers_http_address_shows_the_records_by_state(
    broker: WeirProcess,
) -> None:
    topic, group = share_group_with_progress(broker)
    result = queue(broker, "describe", "--group", group, "--http", broker.http_url,
                   "--format", "json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)["partitions"]
    # The released records wait to be delivered again; none is held, delayed or dead.
    assert (row["available"], row["acquired"], row["delayed"]) == (RECORDS - ACCEPTED, 0, 0)
    assert (row["dead_letter_pending"], row["dead_lettered"]) == (0, 0)
    text = queue(broker, "describe", "--group", group, "--http", broker.http_url)
    assert text.returncode == 0 and "AVAILABLE" in text.stdout and "DEAD-LETTERED" in text.stdout


def test_purge_moves_the_group_past_every_record_and_a_dry_run_changes_nothing(
    broker: WeirProcess,
) -> None:
    topic, group = share_group_with_progress(broker)
    dry = queue(broker, "purge", "--group", group, "--dry-run", "--format", "json")
    assert dry.returncode == 0, dry.stderr
    (planned,) = json.loads(dry.stdout)["partitions"]
    assert (planned["start_offset"], planned["new_start_offset"]) == (ACCEPTED, RECORDS)
    assert described(broker, group)["partitions"][0]["start_offset"] == ACCEPTED

    purged = queue(broker, "purge", "--group", group, "--topic", topic)
    assert purged.returncode == 0, purged.stderr
    (row,) = described(broker, group)["partitions"]
    assert (row["start_offset"], row["lag"]) == (RECORDS, 0)


def test_purge_refuses_a_group_with_members_and_describe_an_unknown_group(
    broker: WeirProcess,
) -> None:
    topic, group = share_group_with_progress(broker)
    member = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    member.subscribe([topic])
    try:
        stop = time.monotonic() + 20
        while time.monotonic() < stop and not described(broker, group)["members"]:
            member.poll(0.5)
        refused = queue(broker, "purge", "--group", group)
        assert refused.returncode != 0 and "stop them before purging" in refused.stderr
    finally:
        member.close()
    unknown = queue(broker, "describe", "--group", f"nobody-{uuid.uuid4().hex[:6]}")
    assert unknown.returncode != 0
