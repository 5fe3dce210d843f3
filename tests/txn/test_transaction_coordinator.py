"""The transaction coordinator's operations, Kafka's semantics, driven like the broker
will drive it (`txn_harness.Broker`)."""

from __future__ import annotations

from weir.format.errors import ErrorCode
from weir.txn.transaction_coordinator import ProducerIdResult, TransactionSettings
from weir.txn.transaction_metadata import EPOCH_MAX
from weir.txn.transaction_records import TxnState

from .txn_harness import COORDINATOR_EPOCH, NOW_MS, Broker

TP0 = ("t", 0)
TP1 = ("t", 1)
OFFSETS = ("__consumer_offsets", 7)


def init(
    broker: Broker, tid: str = "tx", expected: tuple[int, int] | None = None
) -> ProducerIdResult:
    return broker.call(broker.coordinator.init_producer_id(tid, 60_000, NOW_MS, expected))


def state(broker: Broker, tid: str = "tx") -> TxnState:
    txn = broker.coordinator.metadata(tid)
    assert txn is not None
    return txn.state


def test_a_new_id_gets_a_producer_id_at_epoch_0_and_a_stored_empty_state() -> None:
    broker = Broker()
    assert init(broker) == ProducerIdResult(ErrorCode.NONE, 1000, 0)
    [(tid, entry)] = broker.states()
    assert tid == "tx" and entry.state == TxnState.EMPTY and entry.producer_epoch == 0


def test_init_again_bumps_the_epoch_and_fences_the_older_producer() -> None:
    broker = Broker()
    init(broker)
    assert init(broker) == ProducerIdResult(ErrorCode.NONE, 1000, 1)
    c = broker.coordinator
    assert broker.call(c.add_partitions("tx", 1000, 0, [TP0], NOW_MS)) == ErrorCode.PRODUCER_FENCED
    assert broker.call(c.end_txn("tx", 1000, 0, True, NOW_MS)) == ProducerIdResult(
        ErrorCode.PRODUCER_FENCED
    )


def test_init_refuses_bad_ids_and_timeouts() -> None:
    broker = Broker(TransactionSettings(max_timeout_ms=1000))
    c = broker.coordinator
    assert broker.call(c.init_producer_id("", 100, NOW_MS)).error == ErrorCode.INVALID_REQUEST
    assert (
        broker.call(c.init_producer_id("tx", 1001, NOW_MS)).error
        == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    )
    assert (
        broker.call(c.init_producer_id("tx", 0, NOW_MS)).error
        == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    )
    assert broker.log == []


def test_init_during_an_ongoing_transaction_aborts_it_first_and_asks_to_retry() -> None:
    broker = Broker()
    init(broker)
    c = broker.coordinator
    broker.call(c.add_partitions("tx", 1000, 0, [TP0, TP1], NOW_MS))
    assert init(broker).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert state(broker) == TxnState.PREPARE_ABORT
    [marker] = broker.markers
    assert not marker.commit and marker.partitions == {TP0, TP1}
    assert marker.producer_epoch > 0 and marker.coordinator_epoch == COORDINATOR_EPOCH
    assert init(broker).error == ErrorCode.CONCURRENT_TRANSACTIONS  # markers not written yet
    broker.write_markers()
    assert state(broker) == TxnState.COMPLETE_ABORT
    result = init(broker)
    assert result.error == ErrorCode.NONE and result.producer_epoch > marker.producer_epoch


def test_kip360_the_current_epoch_is_bumped_a_retry_gets_the_same_and_an_old_one_is_fenced() -> (
    None
):
    broker = Broker()
    init(broker)
    assert init(broker, expected=(1000, 0)) == ProducerIdResult(ErrorCode.NONE, 1000, 1)
    assert init(broker, expected=(1000, 0)) == ProducerIdResult(ErrorCode.NONE, 1000, 1)  # retry
    assert init(broker, expected=(1000, 1)) == ProducerIdResult(ErrorCode.NONE, 1000, 2)
    assert init(broker, expected=(1000, 0)).error == ErrorCode.PRODUCER_FENCED
    assert init(broker, expected=(999, 2)).error == ErrorCode.PRODUCER_FENCED


def test_an_exhausted_epoch_rolls_to_a_new_producer_id() -> None:
    broker = Broker()
    init(broker)
    txn = broker.coordinator.metadata("tx")
    assert txn is not None
    txn.producer_epoch = EPOCH_MAX - 1
    assert init(broker) == ProducerIdResult(ErrorCode.NONE, 1001, 0)
    assert txn.previous_producer_id == 1000


def test_add_partitions_checks_the_producer_and_starts_the_transaction() -> None:
    broker = Broker()
    init(broker)
    c = broker.coordinator
    assert broker.call(c.add_partitions("nope", 1000, 0, [TP0], NOW_MS)) == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    assert broker.call(c.add_partitions("tx", 7, 0, [TP0], NOW_MS)) == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    assert broker.call(c.add_partitions("tx", 1000, 0, [TP0], NOW_MS + 5)) == ErrorCode.NONE
    assert state(broker) == TxnState.ONGOING
    records = len(broker.log)
    assert broker.call(c.add_partitions("tx", 1000, 0, [TP0], NOW_MS + 6)) == ErrorCode.NONE
    assert len(broker.log) == records  # already in: nothing to write
    assert broker.call(c.add_offsets("tx", 1000, 0, OFFSETS, NOW_MS + 7)) == ErrorCode.NONE
    description = c.describe("tx")
    assert description.state == "Ongoing" and description.start_ms == NOW_MS + 5
    assert description.partitions == (OFFSETS, TP0)


def test_no_partition_is_added_while_the_end_is_completing() -> None:
    broker = Broker()
    init(broker)
    c = broker.coordinator
    broker.call(c.add_partitions("tx", 1000, 0, [TP0], NOW_MS))
    broker.call(c.end_txn("tx", 1000, 0, True, NOW_MS))
    assert broker.call(c.add_partitions("tx", 1000, 0, [TP1], NOW_MS)) == (
        ErrorCode.CONCURRENT_TRANSACTIONS
    )
    assert c.verify_partitions("tx", 1000, 0, [TP0]) == {TP0: ErrorCode.CONCURRENT_TRANSACTIONS}


def test_verification_affirms_only_durable_partitions_of_the_open_transaction() -> None:
    broker = Broker()
    init(broker)
    c = broker.coordinator
    reply = c.add_partitions("tx", 1000, 0, [TP0], NOW_MS)
    # Not reported durable yet: not affirmed.
    assert c.verify_partitions("tx", 1000, 0, [TP0]) == {TP0: ErrorCode.TRANSACTION_ABORTABLE}
    broker.call(reply)
    assert c.verify_partitions("tx", 1000, 0, [TP0, TP1]) == {
        TP0: ErrorCode.NONE,
        TP1: ErrorCode.TRANSACTION_ABORTABLE,
    }
    assert c.verify_partitions("tx", 1000, 1, [TP0]) == {TP0: ErrorCode.PRODUCER_FENCED}
    assert c.verify_partitions("tx", 9, 0, [TP0]) == {TP0: ErrorCode.INVALID_PRODUCER_ID_MAPPING}


def test_commit_v1_keeps_the_epoch_writes_markers_once_then_completes() -> None:
    broker = Broker()
    init(broker)
    c = broker.coordinator
    broker.call(c.add_partitions("tx", 1000, 0, [TP0, TP1], NOW_MS))
    assert broker.call(c.end_txn("tx", 1000, 0, True, NOW_MS)) == ProducerIdResult(
        ErrorCode.NONE, 1000, 0
    )
    assert state(broker) == TxnState.PREPARE_COMMIT
    [marker] = broker.markers
    assert marker.commit and marker.producer_epoch == 0 and marker.transaction_version == 1
    # While the markers are written any end is asked to retry (Kafka: a state change in
    # progress), the other result too; once complete, the other result is invalid.
    for commit in (True, False):
        assert broker.call(c.end_txn("tx", 1000, 0, commit, NOW_MS)).error == (
            ErrorCode.CONCURRENT_TRANSACTIONS
        )
    broker.handle(c.markers_written("tx", 1000, 0, [TP0], NOW_MS))
    assert state(broker) == TxnState.PREPARE_COMMIT
    broker.handle(c.markers_written("tx", 1000, 0, [TP1], NOW_MS))
    assert state(broker) == TxnState.COMPLETE_COMMIT
    assert broker.markers == [marker]  # requested once
    assert broker.call(c.end_txn("tx", 1000, 0, True, NOW_MS)).error == ErrorCode.NONE  # retry
    assert broker.call(c.end_txn("tx", 1000, 0, False, NOW_MS)).error == ErrorCode.INVALID_TXN_STATE


def test_end_txn_without_a_transaction_is_an_invalid_state() -> None:
    broker = Broker()
    init(broker)
    assert broker.call(broker.coordinator.end_txn("tx", 1000, 0, True, NOW_MS)).error == (
        ErrorCode.INVALID_TXN_STATE
    )


def test_end_txn_v2_bumps_the_epoch_on_commit_and_abort_and_answers_it() -> None:
    broker = Broker()
    init(broker)
    c = broker.coordinator
    broker.call(c.add_partitions("tx", 1000, 0, [TP0], NOW_MS, transaction_version=2))
    assert broker.call(c.end_txn("tx", 1000, 0, True, NOW_MS, 2)) == ProducerIdResult(
        ErrorCode.NONE, 1000, 1
    )
    [marker] = broker.markers
    assert marker.producer_epoch == 1 and marker.transaction_version == 2
    # A retry presents the old epoch: still completing, then NONE with the new epoch.
    assert broker.call(c.end_txn("tx", 1000, 0, True, NOW_MS, 2)).error == (
        ErrorCode.CONCURRENT_TRANSACTIONS
    )
    broker.write_markers()
    assert broker.call(c.end_txn("tx", 1000, 0, True, NOW_MS, 2)) == ProducerIdResult(
        ErrorCode.NONE, 1000, 1
    )
    broker.call(c.add_partitions("tx", 1000, 1, [TP0], NOW_MS, transaction_version=2))
    assert broker.call(c.end_txn("tx", 1000, 1, False, NOW_MS, 2)) == ProducerIdResult(
        ErrorCode.NONE, 1000, 2
    )


def test_a_late_end_txn_of_an_earlier_transaction_cannot_end_the_next_one() -> None:
    broker = Broker()
    init(broker)
    c = broker.coordinator
    broker.call(c.add_partitions("tx", 1000, 0, [TP0], NOW_MS, transaction_version=2))
    broker.call(c.end_txn("tx", 1000, 0, False, NOW_MS, 2))
    broker.write_markers()
    broker.call(c.add_partitions("tx", 1000, 1, [TP0], NOW_MS, transaction_version=2))
    # The delayed abort of epoch 0 arrives during the next transaction (epoch 1).
    assert broker.call(c.end_txn("tx", 1000, 0, False, NOW_MS, 2)).error == (
        ErrorCode.PRODUCER_FENCED
    )
    assert state(broker) == TxnState.ONGOING
    # A late marker report of the earlier end does not touch the open transaction.
    broker.handle(c.markers_written("tx", 1000, 1, [TP0], NOW_MS))
    assert state(broker) == TxnState.ONGOING


def test_end_txn_v2_rolls_to_a_new_producer_id_when_the_epoch_runs_out() -> None:
    broker = Broker()
    init(broker)
    c = broker.coordinator
    txn = c.metadata("tx")
    assert txn is not None
    txn.producer_epoch = EPOCH_MAX - 1
    broker.call(c.add_partitions("tx", 1000, EPOCH_MAX - 1, [TP0], NOW_MS, 2))
    assert broker.call(c.end_txn("tx", 1000, EPOCH_MAX - 1, True, NOW_MS, 2)) == (
        ProducerIdResult(ErrorCode.NONE, 1001, 0)
    )
    [marker] = broker.markers
    assert (marker.producer_id, marker.producer_epoch) == (1000, EPOCH_MAX)
    broker.write_markers()
    assert (txn.producer_id, txn.producer_epoch, txn.previous_producer_id) == (1001, 0, 1000)
    # The retry of that end, with the old id and epoch, is answered with the new ones.
    assert broker.call(c.end_txn("tx", 1000, EPOCH_MAX - 1, True, NOW_MS, 2)) == (
        ProducerIdResult(ErrorCode.NONE, 1001, 0)
    )


def test_a_transaction_past_its_timeout_is_fenced_and_aborted() -> None:
    broker = Broker(TransactionSettings(transaction_version=1))
    c = broker.coordinator
    broker.call(c.init_producer_id("tx", 1000, NOW_MS))
    broker.call(c.add_partitions("tx", 1000, 0, [TP0], NOW_MS))
    assert c.next_deadline_ms() == NOW_MS + 1001
    broker.handle(c.advance(NOW_MS + 1000))
    assert state(broker) == TxnState.ONGOING
    broker.handle(c.advance(NOW_MS + 1001))
    assert state(broker) == TxnState.PREPARE_ABORT
    [marker] = broker.markers
    assert not marker.commit and marker.producer_epoch == 1  # fenced
    assert broker.call(c.end_txn("tx", 1000, 0, True, NOW_MS)).error == ErrorCode.PRODUCER_FENCED
    broker.write_markers()
    assert state(broker) == TxnState.COMPLETE_ABORT


def test_a_timed_out_version_2_transaction_is_fenced_by_one_bump_as_kafka_does() -> None:
    """Kafka 4.4 (measured with kafka-clients 4.4): one bump; the fenced producer's
    late commit presents the epoch before, is taken for a retry, and is refused as
    INVALID_TXN_STATE (the client's InvalidTxnStateException)."""
    broker = Broker()
    c = broker.coordinator
    broker.call(c.init_producer_id("tx", 1000, NOW_MS))
    broker.call(c.add_partitions("tx", 1000, 0, [TP0], NOW_MS, transaction_version=2))
    broker.handle(c.advance(NOW_MS + 1001))
    [marker] = broker.markers
    assert (marker.commit, marker.producer_epoch, marker.transaction_version) == (False, 1, 2)
    broker.write_markers()
    assert state(broker) == TxnState.COMPLETE_ABORT
    late_commit = broker.call(c.end_txn("tx", 1000, 0, True, NOW_MS, 2))
    assert late_commit.error == ErrorCode.INVALID_TXN_STATE
    assert broker.call(c.init_producer_id("tx", 1000, NOW_MS)).producer_epoch == 2


def test_the_timeout_is_bounded_by_the_broker_maximum() -> None:
    broker = Broker(TransactionSettings(max_timeout_ms=60_000))
    c = broker.coordinator
    init(broker)
    broker.call(c.add_partitions("tx", 1000, 0, [TP0], NOW_MS))
    txn = c.metadata("tx")
    assert txn is not None
    txn.timeout_ms = 10**9  # stored under an older, larger maximum
    assert c.next_deadline_ms() == NOW_MS + 60_001


def test_an_idle_id_expires_with_a_tombstone_and_a_busy_one_does_not() -> None:
    broker = Broker(TransactionSettings(id_expiration_ms=5000, max_timeout_ms=10**9))
    c = broker.coordinator
    init(broker, "idle")
    broker.call(c.init_producer_id("busy", 10**8, NOW_MS))
    broker.call(c.add_partitions("busy", 1001, 0, [TP0], NOW_MS))
    broker.handle(c.advance(NOW_MS + 4999))
    assert c.transactional_ids() == ["busy", "idle"]
    broker.handle(c.advance(NOW_MS + 5000))
    assert c.transactional_ids() == ["busy"]
    assert broker.log[-1].transactional_id == "idle" and broker.log[-1].value is None
    broker.reload()
    assert broker.coordinator.transactional_ids() == ["busy"]


def test_a_failover_mid_commit_resumes_the_markers_and_completes() -> None:
    broker = Broker()
    init(broker)
    c = broker.coordinator
    broker.call(c.add_partitions("tx", 1000, 0, [TP0, TP1], NOW_MS))
    broker.call(c.end_txn("tx", 1000, 0, True, NOW_MS))
    broker.reload(coordinator_epoch=9)  # the markers were never written
    [marker] = broker.markers
    assert marker.commit and marker.partitions == {TP0, TP1} and marker.coordinator_epoch == 9
    broker.write_markers()
    assert state(broker) == TxnState.COMPLETE_COMMIT
    # The reloaded coordinator serves the same producer.
    assert broker.call(broker.coordinator.end_txn("tx", 1000, 0, True, NOW_MS)).error == (
        ErrorCode.NONE
    )


def test_reload_rebuilds_every_id_as_it_was() -> None:
    broker = Broker()
    init(broker, "a")
    init(broker, "b")
    c = broker.coordinator
    broker.call(c.add_partitions("b", 1001, 0, [TP0], NOW_MS + 1))
    before = {tid: c.metadata(tid) for tid in c.transactional_ids()}
    broker.reload()
    after = {
        tid: broker.coordinator.metadata(tid) for tid in broker.coordinator.transactional_ids()
    }
    assert {t: m.entry() for t, m in before.items() if m} == {
        t: m.entry() for t, m in after.items() if m
    }


def test_an_unloaded_partition_answers_not_coordinator() -> None:
    broker = Broker()
    init(broker)
    broker.coordinator.unload(0)
    assert init(broker).error == ErrorCode.NOT_COORDINATOR
    assert broker.coordinator.describe("tx").error == ErrorCode.NOT_COORDINATOR


def test_no_producer_id_reserved_is_a_retriable_error() -> None:
    broker = Broker()
    broker.new_producer_id = lambda: None  # type: ignore[method-assign]
    broker.coordinator._new_producer_id = broker.new_producer_id
    assert init(broker).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert broker.coordinator.transactional_ids() == []


def test_describe_and_list_answer_from_durable_state_with_kafkas_filters() -> None:
    broker = Broker()
    c = broker.coordinator
    init(broker, "a")
    init(broker, "b")
    broker.call(c.add_partitions("b", 1001, 0, [TP0], NOW_MS))
    assert c.describe("zzz").error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert c.describe("b").state == "Ongoing"
    unknown, listed = c.list_transactions(NOW_MS, states=["Ongoing", "Bogus"])
    assert unknown == ["Bogus"] and [x.transactional_id for x in listed] == ["b"]
    _, listed = c.list_transactions(NOW_MS, producer_ids=[1000])
    assert [x.transactional_id for x in listed] == ["a"]
    _, listed = c.list_transactions(NOW_MS + 100, states=["Ongoing"], min_duration_ms=100)
    assert listed == []
    _, listed = c.list_transactions(NOW_MS + 101, states=["Ongoing"], min_duration_ms=100)
    assert [x.transactional_id for x in listed] == ["b"]
