"""The console's consumer group views in a real browser (headless Chromium) against
the real `weir` and confluent-kafka consumers: the group page shows members and lag
per partition, and the lag falling (cells and chart) as a consumer catches up; an
active group's reset is refused; offsets reset with a dry run first, then applied;
a group deleted; the group list paged, searched and sorted by the broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.console_browser import PHONE_SIZE, ConsoleBrowser
from compat_tests.harness import WeirProcess

pytestmark = pytest.mark.timeout(120)

CLIENT_WAIT_S = 30.0


@pytest.fixture
def http(module_broker: WeirProcess) -> Iterator[httpx.Client]:
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(base_url=module_broker.http_url, timeout=30, limits=limits) as client:
        yield client


def cluster_path(http: httpx.Client) -> str:
    return f"/v3/clusters/{http.get('/v3/clusters').json()['data'][0]['cluster_id']}"


def new_topic(http: httpx.Client, prefix: str, partitions: int) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    body = {"topic_name": name, "partitions_count": partitions}
    created = http.post(f"{cluster_path(http)}/topics", json=body)
    assert created.status_code == 201, created.text
    return name


def produce(broker: WeirProcess, topic: str, per_partition: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, f"order-{i}".encode(), partition=partition)
    assert producer.flush(CLIENT_WAIT_S) == 0


def commit(broker: WeirProcess, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Offsets committed without joining: the group has no members."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def committed(http: httpx.Client, group: str) -> dict[tuple[str, int], int]:
    lags = http.get(f"{cluster_path(http)}/consumer-groups/{group}/lags").json()["data"]
    return {(lag["topic_name"], lag["partition_id"]): lag["current_offset"] for lag in lags}


def lag_cell(topic: str, partition: int) -> str:
    return f"#lags tr[data-partition='{topic}-{partition}'] td.lag"


def wait_exact(console: ConsoleBrowser, css: str, text: str) -> None:
    console.wait_until(lambda: console.find(css).text == text, f"{css} showing exactly {text!r}")


def chart_series(console: ConsoleBrowser) -> list[Any]:
    return list(
        console.driver.execute_script(
            "return Alpine.$data(document.querySelector('main')).chart.plot.data[1]"
        )
    )


def test_the_group_page_shows_members_and_lag_and_the_lag_falls_as_the_consumer_catches_up(
    console: ConsoleBrowser, module_broker: WeirProcess, http: httpx.Client
) -> None:
    topic = new_topic(http, "orders", partitions=2)
    produce(module_broker, topic, 100, 2)
    group = f"billing-{uuid.uuid4().hex[:6]}"
    commit(module_broker, group, {(topic, 0): 10, (topic, 1): 20})
    consumer = Consumer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "group.id": group,
            "client.id": "billing-worker",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    consumed = 0

    def consume_until(total: int) -> None:
        nonlocal consumed
        deadline = time.monotonic() + CLIENT_WAIT_S
        while consumed < total:
            assert time.monotonic() < deadline, f"consumed {consumed} of {total}"
            messages = consumer.consume(num_messages=total - consumed, timeout=0.5)
            consumed += sum(1 for m in messages if m.error() is None)

    try:
        deadline = time.monotonic() + CLIENT_WAIT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer was never assigned"
            consumed += sum(1 for m in consumer.consume(50, timeout=0.2) if m.error() is None)
        console.open(f"/console/group?id={group}")
        wait_exact(console, lag_cell(topic, 0), "90")
        wait_exact(console, lag_cell(topic, 1), "80")
        wait_exact(console, "#group-total-lag", "170")
        console.wait_text("#group-state", "STABLE")
        member = console.wait_for("#members tbody tr[data-consumer]")
        assert member.find_element("css selector", ".client-id").text == "billing-worker"
        assert member.find_element("css selector", ".client-host").text
        assert topic in member.find_element("css selector", ".assignments").text
        assert console.find("#weir-nav a[data-page='groups']").get_attribute("aria-current")

        # A group with members cannot be reset or deleted: the page says why.
        console.click("#reset-dry-run")
        console.wait_text("#reset-error", "inactive")
        console.click("#group-delete")
        console.accept_confirm()
        console.wait_text("#delete-error", "has members")

        # The consumer catches up, a batch at a time; the page follows.
        for step in (50, 100, 150, 170):
            consume_until(max(step, consumed))
            consumer.commit(asynchronous=False)
            wait_exact(console, "#group-total-lag", str(170 - consumed))
            if step == 100:
                console.wait_until(lambda: len(chart_series(console)) >= 3, "chart points")
                console.driver.execute_script("window.scrollTo(0, 0)")
                console.screenshot_for_docs("group")
        wait_exact(console, lag_cell(topic, 0), "0")
        wait_exact(console, lag_cell(topic, 1), "0")
        series = console.wait_until(
            lambda: (s := chart_series(console)) and s[-1] == 0 and s, "the chart at 0"
        )
        assert max(series) == 170, series
        assert series == sorted(series, reverse=True), f"the charted lag rose: {series}"
    finally:
        consumer.close()
    console.wait_for("#members-empty")
    console.assert_no_script_errors()


def test_reset_offsets_shows_a_dry_run_then_applies_it(
    console: ConsoleBrowser, module_broker: WeirProcess, http: httpx.Client
) -> None:
    topic = new_topic(http, "payments", partitions=2)
    produce(module_broker, topic, 10, 2)
    group = f"ledger-{uuid.uuid4().hex[:6]}"
    commit(module_broker, group, {(topic, 0): 5, (topic, 1): 7})
    console.open(f"/console/group?id={group}")
    wait_exact(console, lag_cell(topic, 1), "3")

    console.select("#reset-strategy", value="earliest")
    console.click("#reset-dry-run")
    console.wait_text("#reset-plan-title", "Nothing has changed yet")
    assert console.texts("#reset-plan td.new-offset") == ["0", "0"]
    assert console.texts("#reset-plan td.current") == ["5", "7"]
    assert committed(http, group) == {(topic, 0): 5, (topic, 1): 7}, "the dry run changed them"

    console.click("#reset-apply")
    console.accept_confirm()
    console.wait_text("#group-notice", "Offsets reset on 2 partition(s)")
    wait_exact(console, lag_cell(topic, 0), "10")
    assert committed(http, group) == {(topic, 0): 0, (topic, 1): 0}

    console.select("#reset-strategy", value="shift_by")
    console.type_into("#reset-shift", "4")
    console.select("#reset-topic", value=topic)
    console.click("#reset-dry-run")
    console.wait_text("#reset-plan-title", "2 partition(s)")
    assert console.texts("#reset-plan td.new-offset") == ["4", "4"]
    console.click("#reset-apply")
    console.accept_confirm()
    wait_exact(console, lag_cell(topic, 1), "6")
    assert committed(http, group) == {(topic, 0): 4, (topic, 1): 4}
    console.assert_no_script_errors()


def test_a_group_deleted_from_its_page_is_gone(
    console: ConsoleBrowser, module_broker: WeirProcess, http: httpx.Client
) -> None:
    topic = new_topic(http, "audit", partitions=1)
    produce(module_broker, topic, 3, 1)
    group = f"old-reports-{uuid.uuid4().hex[:6]}"
    commit(module_broker, group, {(topic, 0): 1})
    console.open(f"/console/group?id={group}")
    wait_exact(console, lag_cell(topic, 0), "2")
    console.click("#group-delete")
    console.accept_confirm()
    console.wait_text("#groups-notice", f"Group {group} deleted")
    assert http.get(f"{cluster_path(http)}/consumer-groups/{group}").status_code == 404
    console.assert_no_script_errors()


def test_the_group_list_pages_searches_and_sorts_on_the_server(
    console: ConsoleBrowser, module_broker: WeirProcess, http: httpx.Client
) -> None:
    topic = new_topic(http, "events", partitions=1)
    produce(module_broker, topic, 100, 1)
    prefix = f"svc{uuid.uuid4().hex[:4]}"
    groups_path = f"{cluster_path(http)}/consumer-groups"
    # 60 groups with offsets (a reset of a new group id stores them, as Kafka's).
    for i in range(60):
        body = {
            "strategy": "offset",
            "offset": i,
            "topics": [{"topic_name": topic}],
            "dry_run": False,
        }
        answered = http.post(f"{groups_path}/{prefix}-{i:02d}/reset-offsets", json=body)
        assert answered.status_code == 200, answered.text

    console.open("/console/groups")
    console.wait_for("#groups-table tbody tr[data-group]")
    console.type_into("#groups-search", prefix.upper())
    console.wait_text("#groups-total", "60 groups")
    console.wait_text("#groups-page", "Page 1 of 2")
    rows = console.find_all("#groups-table tbody tr[data-group]")
    assert len(rows) == 50
    assert rows[0].get_attribute("data-group") == f"{prefix}-00"
    console.click("#groups-next")
    console.wait_text("#groups-page", "Page 2 of 2")
    console.wait_until(
        lambda: len(console.find_all("#groups-table tbody tr[data-group]")) == 10, "page 2"
    )

    console.click("#groups-table button[data-sort='total_lag']")  # largest first
    console.wait_text("#groups-page", "Page 1 of 2")
    first = f"#groups-table tbody tr[data-group='{prefix}-00'] td.lag"
    wait_exact(console, first, "100")
    assert console.find("#groups-table tbody tr[data-group]").get_attribute("data-group") == (
        f"{prefix}-00"
    )
    console.click("#groups-table button[data-sort='total_lag']")  # smallest first
    wait_exact(console, f"#groups-table tbody tr[data-group='{prefix}-59'] td.lag", "41")
    assert console.find("#groups-table tbody tr[data-group]").get_attribute("data-group") == (
        f"{prefix}-59"
    )
    assert "sort=total_lag" in console.driver.current_url

    console.type_into("#groups-search", f"{prefix}-1")
    console.wait_text("#groups-total", "10 groups")
    console.click(f"#groups-table tr[data-group='{prefix}-15'] a.group-link")
    console.wait_text("#group-id", f"{prefix}-15")
    wait_exact(console, lag_cell(topic, 0), "85")

    live = Consumer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "group.id": f"{prefix}-checkout",
            "client.id": "checkout",
        }
    )
    live.subscribe([topic])
    try:
        deadline = time.monotonic() + CLIENT_WAIT_S
        while not live.assignment():
            assert time.monotonic() < deadline, "the consumer was never assigned"
            live.poll(0.2)
        live.commit(offsets=[TopicPartition(topic, 0, 12)], asynchronous=False)
        console.open(f"/console/groups?q={prefix}&sort=total_lag&order=desc")
        live_row = f"#groups-table tr[data-group='{prefix}-checkout']"
        wait_exact(console, f"{live_row} td.members", "1")
        wait_exact(console, f"{live_row} td.lag", "88")
        console.screenshot_for_docs("groups")
    finally:
        live.close()
    console.type_into("#groups-search", "no-such-group-anywhere")
    console.wait_for("#groups-empty")
    with console.window_size(*PHONE_SIZE):
        for page in (f"/console/groups?q={prefix}", f"/console/group?id={prefix}-15"):
            console.open(page)
            console.wait_for("#groups-table tbody tr[data-group], #lags tbody tr[data-partition]")
            width = console.driver.execute_script("return document.documentElement.scrollWidth")
            assert width <= console.driver.execute_script("return window.innerWidth"), page
    console.assert_no_script_errors()
