"""Acknowledged writes survive a clean restart and a crash (SIGKILL) of the real broker."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from compat_tests.harness import WeirProcess, create_topic

TIMEOUT_S = 20.0
CRASH_PRODUCER = Path(__file__).with_name("crash_producer.py")


def read_everything(
    bootstrap: str, topic: str, partitions: int
) -> dict[tuple[int, int], tuple[bytes | None, bytes | None]]:
    """Every stored record, read from the beginning to the high watermark of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compat-unused-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
        }
    )
    try:
        high = {}
        for partition in range(partitions):
            low, high[partition] = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=TIMEOUT_S
            )
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        expected = sum(high.values())
        records: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
        deadline = time.monotonic() + 60
        while len(records) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.25)
            if msg is None:
                continue
            assert msg.error() is None, f"consumer error: {msg.error()!r}"
            records[(msg.partition(), msg.offset())] = (msg.key(), msg.value())
        assert len(records) == expected, (
            f"read {len(records)} records but the high watermarks {high} promise {expected}"
        )
        return records
    finally:
        consumer.close()


def test_acknowledged_messages_survive_sigterm_and_restart(
    own_broker: WeirProcess, topic: str
) -> None:
    create_topic(own_broker.bootstrap, topic, partitions=3)
    delivered: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(3000):
        producer.produce(
            topic,
            key=f"key-{i % 97}".encode(),
            value=f"value-{i}".encode(),
            on_delivery=on_delivery,
        )
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []
    assert len(delivered) == 3000

    exit_code = own_broker.stop()
    assert exit_code == 0, f"weir exited with {exit_code} on SIGTERM\n{own_broker.stderr_text()}"
    own_broker.restart()

    stored = read_everything(own_broker.bootstrap, topic, 3)
    assert stored == delivered

    # Offsets continue after the restart.
    next_offsets: list[tuple[int, int]] = []
    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "acks": "all"})
    producer.produce(
        topic,
        value=b"after-restart",
        partition=0,
        on_delivery=lambda err, msg: next_offsets.append((msg.partition(), msg.offset())),
    )
    assert producer.flush(TIMEOUT_S) == 0
    end_of_partition_0 = max(offset for (p, offset) in delivered if p == 0) + 1
    assert next_offsets == [(0, end_of_partition_0)]


def read_acks(path: Path) -> dict[tuple[int, int], int]:
    acks: dict[tuple[int, int], int] = {}
    for line in path.read_text().split("\n")[:-1]:  # the last piece may be torn
        partition, offset, seq = (int(field) for field in line.split())
        assert (partition, offset) not in acks, f"offset acknowledged twice: {line}"
        acks[(partition, offset)] = seq
    return acks


def wait_for_acks(
    path: Path, count: int, producer: subprocess.Popen[bytes], timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        assert producer.poll() is None, "the producer process exited early"
        time.sleep(0.05)  # polling another process's output file
    raise AssertionError(f"fewer than {count} acknowledgements after {timeout_s}s")


def test_acknowledged_messages_survive_sigkill_mid_stream(
    own_broker: WeirProcess, topic: str, tmp_path: Path
) -> None:
    create_topic(own_broker.bootstrap, topic, partitions=3)
    ack_file = tmp_path / "acks.txt"
    producer_log = tmp_path / "producer.stderr"
    with open(producer_log, "wb") as log:
        producer = subprocess.Popen(
            [
                sys.executable,
                str(CRASH_PRODUCER),
                own_broker.bootstrap,
                topic,
                str(ack_file),
                "10000000",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    try:
        wait_for_acks(ack_file, 5000, producer, timeout_s=60)
        own_broker.kill()  # SIGKILL while the producer is still sending
        time.sleep(0.5)  # the producer keeps sending into the dead broker for a while
        assert producer.poll() is None, "the producer process exited early"
    finally:
        producer.send_signal(signal.SIGKILL)
        producer.wait()

    acked = read_acks(ack_file)
    assert len(acked) >= 5000
    own_broker.start()
    stored = read_everything(own_broker.bootstrap, topic, 3)

    missing = sorted(position for position in acked if position not in stored)
    wrong = sorted(
        position
        for position, seq in acked.items()
        if position in stored
        and stored[position] != (f"key-{seq}".encode(), f"value-{seq}".encode())
    )
    assert missing == [], f"{len(missing)} acknowledged records lost, first: {missing[:10]}"
    assert wrong == [], f"{len(wrong)} acknowledged offsets hold other records, first: {wrong[:10]}"


def test_restart_after_sigkill_when_idle_keeps_everything(
    own_broker: WeirProcess, topic: str
) -> None:
    create_topic(own_broker.bootstrap, topic)
    delivered: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "acks": "1", "linger.ms": 5})
    for i in range(500):
        producer.produce(
            topic, key=b"k%d" % i, value=b"v%d" % i, partition=0, on_delivery=on_delivery
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []
    assert sorted(delivered) == [(0, i) for i in range(500)]
    own_broker.kill()
    own_broker.start()
    assert read_everything(own_broker.bootstrap, topic, 1) == delivered
