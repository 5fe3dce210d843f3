"""The share-group history checker (compat_tests/share_history.py) on hand-made histories."""

from __future__ import annotations

from typing import Any

from compat_tests.share_history import check_share_history

LOCK_MS = 2000
LIMIT = 3


def delivered(consumer: str, offset: int, count: int, t_ms: int) -> dict[str, Any]:
    return {
        "event": "delivered",
        "consumer": consumer,
        "partition": 0,
        "offset": offset,
        "delivery_count": count,
        "t_ms": t_ms,
    }


def acked(
    consumer: str, offset: int, ack_type: str, t_ms: int, error: str | None = None
) -> list[dict[str, Any]]:
    """An acknowledgement and the broker's answer 5 ms later."""
    return [
        {
            "event": "acknowledge",
            "consumer": consumer,
            "partition": 0,
            "offset": offset,
            "type": ack_type,
            "t_ms": t_ms,
        },
        {
            "event": "ack_result",
            "consumer": consumer,
            "partition": 0,
            "offsets": [offset],
            "error": error,
            "t_ms": t_ms + 5,
        },
    ]


def check(produced: list[int], events: list[dict[str, Any]]) -> list[str]:
    report = check_share_history(
        [(0, o) for o in produced], events, delivery_limit=LIMIT, lock_ms=LOCK_MS
    )
    return report.violations


def test_each_record_accepted_once_passes() -> None:
    events = [delivered("c1", 0, 1, 100), delivered("c1", 1, 1, 100)]
    events += acked("c1", 0, "ACCEPT", 150) + acked("c1", 1, "ACCEPT", 150)
    assert check([0, 1], events) == []


def test_release_then_redelivery_with_the_next_count_passes() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "RELEASE", 150)]
    events += [delivered("c2", 0, 2, 200), *acked("c2", 0, "ACCEPT", 250)]
    assert check([0], events) == []


def test_reject_archives_the_record() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "REJECT", 150)]
    report = check_share_history([(0, 0)], events, delivery_limit=LIMIT, lock_ms=LOCK_MS)
    assert report.ok and report.resolutions == {"0:0": "rejected"}


def test_released_up_to_the_limit_is_archived() -> None:
    events: list[dict[str, Any]] = []
    for count in range(1, LIMIT + 1):
        events += [
            delivered("c1", 0, count, count * 100),
            *acked("c1", 0, "RELEASE", count * 100 + 50),
        ]
    report = check_share_history([(0, 0)], events, delivery_limit=LIMIT, lock_ms=LOCK_MS)
    assert report.ok and report.resolutions == {"0:0": "delivery_limit"}


def test_lock_expiry_lets_another_consumer_take_the_record() -> None:
    # c1 acknowledges late (after its lock) and Kafka answers without error: ignored
    events = [delivered("c1", 0, 1, 0), delivered("c2", 0, 2, LOCK_MS + 10)]
    events += acked("c2", 0, "ACCEPT", LOCK_MS + 20) + acked("c1", 0, "ACCEPT", LOCK_MS * 2)
    report = check_share_history([(0, 0)], events, delivery_limit=LIMIT, lock_ms=LOCK_MS)
    assert report.ok and report.resolutions == {"0:0": "accepted"}


def test_a_killed_consumers_record_may_go_to_another_before_its_lock_expires() -> None:
    events = [delivered("c1", 0, 1, 0), {"event": "killed", "consumer": "c1", "t_ms": 500}]
    events += [delivered("c2", 0, 2, 600), *acked("c2", 0, "ACCEPT", 650)]
    assert check([0], events) == []


def test_renewed_record_returned_again_is_one_holding() -> None:
    events = [delivered("c1", 0, 1, 0), *acked("c1", 0, "RENEW", 1000)]
    events += [delivered("c1", 0, 1, 1010), *acked("c1", 0, "RENEW", 2500)]
    events += [delivered("c1", 0, 1, 2510), *acked("c1", 0, "ACCEPT", 3500)]
    assert check([0], events) == []


def test_accepted_twice_fails() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "ACCEPT", 150)]
    events += [delivered("c2", 0, 2, 200), *acked("c2", 0, "ACCEPT", 250)]
    violations = check([0], events)
    assert any("delivered after it was accepted" in v for v in violations)
    assert any("accepted twice" in v for v in violations)


def test_a_record_never_acknowledged_is_unresolved() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "ACCEPT", 150)]
    assert check([0, 1], events) == ["0:1: neither accepted nor archived"]


def test_a_failed_accept_is_not_an_acceptance() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "ACCEPT", 150, "INVALID_RECORD_STATE")]
    assert check([0], events) == ["0:0: neither accepted nor archived"]


def test_a_skipped_delivery_count_fails() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "RELEASE", 150)]
    events += [delivered("c1", 0, 3, 200), *acked("c1", 0, "ACCEPT", 250)]
    assert check([0], events) == ["0:0: delivery 3 to c1 at 200: delivery count 3, expected 2"]


def test_a_delivery_over_the_limit_fails() -> None:
    events: list[dict[str, Any]] = []
    for count in range(1, LIMIT + 2):
        events += [
            delivered("c1", 0, count, count * 100),
            *acked("c1", 0, "RELEASE", count * 100 + 50),
        ]
    violations = check([0], events)
    assert (
        f"0:0: delivery {LIMIT + 1} to c1 at {(LIMIT + 1) * 100}: over the delivery limit {LIMIT}"
        in violations
    )
    assert any("delivered after it was delivery_limit" in v for v in violations)


def test_two_consumers_holding_a_record_at_once_fails() -> None:
    # c2 gets it 1.5 s before c1 releases it (more than the checker's slack_ms)
    events = [delivered("c1", 0, 1, 0), delivered("c2", 0, 2, 100)]
    events += acked("c1", 0, "RELEASE", 1600) + acked("c2", 0, "ACCEPT", 1700)
    violations = check([0], events)
    assert violations == ["0:0: delivery 2 to c2 at 100: while c1 still held it (until 1600)"]


def test_a_rejected_record_delivered_again_fails() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "REJECT", 150)]
    events += [delivered("c1", 0, 2, 300), *acked("c1", 0, "ACCEPT", 350)]
    violations = check([0], events)
    assert "0:0: delivery 2 to c1 at 300: delivered after it was rejected" in violations


def test_a_record_never_produced_fails() -> None:
    events = [delivered("c1", 7, 1, 100), *acked("c1", 7, "ACCEPT", 150)]
    assert check([], events) == ["0:7: delivered but never produced"]


def test_a_skipped_count_passes_when_counts_need_only_grow() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "RELEASE", 150)]
    events += [delivered("c2", 0, 3, 5000), *acked("c2", 0, "ACCEPT", 5050)]
    report = check_share_history(
        [(0, 0)], events, delivery_limit=LIMIT, lock_ms=LOCK_MS, strict_counts=False
    )
    assert report.ok


def test_a_count_going_down_fails_even_when_counts_need_only_grow() -> None:
    events = [delivered("c1", 0, 2, 100), *acked("c1", 0, "RELEASE", 150)]
    events += [delivered("c2", 0, 1, 5000), *acked("c2", 0, "ACCEPT", 5050)]
    report = check_share_history(
        [(0, 0)], events, delivery_limit=LIMIT, lock_ms=LOCK_MS, strict_counts=False
    )
    assert report.violations == ["0:0: delivery 1 to c2 at 5000: delivery count 1 after 2"]
