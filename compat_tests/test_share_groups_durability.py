"""A share group's state survives a broker killed with SIGKILL (issue 23).

An acknowledgement the broker answered is never lost: an accepted record is not
delivered again after the restart; a record acquired but not acknowledged when the
broker died comes back with its delivery count kept (one more than the consumer saw),
so a record never exceeds the delivery limit across crashes. With confluent-kafka's
ShareConsumer against the real `weir`, its data dir reused by the restart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests.harness import WeirProcess, create_topic

pytestmark = pytest.mark.timeout(180)

RECORDS = 30
TOPIC = "durable-queue"
GROUP = "durable-workers"
# Long locks: what comes back after the restart came back because of the restart.
GROUP_CONFIGS = {
    "share.auto.offset.reset": "earliest",
    "share.record.lock.duration.ms": "60000",
    "share.delivery.count.limit": "5",
}
POLL_DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("share-durable"), "")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def set_group_configs(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        GROUP,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in GROUP_CONFIGS.items()
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(RECORDS):
        producer.produce(TOPIC, key=str(index).encode(), value=f"job-{index}".encode())
    assert producer.flush(30) == 0


def share_consumer(bootstrap: str, max_poll_records: int) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": max_poll_records,
        }
    )
    consumer.subscribe([TOPIC])
    return consumer


def poll_some(consumer: ShareConsumer, deadline_s: float = POLL_DEADLINE_S) -> list[Message]:
    """The next records delivered (at least one)."""
    stop = time.monotonic() + deadline_s
    while time.monotonic() < stop:
        messages = [m for m in consumer.poll(1.0) if m.error() is None]
        if messages:
            return messages
    raise AssertionError("no record delivered in time")


def accept_until(consumer: ShareConsumer, wanted: set[int]) -> dict[int, int]:
    """Accept what is delivered until every offset in `wanted` was: offset -> count."""
    seen: dict[int, int] = {}
    stop = time.monotonic() + POLL_DEADLINE_S
    while not wanted <= set(seen) and time.monotonic() < stop:
        for message in consumer.poll(1.0):
            if message.error() is not None:
                continue
            assert message.offset() not in seen, f"offset {message.offset()} delivered twice"
            seen[message.offset()] = message.delivery_count()
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.commit_sync(10.0)
    return seen


def test_accepted_records_stay_accepted_and_held_ones_return_counted_after_a_kill(
    broker: WeirProcess,
) -> None:
    create_topic(broker.bootstrap, TOPIC, partitions=1)
    set_group_configs(broker.bootstrap)
    produce(broker.bootstrap)

    first = share_consumer(broker.bootstrap, max_poll_records=10)
    accepted: set[int] = set()
    held_counts: dict[int, int] = {}
    # One poll may bring the whole batch (batch-optimized acquisition, as Kafka): the
    # first half is accepted, the rest stays acquired and unacknowledged.
    for index, message in enumerate(poll_some(first)):
        if index % 2 == 0:
            first.acknowledge(message, AcknowledgeType.ACCEPT)
            accepted.add(message.offset())
        else:
            held_counts[message.offset()] = message.delivery_count()
    first.commit_sync(10.0)  # answered: durable
    assert accepted and held_counts

    broker.kill()
    broker.restart()
    first.close()

    second = share_consumer(broker.bootstrap, max_poll_records=10)
    try:
        rest = set(range(RECORDS)) - accepted
        seen = accept_until(second, rest)
    finally:
        second.close()
    assert set(seen) == rest, f"missing {sorted(rest - set(seen))}"
    assert not accepted & set(seen), "an accepted record was delivered again"
    for offset, count in held_counts.items():
        # Kept across the crash (and perhaps one more, if the first consumer's client
        # fetched again before it closed): never back to 1.
        assert seen[offset] >= count + 1, (offset, count, seen[offset])


def test_a_queue_accepted_in_full_delivers_nothing_after_a_kill(broker: WeirProcess) -> None:
    # The previous test accepted every record of the group; the state is durable.
    broker.kill()
    broker.restart()
    consumer = share_consumer(broker.bootstrap, max_poll_records=10)
    try:
        stop = time.monotonic() + 6.0
        while time.monotonic() < stop:
            delivered = [m.offset() for m in consumer.poll(1.0) if m.error() is None]
            assert not delivered, f"accepted records delivered again: {delivered}"
    finally:
        consumer.close()


def test_the_share_state_topic_holds_the_groups_state(broker: WeirProcess) -> None:
    state_dirs = [p.name for p in Path(broker.data_dir).iterdir() if p.name.startswith("__share")]
    assert state_dirs, "no __share_group_state partition on disk"


def test_the_queue_view_and_metrics_show_the_records_waiting(broker: WeirProcess) -> None:
    # The group has finished with every record so far; five more wait for it.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for index in range(5):
        producer.produce(TOPIC, value=f"later-{index}".encode())
    assert producer.flush(30) == 0
    status, body = broker.http_get(f"/v1/queues/{GROUP}")
    assert status == 200
    (row,) = json.loads(body)["share_partitions"]
    assert (row["topic"], row["partition"]) == (TOPIC, 0)
    assert row["start_offset"] == RECORDS
    assert (row["available"], row["acquired"]) == (5, 0)
    assert row["oldest_unacknowledged_age_ms"] is not None
    metrics = broker.http_get("/metrics")[1].decode()
    wanted = (
        f'weir_share_records{{group="{GROUP}",partition="0",state="available",topic="{TOPIC}"}} 5.0'
    )
    assert wanted in metrics.splitlines(), [m for m in metrics.splitlines() if "weir_share" in m]
