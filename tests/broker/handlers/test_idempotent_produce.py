"""InitProducerId and idempotent Produce through the handlers, on a real Broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.handlers.produce import handle_produce
from weir.broker.handlers.producer_ids import handle_init_producer_id
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
    broker.create_topic(broker.controller.plan_topic("t", 1, 1))
    yield broker
    broker.close()


async def init_producer_id(
    broker: Broker, version: int = 4, transactional_id: str | None = None
) -> Any:
    body = {"transactional_id": transactional_id, "transaction_timeout_ms": 60_000}
    return await call(broker, handle_init_producer_id, ApiKey.INIT_PRODUCER_ID, version, body)


async def produce(broker: Broker, producer_id: int, epoch: int, sequence: int) -> Any:
    records = build_batch(
        [(b"k", f"v{sequence}".encode(), [])],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }
    response = await call(broker, handle_produce, ApiKey.PRODUCE, 9, body)
    return response.responses[0].partition_responses[0]


@pytest.mark.parametrize("version", range(0, 5))
async def test_init_producer_id_hands_out_distinct_ids_with_epoch_zero(
    broker: Broker, version: int
) -> None:
    first = await init_producer_id(broker, version)
    second = await init_producer_id(broker, version)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
    assert first.producer_id >= 0 and second.producer_id == first.producer_id + 1


async def test_retried_produce_gets_the_first_offset_and_is_stored_once(broker: Broker) -> None:
    producer = await init_producer_id(broker)
    assert (await produce(broker, producer.producer_id, 0, 0)).base_offset == 0
    assert (await produce(broker, producer.producer_id, 0, 1)).base_offset == 1
    retry = await produce(broker, producer.producer_id, 0, 0)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 0)
    replica = broker.partition("t", 0)
    assert replica is not None and replica.log.log_end_offset == 2
    assert broker.metrics.produced_duplicate_batches_total == 1


async def test_produce_out_of_sequence_is_refused(broker: Broker) -> None:
    producer = await init_producer_id(broker)
    await produce(broker, producer.producer_id, 0, 0)
    gap = await produce(broker, producer.producer_id, 0, 2)
    assert (gap.error_code, gap.base_offset) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)


async def produce_raw(broker: Broker, records: bytes) -> Any:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }
    response = await call(broker, handle_produce, ApiKey.PRODUCE, 9, body)
    return response.responses[0].partition_responses[0]


@pytest.mark.parametrize("offset_from_next", [0, 1, 10**6])
async def test_a_producer_id_the_broker_never_issued_is_refused(
    broker: Broker, offset_from_next: int
) -> None:
    issued = await init_producer_id(broker)
    never_issued = broker.controller.metadata.next_producer_id + offset_from_next
    refused = await produce(broker, never_issued, 0, 0)
    assert (refused.error_code, refused.base_offset) == (ErrorCode.UNKNOWN_PRODUCER_ID, -1)
    assert str(never_issued) in refused.error_message
    negative = await produce(broker, -7, 0, 0)
    assert negative.error_code == ErrorCode.UNKNOWN_PRODUCER_ID
    # A batch whose CRC fails is answered as corrupt, whatever its producer id says.
    corrupt = bytearray(build_batch([(b"k", b"v", [])], producer_id=never_issued, producer_epoch=0))
    corrupt[-1] ^= 0xFF
    assert (await produce_raw(broker, bytes(corrupt))).error_code == ErrorCode.CORRUPT_MESSAGE
    replica = broker.partition("t", 0)
    assert replica is not None and replica.log.log_end_offset == 0
    accepted = await produce(broker, issued.producer_id, 0, 0)
    assert (accepted.error_code, accepted.base_offset) == (ErrorCode.NONE, 0)
