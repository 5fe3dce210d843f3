"""Client quotas through the dispatcher (`handle_frame`) of a real Broker: the throttle
in the response, the connection muted, a throttled fetch without records, exemptions."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.handlers.context import ClientConnection
from weir.broker.handlers.request_authorization import Session
from weir.broker.server.dispatch import ChunkedFrame, handle_frame
from weir.controller.client_quotas import QuotaAlteration
from weir.format.record_batch import build_batch
from weir.security.principal import user
from weir.wire.protocol import ApiKey, decode_response, encode_request

CLIENT_ID = "quota-test"
VALUE = b"v" * 1000


@pytest.fixture
async def broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    await nursery.start(broker.flusher.run)
    broker.create_topic(broker.controller.plan_topic("orders", 1, 1))
    yield broker
    broker.close()


def set_quota(broker: Broker, entity: dict[str, str | None], key: str, value: float | None) -> None:
    alteration = QuotaAlteration(tuple(entity.items()), ((key, value),))
    change, outcomes = broker.controller.stage_alter_client_quotas([alteration])
    assert [o.error_code for o in outcomes] == [0]
    assert change is not None
    broker.controller.commit(change)


def connection(who: str = "alice") -> ClientConnection:
    connection = ClientConnection()
    connection.session = Session(user(who), "127.0.0.1", "PLAINTEXT")
    return connection


def frame_bytes(response: bytes | ChunkedFrame) -> bytes:
    """A response frame as one buffer (a Fetch response comes as its chunks)."""
    return response.joined() if isinstance(response, ChunkedFrame) else response


async def send(
    broker: Broker, conn: ClientConnection, api_key: int, version: int, body: dict[str, Any]
) -> Any:
    frame = memoryview(encode_request(api_key, version, 7, CLIENT_ID, body))[4:]
    outcome = await handle_frame(broker, frame, "/127.0.0.1", conn)
    if outcome.pending is not None:
        outcome = await outcome.pending()
    assert not outcome.close_connection
    if outcome.response is None:
        return None
    return decode_response(api_key, version, memoryview(frame_bytes(outcome.response))[4:])[1]


def produce_body(records_count: int = 10, acks: int = -1) -> dict[str, Any]:
    records = build_batch([(None, VALUE, [])] * records_count)
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": records}]}],
    }


def fetch_body(max_bytes: int = 1 << 20) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "topics": [
            {"topic": "orders", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                "partition_max_bytes": 1 << 20}]}
        ],
    }  # fmt: skip


async def test_no_quota_means_no_throttle_and_nothing_measured(broker: Broker) -> None:
    conn = connection()
    for _ in range(3):
        response = await send(broker, conn, ApiKey.PRODUCE, 9, produce_body(100))
        assert response.throttle_time_ms == 0
    assert not broker.quotas.enabled()
    assert conn.throttled_until_s == 0.0
    assert all(q.sensor_count() == 0 for q in broker.quotas.quotas.values())


async def test_a_produce_over_its_byte_rate_carries_a_throttle_and_mutes_the_connection(
    broker: Broker,
) -> None:
    # 1000 B/s: ten seconds' worth (10 kB) passes, then each request is throttled.
    set_quota(broker, {"client-id": CLIENT_ID}, "producer_byte_rate", 1000)
    conn = connection()
    first = await send(broker, conn, ApiKey.PRODUCE, 9, produce_body(5))
    assert first.throttle_time_ms == 0 and conn.throttled_until_s == 0.0
    second = await send(broker, conn, ApiKey.PRODUCE, 9, produce_body(20))
    # About 26 kB over the 10 s of a young sensor: 2.6 kB/s, (2.6 - 1) / 1 * 10 s.
    assert 14_000 < second.throttle_time_ms < 18_000
    assert conn.throttled_until_s > time.monotonic() + 10
    assert second.responses[0].partition_responses[0].error_code == 0
    assert broker.quotas.throttled_total["produce"] == 1
    # Another client id of the same user is not limited.
    other = await send_as(broker, "other-client", ApiKey.PRODUCE, 9, produce_body(20))
    assert other.throttle_time_ms == 0


async def send_as(broker: Broker, client_id: str, api_key: int, version: int, body: Any) -> Any:
    frame = memoryview(encode_request(api_key, version, 7, client_id, body))[4:]
    outcome = await handle_frame(broker, frame, "/127.0.0.1", connection())
    if outcome.pending is not None:
        outcome = await outcome.pending()
    assert outcome.response is not None
    return decode_response(api_key, version, memoryview(frame_bytes(outcome.response))[4:])[1]


async def test_a_user_quota_follows_the_sessions_principal(broker: Broker) -> None:
    set_quota(broker, {"user": "alice"}, "producer_byte_rate", 1000)
    alice = await send(broker, connection("alice"), ApiKey.PRODUCE, 9, produce_body(30))
    bob = await send(broker, connection("bob"), ApiKey.PRODUCE, 9, produce_body(30))
    assert alice.throttle_time_ms > 0
    assert bob.throttle_time_ms == 0


async def test_an_acks_zero_produce_is_throttled_without_a_response(broker: Broker) -> None:
    set_quota(broker, {"client-id": CLIENT_ID}, "producer_byte_rate", 1000)
    conn = connection()
    assert await send(broker, conn, ApiKey.PRODUCE, 9, produce_body(30, acks=0)) is None
    assert conn.throttled_until_s > time.monotonic()


async def test_a_throttled_fetch_answers_no_records_and_is_not_counted(broker: Broker) -> None:
    await send(broker, connection(), ApiKey.PRODUCE, 9, produce_body(30))
    set_quota(broker, {"client-id": CLIENT_ID}, "consumer_byte_rate", 2000)
    conn = connection()
    # max_bytes is held to 10 windows of the quota (20 kB); the first batch (30 kB)
    # is returned whole all the same (KIP-74), and that is over the quota.
    throttled = await send(broker, conn, ApiKey.FETCH, 12, fetch_body())
    assert throttled.throttle_time_ms > 0
    assert throttled.responses == []
    assert conn.throttled_until_s > time.monotonic()
    assert broker.quotas.throttled_total["fetch"] == 1
    # Nothing was counted for it: raised, the quota lets the same fetch through.
    set_quota(broker, {"client-id": CLIENT_ID}, "consumer_byte_rate", 4000)
    fetched = await send(broker, connection(), ApiKey.FETCH, 12, fetch_body())
    assert fetched.throttle_time_ms == 0
    assert len(fetched.responses[0].partitions[0].records) > 30_000


async def test_a_fetch_is_held_to_its_quota_window(broker: Broker) -> None:
    for _ in range(3):
        await send(broker, connection(), ApiKey.PRODUCE, 9, produce_body(5))
    set_quota(broker, {"client-id": CLIENT_ID}, "consumer_byte_rate", 1000)
    # 10 kB in the window: the first 5 kB batch, not the second.
    fetched = await send(broker, connection(), ApiKey.FETCH, 12, fetch_body())
    records = fetched.responses[0].partitions[0].records
    assert 5_000 < len(records) < 10_000


async def test_request_percentage_throttles_any_request_at_most_one_window(
    broker: Broker,
) -> None:
    set_quota(broker, {"client-id": CLIENT_ID}, "request_percentage", 1e-9)
    conn = connection()
    response = await send(broker, conn, ApiKey.METADATA, 12, {"topics": None})
    assert 0 < response.throttle_time_ms <= 1000
    assert broker.quotas.throttled_total["request"] == 1


async def test_removing_the_quota_ends_throttling(broker: Broker) -> None:
    set_quota(broker, {"client-id": CLIENT_ID}, "producer_byte_rate", 1000)
    throttled = await send(broker, connection(), ApiKey.PRODUCE, 9, produce_body(30))
    assert throttled.throttle_time_ms > 0
    set_quota(broker, {"client-id": CLIENT_ID}, "producer_byte_rate", None)
    after = await send(broker, connection(), ApiKey.PRODUCE, 9, produce_body(30))
    assert after.throttle_time_ms == 0
    assert not broker.quotas.enabled()


def create_topics_body(*topics: tuple[str, int]) -> dict[str, Any]:
    return {
        "topics": [
            {"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [],
             "configs": []}
            for name, count in topics
        ],
        "timeout_ms": 5000,
        "validate_only": False,
    }  # fmt: skip


async def test_a_strict_mutation_quota_refuses_topics_once_exhausted(broker: Broker) -> None:
    # 2 partitions/s: a bucket of 22; the first 30 overdraw it to -8 (4 s to refill).
    set_quota(broker, {"client-id": CLIENT_ID}, "controller_mutation_rate", 2)
    conn = connection()
    body = create_topics_body(("first", 30), ("second", 1))
    response = await send(broker, conn, ApiKey.CREATE_TOPICS, 7, body)
    errors = {t.name: (t.error_code, t.error_message) for t in response.topics}
    assert errors == {
        "first": (0, None),
        "second": (89, "The throttling quota has been exceeded."),
    }
    assert 3900 < response.throttle_time_ms <= 4000
    assert broker.controller.topic("second") is None
    assert conn.throttled_until_s > time.monotonic() + 3
    assert broker.quotas.throttled_total["controller_mutation"] == 1


async def test_before_create_topics_v6_a_mutation_quota_only_throttles(broker: Broker) -> None:
    set_quota(broker, {"client-id": CLIENT_ID}, "controller_mutation_rate", 2)
    body = create_topics_body(("first", 30), ("second", 1))
    response = await send(broker, connection(), ApiKey.CREATE_TOPICS, 5, body)
    assert [t.error_code for t in response.topics] == [0, 0]
    # -9 tokens: 4.5 s.
    assert 4400 < response.throttle_time_ms <= 4500


async def test_deleting_topics_is_charged_their_partitions(broker: Broker) -> None:
    broker.create_topic(broker.controller.plan_topic("wide", 30, 1))
    set_quota(broker, {"client-id": CLIENT_ID}, "controller_mutation_rate", 2)
    body = {"topic_names": ["wide", "orders"], "timeout_ms": 5000}
    response = await send(broker, connection(), ApiKey.DELETE_TOPICS, 5, body)
    errors = {r.name: r.error_code for r in response.responses}
    assert errors == {"wide": 0, "orders": 89}
