"""aiokafka (asyncio client) against the real `weir serve` process.

The tests are plain functions running asyncio.run(): pytest runs async tests with
Trio in this project (trio_mode), and aiokafka needs asyncio.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from compat_tests.harness import WeirProcess, create_topic

TIMEOUT_S = 20.0


async def produce(
    bootstrap: str, topic: str, messages: list[tuple[bytes, bytes, list]], **config: Any
) -> list[tuple[int, int]]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, **config
    )
    await producer.start()
    try:
        futures = [
            await producer.send(topic, value=value, key=key, headers=headers, partition=0)
            for key, value, headers in messages
        ]
        metadata = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
    finally:
        await producer.stop()
    return [(m.partition, m.offset) for m in metadata]


async def consume(bootstrap: str, topic: str, count: int, *, start: int | None = None) -> list[Any]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        if start is None:
            await consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
        records: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(records) < count and time.monotonic() < deadline:
            batch = await consumer.getmany(tp, timeout_ms=250)
            records.extend(batch.get(tp, []))
        return records
    finally:
        await consumer.stop()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_then_consume_with_assign_round_trips(
    broker: WeirProcess, topic: str, codec: str | None
) -> None:
    create_topic(broker.bootstrap, topic)
    messages = [
        (
            f"key-{i}".encode(),
            f"aiokafka {codec} {i}".encode() * (i % 5 + 1),
            [("i", str(i).encode())],
        )
        for i in range(30)
    ]
    acked = asyncio.run(
        produce(broker.bootstrap, topic, messages, compression_type=codec, linger_ms=20)
    )
    assert acked == [(0, i) for i in range(30)]

    records = asyncio.run(consume(broker.bootstrap, topic, 30))
    assert [(r.offset, r.key, r.value, list(r.headers)) for r in records] == [
        (i, key, value, headers) for i, (key, value, headers) in enumerate(messages)
    ]


def test_consume_from_offset_and_positions(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic)
    messages = [(b"k", f"v{i}".encode(), []) for i in range(8)]
    assert asyncio.run(produce(broker.bootstrap, topic, messages)) == [(0, i) for i in range(8)]

    records = asyncio.run(consume(broker.bootstrap, topic, 3, start=5))
    assert [(r.offset, r.value) for r in records] == [(5, b"v5"), (6, b"v6"), (7, b"v7")]

    async def ends() -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            return await consumer.beginning_offsets([tp]), await consumer.end_offsets([tp])
        finally:
            await consumer.stop()

    beginning, end = asyncio.run(ends())
    assert beginning == {TopicPartition(topic, 0): 0}
    assert end == {TopicPartition(topic, 0): 8}
