"""weir/broker/metrics.py: the families the collector builds at scrape time."""

from __future__ import annotations

from weir.broker.metrics import SAMPLES_ON_LOOP_MAX, Metrics


def test_request_latency_is_a_cumulative_histogram_per_api() -> None:
    metrics = Metrics()
    for seconds in (0.0001, 0.003, 0.003, 42.0):
        metrics.observe_request("PRODUCE", seconds)
    text = metrics.render()
    assert 'weir_request_duration_seconds_bucket{api="PRODUCE",le="0.0005"} 1.0' in text
    assert 'weir_request_duration_seconds_bucket{api="PRODUCE",le="0.005"} 3.0' in text
    assert 'weir_request_duration_seconds_bucket{api="PRODUCE",le="30.0"} 3.0' in text
    assert 'weir_request_duration_seconds_bucket{api="PRODUCE",le="+Inf"} 4.0' in text
    assert 'weir_request_duration_seconds_count{api="PRODUCE"} 4.0' in text


def test_topic_traffic_is_one_counter_family_each() -> None:
    metrics = Metrics()
    traffic = metrics.traffic("orders")
    traffic.produced_bytes += 100
    traffic.produced_records += 3
    traffic.fetched_records += 2
    text = metrics.render()
    assert 'weir_topic_produced_bytes_total{topic="orders"} 100.0' in text
    assert 'weir_topic_produced_records_total{topic="orders"} 3.0' in text
    assert 'weir_topic_fetched_records_total{topic="orders"} 2.0' in text
    assert 'weir_topic_fetched_bytes_total{topic="orders"} 0.0' in text


def test_openmetrics_when_the_accept_header_asks_for_it() -> None:
    metrics = Metrics()
    metrics.requests_total["FETCH"] += 2
    body, content_type = metrics.exposition("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.decode().endswith("# EOF\n")
    assert '# TYPE weir_requests counter\nweir_requests_total{api="FETCH"} 2.0' in body.decode()
    body, content_type = metrics.exposition("text/plain")
    assert content_type.startswith("text/plain; version=0.0.4")
    assert 'weir_requests_total{api="FETCH"} 2.0' in body.decode()


def test_registered_gauges_keep_their_sorted_labels() -> None:
    metrics = Metrics()
    metrics.register_gauge("weir_x", "X.", lambda: [({"type": "a", "state": "b"}, 1.0)])
    assert 'weir_x{state="b",type="a"} 1.0' in metrics.render()


async def test_a_large_page_is_encoded_off_the_loop_to_the_same_text() -> None:
    metrics = Metrics()
    samples = [({"partition": str(i)}, float(i)) for i in range(SAMPLES_ON_LOOP_MAX + 1)]
    metrics.register_gauge("weir_many", "Many.", lambda: samples)
    on_loop, _ = metrics.exposition("")
    off_loop, content_type = await metrics.exposition_off_loop("")

    def weir_lines(page: bytes) -> list[str]:  # process_* move between two scrapes
        return [line for line in page.decode().splitlines() if "process_" not in line]

    assert weir_lines(off_loop) == weir_lines(on_loop)
    assert 'weir_many{partition="1000"} 1000.0' in off_loop.decode()
    assert content_type.startswith("text/plain")
