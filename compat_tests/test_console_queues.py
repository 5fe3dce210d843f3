"""The console's queue views (share groups), in headless Chromium against one real
`weir`: a share group with records acquired by a confluent-kafka ShareConsumer and
some rejected into its dead-letter topic shows its counts, delivery-count histogram,
members and dead letters with their reasons; REDRIVE makes them available again;
purge asks first; a push subscription to a failing receiver shows its last error and
pauses. The API the views use (the share-group list's paging, the delivery-count
histogram, the partition's leader, the dead-letter topic) is checked with httpx."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat_tests.console_browser import ConsoleBrowser
from compat_tests.harness import WeirProcess, unique_topic_name
from compat_tests.push_receiver import PushReceiver

pytestmark = pytest.mark.timeout(180)

WAIT_S = 30.0
RECORDS = 10
REJECTED = 3
REJECTED_REASON = "Offset rejected by client."


def create_topic(broker: WeirProcess, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(WAIT_S)


def set_group_configs(broker: WeirProcess, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(WAIT_S)


def produce(broker: WeirProcess, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(count):
        producer.produce(topic, key=f"job-{i}", value=f'{{"job": {i}}}')
    assert producer.flush(WAIT_S) == 0


@dataclass
class Queue:
    topic: str
    dlq: str
    group: str
    bootstrap: str
    consumer: ShareConsumer


def acquire_and_reject(consumer: ShareConsumer, rejected: int) -> int:
    """Polls until records come; rejects the first `rejected` of them and keeps the
    others acquired (never acknowledged). Returns how many it holds."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaException):
            messages = [m for m in consumer.poll(1.0) if m.error() is None]
            if len(messages) > rejected:
                for message in messages[:rejected]:
                    consumer.acknowledge(message, AcknowledgeType.REJECT)
                consumer.commit_sync(10.0)
                return len(messages) - rejected
    raise AssertionError("the share consumer got no records")


@pytest.fixture(scope="module")
def queue(_module_broker: WeirProcess) -> Iterator[Queue]:
    """A 1-partition topic of RECORDS records whose share group (dead letters on)
    rejected REJECTED of them and holds the rest acquired, its consumer still open."""
    broker = _module_broker
    topic = unique_topic_name("console-queue")
    dlq = f"dlq.{topic}"
    group = f"{topic}-workers"
    create_topic(broker, topic, 1)
    create_topic(broker, dlq, 1, **{"errors.deadletterqueue.group.enable": "true"})
    set_group_configs(
        broker,
        group,
        **{
            "share.auto.offset.reset": "earliest",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.copy.record.enable": "true",
        },
    )
    produce(broker, topic, RECORDS)
    consumer = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "client.id": "console-worker",
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    acquire_and_reject(consumer, REJECTED)
    try:
        yield Queue(topic, dlq, group, broker.bootstrap, consumer)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def http(_module_broker: WeirProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=_module_broker.http_url, timeout=WAIT_S, trust_env=False) as client:
        yield client


@pytest.fixture(scope="module")
def cluster_path(http: httpx.Client) -> str:
    return f"/v3/clusters/{http.get('/v3/clusters').json()['data'][0]['cluster_id']}"


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def described(http: httpx.Client, cluster_path: str, group: str) -> dict[str, Any]:
    document: dict[str, Any] = ok(http.get(f"{cluster_path}/share-groups/{group}"))
    return document


def wait_for(condition: Any, what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


# -- the API the views use ----------------------------------------------------------------


def test_a_share_group_shows_its_delivery_count_histogram_leader_and_dead_letter_topic(
    queue: Queue, http: httpx.Client, cluster_path: str
) -> None:
    def settled() -> dict[str, Any] | None:
        group = described(http, cluster_path, queue.group)
        records = group["partitions"][0]["records"]
        return group if records and records["dead_lettered"] == REJECTED else None

    group = wait_for(settled, "the dead letters written")
    assert group["dead_letter_topic"] == queue.dlq
    assert group["records_from_broker"] == 1
    (partition,) = group["partitions"]
    assert partition["leader"] == 1
    records = partition["records"]
    held = RECORDS - REJECTED
    assert (records["acquired"], records["available"]) == (held, 0)
    # The held records were delivered once; the rejected ones are done.
    assert records["delivery_counts"] == {"1": held}
    assert [m["client_id"] for m in group["members"]] == ["console-worker"]


def test_the_share_group_list_is_paged_sorted_and_filtered_with_records_totals(
    queue: Queue, http: httpx.Client, cluster_path: str
) -> None:
    whole = ok(http.get(f"{cluster_path}/share-groups"))
    assert "total" not in whole["metadata"] and "records" not in whole["data"][0]

    page = ok(http.get(f"{cluster_path}/share-groups", params={"q": queue.group.upper()}))
    assert page["metadata"]["total"] == 1
    assert (page["metadata"]["page"], page["metadata"]["page_size"]) == (1, 50)
    (row,) = page["data"]
    assert row["share_group_id"] == queue.group
    assert row["records"]["dead_lettered"] == REJECTED
    assert row["records"]["partitions_led_here"] == 1

    other = f"{queue.topic}-idle"
    join_and_leave(queue, other)
    first = ok(
        http.get(
            f"{cluster_path}/share-groups",
            params={"q": queue.topic, "sort": "dead_lettered", "order": "desc", "page_size": 1},
        )
    )
    assert first["metadata"]["total"] == 2
    assert [r["share_group_id"] for r in first["data"]] == [queue.group]
    second = ok(http.get(first["metadata"]["next"]))
    assert [r["share_group_id"] for r in second["data"]] == [other]
    assert second["metadata"]["next"] is None

    for params in ({"page_size": "501"}, {"sort": "nope"}, {"order": "up"}, {"page": "0"}):
        response = http.get(f"{cluster_path}/share-groups", params=params)
        assert response.status_code == 400, (params, response.text)


def join_and_leave(queue: Queue, group: str) -> None:
    """A second share group on the queue's topic, which fetched once and left."""
    consumer = ShareConsumer({"bootstrap.servers": queue.bootstrap, "group.id": group})
    try:
        consumer.subscribe([queue.topic])
        consumer.poll(2.0)
    finally:
        consumer.close()


# -- the browser ------------------------------------------------------------------------------


def cell(console: ConsoleBrowser, row_css: str, field: str) -> str:
    return console.find(f"{row_css} [data-field='{field}']").text


def test_the_queues_page_lists_the_share_group_with_its_totals_and_filters_it(
    console: ConsoleBrowser, queue: Queue
) -> None:
    console.open("/console/queues")
    row = f"#queues tr[data-group='{queue.group}']"
    console.wait_for(row)
    console.wait_text(f"{row} [data-field='dead_lettered']", str(REJECTED))
    assert cell(console, row, "acquired") == str(RECORDS - REJECTED)
    assert console.find("#weir-nav a[aria-current='page']").text == "Queues"
    console.type_into("#queue-filter", "no-such-queue-anywhere")
    console.wait_gone(row)
    console.type_into("#queue-filter", queue.group)
    console.wait_for(row)
    console.assert_no_script_errors()


def test_the_queue_page_shows_counts_histogram_members_and_dead_letters_with_reasons(
    console: ConsoleBrowser, queue: Queue
) -> None:
    console.open(f"/console/queue?id={queue.group}")
    row = f"#partitions tr[data-partition='{queue.topic}/0']"
    console.wait_text(f"{row} [data-field='dead_lettered']", str(REJECTED))
    assert cell(console, row, "acquired") == str(RECORDS - REJECTED)
    assert cell(console, row, "available") == "0"
    console.wait_text("#histogram .bar-row[data-count='1']", str(RECORDS - REJECTED))
    console.wait_text("#members", "console-worker")
    console.wait_text("#dead-letter-topic", queue.dlq)
    letters = console.wait_until(
        lambda: (
            len(console.find_all("#dead-letters tr[data-dead-letter]")) == REJECTED
            and console.texts("#dead-letters [data-field='reason']")
        ),
        "the dead letters listed",
    )
    assert letters == [REJECTED_REASON] * REJECTED
    sources = console.texts("#dead-letters [data-field='source']")
    assert sorted(sources) == [f"{queue.topic}/0@{offset}" for offset in range(REJECTED)]
    assert console.find("#weir-nav a[aria-current='page']").text == "Queues"
    console.screenshot_for_docs("queue")
    console.assert_no_script_errors()


def test_redrive_makes_the_dead_letters_available_again_and_purge_asks_first(
    console: ConsoleBrowser, queue: Queue, http: httpx.Client, cluster_path: str
) -> None:
    console.open(f"/console/queue?id={queue.group}")
    row = f"#partitions tr[data-partition='{queue.topic}/0']"
    console.wait_text(f"{row} [data-field='dead_lettered']", str(REJECTED))
    console.wait_until(lambda: console.find("#redrive").is_enabled(), "the redrive button enabled")
    console.click("#redrive")
    console.wait_text("#queue-notice", f"Redrove {REJECTED} dead letters")
    console.wait_text(f"{row} [data-field='available']", str(REJECTED))
    console.wait_text(f"{row} [data-field='depth']", str(RECORDS))
    # Purging needs the group without members: while the consumer is in it, the
    # broker refuses, and the page says why.
    console.click("#purge")
    console.accept_confirm()
    console.wait_text("#queue-error", "members")
    assert described(http, cluster_path, queue.group)["queue_depth"] == RECORDS
    console.assert_no_script_errors(allowed=("409",))


def test_a_push_subscription_to_a_failing_receiver_shows_its_last_error_and_pauses(
    console: ConsoleBrowser, queue: Queue, http: httpx.Client
) -> None:
    receiver = PushReceiver(behaviour=lambda receiver, body, headers: (500, 0.0)).start()
    try:
        name = f"{queue.topic}-hook"
        created = http.post(
            "/v1/subscriptions",
            json={
                "name": name,
                "topic": queue.topic,
                "url": receiver.url,
                "start": "earliest",
                "retry": {"min_backoff_ms": 100, "max_backoff_ms": 1000, "max_attempts": 5},
            },
        )
        assert created.status_code == 201, created.text
        console.open("/console/queues")
        row = f"#subscriptions tr[data-subscription='{name}']"
        console.wait_text(f"{row} [data-field='last-error']", "HTTP 500")
        assert cell(console, row, "status") == "failing"
        console.wait_for(f"#queues tr[data-group='{queue.group}']")
        console.screenshot_for_docs("queues")
        console.click(f"{row} button.pause")
        console.wait_text(f"{row} [data-field='status']", "paused")
        assert http.get(f"/v1/subscriptions/{name}").json()["paused"] is True
        console.click(f"{row} button.resume")
        console.wait_text(f"{row} [data-field='status']", "failing")
        console.assert_no_script_errors()
    finally:
        receiver.stop()
