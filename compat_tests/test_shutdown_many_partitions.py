"""SIGTERM with 5,000 partitions: the broker exits within the documented 10 s,
honours a shorter `shutdown_timeout_ms` (logs it could not close in time are
recovered at the next start), and comes back with every record.

About 35 s: creating 5,000 partition directories and closing them cleanly costs
a few fsyncs each."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.harness import WeirProcess, unique_topic_name

TOPICS_COUNT = 5
PARTITIONS_PER_TOPIC = 1000  # the per-topic maximum
DOCUMENTED_STOP_S = 10.0
SHORT_SHUTDOWN_TIMEOUT_MS = 2000


def write_config(path: Path, shutdown_timeout_ms: int | None) -> None:
    path.write_text(
        "" if shutdown_timeout_ms is None else f"shutdown_timeout_ms = {shutdown_timeout_ms}\n"
    )


def create_topics(broker: WeirProcess, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=PARTITIONS_PER_TOPIC) for name in names],
        request_timeout=120,
    )
    for future in futures.values():
        future.result(timeout=120)


def produce_some(broker: WeirProcess, names: list[str]) -> dict[tuple[str, int], bytes]:
    """One record in every 50th partition of each topic."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    expected = {}
    for name in names:
        for index in range(0, PARTITIONS_PER_TOPIC, 50):
            value = f"{name}/{index}".encode()
            producer.produce(name, value, partition=index)
            expected[(name, index)] = value
    assert producer.flush(60) == 0
    return expected


def read_back(broker: WeirProcess, expected: dict[tuple[str, int], bytes]) -> dict:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_topic_name("many"),
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(name, index, 0) for name, index in expected])
        found: dict[tuple[str, int], bytes] = {}
        deadline = time.monotonic() + 30
        while len(found) < len(expected) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                found[(message.topic(), message.partition())] = message.value() or b""
        return found
    finally:
        consumer.close()


def timed_stop(broker: WeirProcess, limit_s: float) -> float:
    started = time.monotonic()
    assert broker.stop(timeout_s=limit_s) == 0
    return time.monotonic() - started


def test_broker_with_5000_partitions_stops_in_time_and_restarts_with_its_data(
    tmp_path: Path,
) -> None:
    config = tmp_path / "weir.toml"
    write_config(config, None)
    broker = WeirProcess(tmp_path / "data", tmp_path / "logs", extra_args=("--config", str(config)))
    try:
        broker.start()
        names = [unique_topic_name(f"many{i}") for i in range(TOPICS_COUNT)]
        create_topics(broker, names)
        expected = produce_some(broker, names)

        default_stop_s = timed_stop(broker, DOCUMENTED_STOP_S)
        assert "shutdown complete" in broker.stderr_text()
        write_config(config, SHORT_SHUTDOWN_TIMEOUT_MS)
        broker.start(ready_timeout_s=90)
        assert read_back(broker, expected) == expected

        short_stop_s = timed_stop(broker, SHORT_SHUTDOWN_TIMEOUT_MS / 1000 + 1.5)
        broker.start(ready_timeout_s=90)
        assert read_back(broker, expected) == expected
        print(f"stopped in {default_stop_s:.1f} s (default), {short_stop_s:.1f} s (2 s timeout)")
    finally:
        broker.close()
