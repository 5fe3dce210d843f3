"""Produce refusals that clients see per partition."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.handlers.produce import handle_produce
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.wire.protocol import (
    ApiKey,
)

from ..handler_calls import call


@pytest.fixture
async def broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    await nursery.start(broker.flusher.run)
    yield broker
    broker.close()


async def produce(broker: Broker, topic: str) -> Any:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v", [])])}],
            }
        ],
    }
    response = await call(broker, handle_produce, ApiKey.PRODUCE, 9, body)
    return response.responses[0].partition_responses[0]


async def test_clients_cannot_append_to_an_internal_topic(broker: Broker) -> None:
    record = broker.controller.plan_topic("__consumer_offsets", 1, 1, internal=True)
    broker.create_topic(record)
    refused = await produce(broker, "__consumer_offsets")
    assert refused.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    replica = broker.partition("__consumer_offsets", 0)
    assert replica is not None and replica.log.log_end_offset == 0


async def test_clients_cannot_append_to_a_client_made_topic_of_an_internal_name(
    broker: Broker,
) -> None:
    # As an older Weir let a client create it: not marked internal.
    record = TopicRecord(name="__consumer_offsets", topic_id=uuid.uuid4(), partition_count=1)
    broker.create_topic(record)
    refused = await produce(broker, "__consumer_offsets")
    assert refused.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert refused.error_message == "Cannot append to internal topic __consumer_offsets"
    replica = broker.partition("__consumer_offsets", 0)
    assert replica is not None and replica.log.log_end_offset == 0


async def test_producing_to_a_missing_internal_topic_is_refused_as_internal(
    broker: Broker,
) -> None:
    refused = await produce(broker, "__transaction_state")
    assert refused.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert broker.controller.topic("__transaction_state") is None


async def test_a_transactional_batch_is_refused_while_transactions_are_not_served(
    broker: Broker,
) -> None:
    broker.create_topic(broker.controller.plan_topic("orders", 1, 1))
    producer_id = broker.producer_ids.next_producer_id()  # an id the broker issued
    batch = build_batch(
        [(b"k", b"v", [])],
        producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True,
    )  # fmt: skip
    refused = await produce_records_raw(broker, "orders", batch)
    assert refused.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert "transactional" in refused.error_message
    replica = broker.partition("orders", 0)
    assert replica is not None and replica.log.log_end_offset == 0


async def test_ordinary_topic_accepts_the_same_append(broker: Broker) -> None:
    broker.create_topic(broker.controller.plan_topic("orders", 1, 1))
    accepted = await produce(broker, "orders")
    assert (accepted.error_code, accepted.base_offset) == (ErrorCode.NONE, 0)


async def produce_records(broker: Broker, topic: str, records: list[Any]) -> Any:
    return await produce_records_raw(broker, topic, build_batch(records))


@pytest.mark.parametrize("compression", [0, 1, 4])
async def test_compacted_topic_refuses_records_without_a_key(
    broker: Broker, compression: int
) -> None:
    record = broker.controller.plan_topic("compacted", 1, 1, configs={"cleanup.policy": "compact"})
    broker.create_topic(record)
    body_records = [(b"k", b"v", []), (None, b"keyless", [])]
    frame_records = build_batch(body_records, compression=compression)
    refused = await produce_records_raw(broker, "compacted", frame_records)
    assert refused.error_code == ErrorCode.INVALID_RECORD
    accepted = await produce_records(broker, "compacted", [(b"k", b"v", [])])
    assert accepted.error_code == ErrorCode.NONE


async def produce_records_raw(broker: Broker, topic: str, batch: bytes) -> Any:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    response = await call(broker, handle_produce, ApiKey.PRODUCE, 9, body)
    return response.responses[0].partition_responses[0]
