"""The console's overview and topic views on a real 3-broker cluster (over a real
etcd), in headless Chromium: the overview shows the three brokers, the controller
and a throughput chart that moves once records are produced (each broker's
statistics asked of it through the broker the browser uses); a topic's partitions
show leaders and ISRs across brokers; a broker killed while the console is open
shows as down with under-replicated partitions while the page keeps working; and
when the browser's own broker dies the page says so while another broker's
console still serves the cluster."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from compat_tests.cluster_harness import WeirCluster, running_cluster
from compat_tests.console_browser import ConsoleBrowser
from compat_tests.harness import WeirProcess

pytestmark = pytest.mark.timeout(180)

TOPIC = "console-cluster"
FAILOVER_WAIT_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirCluster]:
    with running_cluster(tmp_path_factory.mktemp("console-cluster")) as weir:
        weir.create_topic(TOPIC, 3, 3)
        weir.wait_full_isr(TOPIC)
        yield weir


@pytest.fixture
def browser(chromium: ConsoleBrowser, cluster: WeirCluster) -> ConsoleBrowser:
    chromium.use_broker(cluster.brokers[1].http_url)
    return chromium


def get(broker: WeirProcess, path: str) -> Any:
    answer = httpx.get(broker.http_url + path, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def cluster_path(broker: WeirProcess) -> str:
    return "/v3/clusters/" + get(broker, "/v3/clusters")["data"][0]["cluster_id"]


def produce(cluster: WeirCluster, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(TOPIC, value=b"x" * 500, partition=i % 3)
    assert producer.flush(30) == 0


def test_any_broker_answers_for_every_brokers_stats(cluster: WeirCluster) -> None:
    first = cluster.brokers[1]
    base = cluster_path(first)
    for node_id in (1, 2, 3):
        stats = get(first, f"{base}/brokers/{node_id}/stats?topics={TOPIC}")
        assert stats["broker_id"] == node_id
        assert stats["replicas"] >= 3  # every broker holds a replica of each partition
        assert [t["topic_name"] for t in stats["topics"]] == [TOPIC]
    health = get(cluster.brokers[2], f"{base}/health")
    assert [(b["broker_id"], b["live"]) for b in health["brokers"]] == [
        (1, True),
        (2, True),
        (3, True),
    ]
    assert sum(b["partitions_led"] for b in health["brokers"]) == health["partitions_count"]


def test_the_overview_shows_three_brokers_the_controller_and_throughput_after_producing(
    browser: ConsoleBrowser, cluster: WeirCluster
) -> None:
    browser.open("/console/overview")
    browser.wait_until(
        lambda: len(browser.find_all("#brokers tr[data-live='true']")) == 3, "three live brokers"
    )
    controller = cluster.controller_id()
    browser.wait_text(f"#brokers tr[data-broker='{controller}'] .broker-state", "controller")
    assert browser.find("#controller-id").text == str(controller)
    produce(cluster, 600)
    browser.wait_until(
        lambda: float(browser.find("#throughput-chart").get_attribute("data-max-in") or 0) > 0,
        "bytes in on the throughput chart",
        timeout_s=20,
    )
    browser.wait_until(
        lambda: any(
            text not in ("", "0", "–") for text in browser.texts("#brokers td.partitions-led")
        ),
        "partitions led",
    )
    browser.screenshot_for_docs("overview")
    browser.assert_no_script_errors()


def test_a_topics_partitions_show_their_leaders_and_isr_across_the_brokers(
    browser: ConsoleBrowser, cluster: WeirCluster
) -> None:
    browser.open(f"/console/topic?name={TOPIC}")
    for partition in range(3):
        row = f"#partitions tr[data-partition='{partition}']"
        leader = str(cluster.leader_of(TOPIC, partition))
        browser.wait_text(row + " .leader", leader)
        assert browser.find(row + " .replicas").text.count(",") == 2
        assert sorted(browser.find(row + " .isr").text.split(", ")) == ["1", "2", "3"]
    browser.assert_no_script_errors()


def test_a_broker_killed_while_the_overview_is_open_shows_down_with_under_replicated_partitions(
    browser: ConsoleBrowser, cluster: WeirCluster
) -> None:
    browser.open("/console/overview")
    browser.wait_until(
        lambda: len(browser.find_all("#brokers tr[data-live='true']")) == 3, "three live brokers"
    )
    cluster.brokers[3].kill()
    browser.wait_for("#brokers tr[data-broker='3'][data-live='false']", FAILOVER_WAIT_S)
    browser.wait_text("#brokers tr[data-broker='3'] .broker-state", "down")
    browser.wait_until(
        lambda: int(browser.find("#under-replicated-count").text.replace(",", "")) > 0,
        "under-replicated partitions",
        timeout_s=FAILOVER_WAIT_S,
    )
    browser.wait_for("#under-replicated tbody tr")
    # The page goes on: the live brokers with their statistics, no error.
    assert len(browser.find_all("#brokers tr[data-live='true']")) == 2
    assert not browser.find("#overview-error").is_displayed()
    assert not browser.find("#weir-unreachable").is_displayed()


def test_the_browsers_own_broker_killed_shows_the_banner_and_another_broker_still_serves(
    browser: ConsoleBrowser, cluster: WeirCluster
) -> None:
    browser.open("/console/overview")
    browser.wait_for("#brokers tr[data-broker='1']")
    cluster.brokers[1].kill()
    browser.wait_for("#weir-unreachable", FAILOVER_WAIT_S)
    browser.use_broker(cluster.brokers[2].http_url)
    browser.open("/console/overview")
    browser.wait_for("#brokers tr[data-broker='1'][data-live='false']", FAILOVER_WAIT_S)
    browser.wait_for("#brokers tr[data-broker='2'][data-live='true']")
    assert not browser.find("#weir-unreachable").is_displayed()
