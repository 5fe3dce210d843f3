"""The pure parts of the console's overview and topic list API: the paging
contract (rest_admin_paging), the traffic history's rates (broker_stats) and the
cluster's health summary (rest_admin_broker_stats)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from weir.broker.http.broker_stats import Totals, rate_sample, topic_rates
from weir.broker.http.rest_admin_broker_stats import health_summary
from weir.broker.http.rest_admin_paging import PageRequest, cut_page
from weir.controller.partition_state import BrokerInfo

ROWS = [("b", 3), ("a", 1), ("C", 3), ("d", 2)]
KEYS: dict[str, Any] = {"name": lambda r: r[0], "size": lambda r: r[1]}


def paged(q: str = "", sort: str = "name", desc: bool = False, page: int = 1, size: int = 50):
    return cut_page(ROWS, PageRequest(q, sort, desc, page, size), lambda r: r[0], KEYS)


def test_a_page_is_cut_after_filtering_and_sorting_and_counts_every_match() -> None:
    assert paged(size=2) == ([("C", 3), ("a", 1)], 4)
    assert paged(size=2, page=2) == ([("b", 3), ("d", 2)], 4)
    assert paged(size=2, page=3) == ([], 4)


def test_the_filter_is_a_case_insensitive_substring_of_the_name() -> None:
    assert paged(q="c") == ([("C", 3)], 1)
    assert paged(q="zz") == ([], 0)


def test_ties_in_the_sort_field_keep_name_order_whichever_the_direction() -> None:
    rows, _ = paged(sort="size", desc=True)
    assert rows == [("C", 3), ("b", 3), ("d", 2), ("a", 1)]
    rows, _ = paged(sort="size")
    assert rows == [("a", 1), ("d", 2), ("C", 3), ("b", 3)]


def totals(at_s: float, produced: int, requests: int) -> Totals:
    return Totals(at_s, int(at_s * 1000), produced, produced // 100, 0, 0, requests)


def test_a_sample_is_the_counters_rate_over_its_interval() -> None:
    sample = rate_sample(totals(10.0, 1000, 5), totals(20.0, 21000, 25), 12.34)
    assert sample["produced_bytes_per_s"] == 2000.0
    assert sample["produced_records_per_s"] == 20.0
    assert sample["requests_per_s"] == 2.0
    assert sample["time_ms"] == 20000 and sample["loop_lag_worst_ms"] == 12.3


def test_a_counter_that_went_back_shows_no_negative_rate() -> None:
    sample = rate_sample(totals(10.0, 5000, 5), totals(20.0, 100, 5), 0.0)
    assert sample["produced_bytes_per_s"] == 0.0


def test_topic_rates_cover_the_topics_asked_even_those_never_seen() -> None:
    rates = topic_rates({"t": (0, 0, 0, 0)}, {"t": (600, 60, 300, 30)}, 60.0, ["t", "new"])
    assert rates["t"] == {
        "produced_bytes_per_s": 10.0,
        "produced_records_per_s": 1.0,
        "fetched_bytes_per_s": 5.0,
        "fetched_records_per_s": 0.5,
    }
    assert set(rates["new"].values()) == {0.0}


def partition(index: int, leader: int, replicas: list[int], isr: list[int]) -> Any:
    return SimpleNamespace(
        partition_index=index, leader_id=leader, replica_nodes=replicas, isr_nodes=isr
    )


def test_health_shows_a_broker_holding_replicas_but_not_live_as_down() -> None:
    topic = SimpleNamespace(
        name="t",
        error_code=0,
        partitions=[
            partition(0, 1, [1, 2, 3], [1, 2]),
            partition(1, 2, [2, 3, 1], [2, 1]),
            partition(2, -1, [3], []),
        ],
    )
    live = {i: SimpleNamespace(host="h", port=9092 + i, rack=None) for i in (1, 2)}
    summary = health_summary(live, 2, [topic])
    assert [(b["broker_id"], b["live"], b["is_controller"]) for b in summary["brokers"]] == [
        (1, True, False),
        (2, True, True),
        (3, False, False),
    ]
    assert [b["partitions_led"] for b in summary["brokers"]] == [1, 1, 0]
    assert [b["replicas"] for b in summary["brokers"]] == [2, 2, 3]
    assert summary["offline_partitions_count"] == 1
    assert summary["under_replicated_partitions_count"] == 2
    assert summary["offline_partitions"] == [{"topic_name": "t", "partition_id": 2}]


def test_a_registration_carries_the_http_url_and_one_without_it_still_loads() -> None:
    info = BrokerInfo(node_id=2, host="b2", port=9092, http_url="http://b2:8090")
    assert BrokerInfo.from_json(info.to_json(), epoch=7).http_url == "http://b2:8090"
    older = b'{"node_id": 2, "host": "b2", "port": 9092}'
    assert BrokerInfo.from_json(older, epoch=7).http_url == ""
    assert b"http_url" not in BrokerInfo(node_id=2, host="b2", port=9092).to_json()
