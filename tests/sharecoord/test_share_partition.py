"""The share partition's rules, one by one (see weir/sharecoord/share_partition.py)."""

from __future__ import annotations

from weir.format.errors import ErrorCode
from weir.sharecoord.share_partition import (
    AckBatch,
    AcknowledgeType,
    AcquiredRange,
    Archived,
    ArchiveReason,
    LogBatch,
    RecordState,
    SharePartition,
    ShareSettings,
)
from weir.sharecoord.share_state import ShareState, StateBatch

A, B = "member-a", "member-b"
LOCK_MS = 30_000
SETTINGS = ShareSettings(record_lock_duration_ms=LOCK_MS, delivery_count_limit=5)
ACCEPT, RELEASE, REJECT, GAP, RENEW = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.GAP,
    AcknowledgeType.RENEW,
)


def batches(*spans: tuple[int, int]) -> list[LogBatch]:
    return [LogBatch(first, last) for first, last in spans]


def fetch(
    partition: SharePartition,
    member: str,
    log: list[LogBatch],
    *,
    max_records: int = 500,
    record_limit: bool = False,
    now_ms: int = 0,
) -> list[AcquiredRange]:
    """Acquire as the driver does: read the log from fetch_offset()."""
    start = partition.fetch_offset()
    if start is None:
        return []
    read = [b for b in log if b.last_offset >= start]
    got = partition.acquire(
        member,
        read,
        max_records=max_records,
        record_limit=record_limit,
        read_offset=start,
        now_ms=now_ms,
    )
    partition._check_invariants()
    return got


def ack(
    partition: SharePartition, member: str, first: int, last: int, *types: int, now_ms: int = 0
):
    outcome = partition.acknowledge(member, first, last, list(types), now_ms)
    partition._check_invariants()
    return outcome


# -- acquisition ------------------------------------------------------------------------


def test_new_records_are_acquired_with_delivery_count_one_and_a_lock():
    p = SharePartition.starting_at(0, SETTINGS)
    assert fetch(p, A, batches((0, 4), (5, 9)), now_ms=100) == [AcquiredRange(0, 9, 1)]
    assert p.record_state(3) == (RecordState.ACQUIRED, 1, A)
    assert p.next_deadline_ms() == 100 + LOCK_MS
    assert p.fetch_offset() == 10


def test_a_record_is_acquired_by_one_member_at_a_time():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 9)))
    # B reads the same log region: nothing there is AVAILABLE.
    assert (
        p.acquire(B, batches((0, 9)), max_records=500, record_limit=False, read_offset=0, now_ms=0)
        == []
    )
    assert fetch(p, B, batches((0, 9), (10, 14))) == [AcquiredRange(10, 14, 1)]


def test_batch_optimized_mode_rounds_up_to_the_end_of_the_log_batch():
    p = SharePartition.starting_at(0, SETTINGS)
    assert fetch(p, A, batches((0, 9), (10, 19)), max_records=3) == [AcquiredRange(0, 9, 1)]


def test_record_limit_mode_never_exceeds_max_records():
    p = SharePartition.starting_at(0, SETTINGS)
    got = fetch(p, A, batches((0, 9), (10, 19)), max_records=3, record_limit=True)
    assert got == [AcquiredRange(0, 2, 1)]
    assert fetch(p, B, batches((0, 9), (10, 19)), max_records=3, record_limit=True) == [
        AcquiredRange(3, 5, 1)
    ]


def test_released_records_are_redelivered_with_their_count_before_new_ones():
    p = SharePartition.starting_at(0, SETTINGS)
    log = batches((0, 4), (5, 9))
    fetch(p, A, log)
    assert ack(p, A, 2, 3, RELEASE).error == ErrorCode.NONE
    assert p.fetch_offset() == 2
    log.append(LogBatch(10, 12))
    assert fetch(p, B, log) == [AcquiredRange(2, 3, 2), AcquiredRange(10, 12, 1)]


def test_acquired_ranges_merge_only_where_delivery_counts_agree():
    p = SharePartition.starting_at(0, SETTINGS)
    log = batches((0, 5))
    fetch(p, A, log)
    ack(p, A, 0, 5, RELEASE)
    fetch(p, A, log, max_records=2, record_limit=True)  # 0-1 at count 2
    ack(p, A, 0, 1, RELEASE)
    assert fetch(p, B, log) == [AcquiredRange(0, 1, 3), AcquiredRange(2, 5, 2)]


def test_offsets_between_batches_are_acquired_as_a_range():
    p = SharePartition.starting_at(0, SETTINGS)
    # 3-4 were compacted away: the client answers GAP for them.
    assert fetch(p, A, batches((0, 2), (5, 7))) == [AcquiredRange(0, 7, 1)]
    assert ack(p, A, 0, 7, 1, 1, 1, GAP, GAP, 1, 1, 1).error == ErrorCode.NONE
    assert p.start_offset == 8


def test_a_window_with_nothing_in_flight_jumps_to_the_first_batch():
    p = SharePartition.starting_at(0, SETTINGS)
    assert fetch(p, A, batches((40, 44))) == [AcquiredRange(40, 44, 1)]
    assert p.start_offset == 40


# -- the in-flight bound ----------------------------------------------------------------


def test_the_in_flight_bound_cuts_new_records_even_mid_batch():
    p = SharePartition.starting_at(0, ShareSettings(partition_max_record_locks=10))
    assert fetch(p, A, batches((0, 7), (8, 15))) == [AcquiredRange(0, 9, 1)]
    assert p.fetch_offset() is None
    assert (
        p.acquire(
            B, batches((10, 15)), max_records=500, record_limit=False, read_offset=0, now_ms=0
        )
        == []
    )


def test_a_full_window_still_redelivers_released_records():
    p = SharePartition.starting_at(0, ShareSettings(partition_max_record_locks=10))
    log = batches((0, 15))
    fetch(p, A, log)
    ack(p, A, 4, 4, RELEASE)
    assert p.fetch_offset() == 4
    assert fetch(p, B, log) == [AcquiredRange(4, 4, 2)]


def test_the_window_reopens_as_the_start_offset_moves():
    p = SharePartition.starting_at(0, ShareSettings(partition_max_record_locks=10))
    log = batches((0, 15))
    fetch(p, A, log)
    ack(p, A, 0, 2, ACCEPT)
    assert p.start_offset == 3
    assert p.fetch_offset() == 10
    assert fetch(p, B, log) == [AcquiredRange(10, 12, 1)]


# -- acknowledgement --------------------------------------------------------------------


def test_accept_and_reject_finish_records_and_the_start_offset_moves_past_them():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 9)))
    outcome = ack(p, A, 0, 3, ACCEPT, REJECT, REJECT, ACCEPT)
    assert outcome.error == ErrorCode.NONE
    assert outcome.archived == (Archived(1, 2, 1, ArchiveReason.REJECTED),)
    assert p.start_offset == 4
    assert p.record_state(3) is None


def test_the_start_offset_waits_for_the_first_unfinished_record():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 9)))
    ack(p, A, 1, 9, ACCEPT)
    assert p.start_offset == 0
    ack(p, A, 0, 0, ACCEPT)
    assert p.start_offset == 10
    assert p.fetch_offset() == 10


def test_only_the_member_holding_the_lock_may_acknowledge():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 4)))
    outcome = ack(p, B, 0, 4, ACCEPT)
    assert outcome.error == ErrorCode.INVALID_RECORD_STATE
    assert p.record_state(0) == (RecordState.ACQUIRED, 1, A)


def test_acknowledging_a_record_that_is_not_acquired_is_invalid_record_state():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 4)))
    ack(p, A, 2, 2, RELEASE)
    assert ack(p, A, 2, 2, ACCEPT).error == ErrorCode.INVALID_RECORD_STATE


def test_acknowledging_with_nothing_in_flight_is_invalid_record_state():
    p = SharePartition.starting_at(5, SETTINGS)
    assert ack(p, A, 5, 6, ACCEPT).error == ErrorCode.INVALID_RECORD_STATE


def test_acknowledging_past_the_acquired_records_is_invalid_request():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 4)))
    assert ack(p, A, 3, 7, ACCEPT).error == ErrorCode.INVALID_REQUEST
    assert ack(p, A, 6, 7, ACCEPT).error == ErrorCode.INVALID_REQUEST


def test_malformed_batches_are_invalid_request():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 9)))
    assert ack(p, A, 4, 3, ACCEPT).error == ErrorCode.INVALID_REQUEST
    assert ack(p, A, 0, 3, ACCEPT, ACCEPT).error == ErrorCode.INVALID_REQUEST
    assert ack(p, A, 0, 3).error == ErrorCode.INVALID_REQUEST
    assert ack(p, A, 0, 3, 7).error == ErrorCode.INVALID_REQUEST
    overlapping = [AckBatch(0, 3, (1,)), AckBatch(3, 5, (1,))]
    assert p.acknowledge_batches(A, overlapping, 0).error == ErrorCode.INVALID_REQUEST
    assert all(p.record_state(o) == (RecordState.ACQUIRED, 1, A) for o in range(10))


def test_a_request_acknowledges_all_its_batches_or_none():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 4)))
    fetch(p, B, batches((0, 4), (5, 9)))
    outcome = p.acknowledge_batches(A, [AckBatch(0, 4, (1,)), AckBatch(5, 6, (1,))], 0)
    assert outcome.error == ErrorCode.INVALID_RECORD_STATE
    assert p.start_offset == 0
    assert p.record_state(0) == (RecordState.ACQUIRED, 1, A)


def test_offsets_below_the_start_offset_are_skipped():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 9)))
    ack(p, A, 0, 4, ACCEPT)
    assert ack(p, A, 0, 4, ACCEPT).error == ErrorCode.NONE  # already done
    assert ack(p, A, 2, 6, ACCEPT).error == ErrorCode.NONE  # 5-6 acknowledged now
    assert p.start_offset == 7


def test_renew_extends_the_lock_and_keeps_the_delivery_count():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 4)), now_ms=0)
    assert ack(p, A, 0, 4, RENEW, now_ms=20_000).error == ErrorCode.NONE
    assert p.next_deadline_ms() == 20_000 + LOCK_MS
    assert p.expire_locks(LOCK_MS) == []
    assert p.record_state(0) == (RecordState.ACQUIRED, 1, A)
    p.expire_locks(20_000 + LOCK_MS)
    p._check_invariants()
    assert p.record_state(0) == (RecordState.AVAILABLE, 1, None)


def test_renew_is_refused_when_the_group_disabled_it():
    settings = ShareSettings(renew_acknowledge_enabled=False)
    p = SharePartition.starting_at(0, settings)
    fetch(p, A, batches((0, 4)))
    assert ack(p, A, 0, 4, RENEW).error == ErrorCode.INVALID_RECORD_STATE


# -- delivery count limit, expiry and release -------------------------------------------


def test_release_at_the_delivery_limit_archives_the_record():
    p = SharePartition.starting_at(0, ShareSettings(delivery_count_limit=2))
    log = batches((0, 0))
    fetch(p, A, log)
    assert ack(p, A, 0, 0, RELEASE).archived == ()
    fetch(p, A, log)
    outcome = ack(p, A, 0, 0, RELEASE)
    assert outcome.archived == (Archived(0, 0, 2, ArchiveReason.DELIVERY_LIMIT),)
    assert p.start_offset == 1


def test_lock_expiry_makes_records_available_again_then_archives_at_the_limit():
    p = SharePartition.starting_at(
        0, ShareSettings(record_lock_duration_ms=10, delivery_count_limit=2)
    )
    log = batches((0, 2))
    fetch(p, A, log, now_ms=0)
    assert p.expire_locks(9) == []
    assert p.expire_locks(10) == []
    p._check_invariants()
    assert p.record_state(1) == (RecordState.AVAILABLE, 1, None)
    assert fetch(p, B, log, now_ms=20) == [AcquiredRange(0, 0, 2)]  # last attempt: alone
    assert p.expire_locks(30) == [Archived(0, 0, 2, ArchiveReason.DELIVERY_LIMIT)]
    p._check_invariants()
    assert p.start_offset == 1
    assert p.next_deadline_ms() is None


def test_a_member_release_keeps_delivery_counts_and_archives_at_the_limit():
    # Kafka 4.4 releases with DeliveryCountOps.NO_OP on share session close.
    p = SharePartition.starting_at(0, ShareSettings(delivery_count_limit=2))
    log = batches((0, 3))
    fetch(p, A, log)
    ack(p, A, 0, 0, RELEASE)
    fetch(p, A, log)  # offset 0 again, on its last attempt
    assert p.release_member(A, 0) == [Archived(0, 0, 2, ArchiveReason.DELIVERY_LIMIT)]
    p._check_invariants()
    assert p.record_state(1) == (RecordState.AVAILABLE, 1, None)
    assert p.release_member(B, 0) == []


def test_a_member_release_leaves_other_members_records_alone():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 4)))
    fetch(p, B, batches((0, 4), (5, 9)))
    p.release_member(A, 0)
    p._check_invariants()
    assert p.record_state(0) == (RecordState.AVAILABLE, 1, None)
    assert p.record_state(5) == (RecordState.ACQUIRED, 1, B)


def test_throttled_redeliveries_start_their_own_acquisition():
    # limit 5: from 3 deliveries on, a record is throttled (max(2, ceil(5/2))); on its
    # 5th (last) delivery it goes alone.
    state = ShareState(
        0,
        0,
        0,
        (
            StateBatch(0, 0, RecordState.AVAILABLE, 1),
            StateBatch(1, 1, RecordState.AVAILABLE, 3),
            StateBatch(2, 2, RecordState.AVAILABLE, 4),
        ),
    )
    p = SharePartition.from_state(state, SETTINGS)
    log = batches((0, 0), (1, 1), (2, 2), (3, 9))
    assert fetch(p, A, log) == [AcquiredRange(0, 0, 2)]  # stops before the throttled one
    assert fetch(p, A, log) == [AcquiredRange(1, 1, 4)]  # throttled: its batch only
    assert fetch(p, A, log) == [AcquiredRange(2, 2, 5)]  # last attempt: alone
    assert fetch(p, A, log) == [AcquiredRange(3, 9, 1)]


def test_a_throttled_acquisition_takes_the_rest_of_its_log_batch():
    state = ShareState(0, 0, 0, (StateBatch(0, 3, RecordState.AVAILABLE, 3),))
    p = SharePartition.from_state(state, SETTINGS)
    assert fetch(p, A, batches((0, 5), (6, 9))) == [AcquiredRange(0, 3, 4), AcquiredRange(4, 5, 1)]


# -- the start offset moving ------------------------------------------------------------


def test_advance_start_drops_records_below_the_new_log_start():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 9)))
    p.advance_start_to(5)
    p._check_invariants()
    assert p.start_offset == 5
    assert ack(p, A, 0, 9, ACCEPT).error == ErrorCode.NONE  # 0-4 skipped
    assert p.start_offset == 10
    p.advance_start_to(3)  # never backwards
    assert p.start_offset == 10


def test_advance_start_past_the_window_empties_it():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 9)))
    p.advance_start_to(50)
    p._check_invariants()
    assert (p.start_offset, p.in_flight_end, p.fetch_offset()) == (50, 50, 50)


# -- depth ------------------------------------------------------------------------------


def test_depth_counts_records_by_state_and_the_unfetched_tail():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 9)))
    ack(p, A, 1, 1, ACCEPT)
    ack(p, A, 2, 2, REJECT)
    ack(p, A, 3, 3, RELEASE)
    depth = p.depth(end_offset=25)
    assert (depth.start_offset, depth.available, depth.acquired) == (0, 1 + 15, 7)
    assert (depth.acknowledged, depth.archived) == (1, 1)


def test_delivery_counts_histogram_the_unfinished_records_with_the_unfetched_as_zero():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, A, batches((0, 9)))
    ack(p, A, 1, 1, ACCEPT)
    ack(p, A, 2, 2, REJECT)
    ack(p, A, 3, 3, RELEASE)
    fetch(p, A, batches((0, 9)))  # offset 3 again: its second delivery
    # 0-9 delivered once, 3 twice; 1 and 2 are done; 10-24 never fetched.
    assert p.delivery_counts(end_offset=25) == {0: 15, 1: 7, 2: 1}
