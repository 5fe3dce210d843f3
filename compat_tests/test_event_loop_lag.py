"""The real broker measures its own event-loop stalls (issue 9's yardstick):
`/health/ready` reports the worst lag of the last minute as JSON and
`/metrics` has the `weir_event_loop_lag_seconds` histogram."""

from __future__ import annotations

import json

from compat_tests.harness import WeirProcess, create_topic


def ready_document(broker: WeirProcess) -> dict[str, object]:
    status, body = broker.http_get("/health/ready")
    assert status == 200
    document: dict[str, object] = json.loads(body)
    return document


def lag_count(broker: WeirProcess) -> float:
    text = broker.http_get("/metrics")[1].decode()
    line = next(
        row for row in text.splitlines() if row.startswith("weir_event_loop_lag_seconds_count")
    )
    return float(line.rsplit(" ", 1)[1])


def test_ready_reports_the_worst_loop_lag_and_metrics_count_the_probes(
    own_broker: WeirProcess,
) -> None:
    document = ready_document(own_broker)
    assert document["status"] == "ready"
    assert isinstance(document["event_loop_lag_worst_last_minute_ms"], float)
    first = lag_count(own_broker)
    # Creating 300 partitions runs its fsyncs on the event loop today: a stall the
    # meter must see. Issue 9 moves that work off the loop; this test must then
    # find another stall, and a new one asserts issue 9's bound (under 100 ms).
    create_topic(own_broker.bootstrap, "stall", partitions=300, timeout_s=60)
    worst_ms = ready_document(own_broker)["event_loop_lag_worst_last_minute_ms"]
    assert isinstance(worst_ms, float) and worst_ms >= 50, worst_ms
    assert lag_count(own_broker) > first
