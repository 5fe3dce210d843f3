"""Hostile transaction requests against the real `weir` process, one test per class
of bad input: each gets Kafka's error, nothing is written, and the broker keeps
serving. A client cannot forge a marker, write with another producer's id, end or
join a transaction it does not own, or stall the broker with a pattern."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.wire_client import connect, round_trip
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.wire.api_keys import ApiKey

pytestmark = pytest.mark.timeout(120)

COORDINATOR_RETRIES = 50


def call(broker: WeirProcess, api_key: int, version: int, body: dict[str, Any]) -> Any:
    with connect(broker) as sock:
        return round_trip(sock, api_key, version, body)


def init_producer(broker: WeirProcess, transactional_id: str, timeout_ms: int = 60_000) -> Any:
    """InitProducerId, retried while the transaction state topic is being created."""
    body = {"transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms}
    for _ in range(COORDINATOR_RETRIES):
        response = call(broker, ApiKey.INIT_PRODUCER_ID, 4, body)
        if response.error_code not in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        ):
            return response
        time.sleep(0.2)
    return response


def produce(broker: WeirProcess, topic: str, records: bytes, transactional_id: str | None) -> Any:
    body = {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    response = call(broker, ApiKey.PRODUCE, 11, body)
    return response.responses[0].partition_responses[0]


def log_end(broker: WeirProcess, topic: str) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    response = call(broker, ApiKey.LIST_OFFSETS, 7, body)
    return int(response.topics[0].partitions[0].offset)


@pytest.fixture
def topic(module_broker: WeirProcess) -> str:
    name = f"txn-hostile-{uuid.uuid4().hex[:8]}"
    create_topic(module_broker.bootstrap, name)
    return name


def transactional_batch(producer: Any, sequence: int = 0) -> bytes:
    return build_batch(
        [(b"k", b"v", [])],
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=sequence,
        is_transactional=True,
    )


def test_a_client_cannot_forge_a_commit_marker_with_produce(
    module_broker: WeirProcess, topic: str
) -> None:
    producer = init_producer(module_broker, f"tx-{uuid.uuid4()}")
    forged = build_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [])],  # a COMMIT marker's record
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        is_transactional=True,
        is_control=True,
    )
    answer = produce(module_broker, topic, forged, None)
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert log_end(module_broker, topic) == 0


def test_a_transactional_batch_with_another_ids_producer_is_refused(
    module_broker: WeirProcess, topic: str
) -> None:
    mine = f"tx-{uuid.uuid4()}"
    init_producer(module_broker, mine)
    theirs = init_producer(module_broker, f"tx-{uuid.uuid4()}")
    answer = produce(module_broker, topic, transactional_batch(theirs), mine)
    assert answer.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert log_end(module_broker, topic) == 0


def test_a_transactional_batch_without_a_transactional_id_is_refused(
    module_broker: WeirProcess, topic: str
) -> None:
    producer = init_producer(module_broker, f"tx-{uuid.uuid4()}")
    answer = produce(module_broker, topic, transactional_batch(producer), None)
    assert answer.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert log_end(module_broker, topic) == 0


def test_ending_or_joining_a_transaction_one_does_not_own_is_refused(
    module_broker: WeirProcess, topic: str
) -> None:
    owner = f"tx-{uuid.uuid4()}"
    producer = init_producer(module_broker, owner)
    other = init_producer(module_broker, f"tx-{uuid.uuid4()}")
    end = {
        "transactional_id": owner,
        "producer_id": other.producer_id,
        "producer_epoch": other.producer_epoch,
        "committed": True,
    }
    assert (
        call(module_broker, ApiKey.END_TXN, 3, end).error_code
        == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    unknown = dict(end, transactional_id=f"tx-never-{uuid.uuid4()}")
    assert (
        call(module_broker, ApiKey.END_TXN, 3, unknown).error_code
        == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    stale = {
        "v3_and_below_transactional_id": owner,
        "v3_and_below_producer_id": producer.producer_id,
        "v3_and_below_producer_epoch": producer.producer_epoch + 7,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
    }
    added = call(module_broker, ApiKey.ADD_PARTITIONS_TO_TXN, 3, stale)
    error = added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    assert error == ErrorCode.PRODUCER_FENCED


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_a_transaction_timeout_out_of_range_is_refused(
    module_broker: WeirProcess, timeout_ms: int
) -> None:
    response = init_producer(module_broker, f"tx-{uuid.uuid4()}", timeout_ms)
    assert response.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT


def test_a_stale_marker_from_a_client_is_refused_and_the_transaction_stays_open(
    module_broker: WeirProcess, topic: str
) -> None:
    transactional_id = f"tx-{uuid.uuid4()}"
    old = init_producer(module_broker, transactional_id)
    current = init_producer(module_broker, transactional_id)
    assert current.producer_epoch == old.producer_epoch + 1
    answer = produce(module_broker, topic, transactional_batch(current), transactional_id)
    assert answer.error_code == ErrorCode.TRANSACTION_ABORTABLE  # not added: refused (v11)
    added = call(
        module_broker,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": current.producer_id,
            "v3_and_below_producer_epoch": current.producer_epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
        },
    )
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    assert (
        produce(module_broker, topic, transactional_batch(current), transactional_id).error_code
        == 0
    )
    marker = {
        "markers": [
            {
                "producer_id": old.producer_id,
                "producer_epoch": old.producer_epoch,
                "transaction_result": True,
                "topics": [{"name": topic, "partition_indexes": [0]}],
                "coordinator_epoch": 0,
            }
        ]
    }
    response = call(module_broker, ApiKey.WRITE_TXN_MARKERS, 1, marker)
    error = response.markers[0].topics[0].partitions[0].error_code
    assert error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log_end(module_broker, topic) == 1  # the batch, no marker


@pytest.mark.parametrize("pattern", ["(a+)+$", "(?<=tx)-1", "(" * 10_000])
def test_a_list_transactions_pattern_cannot_stall_the_broker(
    module_broker: WeirProcess, pattern: str
) -> None:
    init_producer(module_broker, "a" * 64 + "!")
    started = time.monotonic()
    response = call(
        module_broker,
        ApiKey.LIST_TRANSACTIONS,
        2,
        {"state_filters": [], "producer_id_filters": [], "transactional_id_pattern": pattern},
    )
    assert time.monotonic() - started < 2
    assert response.error_code in (ErrorCode.NONE, ErrorCode.INVALID_REGULAR_EXPRESSION)
    if pattern != "(a+)+$":
        assert response.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION


def fetch_committed(broker: WeirProcess, topic: str) -> Any:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    return call(broker, ApiKey.FETCH, 11, body).responses[0].partitions[0]


def test_a_delayed_end_txn_and_marker_of_the_last_transaction_leave_the_next_one_alone(
    module_broker: WeirProcess, topic: str
) -> None:
    """Transaction version 2 (EndTxn v5, Produce v12): the replay of the first
    transaction's EndTxn and of its marker, while the second is open, is refused and
    changes nothing; the second commits and only its record is read committed."""
    transactional_id = f"tx-{uuid.uuid4()}"
    producer = init_producer(module_broker, transactional_id)
    first = produce_v12(
        module_broker, topic, transactional_id, (producer.producer_id, producer.producer_epoch)
    )
    assert first.error_code == ErrorCode.NONE
    end = {
        "transactional_id": transactional_id,
        "producer_id": producer.producer_id,
        "producer_epoch": producer.producer_epoch,
        "committed": False,
    }
    ended = call(module_broker, ApiKey.END_TXN, 5, end)
    assert ended.error_code == ErrorCode.NONE
    next_epoch = ended.producer_epoch
    assert next_epoch == producer.producer_epoch + 1
    second = produce_v12(
        module_broker, topic, transactional_id, (producer.producer_id, next_epoch), retries=50
    )
    assert second.error_code == ErrorCode.NONE
    # The replays: the same EndTxn (and a commit of it), and the marker written for it.
    for replay in (end, dict(end, committed=True)):
        assert call(module_broker, ApiKey.END_TXN, 5, replay).error_code == (
            ErrorCode.PRODUCER_FENCED
        )
    marker = {
        "markers": [
            {
                "producer_id": producer.producer_id,
                "producer_epoch": next_epoch,
                "transaction_result": False,
                "topics": [{"name": topic, "partition_indexes": [0]}],
                "coordinator_epoch": 0,
                "transaction_version": 2,
            }
        ]
    }
    replayed = call(module_broker, ApiKey.WRITE_TXN_MARKERS, 2, marker)
    assert replayed.markers[0].topics[0].partitions[0].error_code == (
        ErrorCode.INVALID_PRODUCER_EPOCH
    )
    open_now = fetch_committed(module_broker, topic)
    assert open_now.last_stable_offset == second.base_offset  # still open
    commit = dict(end, producer_epoch=next_epoch, committed=True)
    assert call(module_broker, ApiKey.END_TXN, 5, commit).error_code == ErrorCode.NONE
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stable = fetch_committed(module_broker, topic)
        if stable.last_stable_offset == stable.high_watermark:
            break
        time.sleep(0.05)
    assert stable.last_stable_offset == stable.high_watermark == second.base_offset + 2
    assert [a.producer_id for a in stable.aborted_transactions] == [producer.producer_id]
    assert stable.aborted_transactions[0].first_offset == first.base_offset


def produce_v12(
    broker: WeirProcess,
    topic: str,
    transactional_id: str,
    producer: tuple[int, int],
    retries: int = 0,
) -> Any:
    """A transactional Produce v12 (the partition joins implicitly); retried while the
    broker answers a retriable error (the last transaction still completing)."""
    producer_id, epoch = producer
    records = build_batch(
        [(b"k", f"e{epoch}".encode(), [])],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    body = {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    for _ in range(retries + 1):
        answer = call(broker, ApiKey.PRODUCE, 12, body).responses[0].partition_responses[0]
        if answer.error_code != ErrorCode.NOT_ENOUGH_REPLICAS:
            return answer
        time.sleep(0.1)
    return answer


def test_write_txn_markers_naming_many_partitions_not_led_here_is_answered_at_once(
    module_broker: WeirProcess,
) -> None:
    """Each named partition the broker does not lead is answered without a task or a
    wait of its own, so an untrusted count costs only the answer."""
    count = 50_000
    marker = {
        "markers": [
            {
                "producer_id": 0,
                "producer_epoch": 0,
                "transaction_result": False,
                "topics": [{"name": "no-such-topic", "partition_indexes": list(range(count))}],
                "coordinator_epoch": 0,
            }
        ]
    }
    started = time.monotonic()
    response = call(module_broker, ApiKey.WRITE_TXN_MARKERS, 1, marker)
    assert time.monotonic() - started < 10
    errors = {p.error_code for p in response.markers[0].topics[0].partitions}
    assert errors == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert len(response.markers[0].topics[0].partitions) == count
