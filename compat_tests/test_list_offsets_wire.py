"""ListOffsets v8-v11 against the real `weir` process, with raw requests so every
field of the answer is seen: Weir has no tiered storage, so like Kafka for a topic
without remote storage it answers EARLIEST_LOCAL (-4, v8+) with the log start
offset, and LATEST_TIERED (-5, v9+) and EARLIEST_PENDING_UPLOAD (-6, v11) with no
offset. v10 adds timeout_ms (KIP-1075). ApiVersions advertises v11."""

from __future__ import annotations

from typing import Any

import pytest

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.wire_client import connect, round_trip
from weir.format.record_batch import build_batch

PRODUCE = 0
LIST_OFFSETS = 2
API_VERSIONS = 18
DELETE_RECORDS = 21
EARLIEST = -2
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
UNSUPPORTED_VERSION = 35
BASE_MS = 1_700_000_000_000


def produce(broker: WeirProcess, topic: str, records: int) -> None:
    with connect(broker) as sock:
        for i in range(records):
            batch = build_batch([(b"k", b"v", [])], timestamp_ms=BASE_MS + i)
            body = {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 10_000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            }
            [answer] = round_trip(sock, PRODUCE, 9, body).responses[0].partition_responses
            assert answer.error_code == 0


def list_offset(broker: WeirProcess, topic: str, version: int, timestamp: int) -> Any:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                ],
            }
        ],
        "timeout_ms": 30_000,
    }
    with connect(broker) as sock:
        [answer] = round_trip(sock, LIST_OFFSETS, version, body).topics[0].partitions
    return answer


def triple(answer: Any) -> tuple[int, int, int]:
    return answer.error_code, answer.offset, answer.timestamp


def test_api_versions_advertises_list_offsets_up_to_v11(broker: WeirProcess) -> None:
    with connect(broker) as sock:
        response = round_trip(sock, API_VERSIONS, 3, {
            "client_software_name": "weir-wire-test", "client_software_version": "1"
        })  # fmt: skip
    [entry] = [k for k in response.api_keys if k.api_key == LIST_OFFSETS]
    assert (entry.min_version, entry.max_version) == (1, 11)
    assert broker.connection_trouble() == {}


@pytest.mark.parametrize("version", [8, 9, 10, 11])
def test_earliest_local_is_the_log_start_offset(
    broker: WeirProcess, topic: str, version: int
) -> None:
    create_topic(broker.bootstrap, topic)
    produce(broker, topic, 3)
    earliest = list_offset(broker, topic, version, EARLIEST)
    local = list_offset(broker, topic, version, EARLIEST_LOCAL)
    assert triple(local) == (0, 0, -1)
    assert local.leader_epoch == earliest.leader_epoch == 0
    with connect(broker) as sock:
        deleted = round_trip(sock, DELETE_RECORDS, 2, {
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 2}]}],
            "timeout_ms": 10_000,
        })  # fmt: skip
    assert deleted.topics[0].partitions[0].low_watermark == 2
    assert triple(list_offset(broker, topic, version, EARLIEST_LOCAL)) == (0, 2, -1)
    assert broker.connection_trouble() == {}


@pytest.mark.parametrize(
    ("version", "timestamp"),
    [(9, LATEST_TIERED), (10, LATEST_TIERED), (11, LATEST_TIERED), (11, EARLIEST_PENDING_UPLOAD)],
)
def test_nothing_is_tiered_or_pending_upload(
    broker: WeirProcess, topic: str, version: int, timestamp: int
) -> None:
    create_topic(broker.bootstrap, topic)
    produce(broker, topic, 2)
    answer = list_offset(broker, topic, version, timestamp)
    assert (*triple(answer), answer.leader_epoch) == (0, -1, -1, -1)
    assert broker.connection_trouble() == {}


@pytest.mark.parametrize(
    ("version", "timestamp"),
    [(7, EARLIEST_LOCAL), (8, LATEST_TIERED), (10, EARLIEST_PENDING_UPLOAD)],
)
def test_a_special_timestamp_before_its_version_is_unsupported(
    broker: WeirProcess, topic: str, version: int, timestamp: int
) -> None:
    """A client picks the version from the timestamps it asks for; a request that
    carries one its version predates is refused per partition, not by closing the
    connection."""
    create_topic(broker.bootstrap, topic)
    assert triple(list_offset(broker, topic, version, timestamp)) == (UNSUPPORTED_VERSION, -1, -1)
    assert broker.connection_trouble() == {}
