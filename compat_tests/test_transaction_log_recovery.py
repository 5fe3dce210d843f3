"""The real `weir` process recovers transactions from its partition logs after
kill -9: an open transaction (transactional batches, no marker) keeps the last
stable offset at its first offset through crashes, read_committed Fetch and
ListOffsets stop there, and once its ABORT marker is in the log the LSO
reaches the high watermark and the abort is listed.

Clients cannot write transactional batches or markers through this broker's
Produce yet (the transaction coordinator lands separately), so the
transactional batches and the marker are appended to the stopped broker's
partition directory by the log itself (`PartitionLog`), followed by a crash
(no clean close); every recovery and every answer is the broker's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.harness import WeirProcess, create_topic, unique_topic_name
from compat_tests.wire_client import connect, round_trip
from weir.format.record_batch import build_batch, iter_batch_headers
from weir.log.config import LogConfig
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog
from weir.wire.api_keys import ApiKey

pytestmark = pytest.mark.timeout(120)

PID = 4242
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    base = tmp_path_factory.mktemp("txn-recovery")
    process = WeirProcess(base / "data", base / "logs")
    process.start()
    yield process
    process.close()


def fetch(broker: WeirProcess, topic: str, isolation_level: int) -> Any:
    request = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20,
        }]}],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip
    with connect(broker) as sock:
        response = round_trip(sock, ApiKey.FETCH, 12, request)
    return response.responses[0].partitions[0]


def latest_offset(broker: WeirProcess, topic: str, isolation_level: int) -> int:
    request = {
        "replica_id": -1, "isolation_level": isolation_level,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1},
        ]}],
    }  # fmt: skip
    with connect(broker) as sock:
        response = round_trip(sock, ApiKey.LIST_OFFSETS, 7, request)
    offset: int = response.topics[0].partitions[0].offset
    return offset


def produce_plain(broker: WeirProcess, topic: str, count: int) -> None:
    request = {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": 0, "records": build_batch([(b"k", b"plain", [])] * count)},
        ]}],
    }  # fmt: skip
    with connect(broker) as sock:
        response = round_trip(sock, ApiKey.PRODUCE, 9, request)
    assert response.responses[0].partition_responses[0].error_code == 0


def append_while_stopped(directory: Path, write: Any) -> None:
    """Open the stopped broker's partition log (its recovery), `write(log)`,
    make it durable, and drop it without a clean close (a crash)."""
    log = PartitionLog.open(directory, LogConfig(), GroupFlusher())
    write(log)
    log.flush()
    for segment in log.segments:
        segment.close()


def offsets_of(records: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batch_headers(records)]


def test_an_open_transaction_holds_the_lso_through_kill_9_until_its_abort_marker(
    broker: WeirProcess,
) -> None:
    topic = unique_topic_name("txn")
    create_topic(broker.bootstrap, topic)
    produce_plain(broker, topic, 2)  # offsets 0-1
    broker.kill()
    directory = broker.data_dir / f"{topic}-0"

    def open_transaction(log: PartitionLog) -> None:
        batch = build_batch(
            [(b"k", b"in-txn", [])] * 3, producer_id=PID, producer_epoch=0, base_sequence=0,
            is_transactional=True,
        )  # fmt: skip
        assert log.append(batch, leader_epoch=0, now_ms=0).base_offset == 2  # offsets 2-4

    append_while_stopped(directory, open_transaction)
    broker.start()
    produce_plain(broker, topic, 1)  # offset 5, after the open transaction
    for restart in range(2):
        committed = fetch(broker, topic, READ_COMMITTED)
        assert (committed.high_watermark, committed.last_stable_offset) == (6, 2), restart
        assert offsets_of(bytes(committed.records)) == [0]
        assert latest_offset(broker, topic, READ_COMMITTED) == 2
        uncommitted = fetch(broker, topic, READ_UNCOMMITTED)
        assert offsets_of(bytes(uncommitted.records)) == [0, 2, 5]
        assert latest_offset(broker, topic, READ_UNCOMMITTED) == 6
        broker.kill()  # kill -9 with the transaction open: recovery rebuilds it
        broker.start()
    broker.kill()

    def abort(log: PartitionLog) -> None:
        marker = log.append_txn_marker(
            producer_id=PID, producer_epoch=0, coordinator_epoch=0, commit=False,
            leader_epoch=0, now_ms=0,
        )  # fmt: skip
        assert marker.base_offset == 6

    append_while_stopped(directory, abort)
    broker.start()
    committed = fetch(broker, topic, READ_COMMITTED)
    assert committed.high_watermark == committed.last_stable_offset == 7
    assert offsets_of(bytes(committed.records)) == [0, 2, 5, 6]
    aborted = [(a.producer_id, a.first_offset) for a in committed.aborted_transactions]
    assert aborted == [(PID, 2)]
    assert latest_offset(broker, topic, READ_COMMITTED) == 7
