"""A share group's config change reaches share partitions already served (issue 23):
a shorter `share.record.lock.duration.ms` set while the group is consuming applies to
the next records acquired, with no restart. With confluent-kafka's ShareConsumer
against the real `weir`."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests.harness import WeirProcess, create_topic

pytestmark = pytest.mark.timeout(120)

TOPIC = "reconfigured"
GROUP = "reconfigured-workers"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(
        tmp_path_factory.mktemp("share-config"), "group_share_min_record_lock_duration_ms = 1000\n"
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def set_group_configs(bootstrap: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(count):
        producer.produce(TOPIC, value=str(index).encode())
    assert producer.flush(30) == 0


def consumer_of(bootstrap: str) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([TOPIC])
    return consumer


def poll_offsets(consumer: ShareConsumer, deadline_s: float) -> dict[int, int]:
    stop = time.monotonic() + deadline_s
    while time.monotonic() < stop:
        messages = [m for m in consumer.poll(0.5) if m.error() is None]
        if messages:
            return {m.offset(): m.delivery_count() for m in messages}
    return {}


def test_a_shorter_lock_set_while_consuming_applies_to_the_next_acquisition(
    broker: WeirProcess,
) -> None:
    create_topic(broker.bootstrap, TOPIC, partitions=1)
    set_group_configs(
        broker.bootstrap,
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "60000"},
    )
    produce(broker.bootstrap, 1)
    holder = consumer_of(broker.bootstrap)
    first = poll_offsets(holder, 20)
    assert first == {0: 1}  # never acknowledged: held for 60 s

    set_group_configs(broker.bootstrap, {"share.record.lock.duration.ms": "1500"})
    produce(broker.bootstrap, 1)  # acquired under the new lock
    other = consumer_of(broker.bootstrap)
    late = consumer_of(broker.bootstrap)
    try:
        second = poll_offsets(other, 20)
        assert second == {1: 1}, second  # offset 0 stays with `holder` (a 60 s lock)
        # `other` holds offset 1 without acknowledging: its 1.5 s lock ends and the
        # record goes to the next consumer, its count grown; offset 0 does not.
        started = time.monotonic()
        third = poll_offsets(late, 15)
        assert third == {1: 2}, third
        assert time.monotonic() - started < 10
    finally:
        late.close()
        other.close()
        holder.close()


def test_read_committed_share_groups_never_see_aborted_records(broker: WeirProcess) -> None:
    """share.isolation.level=read_committed: a transaction's records are delivered once
    committed, an aborted one's never (its offsets are skipped), as in Kafka."""
    topic, group = "transactional-jobs", "committed-workers"
    create_topic(broker.bootstrap, topic, partitions=1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entries = [
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.isolation.level", "read_committed",
                    incremental_operation=AlterConfigOpType.SET),
    ]  # fmt: skip
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "jobs-tx"})
    producer.init_transactions(30)
    for outcome, values in (("commit", [b"c1", b"c2"]), ("abort", [b"a1", b"a2", b"a3"]),
                            ("commit", [b"c3"])):  # fmt: skip
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})  # fmt: skip
    consumer.subscribe([topic])
    seen: list[bytes] = []
    try:
        stop = time.monotonic() + 20
        while time.monotonic() < stop and len(seen) < 3:
            for message in consumer.poll(0.5):
                if message.error() is None:
                    seen.append(message.value() or b"")
                    consumer.acknowledge(message)
            consumer.commit_sync(10.0)
        # A little longer: nothing aborted arrives late.
        for message in consumer.poll(2.0):
            if message.error() is None:
                seen.append(message.value() or b"")
    finally:
        consumer.close()
    assert seen == [b"c1", b"c2", b"c3"]
