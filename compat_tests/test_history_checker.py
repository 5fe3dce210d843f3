"""The fault tests' checker finds each kind of anomaly it claims to, and passes a
clean history (hand-made histories: no broker needed)."""

from __future__ import annotations

from compat_tests.history_checker import AckLog, check


def acks_of(acked: dict[str, tuple[int, int]], failed: dict[str, str] | None = None) -> AckLog:
    log = AckLog()
    log.acked.update(acked)
    log.failed.update(failed or {})
    return log


CLEAN_ACKS = {"w-0": (0, 0), "w-1": (1, 0), "w-2": (0, 1), "w-3": (1, 1)}
CLEAN_LOG = {0: [(0, "w-0"), (1, "w-2")], 1: [(0, "w-1"), (1, "w-3")]}


def test_clean_history_has_no_anomaly() -> None:
    found = check(acks_of(CLEAN_ACKS), 4, CLEAN_LOG, [(0, 0, "w-0"), (1, 1, "w-3")])
    assert found.ok, found.summary()
    assert found.acknowledged_count == 4 and found.read_count == 4


def test_an_acknowledged_write_missing_from_the_log_is_lost() -> None:
    log = {0: [(0, "w-0")], 1: [(0, "w-1"), (1, "w-3")]}
    found = check(acks_of(CLEAN_ACKS), 4, log)
    assert found.lost == ["w-2"] and not found.ok


def test_a_value_at_two_offsets_is_duplicated() -> None:
    log = {0: [(0, "w-0"), (1, "w-2"), (2, "w-2")], 1: [(0, "w-1"), (1, "w-3")]}
    assert check(acks_of(CLEAN_ACKS), 4, log).duplicated == ["w-2"]


def test_writes_of_one_producer_out_of_order_in_a_partition_are_reordered() -> None:
    acked = {"w-0": (0, 1), "w-1": (0, 0)}
    log = {0: [(0, "w-1"), (1, "w-0")]}
    found = check(acks_of(acked), 2, log)
    assert found.reordered == [("w-1", "w-0")]


def test_a_write_found_elsewhere_than_acknowledged_is_an_offset_mismatch() -> None:
    acked = {"w-0": (0, 5)}
    found = check(acks_of(acked), 1, {0: [(0, "w-0")]})
    assert found.offset_mismatch == [("w-0", (0, 5), (0, 0))]


def test_a_record_read_during_the_run_and_gone_at_the_end_vanished() -> None:
    found = check(acks_of(CLEAN_ACKS), 4, CLEAN_LOG, [(0, 2, "w-9")])
    assert found.vanished == [(0, 2, "w-9")] and not found.ok


def test_a_value_nobody_wrote_is_unexpected() -> None:
    log = {0: [(0, "w-0"), (1, "w-2"), (2, "intruder")], 1: [(0, "w-1"), (1, "w-3")]}
    assert check(acks_of(CLEAN_ACKS), 4, log).unexpected == ["intruder"]


def test_a_failed_delivery_is_reported() -> None:
    found = check(acks_of(CLEAN_ACKS, {"w-4": "timed out"}), 5, CLEAN_LOG)
    assert found.failed == ["w-4"] and not found.ok
