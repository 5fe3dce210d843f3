"""Topic changes happen completely or not at all, on disk and in the metadata,
and names Kafka allows (249 characters) work for every operation."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.conftest import _attach
from compat_tests.harness import WeirProcess

TIMEOUT_S = 20.0


def admin(broker: WeirProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(broker: WeirProcess, name: str, partitions: int = 1) -> KafkaError | None:
    client = admin(broker)  # kept alive until the answer arrives
    return answer(client.create_topics([NewTopic(name, partitions, 1)])[name])


def delete(broker: WeirProcess, name: str) -> KafkaError | None:
    client = admin(broker)
    return answer(client.delete_topics([name], operation_timeout=TIMEOUT_S)[name])


def answer(future: Future[None]) -> KafkaError | None:
    try:
        future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return None


def topic_names(broker: WeirProcess) -> set[str]:
    return set(admin(broker).list_topics(timeout=TIMEOUT_S).topics)


def produce_one(broker: WeirProcess, topic: str) -> int:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    offsets: list[int] = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: offsets.append(msg.offset()))
    assert producer.flush(TIMEOUT_S) == 0 and len(offsets) == 1
    return offsets[0]


def test_a_249_character_topic_name_works_for_every_operation(own_broker: WeirProcess) -> None:
    name = ("long-" + uuid.uuid4().hex).ljust(249, "x")
    assert len(name) == 249
    assert create(own_broker, name, 3) is None
    assert produce_one(own_broker, name) == 0
    assert delete(own_broker, name) is None
    assert name not in topic_names(own_broker)
    own_broker.stop()
    own_broker.start()
    assert name not in topic_names(own_broker), "a deleted topic came back after restart"
    assert create(own_broker, name, 3) is None
    assert produce_one(own_broker, name) == 0, "old records of the deleted topic came back"
    assert not [p for p in own_broker.data_dir.iterdir() if p.name.endswith(".deleted")]


@pytest.fixture
def small_disk_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WeirProcess]:
    """A broker whose data dir is a 24 MiB tmpfs (root only: skipped otherwise)."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount_point)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill: {mounted.stderr.strip()}")
    proc = WeirProcess(mount_point / "data", tmp_path / "logs")
    _attach(request, proc)
    try:
        proc.start()
        yield proc
    finally:
        proc.close()
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill_disk(directory: Path) -> Path:
    filler = directory / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass
    return filler


def test_create_and_delete_on_a_full_disk_change_nothing_and_say_so(
    small_disk_broker: WeirProcess,
) -> None:
    broker = small_disk_broker
    kept = f"kept-{uuid.uuid4().hex[:8]}"
    assert create(broker, kept, 2) is None
    filler = fill_disk(broker.data_dir)
    failed_name = f"never-{uuid.uuid4().hex[:8]}"

    error = create(broker, failed_name, 50)
    assert error is not None and error.code() == KafkaError.KAFKA_STORAGE_ERROR, error
    assert failed_name not in topic_names(broker)
    assert not list(broker.data_dir.glob(f"{failed_name}-*"))
    error = delete(broker, kept)
    assert error is not None and error.code() == KafkaError.KAFKA_STORAGE_ERROR, error
    assert kept in topic_names(broker), "a failed delete took the topic away"

    os.unlink(filler)
    broker.stop()
    broker.start()
    assert kept in topic_names(broker) and failed_name not in topic_names(broker)
    assert produce_one(broker, kept) == 0
    assert delete(broker, kept) is None
    assert kept not in topic_names(broker)
