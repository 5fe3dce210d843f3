"""Rule 10 of the share partition: records wait in ARCHIVING until dead-lettered."""

from __future__ import annotations

from weir.sharecoord.share_partition import (
    AcknowledgeType,
    Archived,
    ArchiveReason,
    LogBatch,
    RecordState,
    SharePartition,
    ShareSettings,
)
from weir.sharecoord.share_state import ShareState, StateBatch

A = "member-a"
LOCK_MS = 30_000
WITH_DLQ = ShareSettings(record_lock_duration_ms=LOCK_MS, delivery_count_limit=2, dead_letters=True)
WITHOUT_DLQ = ShareSettings(record_lock_duration_ms=LOCK_MS, delivery_count_limit=2)
LOG = [LogBatch(0, 4)]


def acquired(settings: ShareSettings) -> SharePartition:
    partition = SharePartition.starting_at(0, settings)
    partition.acquire(A, LOG, max_records=5, record_limit=False, read_offset=0, now_ms=0)
    return partition


def test_a_rejected_record_waits_in_archiving_and_holds_the_start_offset():
    partition = acquired(WITH_DLQ)
    outcome = partition.acknowledge(A, 0, 1, [AcknowledgeType.REJECT], now_ms=1)
    partition.acknowledge(A, 2, 4, [AcknowledgeType.ACCEPT], now_ms=1)
    partition._check_invariants()
    assert outcome.archived == (Archived(0, 1, 1, ArchiveReason.REJECTED),)
    assert partition.record_state(0) == (RecordState.ARCHIVING, 1, None)
    assert partition.start_offset == 0
    assert partition.pending_dead_letters() == [Archived(0, 1, 1, ArchiveReason.REJECTED)]
    assert partition.state().batches[0] == StateBatch(0, 1, RecordState.ARCHIVING, 1)

    assert partition.dead_lettered(0, 1) == 2
    partition._check_invariants()
    assert partition.start_offset == 5
    assert partition.pending_dead_letters() == []


def test_without_a_dead_letter_topic_a_rejected_record_is_archived_at_once():
    partition = acquired(WITHOUT_DLQ)
    partition.acknowledge(A, 0, 4, [AcknowledgeType.REJECT], now_ms=1)
    assert partition.start_offset == 5
    assert partition.pending_dead_letters() == []


def test_the_delivery_limit_archives_into_archiving_with_its_reason():
    partition = acquired(WITH_DLQ)
    partition.expire_locks(LOCK_MS)
    partition.acquire(A, LOG, max_records=5, record_limit=False, read_offset=0, now_ms=LOCK_MS)
    archived = partition.expire_locks(2 * LOCK_MS + 1)
    partition._check_invariants()
    assert archived == [Archived(0, 0, 2, ArchiveReason.DELIVERY_LIMIT)]
    assert partition.pending_dead_letters() == [Archived(0, 0, 2, ArchiveReason.DELIVERY_LIMIT)]


def test_archiving_records_load_back_with_the_mark_and_a_reason_from_their_count():
    """After a restart the reason is derived as Kafka 4.4 does: at the limit, the
    delivery limit; below it, a rejection."""
    state = ShareState(
        0,
        0,
        0,
        (
            StateBatch(0, 0, RecordState.ARCHIVING, 1),
            StateBatch(1, 1, RecordState.ARCHIVING, 2),
            StateBatch(2, 2, RecordState.AVAILABLE, 1),
        ),
        dead_letter_mark=7,
    )
    partition = SharePartition.from_state(state, WITH_DLQ)
    partition._check_invariants()
    assert partition.dead_letter_mark == 7
    assert partition.pending_dead_letters() == [
        Archived(0, 0, 1, ArchiveReason.REJECTED),
        Archived(1, 1, 2, ArchiveReason.DELIVERY_LIMIT),
    ]
    assert partition.fetch_offset() == 2
    assert partition.state() == state


def test_a_record_loaded_at_the_limit_goes_to_archiving_when_dead_letters_are_on():
    state = ShareState(0, 0, 0, (StateBatch(0, 0, RecordState.AVAILABLE, 2),))
    partition = SharePartition.from_state(state, WITH_DLQ)
    assert partition.archived_at_load == (Archived(0, 0, 2, ArchiveReason.DELIVERY_LIMIT),)
    assert partition.record_state(0) == (RecordState.ARCHIVING, 2, None)


def test_an_archiving_record_cannot_be_acknowledged():
    partition = acquired(WITH_DLQ)
    partition.acknowledge(A, 0, 0, [AcknowledgeType.REJECT], now_ms=1)
    outcome = partition.acknowledge(A, 0, 0, [AcknowledgeType.ACCEPT], now_ms=1)
    assert outcome.error.name == "INVALID_RECORD_STATE"


def test_the_log_start_moving_past_archiving_records_drops_them():
    partition = acquired(WITH_DLQ)
    partition.acknowledge(A, 0, 1, [AcknowledgeType.REJECT], now_ms=1)
    partition.advance_start_to(1)
    partition._check_invariants()
    assert partition.pending_dead_letters() == [Archived(1, 1, 1, ArchiveReason.REJECTED)]


def test_an_expired_record_waits_in_archiving_for_its_dead_letter():
    partition = SharePartition.starting_at(0, WITH_DLQ)
    got = partition.acquire_records(
        A, [LogBatch(0, 0, expires_ms=5), LogBatch(1, 1)],
        max_records=5, record_limit=False, read_offset=0, now_ms=10,
    )  # fmt: skip
    partition._check_invariants()
    assert got.archived == (Archived(0, 0, 0, ArchiveReason.EXPIRED),)
    assert partition.record_state(0) == (RecordState.ARCHIVING, 0, None)
    assert partition.start_offset == 0
    assert partition.pending_dead_letters() == [Archived(0, 0, 0, ArchiveReason.EXPIRED)]
    assert partition.dead_lettered(0, 0) == 1


def test_an_expired_record_is_archived_at_once_without_dead_letters():
    partition = SharePartition.starting_at(0, WITHOUT_DLQ)
    partition.acquire_records(
        A, [LogBatch(0, 0, expires_ms=5), LogBatch(1, 1)],
        max_records=5, record_limit=False, read_offset=0, now_ms=10,
    )  # fmt: skip
    assert partition.start_offset == 1  # done: nothing to wait for
    assert partition.pending_dead_letters() == []


def test_a_loaded_archiving_record_never_delivered_is_labelled_expired():
    state = ShareState(0, 0, 0, (StateBatch(0, 0, RecordState.ARCHIVING, 0),
                                 StateBatch(1, 1, RecordState.ARCHIVING, 1)))  # fmt: skip
    partition = SharePartition.from_state(state, WITH_DLQ)
    assert partition.pending_dead_letters() == [
        Archived(0, 0, 0, ArchiveReason.EXPIRED),
        Archived(1, 1, 1, ArchiveReason.REJECTED),
    ]


def test_the_depth_counts_records_waiting_for_their_dead_letters():
    partition = acquired(WITH_DLQ)
    partition.acknowledge(A, 0, 1, [AcknowledgeType.REJECT], now_ms=1)
    depth = partition.depth(end_offset=5)
    assert (depth.archived, depth.archiving, depth.acquired) == (2, 2, 3)
    partition.dead_lettered(0, 1)
    depth = partition.depth(end_offset=5)
    assert (depth.start_offset, depth.archived, depth.archiving) == (2, 0, 0)  # done
