"""Dead-letter topics of share groups (KIP-1191) against the real `weir`, with
confluent-kafka's ShareConsumer rejecting records and running into the delivery
limit; the dead letters' records and headers are Kafka 4.4's (checked against a
4.4 broker: docs/queues.md, "Dead letters"). Then a broker killed (SIGKILL) in the
middle of writing dead letters: none lost, none doubled."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat_tests.harness import WeirProcess, unique_topic_name

pytestmark = pytest.mark.timeout(240)

SHARE_SETTINGS = (
    "group_share_min_record_lock_duration_ms = 1000\n"
    "group_share_min_session_timeout_ms = 6000\n"
    "group_share_min_heartbeat_interval_ms = 500\n"
)
FAILPOINT_ENV = "WEIR_DEAD_LETTERS_FAILPOINT"
REJECTED = b"Offset rejected by client."
OVER_LIMIT = b"Offset delivery count exceeded the threshold."
EXPIRED = b"Offset expired before delivery."  # Weir's: Kafka has no expiry


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("dlq"), SHARE_SETTINGS)
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


# -- clients -------------------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(30)


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def dead_letter_group(
    bootstrap: str, group: str, dlq: str, *, copy: bool = True, limit: int = 5
) -> None:
    set_group_configs(
        bootstrap,
        group,
        **{
            "share.auto.offset.reset": "earliest",
            "share.delivery.count.limit": str(limit),
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.copy.record.enable": "true" if copy else "false",
        },
    )


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(
            topic, key=f"k{i}", value=f"v{i}", partition=i % partitions, headers=[("h", b"x")]
        )
    assert producer.flush(30) == 0


def share_consume(
    bootstrap: str,
    group: str,
    topic: str,
    action: AcknowledgeType,
    *,
    deliveries: int,
    timeout_s: float = 60,
) -> list[tuple[int, int, int]]:
    """Acknowledge every delivery with `action` until `deliveries` were seen;
    returns (partition, offset, delivery count) per delivery."""
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    seen: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(seen) < deliveries and time.monotonic() < deadline:
            try:
                messages = list(consumer.poll(1.0))
            except KafkaException:
                continue
            for message in messages:
                if message.error() is not None:
                    continue
                seen.append((message.partition(), message.offset(), message.delivery_count()))
                consumer.acknowledge(message, action)
            if messages:
                with contextlib.suppress(KafkaException):
                    consumer.commit_sync(10.0)
    finally:
        consumer.close()
    return seen


def read_topic(
    bootstrap: str, topic: str, partition: int, count: int, timeout_s: float = 30
) -> Any:
    """The first records of a partition, waiting until `count` are there (then a
    little longer, to see any extra)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic_name("reader"),
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    records = []
    deadline = time.monotonic() + timeout_s
    settle_until: float | None = None
    try:
        while time.monotonic() < (settle_until or deadline):
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                if len(records) >= count and settle_until is None:
                    settle_until = time.monotonic() + 2
                continue
            records.append(message)
    finally:
        consumer.close()
    return records


def headers_of(message: Any) -> list[tuple[str, bytes]]:
    return list(message.headers() or [])


# -- Kafka's dead letters ------------------------------------------------------------------


def test_rejected_records_become_dead_letters_with_kafkas_headers_and_the_record(
    broker: WeirProcess,
) -> None:
    bootstrap = broker.bootstrap
    source, dlq, group = (
        unique_topic_name("src"),
        "dlq." + unique_topic_name("q"),
        unique_topic_name("g"),
    )
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, dlq, 1, **{"errors.deadletterqueue.group.enable": "true"})
    dead_letter_group(bootstrap, group, dlq)
    produce(bootstrap, source, 4, partitions=2)

    seen = share_consume(bootstrap, group, source, AcknowledgeType.REJECT, deliveries=4)
    assert sorted(seen) == [(0, 0, 1), (0, 1, 1), (1, 0, 1), (1, 1, 1)]

    letters = read_topic(bootstrap, dlq, 0, 4)
    assert len(letters) == 4
    by_source = {(m.key(), m.value()): headers_of(m) for m in letters}
    assert by_source[(b"k1", b"v1")] == [
        ("__dlq.errors.topic", source.encode()),
        ("__dlq.errors.partition", b"1"),
        ("__dlq.errors.offset", b"0"),
        ("__dlq.errors.group", group.encode()),
        ("__dlq.errors.delivery.count", b"1"),
        ("__dlq.errors.message", REJECTED),
    ]
    assert {(h[1][1], h[2][1]) for h in by_source.values()} == {
        (b"0", b"0"),
        (b"0", b"1"),
        (b"1", b"0"),
        (b"1", b"1"),
    }
    # Kafka 4.4 stamps a dead letter with the time it writes it.
    assert all(abs(m.timestamp()[1] - time.time() * 1000) < 120_000 for m in letters)
    # The queue view counts them (Weir's).
    status, body = broker.http_get(f"/v1/queues/{group}")
    assert status == 200
    rows = json.loads(body)["share_partitions"]
    assert sum(r["dead_lettered"] for r in rows) == 4
    assert sum(r["dead_letter_pending"] for r in rows) == 0
    assert sum(r["archived"] for r in rows) + sum(r["start_offset"] for r in rows) == 4


def test_records_at_the_delivery_limit_become_headers_only_dead_letters(
    broker: WeirProcess,
) -> None:
    bootstrap = broker.bootstrap
    source, dlq, group = (
        unique_topic_name("src"),
        "dlq." + unique_topic_name("q"),
        unique_topic_name("g"),
    )
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, dlq, 1, **{"errors.deadletterqueue.group.enable": "true"})
    dead_letter_group(bootstrap, group, dlq, copy=False, limit=2)
    produce(bootstrap, source, 2)

    seen = share_consume(bootstrap, group, source, AcknowledgeType.RELEASE, deliveries=4)
    assert sorted(seen) == [(0, 0, 1), (0, 0, 2), (0, 1, 1), (0, 1, 2)]

    letters = read_topic(bootstrap, dlq, 0, 2)
    assert [(m.key(), m.value()) for m in letters] == [(None, None), (None, None)]
    assert [dict(headers_of(m))["__dlq.errors.offset"] for m in letters] == [b"0", b"1"]
    assert {dict(headers_of(m))["__dlq.errors.delivery.count"] for m in letters} == {b"2"}
    assert {dict(headers_of(m))["__dlq.errors.message"] for m in letters} == {OVER_LIMIT}


def test_expired_records_become_dead_letters_with_weirs_reason(broker: WeirProcess) -> None:
    bootstrap = broker.bootstrap
    source, dlq, group = (
        unique_topic_name("src"),
        "dlq." + unique_topic_name("q"),
        unique_topic_name("g"),
    )
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, dlq, 1, **{"errors.deadletterqueue.group.enable": "true"})
    set_group_configs(bootstrap, group, **{"weir.share.record.headers.enable": "true"})
    dead_letter_group(bootstrap, group, dlq)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(source, key=b"stale", value=b"s", headers=[("weir.ttl.ms", b"1")])
    producer.produce(source, key=b"fresh", value=b"f")
    assert producer.flush(30) == 0
    time.sleep(0.1)  # past the first record's 1 ms

    seen = share_consume(bootstrap, group, source, AcknowledgeType.ACCEPT, deliveries=1)
    assert seen == [(0, 1, 1)]  # the expired record is never delivered

    letters = read_topic(bootstrap, dlq, 0, 1)
    assert [(m.key(), m.value()) for m in letters] == [(b"stale", b"s")]
    headers = dict(headers_of(letters[0]))
    assert headers["__dlq.errors.offset"] == b"0"
    assert headers["__dlq.errors.delivery.count"] == b"0"
    assert headers["__dlq.errors.message"] == EXPIRED


def test_a_topic_without_dead_letters_enabled_gets_none_and_the_records_are_archived(
    broker: WeirProcess,
) -> None:
    """Kafka 4.4: "DLQ is not enabled on configured DLQ topic": logged, the records
    archived all the same (not delivered again)."""
    bootstrap = broker.bootstrap
    source, dlq, group = (
        unique_topic_name("src"),
        "dlq." + unique_topic_name("q"),
        unique_topic_name("g"),
    )
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, dlq, 1)
    dead_letter_group(bootstrap, group, dlq)
    produce(bootstrap, source, 2)

    share_consume(bootstrap, group, source, AcknowledgeType.REJECT, deliveries=2)
    produce(bootstrap, source, 1)
    later = share_consume(bootstrap, group, source, AcknowledgeType.ACCEPT, deliveries=1)
    assert later == [(0, 2, 1)]
    assert read_topic(bootstrap, dlq, 0, 0, timeout_s=3) == []
    assert "DLQ is not enabled on configured DLQ topic" in broker.stderr_text()


# -- a broker killed mid-round -------------------------------------------------------------


@pytest.fixture
def killable(tmp_path: Path) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(
        tmp_path, SHARE_SETTINGS + "errors_deadletterqueue_auto_create_topics_enable = true\n"
    )
    try:
        yield proc
    finally:
        proc.close()


def wait_exit(proc: WeirProcess, timeout_s: float = 60) -> None:
    assert proc.process is not None
    proc.process.wait(timeout_s)
    assert proc.process.returncode == -9, proc.stderr_text()


@pytest.mark.parametrize("failpoint", ["after-mark", "after-append"])
def test_a_broker_killed_while_writing_dead_letters_writes_each_exactly_once(
    killable: WeirProcess, failpoint: str
) -> None:
    """The broker SIGKILLs itself after storing the dead-letter mark (before any
    dead letter is appended) or after the dead letters are durable (before they are
    stored ARCHIVED); after the restart every rejected record has one dead letter.
    The dead-letter topic is missing: the broker creates it (auto-create on)."""
    killable.extra_env[FAILPOINT_ENV] = failpoint
    killable.start()
    bootstrap = killable.bootstrap
    source, dlq, group = (
        unique_topic_name("src"),
        "dlq." + unique_topic_name("q"),
        unique_topic_name("g"),
    )
    create_topic(bootstrap, source, 1)
    dead_letter_group(bootstrap, group, dlq)
    produce(bootstrap, source, 5)

    share_consume(bootstrap, group, source, AcknowledgeType.REJECT, deliveries=5, timeout_s=20)
    wait_exit(killable)
    assert f"{FAILPOINT_ENV}={failpoint}" in killable.stderr_text()

    del killable.extra_env[FAILPOINT_ENV]
    killable.start()
    letters = read_topic(bootstrap, dlq, 0, 5)
    offsets = sorted(int(dict(headers_of(m))["__dlq.errors.offset"]) for m in letters)
    assert offsets == [0, 1, 2, 3, 4]
    assert sorted(m.value() for m in letters) == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    # Archived, not delivered again.
    produce(bootstrap, source, 1)
    assert share_consume(bootstrap, group, source, AcknowledgeType.ACCEPT, deliveries=1) == [
        (0, 5, 1)
    ]
