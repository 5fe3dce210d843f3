"""The console's topic views in a real browser (headless Chromium) against the real
`weir`: create a topic with a config, find it by searching, page through more
topics than a page holds, change a config and see the override beside its default,
see a topic's partitions with their offsets after a producer wrote to it, delete a
topic after confirming; and the paged, sorted, filtered topic list API beneath."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from compat_tests.console_browser import ConsoleBrowser
from compat_tests.harness import WeirProcess

pytestmark = pytest.mark.timeout(120)

PAGED_TOPICS = 60  # more than the console's page of 50


def cluster_path(broker: WeirProcess) -> str:
    cluster_id = httpx.get(broker.http_url + "/v3/clusters").json()["data"][0]["cluster_id"]
    return f"{broker.http_url}/v3/clusters/{cluster_id}"


@pytest.fixture(scope="module")
def many_topics(_module_broker: WeirProcess) -> list[str]:
    base = cluster_path(_module_broker)
    names = [f"paged-{i:03d}" for i in range(PAGED_TOPICS)]
    with httpx.Client(timeout=30) as client:
        for i, name in enumerate(names):
            answer = client.post(
                f"{base}/topics", json={"topic_name": name, "partitions_count": 1 + i % 4}
            )
            assert answer.status_code == 201, answer.text
    return names


def topic_page(broker: WeirProcess, **params: Any) -> Any:
    answer = httpx.get(f"{cluster_path(broker)}/topics", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_topic_list_api_pages_sorts_and_filters_on_the_server(
    module_broker: WeirProcess, many_topics: list[str]
) -> None:
    first = topic_page(module_broker, q="PAGED-", page_size=25)
    assert first["metadata"]["total"] == PAGED_TOPICS
    assert [t["topic_name"] for t in first["data"]] == many_topics[:25]
    assert "page=2" in first["metadata"]["next"]
    last = topic_page(module_broker, q="paged-", page_size=25, page=3)
    assert [t["topic_name"] for t in last["data"]] == many_topics[50:]
    assert last["metadata"]["next"] is None
    widest = topic_page(module_broker, q="paged-", sort="partitions_count", order="desc")
    counts = [t["partitions_count"] for t in widest["data"]]
    assert counts == sorted(counts, reverse=True) and counts[0] == 4
    assert all("retention_ms" in t for t in widest["data"])
    # Without paging parameters: every topic, as before.
    whole = topic_page(module_broker)
    assert "total" not in whole["metadata"] and len(whole["data"]) >= PAGED_TOPICS
    too_big = httpx.get(f"{cluster_path(module_broker)}/topics", params={"page_size": 501})
    assert too_big.status_code == 400
    bad_sort = httpx.get(f"{cluster_path(module_broker)}/topics", params={"sort": "nope"})
    assert bad_sort.status_code == 400


def test_a_topic_created_in_the_browser_with_a_config_is_listed_and_found_by_search(
    console: ConsoleBrowser, module_broker: WeirProcess
) -> None:
    console.open("/console/topics")
    console.click("#create-topic-open")
    console.type_into("#new-topic-name", "orders-eu")
    console.type_into("#new-topic-partitions", "3")
    console.type_into("#new-topic-configs", "retention.ms=3600000")
    console.click("#create-topic-submit")
    console.wait_text("#topics-notice", "Created topic orders-eu")
    console.type_into("#topic-search", "ORDERS")
    console.wait_until(
        lambda: console.texts("#topics tbody tr .topic-link") == ["orders-eu"], "only orders-eu"
    )
    row = "#topics tr[data-topic='orders-eu']"
    assert console.find(row + " .partitions").text == "3"
    console.wait_text(row + " .retention", "60 min")
    console.wait_text(row + " .size", "B")  # the brokers' statistics came back
    console.assert_no_script_errors()


def test_paging_through_more_topics_than_a_page_shows_each_once(
    console: ConsoleBrowser, many_topics: list[str]
) -> None:
    console.open("/console/topics?q=paged-")
    console.wait_text("#page-info", f"1–50 of {PAGED_TOPICS}")
    seen = console.texts("#topics tbody tr .topic-link")
    assert seen == many_topics[:50]
    console.click("#page-next")
    console.wait_text("#page-info", f"51–{PAGED_TOPICS} of {PAGED_TOPICS}")
    console.wait_until(
        lambda: console.texts("#topics tbody tr .topic-link") == many_topics[50:], "page 2"
    )
    assert not console.find("#page-next").is_enabled()
    console.click("button.sort[data-sort='topic_name']")  # descending now
    console.wait_until(
        lambda: console.texts("#topics tbody tr .topic-link")[:1] == [many_topics[-1]],
        "the last name first",
    )


def test_a_changed_config_shows_as_an_override_beside_its_default(
    console: ConsoleBrowser, module_broker: WeirProcess
) -> None:
    httpx.post(
        f"{cluster_path(module_broker)}/topics",
        json={"topic_name": "settings-demo", "partitions_count": 1},
    ).raise_for_status()
    console.open("/console/topic?name=settings-demo")
    row = "#configs tr[data-config='retention.ms']"
    console.wait_for(row + "[data-override='false']")
    console.click(row + " .config-edit")
    console.type_into(row + " .config-input", "7200000")
    console.click(row + " .config-save")
    console.wait_for(row + "[data-override='true']")
    assert console.find(row + " .config-value").text == "7200000"
    assert console.find(row + " .config-default").text == "604800000"  # the broker default
    console.click(row + " .config-reset")
    console.wait_for(row + "[data-override='false']")
    console.assert_no_script_errors()


def test_a_topics_partitions_show_leader_isr_and_offsets_after_producing(
    console: ConsoleBrowser, module_broker: WeirProcess
) -> None:
    base = cluster_path(module_broker)
    httpx.post(
        f"{base}/topics",
        json={
            "topic_name": "clicks",
            "partitions_count": 2,
            "configs": [{"name": "cleanup.policy", "value": "delete"}],
        },  # fmt: skip
    ).raise_for_status()
    producer = Producer({"bootstrap.servers": module_broker.bootstrap})
    for i in range(30):
        producer.produce("clicks", key=b"k", value=f"click {i}".encode(), partition=i % 2)
    assert producer.flush(20) == 0
    console.open("/console/topic?name=clicks")
    for partition in (0, 1):
        row = f"#partitions tr[data-partition='{partition}']"
        console.wait_text(row + " .high-watermark", "15")
        assert console.find(row + " .leader").text == "1"
        assert console.find(row + " .isr").text == "1"
        assert console.find(row + " .log-start").text == "0"
        assert console.find(row + " .last-stable").text == "15"
    console.wait_text("#topic-records", "30")
    link = console.find("#browse-messages").get_attribute("href")
    assert link.endswith("/console/messages?topic=clicks")
    console.screenshot_for_docs("topic")
    console.assert_no_script_errors()


def test_deleting_a_topic_asks_for_confirmation_then_removes_it(
    console: ConsoleBrowser, module_broker: WeirProcess
) -> None:
    httpx.post(
        f"{cluster_path(module_broker)}/topics",
        json={"topic_name": "doomed", "partitions_count": 1},
    ).raise_for_status()
    console.open("/console/topics")
    size = "#topics tr[data-topic='clicks'] .size"  # produced to by a test above
    console.wait_until(lambda: console.find(size).text not in ("…", "0 B"), "the size of clicks")
    console.screenshot_for_docs("topics")
    console.open("/console/topics?q=doomed")
    console.click("button[data-delete='doomed']")
    console.accept_confirm()
    console.wait_text("#topics-notice", "Deleted topic doomed")
    console.wait_gone("#topics tr[data-topic='doomed']")
    answer = httpx.get(f"{cluster_path(module_broker)}/topics/doomed")
    assert answer.status_code == 404
    console.assert_no_script_errors()
