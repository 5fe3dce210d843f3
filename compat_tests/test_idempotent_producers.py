"""Idempotent producers (InitProducerId, sequence numbers) with real clients.

The strongest check: a confluent-kafka producer with enable.idempotence keeps
sending while the broker is SIGKILLed and restarted; afterwards every message is
in the log exactly once and in the order it was produced, although the
producer retried requests whose batches were already stored.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable

import aiokafka
from confluent_kafka import KafkaError, Message, Producer

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.test_durability import read_everything

TIMEOUT_S = 30.0


def idempotent_producer(bootstrap: str, **config: object) -> Producer:
    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": 60_000,
        "reconnect.backoff.max.ms": 200,
    }
    settings.update(config)
    return Producer(settings)


def values_by_partition(
    stored: dict[tuple[int, int], tuple[bytes | None, bytes | None]],
) -> dict[int, list[bytes]]:
    ordered: dict[int, list[bytes]] = {}
    for (partition, _offset), (_key, value) in sorted(stored.items()):
        assert value is not None
        ordered.setdefault(partition, []).append(value)
    return ordered


def sequence_numbers(values: list[bytes]) -> list[int]:
    return [int(value.split(b"-")[1]) for value in values]


def test_confluent_idempotent_producer_stores_every_message_once_in_order(
    broker: WeirProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=3)
    errors: list[KafkaError] = []
    producer = idempotent_producer(broker.bootstrap)
    for i in range(3000):
        producer.produce(
            topic, value=f"v-{i}".encode(), partition=i % 3,
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )  # fmt: skip
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []
    by_partition = values_by_partition(read_everything(broker.bootstrap, topic, 3))
    for partition in range(3):
        assert sequence_numbers(by_partition[partition]) == list(range(partition, 3000, 3))


def test_confluent_idempotent_producer_through_broker_crash_has_no_duplicates_or_gaps(
    own_broker: WeirProcess, topic: str
) -> None:
    create_topic(own_broker.bootstrap, topic, partitions=2)
    total = 20_000
    delivered: list[Message] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg)

    producer = idempotent_producer(
        own_broker.bootstrap, **{"batch.num.messages": 200, "on_delivery": on_delivery}
    )
    stop_polling = threading.Event()

    def poll_loop() -> None:
        while not stop_polling.is_set():
            producer.poll(0.05)

    poller = threading.Thread(target=poll_loop, daemon=True)
    poller.start()
    try:
        for i in range(total):
            producer.produce(topic, value=f"v-{i}".encode(), partition=i % 2)
            if i == total // 3:
                _wait_until(lambda: len(delivered) > 1000, "first deliveries")
                own_broker.kill()
                own_broker.start()
        assert producer.flush(TIMEOUT_S * 2) == 0
    finally:
        stop_polling.set()
        poller.join()
    assert errors == []
    by_partition = values_by_partition(read_everything(own_broker.bootstrap, topic, 2))
    for partition in range(2):
        sequences = sequence_numbers(by_partition[partition])
        duplicated = [seq for seq, n in Counter(sequences).items() if n > 1]
        assert duplicated == [], f"partition {partition}: stored twice: {duplicated[:10]}"
        assert sequences == list(range(partition, total, 2))


def _wait_until(condition: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)  # polling another process


def test_aiokafka_idempotent_producer_round_trips(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, partitions=1)

    async def produce() -> list[int]:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all"
        )
        await producer.start()
        try:
            return [
                (await producer.send_and_wait(topic, f"v-{i}".encode(), partition=0)).offset
                for i in range(50)
            ]
        finally:
            await producer.stop()

    assert asyncio.run(produce()) == list(range(50))
    stored = read_everything(broker.bootstrap, topic, 1)
    assert sequence_numbers(values_by_partition(stored)[0]) == list(range(50))
