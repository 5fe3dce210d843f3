"""The fsync round histogram and page cache counters reach /metrics."""

from __future__ import annotations

import re
from pathlib import Path

import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.metrics import HistogramSample, Metrics
from weir.format.record_batch import build_batch


def test_a_histogram_renders_cumulative_buckets_sum_and_count() -> None:
    metrics = Metrics()
    metrics.register_histogram(
        "weir_x_seconds", "X.", lambda: HistogramSample([(0.001, 2), (0.01, 5)], 0.0123, 6)
    )
    text = metrics.render()
    assert "# TYPE weir_x_seconds histogram" in text
    assert 'weir_x_seconds_bucket{le="0.001"} 2' in text
    assert 'weir_x_seconds_bucket{le="0.01"} 5' in text
    assert 'weir_x_seconds_bucket{le="+Inf"} 6.0' in text
    assert "weir_x_seconds_sum 0.0123" in text
    assert "weir_x_seconds_count 6.0" in text


async def test_produced_records_show_up_as_fsync_rounds(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    await nursery.start(broker.flusher.run)
    broker.create_topic(broker.controller.plan_topic("t", 1, 1))
    replica = broker.partition("t", 0)
    assert replica is not None
    for _ in range(3):
        result = replica.log.append(build_batch([(b"k", b"v", [])]), leader_epoch=0, now_ms=0)
        with trio.fail_after(10):
            await replica.log.wait_durable(result.last_offset + 1)
    text = broker.metrics.render()
    count = re.search(r"^weir_fsync_round_seconds_count (\d+)\.0$", text, re.MULTILINE)
    assert count is not None and int(count[1]) >= 3
    infinite = re.search(r'^weir_fsync_round_seconds_bucket\{le="\+Inf"\} (\d+)\.0$', text, re.M)
    assert infinite is not None and infinite[1] == count[1]
    assert re.search(r"^weir_page_cache_evicted_bytes_total 0\.0$", text, re.MULTILINE)
    assert re.search(r"^weir_syncfs_helper_starts_total [01]\.0$", text, re.MULTILINE)
    broker.close()
