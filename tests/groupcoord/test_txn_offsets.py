"""Transactional offsets (TxnOffsetCommit): pending until their transaction's marker,
then committed (readers see them once the marker is committed) or dropped."""

from __future__ import annotations

from collections.abc import Callable

from weir.groupcoord.committed_offsets import CommittedOffset, OffsetStore, encode_offset_key

PRODUCER = 7
OTHER_PRODUCER = 8
LOG_PARTITION = 3


def everywhere(group_id: str) -> bool:
    return True


def only(*group_ids: str) -> Callable[[str], bool]:
    return lambda group_id: group_id in group_ids


def committed_txn(store: OffsetStore, producer_id: int, end_offset: int | None = 100) -> int:
    return store.end_transaction(producer_id, True, everywhere, LOG_PARTITION, end_offset)


def test_a_transactional_offset_is_invisible_until_its_commit_marker_is_committed() -> None:
    store = OffsetStore()
    records = store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    store.place(LOG_PARTITION, 10, records)
    store.promote(LOG_PARTITION, 10)
    assert store.group_offsets("g") == {} and store.committed_group_offsets("g") == {}
    assert store.is_unstable("g", "t", 0) and store.has_pending_transaction("g", "t", 0)
    assert not store.is_unstable("g", "t", 1)

    assert committed_txn(store, PRODUCER, end_offset=12) == 1
    assert store.group_offsets("g") == {("t", 0): CommittedOffset(5)}  # decisions
    assert store.committed_group_offsets("g") == {}
    assert store.is_unstable("g", "t", 0)  # the marker is not committed yet
    store.promote(LOG_PARTITION, 12)
    assert store.committed_group_offsets("g") == {("t", 0): CommittedOffset(5)}
    assert not store.is_unstable("g", "t", 0)
    assert store.pending_producers() == [] and store.uncommitted_count() == 0


def test_an_abort_marker_drops_the_transactions_offsets() -> None:
    store = OffsetStore()
    store.place(0, 1, store.commit("g", [("t", 0, CommittedOffset(1))]))
    store.promote(0, 1)
    store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    assert store.end_transaction(PRODUCER, False, everywhere, 0, 3) == 0
    store.promote(0, 3)
    assert store.committed_group_offsets("g") == {("t", 0): CommittedOffset(1)}
    assert not store.is_unstable("g", "t", 0) and store.groups() == ["g"]


def test_a_later_plain_commit_wins_over_a_transaction_committed_after_it() -> None:
    """Kafka keeps the most recent commit: a transaction's offset written before a
    plain OffsetCommit of the same partition does not replace it at the marker."""
    store = OffsetStore()
    store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    store.commit("g", [("t", 0, CommittedOffset(9))])
    store.commit_transactional(PRODUCER, "g", [("t", 1, CommittedOffset(6))])
    assert committed_txn(store, PRODUCER, end_offset=None) == 1
    assert store.group_offsets("g") == {("t", 0): CommittedOffset(9), ("t", 1): CommittedOffset(6)}


def test_a_plain_commit_before_the_transactions_record_is_replaced_at_commit() -> None:
    store = OffsetStore()
    store.commit("g", [("t", 0, CommittedOffset(9))])
    store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    assert store.group_offsets("g") == {("t", 0): CommittedOffset(9)}
    committed_txn(store, PRODUCER, end_offset=None)
    assert store.committed_group_offsets("g") == {("t", 0): CommittedOffset(5)}


def test_of_two_transactions_the_one_whose_record_came_last_wins() -> None:
    store = OffsetStore()
    store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    store.commit_transactional(OTHER_PRODUCER, "g", [("t", 0, CommittedOffset(8))])
    committed_txn(store, OTHER_PRODUCER, end_offset=None)
    committed_txn(store, PRODUCER, end_offset=None)
    assert store.group_offsets("g") == {("t", 0): CommittedOffset(8)}


def test_a_marker_ends_only_the_transaction_of_its_own_log_partition() -> None:
    store = OffsetStore()
    store.commit_transactional(PRODUCER, "here", [("t", 0, CommittedOffset(5))])
    store.commit_transactional(PRODUCER, "there", [("t", 0, CommittedOffset(6))])
    store.end_transaction(PRODUCER, True, only("here"), LOG_PARTITION, None)
    assert store.group_offsets("here") == {("t", 0): CommittedOffset(5)}
    assert store.group_offsets("there") == {}
    assert store.has_pending_transaction("there", "t", 0)
    assert store.pending_producers() == [PRODUCER]


def test_a_transactional_offset_whose_append_failed_is_dropped() -> None:
    store = OffsetStore()
    refused = store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    store.discard(refused)
    assert not store.has_open_transactions("g")
    assert committed_txn(store, PRODUCER) == 0


def test_deleting_offsets_drops_pending_ones_with_a_tombstone() -> None:
    store = OffsetStore()
    store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    store.commit("g", [("t", 1, CommittedOffset(1))])
    tombstones = store.delete_group("g")
    assert sorted(key for key, _ in tombstones) == sorted(
        [encode_offset_key("g", "t", 0), encode_offset_key("g", "t", 1)]
    )
    assert not store.has_open_transactions("g")
    assert committed_txn(store, PRODUCER) == 0
    assert store.groups() == []


def test_offsets_with_a_pending_transaction_do_not_expire() -> None:
    store = OffsetStore()
    store.commit("g", [("t", 0, CommittedOffset(1, commit_timestamp_ms=0))])
    store.commit("g", [("t", 1, CommittedOffset(1, commit_timestamp_ms=0))])
    store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    tombstones = store.expire(1_000, 10, lambda group_id: 0)
    assert tombstones == [(encode_offset_key("g", "t", 1), None)]
    assert store.group_offsets("g") == {("t", 0): CommittedOffset(1, commit_timestamp_ms=0)}


def test_loading_rebuilds_pending_offsets_and_applies_markers_in_log_order() -> None:
    writer = OffsetStore()
    aborted = writer.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(3))])
    committed = writer.commit_transactional(OTHER_PRODUCER, "g", [("t", 1, CommittedOffset(4))])
    plain = writer.commit("g", [("t", 1, CommittedOffset(9))])
    still_open = writer.commit_transactional(PRODUCER, "g", [("t", 2, CommittedOffset(5))])

    loaded = OffsetStore()
    for key, value in aborted:
        loaded.replay(key, value, producer_id=PRODUCER)
    loaded.end_transaction(PRODUCER, False, everywhere, LOG_PARTITION, None)
    for key, value in committed:
        loaded.replay(key, value, producer_id=OTHER_PRODUCER)
    for key, value in plain:
        loaded.replay(key, value)
    loaded.end_transaction(OTHER_PRODUCER, True, everywhere, LOG_PARTITION, None)
    for key, value in still_open:
        loaded.replay(key, value, producer_id=PRODUCER)

    assert loaded.committed_group_offsets("g") == {("t", 1): CommittedOffset(9)}
    assert loaded.has_pending_transaction("g", "t", 2)
    assert loaded.groups() == ["g"]
    committed_txn(loaded, PRODUCER, end_offset=None)
    assert loaded.committed_group_offsets("g")[("t", 2)] == CommittedOffset(5)


def test_a_tombstone_read_back_drops_the_pending_offsets_of_its_partition() -> None:
    loaded = OffsetStore()
    ((key, value),) = OffsetStore().commit_transactional(
        PRODUCER, "g", [("t", 0, CommittedOffset(3))]
    )
    loaded.replay(key, value, producer_id=PRODUCER)
    loaded.replay(key, None)
    assert not loaded.has_open_transactions("g")


def test_a_marker_placed_before_earlier_appends_waits_for_them_in_log_order() -> None:
    """The marker is reported after a later append was placed: readers still see
    changes in log order."""
    store = OffsetStore()
    store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    later = store.commit("g", [("t", 1, CommittedOffset(2))])
    store.place(LOG_PARTITION, 20, later)
    committed_txn(store, PRODUCER, end_offset=15)
    store.promote(LOG_PARTITION, 15)
    assert store.committed_group_offsets("g") == {("t", 0): CommittedOffset(5)}
    store.promote(LOG_PARTITION, 20)
    assert len(store.committed_group_offsets("g")) == 2


def test_forgotten_groups_leave_no_pending_transaction() -> None:
    store = OffsetStore()
    store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    committed_txn(store, OTHER_PRODUCER)
    store.commit_transactional(OTHER_PRODUCER, "h", [("t", 0, CommittedOffset(5))])
    committed_txn(store, OTHER_PRODUCER, end_offset=50)
    store.forget(["g", "h"])
    assert store.pending_producers() == [] and store.groups() == []
    assert not store.is_unstable("h", "t", 0) and store.uncommitted_count() == 0


def test_a_refused_txn_commit_leaves_the_offset_it_would_have_replaced_pending() -> None:
    """A zombie's TxnOffsetCommit under the same producer id (an older epoch, which
    the log refuses) must not take away the current transaction's offset."""
    store = OffsetStore()
    store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(10))])
    refused = store.commit_transactional(PRODUCER, "g", [("t", 0, CommittedOffset(5))])
    store.discard(refused)
    committed_txn(store, PRODUCER, end_offset=None)
    assert store.group_offsets("g") == {("t", 0): CommittedOffset(10)}
