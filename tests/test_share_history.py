"""The share-group history checker (compat_tests/share_history.py) on hand-made histories."""

from __future__ import annotations

from typing import Any

from compat_tests.share_history import (
    DeadLetterSeen,
    HistoryReport,
    ProducedRecord,
    check_share_history,
)

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


# -- under faults: failovers, dead letters, delays and expiry, unconfirmed accepts ------


def failover(t_ms: int, partition: int = 0) -> dict[str, Any]:
    return {"event": "failover", "partition": partition, "t_ms": t_ms}


def letter(offset: int, reason: str, count: int) -> DeadLetterSeen:
    return DeadLetterSeen(f"0:{offset}", count, reason)


def check_faults(
    produced: list[int],
    events: list[dict[str, Any]],
    letters: list[DeadLetterSeen] | None = None,
    records: dict[str, ProducedRecord] | None = None,
    *,
    drain_empty: bool = False,
) -> HistoryReport:
    return check_share_history(
        [(0, o) for o in produced],
        events,
        delivery_limit=LIMIT,
        lock_ms=LOCK_MS,
        strict_counts=False,
        dead_letters=[] if letters is None else letters,
        records=records,
        drain_empty=drain_empty,
    )


def test_a_failover_ends_the_holdings_of_its_partition() -> None:
    # the new leader delivers c1's record to c2 at once (count 2), within c1's lock
    events = [delivered("c1", 0, 1, 0), failover(500)]
    events += [delivered("c2", 0, 2, 600), *acked("c2", 0, "ACCEPT", 650)]
    assert check_faults([0], events).ok
    without = [e for e in events if e["event"] != "failover"]
    assert check_faults([0], without).violations == [
        "0:0: delivery 2 to c2 at 600: while c1 still held it (until 2000)"
    ]


def test_a_failover_of_another_partition_ends_nothing() -> None:
    events = [delivered("c1", 0, 1, 0), failover(500, partition=1)]
    events += [delivered("c2", 0, 2, 600), *acked("c2", 0, "ACCEPT", 650)]
    assert "while c1 still held it" in check_faults([0], events).violations[0]


def test_an_accept_after_a_failover_is_not_effective() -> None:
    # c1's ACCEPT after the failover, answered without error, went to a later
    # acquisition: the record is delivered again and accepted then
    events = [delivered("c1", 0, 1, 0), failover(500), *acked("c1", 0, "ACCEPT", 700)]
    events += [delivered("c2", 0, 2, 800), *acked("c2", 0, "ACCEPT", 850)]
    report = check_faults([0], events)
    assert report.ok and report.resolutions == {"0:0": "accepted"}


def test_a_rejected_record_with_its_dead_letter_passes() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "REJECT", 150)]
    report = check_faults([0], events, [letter(0, "REJECTED", 1)])
    assert report.ok and report.resolutions == {"0:0": "rejected"}


def test_a_rejected_record_without_a_dead_letter_fails() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "REJECT", 150)]
    assert check_faults([0], events).violations == ["0:0: rejected but no dead letter"]


def test_a_record_at_the_limit_without_a_dead_letter_fails() -> None:
    events: list[dict[str, Any]] = []
    for count in range(1, LIMIT + 1):
        events += [delivered("c1", 0, count, count * 100)]
        events += acked("c1", 0, "RELEASE", count * 100 + 50)
    assert check_faults([0], events).violations == ["0:0: delivery_limit but no dead letter"]
    assert check_faults([0], events, [letter(0, "DELIVERY_LIMIT", LIMIT)]).ok


def test_an_accepted_record_with_a_dead_letter_fails() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "ACCEPT", 150)]
    violations = check_faults([0], events, [letter(0, "DELIVERY_LIMIT", LIMIT)]).violations
    assert "0:0: dead letter DELIVERY_LIMIT count 3: the record was accepted" in violations


def test_a_record_dead_lettered_twice_fails() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "REJECT", 150)]
    twice = [letter(0, "REJECTED", 1), letter(0, "REJECTED", 1)]
    assert check_faults([0], events, twice).violations == ["0:0: dead-lettered 2 times"]


def test_a_dead_letter_of_a_record_never_produced_fails() -> None:
    violations = check_faults([], [], [letter(4, "EXPIRED", 0)]).violations
    assert "0:4: dead-lettered but never produced" in violations


def test_a_rejected_dead_letter_of_a_record_nobody_rejected_fails() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "RELEASE", 150)]
    violations = check_faults([0], events, [letter(0, "REJECTED", 1)]).violations
    assert violations == [
        "0:0: dead letter REJECTED count 1: the history does not agree with the reason"
    ]


def test_a_delivery_limit_dead_letter_below_the_limit_fails() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "RELEASE", 150)]
    violations = check_faults([0], events, [letter(0, "DELIVERY_LIMIT", 2)]).violations
    assert violations == [
        "0:0: dead letter DELIVERY_LIMIT count 2: the history does not agree with the reason"
    ]


def test_a_delivery_limit_dead_letter_after_skipped_counts_passes() -> None:
    # acquired at counts the consumers never saw (responses lost in failovers)
    events = [delivered("c1", 0, 1, 100), failover(200)]
    report = check_faults([0], events, [letter(0, "DELIVERY_LIMIT", LIMIT)])
    assert report.ok and report.resolutions == {"0:0": "delivery_limit"}


def test_a_dead_letter_count_below_a_count_seen_fails() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "RELEASE", 150)]
    events += [delivered("c1", 0, 2, 300), *acked("c1", 0, "REJECT", 350)]
    violations = check_faults([0], events, [letter(0, "REJECTED", 1)]).violations
    assert violations == ["0:0: dead letter REJECTED count 1: a consumer saw delivery count 2"]


def test_an_expired_dead_letter_of_a_record_with_a_ttl_never_delivered_passes() -> None:
    records = {"0:0": ProducedRecord(timestamp_ms=1000, ttl_ms=300)}
    report = check_faults([0], [], [letter(0, "EXPIRED", 0)], records)
    assert report.ok and report.resolutions == {"0:0": "expired"}


def test_an_expired_dead_letter_of_a_record_without_a_ttl_fails() -> None:
    records = {"0:0": ProducedRecord(timestamp_ms=1000)}
    violations = check_faults([0], [], [letter(0, "EXPIRED", 0)], records).violations
    assert violations == [
        "0:0: dead letter EXPIRED count 0: the history does not agree with the reason"
    ]


def test_a_record_delivered_after_its_expiry_fails() -> None:
    records = {"0:0": ProducedRecord(timestamp_ms=1000, ttl_ms=300)}
    events = [delivered("c1", 0, 1, 5000), *acked("c1", 0, "ACCEPT", 5050)]
    violations = check_faults([0], events, [], records).violations
    assert violations == ["0:0: delivery 1 to c1 at 5000: after it expired (at 1300)"]
    # and dead-lettered EXPIRED after a delivery past its expiry
    events = [delivered("c1", 0, 1, 5000), *acked("c1", 0, "RELEASE", 5050)]
    violations = check_faults([0], events, [letter(0, "EXPIRED", 1)], records).violations
    assert "0:0: dead letter EXPIRED count 1: the history does not agree with the reason" in (
        violations
    )


def test_a_delayed_record_delivered_before_its_delay_fails() -> None:
    records = {"0:0": ProducedRecord(timestamp_ms=1000, delay_ms=2000)}
    early = [delivered("c1", 0, 1, 2500), *acked("c1", 0, "ACCEPT", 2550)]
    assert check_faults([0], early, [], records).violations == [
        "0:0: delivery 1 to c1 at 2500: before its delay ended (at 3000)"
    ]
    late = [delivered("c1", 0, 1, 3010), *acked("c1", 0, "ACCEPT", 3050)]
    assert check_faults([0], late, [], records).ok


def test_a_failed_accept_counts_as_unconfirmed_only_when_the_drain_was_empty() -> None:
    events = [
        delivered("c1", 0, 1, 100),
        *acked("c1", 0, "ACCEPT", 150, "COORDINATOR_NOT_AVAILABLE"),
    ]
    report = check_faults([0], events, drain_empty=True)
    assert report.ok and report.counts() == {"accepted_unconfirmed": 1}
    report = check_faults([0], events, drain_empty=False)
    assert report.violations == ["0:0: neither accepted nor archived"]


def test_a_record_never_accepted_is_not_unconfirmed_even_with_an_empty_drain() -> None:
    events = [delivered("c1", 0, 1, 100), *acked("c1", 0, "RELEASE", 150)]
    report = check_faults([0], events, drain_empty=True)
    assert report.violations == ["0:0: neither accepted nor archived"]


def test_a_holding_from_a_deposed_leader_ends_where_it_started() -> None:
    # a paused leader, resumed, answers c1 before it learns of its successor, which
    # gives the record to c2 at once
    events = [
        delivered("c1", 0, 2, 1000),
        *acked("c1", 0, "ACCEPT", 1010, "NOT_LEADER_OR_FOLLOWER"),
    ]
    events += [delivered("c2", 0, 3, 1070), *acked("c2", 0, "ACCEPT", 1100)]
    assert check_faults([0], events).ok
    events[1:3] = acked("c1", 0, "ACCEPT", 1010, "INVALID_RECORD_STATE")
    assert "while c1 still held it" in check_faults([0], events).violations[0]
