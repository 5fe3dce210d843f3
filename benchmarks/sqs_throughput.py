"""The SQS-compatible API (docs/http-sqs.md) with boto3, against the Kafka protocol
moving the same messages, in one run against one `weir serve` of this tree: messages/s
and the broker's CPU per message (user + system time of the broker process).

    PYTHONPATH=. .venv/bin/python benchmarks/sqs_throughput.py --messages 2000 --rounds 2

Each round, per mode, --messages messages of --value-bytes go through their own queue
(or topic, for the Kafka modes: a 1-partition topic, as a queue is), --clients threads
of boto3 clients (each its own HTTP keep-alive connection) sharing the work:

- `send`: SendMessage, one message per call;
- `send-batch`: SendMessageBatch, ten per call;
- `receive-delete`: ReceiveMessage (up to ten, no wait) then DeleteMessageBatch, until
  the queue filled by `send-batch` is empty;
- `kafka-produce`: confluent-kafka's Producer (acks=all, librdkafka's batching), the
  Kafka path for sending;
- `kafka-share`: confluent-kafka ShareConsumers (--clients of them, one share group,
  every record acknowledged ACCEPT explicitly), the Kafka path for receiving and
  deleting the same messages.

The client runs on the same 2-core machine; its CPU is not counted.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from confluent_kafka import KafkaError, Producer, ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from benchmarks.rest_produce import Broker, measure

BATCH = 10
DRAIN_IDLE_S = 3.0


def sqs_client(broker: Broker) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=f"http://127.0.0.1:{broker.http_port}",
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(retries={"max_attempts": 0}, max_pool_connections=1),
    )


def in_threads(count: int, work: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def send(broker: Broker, url: str, count: int, body: str, clients: int) -> None:
    def work(index: int) -> None:
        client = sqs_client(broker)
        for _ in range(shares(count, clients)[index]):
            client.send_message(QueueUrl=url, MessageBody=body)

    in_threads(clients, work)


def send_batch(broker: Broker, url: str, count: int, body: str, clients: int) -> None:
    def work(index: int) -> None:
        client = sqs_client(broker)
        left = shares(count, clients)[index]
        while left > 0:
            size = min(BATCH, left)
            entries = [{"Id": str(i), "MessageBody": body} for i in range(size)]
            response = client.send_message_batch(QueueUrl=url, Entries=entries)
            assert not response.get("Failed"), response
            left -= size

    in_threads(clients, work)


def receive_delete(broker: Broker, url: str, count: int, clients: int) -> None:
    done = [0]
    lock = threading.Lock()

    def work(_index: int) -> None:
        client = sqs_client(broker)
        idle_since = time.monotonic()
        while done[0] < count and time.monotonic() - idle_since < DRAIN_IDLE_S:
            messages = client.receive_message(QueueUrl=url, MaxNumberOfMessages=BATCH).get(
                "Messages", []
            )
            if not messages:
                continue
            idle_since = time.monotonic()
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
            ]
            response = client.delete_message_batch(QueueUrl=url, Entries=entries)
            assert not response.get("Failed"), response
            with lock:
                done[0] += len(messages)

    in_threads(clients, work)
    assert done[0] >= count, f"drained {done[0]} of {count}"


def kafka_produce(broker: Broker, topic: str, count: int, body: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=body.encode())
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(60) == 0


def set_share_reset_earliest(broker: Broker, group: str) -> None:
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    broker.admin.incremental_alter_configs([resource])[resource].result(timeout=10)


def kafka_share(broker: Broker, topic: str, count: int, clients: int) -> None:
    group = f"{topic}-share"
    set_share_reset_earliest(broker, group)
    done = [0]
    lock = threading.Lock()

    def work(_index: int) -> None:
        consumer = ShareConsumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "share.acknowledgement.mode": "explicit",
            }
        )
        consumer.subscribe([topic])
        idle_since = time.monotonic()
        try:
            while done[0] < count and time.monotonic() - idle_since < DRAIN_IDLE_S + 5:
                messages = [m for m in consumer.poll(0.5) if m.error() is None]
                if not messages:
                    continue
                idle_since = time.monotonic()
                for message in messages:
                    consumer.acknowledge(message)
                consumer.commit_sync(10.0)
                with lock:
                    done[0] += len(messages)
        finally:
            consumer.close()

    in_threads(clients, work)
    assert done[0] >= count, f"drained {done[0]} of {count} ({KafkaError.__name__})"


MODES = ("send", "send-batch", "receive-delete", "kafka-produce", "kafka-share")


def round_runs(
    broker: Broker, sqs: Any, round_index: int, count: int, body: str, clients: int
) -> dict[str, Callable[[], None]]:
    """One round's modes, in MODES order, each on its own queues or topic."""
    topic = broker.topic(f"bench-kafka-{round_index}")
    single = sqs.create_queue(QueueName=f"bench-{round_index}-single")["QueueUrl"]
    batched = sqs.create_queue(QueueName=f"bench-{round_index}-batched")["QueueUrl"]
    return {
        "send": lambda: send(broker, single, count, body, clients),
        "send-batch": lambda: send_batch(broker, batched, count, body, clients),
        "receive-delete": lambda: receive_delete(broker, batched, count, clients),
        "kafka-produce": lambda: kafka_produce(broker, topic, count, body),
        "kafka-share": lambda: kafka_share(broker, topic, count, clients),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    body = "m" * args.value_bytes
    count, clients = args.messages, args.clients
    broker = Broker()
    sqs = sqs_client(broker)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in MODES}
    try:
        for round_index in range(args.rounds):
            runs = round_runs(broker, sqs, round_index, count, body, clients)
            for name, run in runs.items():
                rate, cpu_us = measure(broker, run, count)
                results[name].append((rate, cpu_us))
                print(f"round {round_index + 1} {name:15} {rate:9.0f} messages/s  "
                      f"broker CPU {cpu_us:8.1f} µs/message", flush=True)  # fmt: skip
    finally:
        broker.stop()
    print(f"\nmedians ({count} messages of {args.value_bytes} B, {clients} clients, "
          f"{args.rounds} rounds):")  # fmt: skip
    for name, rows in results.items():
        rate = statistics.median(r for r, _ in rows)
        cpu_us = statistics.median(c for _, c in rows)
        print(f"  {name:15} {rate:9.0f} messages/s  broker CPU {cpu_us:8.1f} µs/message")


if __name__ == "__main__":
    main()
