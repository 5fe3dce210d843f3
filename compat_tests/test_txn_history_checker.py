"""The transaction history checker finds each anomaly it claims to, and passes a clean
history (hand-made histories: no broker needed)."""

from __future__ import annotations

from typing import Any

from compat_tests.txn_history import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Assign,
    ConsumerLog,
    Outcome,
    Poll,
    Record,
    Scan,
    TopicPartition,
    Txn,
    TxnAnomalies,
    check,
)

A0: TopicPartition = ("a", 0)
B0: TopicPartition = ("b", 0)

# t1 commits a1 (a-0 offset 0) and b1 (b-0 offset 0), markers at a-0:1 and b-0:1;
# t2 aborts a2 (a-0:2, marker 3); t3 commits a3 (a-0:4, marker 5) and b3 (b-0:2, marker 3).
T1 = Txn("t1", ((A0, "a1"), (B0, "b1")), Outcome.COMMITTED)
T2 = Txn("t2", ((A0, "a2"),), Outcome.ABORTED)
T3 = Txn("t3", ((A0, "a3"), (B0, "b3")), Outcome.COMMITTED)
TXNS = [T1, T2, T3]
COMMITTED_SCAN: Scan = {A0: [(0, "a1"), (4, "a3")], B0: [(0, "b1"), (2, "b3")]}
UNCOMMITTED_SCAN: Scan = {A0: [(0, "a1"), (2, "a2"), (4, "a3")], B0: [(0, "b1"), (2, "b3")]}
START = {A0: 0, B0: 0}


def consumer(isolation: str, *polls: list[Record], name: str = "c") -> ConsumerLog:
    log = ConsumerLog(name, isolation)
    log.assign(START)
    for records in polls:
        log.poll(records)
    return log


def clean_consumers() -> list[ConsumerLog]:
    committed = consumer(
        READ_COMMITTED,
        [Record(A0, 0, "a1"), Record(B0, 0, "b1")],
        [Record(A0, 4, "a3"), Record(B0, 2, "b3")],
        name="rc",
    )
    uncommitted = consumer(
        READ_UNCOMMITTED,
        [Record(A0, 0, "a1"), Record(A0, 2, "a2")],
        [Record(A0, 4, "a3"), Record(B0, 0, "b1"), Record(B0, 2, "b3")],
        name="ru",
    )
    return [committed, uncommitted]


def run(
    txns: list[Txn] | None = None,
    consumers: list[ConsumerLog] | None = None,
    committed: Scan | None = None,
    uncommitted: Scan | None = None,
) -> TxnAnomalies:
    return check(
        TXNS if txns is None else txns,
        clean_consumers() if consumers is None else consumers,
        COMMITTED_SCAN if committed is None else committed,
        UNCOMMITTED_SCAN if uncommitted is None else uncommitted,
    )


def only(found: TxnAnomalies, kind: str) -> list[Any]:
    """The instances of `kind`; fails when any other kind was found too."""
    assert set(found.found()) == {kind}, found.summary()
    return found.found()[kind]


def test_a_clean_history_has_no_anomaly() -> None:
    found = run()
    assert found.ok, found.summary()
    assert found.counts["committed"] == 2 and found.counts["aborted"] == 1


def test_a_value_of_an_aborted_transaction_read_committed_is_an_aborted_read() -> None:
    reader = consumer(READ_COMMITTED, [Record(A0, 0, "a1"), Record(A0, 2, "a2")], name="rc")
    assert only(run(consumers=[reader]), "aborted_read") == [("rc", "a2")]


def test_an_aborted_value_in_the_final_committed_scan_is_an_aborted_read() -> None:
    scan = {A0: [(0, "a1"), (2, "a2"), (4, "a3")], B0: [(0, "b1"), (2, "b3")]}
    found = run(consumers=[], committed=scan)
    assert only(found, "aborted_read") == [("final read_committed scan", "a2")]


def test_a_value_of_a_transaction_whose_commit_failed_read_committed_is_g1a() -> None:
    failed = Txn("t2", ((A0, "a2"),), Outcome.FAILED)
    reader = consumer(READ_COMMITTED, [Record(A0, 0, "a1"), Record(A0, 2, "a2")], name="rc")
    assert only(run(txns=[T1, failed, T3], consumers=[reader]), "g1a") == [("rc", "a2")]


def test_reading_uncommitted_values_is_no_anomaly() -> None:
    reader = consumer(READ_UNCOMMITTED, [Record(A0, 0, "a1"), Record(A0, 2, "a2")])
    assert run(consumers=[reader]).ok


def test_a_committed_value_missing_from_the_final_scan_is_a_lost_write() -> None:
    # The whole of t3 is missing: lost, but not partial.
    scan = {A0: [(0, "a1")], B0: [(0, "b1")]}
    assert sorted(only(run(consumers=[], committed=scan), "lost_write")) == ["a3", "b3"]


def test_an_unknown_outcome_seen_once_must_stay_visible() -> None:
    unknown = Txn("t3", ((A0, "a3"), (B0, "b3")), Outcome.UNKNOWN)
    reader = consumer(READ_COMMITTED, [Record(A0, 0, "a1"), Record(A0, 4, "a3")], name="rc")
    scan = {A0: [(0, "a1")], B0: [(0, "b1")]}
    found = run(txns=[T1, T2, unknown], consumers=[reader], committed=scan)
    assert sorted(only(found, "lost_write")) == ["a3", "b3"]


def test_an_unknown_outcome_may_be_either_way() -> None:
    unknown = Txn("t3", ((A0, "a3"), (B0, "b3")), Outcome.UNKNOWN)
    assert run(txns=[T1, T2, unknown]).ok
    scan = {A0: [(0, "a1")], B0: [(0, "b1")]}
    assert run(txns=[T1, T2, unknown], consumers=[], committed=scan).ok


def test_some_values_of_a_transaction_visible_and_others_not_is_a_partial_transaction() -> None:
    unknown = Txn("t3", ((A0, "a3"), (B0, "b3")), Outcome.UNKNOWN)
    scan = {A0: [(0, "a1"), (4, "a3")], B0: [(0, "b1")]}
    found = run(txns=[T1, T2, unknown], consumers=[], committed=scan)
    assert found.partial_txn == [("t3", ["a3"], ["b3"])]
    assert found.lost_write == ["b3"]  # seen, so committed: the rest is lost
    assert set(found.found()) == {"partial_txn", "lost_write"}


def test_a_value_at_two_offsets_is_a_duplicate() -> None:
    scan = {A0: [(0, "a1"), (4, "a3"), (6, "a3")], B0: [(0, "b1"), (2, "b3")]}
    found = run(consumers=[], committed=scan)
    assert only(found, "duplicate") == [("a3", [(A0, 4), (A0, 6)])]


def test_a_value_polled_at_another_offset_than_the_final_scan_is_a_duplicate() -> None:
    reader = consumer(READ_UNCOMMITTED, [Record(A0, 0, "a1"), Record(A0, 1, "a2")])
    found = run(consumers=[reader])
    assert found.duplicate == [("a2", [(A0, 1), (A0, 2)])]


def test_a_poll_going_back_without_a_seek_is_non_monotonic() -> None:
    reader = consumer(
        READ_COMMITTED,
        [Record(A0, 0, "a1"), Record(A0, 4, "a3")],
        [Record(A0, 0, "a1")],
        name="rc",
    )
    assert only(run(consumers=[reader]), "non_monotonic_poll") == [("rc", A0, 4, 0)]


def test_a_poll_going_back_after_a_seek_is_fine() -> None:
    reader = consumer(READ_COMMITTED, [Record(A0, 0, "a1"), Record(A0, 4, "a3")], name="rc")
    reader.events.append(Assign({A0: 0}))
    reader.events.append(Poll((Record(A0, 0, "a1"),)))
    assert run(consumers=[reader]).ok


def test_a_committed_record_passed_over_at_read_committed_is_a_skipped_poll() -> None:
    reader = consumer(READ_COMMITTED, [Record(A0, 0, "a1")], [Record(B0, 2, "b3")], name="rc")
    assert only(run(consumers=[reader]), "skipped_poll") == [("rc", B0, [0])]


def test_read_committed_polls_pass_over_markers_and_aborted_records() -> None:
    # a-0 offsets 1 (marker), 2 (aborted a2) and 3 (marker) lie between a1 and a3.
    reader = consumer(READ_COMMITTED, [Record(A0, 0, "a1")], [Record(A0, 4, "a3")])
    assert run(consumers=[reader]).ok


def test_an_aborted_record_passed_over_at_read_uncommitted_is_a_skipped_poll() -> None:
    reader = consumer(READ_UNCOMMITTED, [Record(A0, 0, "a1")], [Record(A0, 4, "a3")], name="ru")
    assert only(run(consumers=[reader]), "skipped_poll") == [("ru", A0, [2])]


def test_read_cycles_between_transactions_are_g1c() -> None:
    # t4 read what t5 wrote and t5 what t4 wrote (consume-transform-produce).
    t4 = Txn("t4", ((A0, "a4"),), Outcome.COMMITTED, reads=("b5",))
    t5 = Txn("t5", ((B0, "b5"),), Outcome.COMMITTED, reads=("a4",))
    committed = {A0: [(0, "a1"), (4, "a3"), (6, "a4")], B0: [(0, "b1"), (2, "b3"), (4, "b5")]}
    uncommitted = {
        A0: [(0, "a1"), (2, "a2"), (4, "a3"), (6, "a4")],
        B0: [(0, "b1"), (2, "b3"), (4, "b5")],
    }
    found = run(txns=[*TXNS, t4, t5], consumers=[], committed=committed, uncommitted=uncommitted)
    assert only(found, "g1c") == [["t4", "t5"]]


def test_a_longer_read_cycle_is_g1c_and_a_chain_is_not() -> None:
    t4 = Txn("t4", ((A0, "x4"),), Outcome.UNKNOWN, reads=("x6",))
    t5 = Txn("t5", ((A0, "x5"),), Outcome.UNKNOWN, reads=("x4",))
    t6 = Txn("t6", ((A0, "x6"),), Outcome.UNKNOWN, reads=("x5",))
    t7 = Txn("t7", ((A0, "x7"),), Outcome.UNKNOWN, reads=("x6",))
    found = run(txns=[*TXNS, t4, t5, t6, t7], consumers=[])
    assert only(found, "g1c") == [["t4", "t5", "t6"]]
    chain = [*TXNS, t5, t6, t7]
    assert run(txns=chain, consumers=[]).ok


def test_a_value_in_another_partition_than_written_is_reported() -> None:
    scan = {A0: [(0, "a1"), (4, "a3"), (5, "b3")], B0: [(0, "b1")]}
    uncommitted = {A0: [(0, "a1"), (2, "a2"), (4, "a3"), (5, "b3")], B0: [(0, "b1")]}
    found = run(consumers=[], committed=scan, uncommitted=uncommitted)
    assert only(found, "wrong_partition") == [("b3", B0, A0)]


def test_a_value_nobody_wrote_is_unexpected() -> None:
    scan = {A0: [(0, "a1"), (4, "a3"), (6, "intruder")], B0: [(0, "b1"), (2, "b3")]}
    found = run(consumers=[], committed=scan)
    assert only(found, "unexpected") == [(A0, 6, "intruder")]
