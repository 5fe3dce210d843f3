"""Damage on disk never deletes intact data or reuses an offset (the real broker).

Each test writes acknowledged records through confluent-kafka, damages the
stopped broker's files the way an operator, a bad disk or a careless script
would, and starts it again: the damaged partition goes offline untouched while
the rest serve, and `weir repair` brings it back with every intact record at
its original offset and new records above every old offset.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from compat_tests.harness import WeirProcess, create_topic, weir_executable

TIMEOUT_S = 20.0
RECORDS = 6000
VALUE_BYTES = 200
SEGMENT_BYTES = 200_000  # about seven segments of RECORDS


def produce(bootstrap: str, topic: str, partition: int, count: int, tag: str) -> list[int]:
    """Acknowledged offsets of `count` records `tag-i` (acks=all)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 32768}
    )
    offsets: list[int] = []

    def delivered(err: KafkaError | None, msg: object) -> None:
        assert err is None, err
        offsets.append(msg.offset())  # type: ignore[attr-defined]

    for i in range(count):
        value = f"{tag}-{i}-".encode().ljust(VALUE_BYTES, b"x")
        producer.produce(topic, value, partition=partition, on_delivery=delivered)
        if i % 1000 == 999:
            producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert len(offsets) == count
    return offsets


def read_partition(bootstrap: str, topic: str, partition: int) -> dict[int, bytes]:
    """offset -> value of everything up to the high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"damage-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }  # fmt: skip
    )
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=TIMEOUT_S
        )
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        records: dict[int, bytes] = {}
        last = low - 1
        while last < high - 1:
            msg = consumer.poll(TIMEOUT_S)
            assert msg is not None, f"nothing after offset {last} (high watermark {high})"
            assert msg.error() is None, msg.error()
            records[msg.offset()] = msg.value()
            last = msg.offset()
        return records
    finally:
        consumer.close()


def partition_state(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (leader, metadata error code)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic]
    return {
        index: (p.leader, p.error.code() if p.error is not None else 0)
        for index, p in described.partitions.items()
    }


def segment_logs(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def run_repair(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [weir_executable(), "repair", "--data-dir", str(data_dir), *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def setup_damaged_topic(broker: WeirProcess) -> tuple[str, dict[int, bytes], dict[int, bytes]]:
    """A 2-partition topic with many segments in partition 0; returns (topic,
    partition 0's records, partition 1's records) as acknowledged."""
    topic = f"damage-{uuid.uuid4().hex[:8]}"
    create_topic(
        broker.bootstrap, topic, partitions=2, config={"segment.bytes": str(SEGMENT_BYTES)}
    )
    produce(broker.bootstrap, topic, 0, RECORDS, "p0")
    produce(broker.bootstrap, topic, 1, 50, "p1")
    return (
        topic,
        read_partition(broker.bootstrap, topic, 0),
        read_partition(broker.bootstrap, topic, 1),
    )


def truncate_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def flip_bytes_and_delete_index(path: Path) -> None:
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size // 2)
        data = f.read(16)
        f.seek(path.stat().st_size // 2)
        f.write(bytes(b ^ 0xFF for b in data))
    path.with_suffix(".index").unlink()


def delete_log(path: Path) -> None:
    path.unlink()


@pytest.mark.parametrize(
    "damage", [truncate_half, flip_bytes_and_delete_index, delete_log], ids=lambda f: f.__name__
)
def test_damaged_segment_takes_only_its_partition_offline_and_repair_never_reuses_offsets(
    own_broker: WeirProcess, damage: Callable[[Path], None]
) -> None:
    topic, before0, before1 = setup_damaged_topic(own_broker)
    own_broker.stop()
    directory = own_broker.data_dir / f"{topic}-0"
    logs = segment_logs(directory)
    assert len(logs) >= 6, logs
    damage(logs[2])
    files_before = {p.name: p.stat().st_size for p in directory.iterdir() if p.is_file()}

    own_broker.start()
    state = partition_state(own_broker.bootstrap, topic)
    assert state[0] == (-1, KafkaError.LEADER_NOT_AVAILABLE)
    assert state[1][1] == 0
    assert read_partition(own_broker.bootstrap, topic, 1) == before1  # the rest serve
    stderr = own_broker.stderr_path.read_text()
    assert f"{topic}-0 is offline" in stderr and "weir repair" in stderr
    own_broker.stop()
    files_after = {p.name: p.stat().st_size for p in directory.iterdir() if p.is_file()}
    for later in logs[3:]:
        assert files_after[later.name] == files_before[later.name], "a later segment changed"

    report = run_repair(own_broker.data_dir)
    assert report.returncode == 0, report.stderr
    assert f"{topic}-0:" in report.stdout and "--execute" in report.stdout
    assert {p.name: p.stat().st_size for p in directory.iterdir() if p.is_file()} == files_after
    repaired = run_repair(own_broker.data_dir, "--execute")
    assert repaired.returncode == 0, repaired.stderr

    own_broker.start()
    after0 = read_partition(own_broker.bootstrap, topic, 0)
    assert after0, "every intact record must come back"
    assert all(before0[offset] == value for offset, value in after0.items())
    lost = set(before0) - set(after0)
    assert lost and max(after0) > max(lost), "records after the damage must stay"
    new_offsets = produce(own_broker.bootstrap, topic, 0, 3, "new")
    assert min(new_offsets) > max(before0), "an acknowledged offset was handed out again"


def test_bytes_flipped_mid_active_segment_after_a_crash_are_not_truncated(
    own_broker: WeirProcess,
) -> None:
    topic = f"damage-{uuid.uuid4().hex[:8]}"
    create_topic(own_broker.bootstrap, topic)
    produce(own_broker.bootstrap, topic, 0, 3000, "p0")
    own_broker.kill()
    active = segment_logs(own_broker.data_dir / f"{topic}-0")[-1]
    size = active.stat().st_size
    flip_bytes_and_delete_index(active)
    own_broker.start()
    assert partition_state(own_broker.bootstrap, topic)[0][0] == -1
    assert active.stat().st_size == size, "acknowledged records were truncated"
    assert "intact records follow" in own_broker.stderr_path.read_text()


def test_bytes_flipped_in_the_last_acknowledged_batch_after_a_crash_are_not_truncated(
    own_broker: WeirProcess,
) -> None:
    """The broker records its fsynced offset every second, so a bad last batch
    that was acknowledged is damage, not a torn append."""
    topic = f"damage-{uuid.uuid4().hex[:8]}"
    create_topic(own_broker.bootstrap, topic)
    produce(own_broker.bootstrap, topic, 0, 500, "p0")
    time.sleep(2.5)  # past the durable-offset checkpoint interval
    own_broker.kill()
    active = segment_logs(own_broker.data_dir / f"{topic}-0")[-1]
    size = active.stat().st_size
    with open(active, "r+b") as f:
        f.seek(size - 20)
        f.write(b"\xff" * 16)
    own_broker.start()
    assert partition_state(own_broker.bootstrap, topic)[0][0] == -1
    assert active.stat().st_size == size, "acknowledged records were truncated"
    assert "those records were fsynced" in own_broker.stderr_path.read_text()


def test_missing_cluster_metadata_refuses_to_start_and_is_rebuilt_by_repair(
    own_broker: WeirProcess,
) -> None:
    topic, before0, before1 = setup_damaged_topic(own_broker)
    own_broker.stop()
    (own_broker.data_dir / "cluster-metadata.json").unlink()
    with pytest.raises(RuntimeError, match="cluster-metadata.json is missing"):
        own_broker.start()
    assert (own_broker.data_dir / f"{topic}-0").is_dir()
    assert not (own_broker.data_dir / "cluster-metadata.json").exists()
    rebuilt = run_repair(own_broker.data_dir, "--rebuild-metadata", "--execute")
    assert rebuilt.returncode == 0, rebuilt.stderr
    own_broker.start()
    assert read_partition(own_broker.bootstrap, topic, 0) == before0
    assert read_partition(own_broker.bootstrap, topic, 1) == before1


def test_missing_partition_directory_stays_offline_and_never_restarts_at_zero(
    own_broker: WeirProcess,
) -> None:
    topic, before0, _ = setup_damaged_topic(own_broker)
    own_broker.stop()
    directory = own_broker.data_dir / f"{topic}-0"
    os.rename(directory, own_broker.data_dir / "elsewhere")
    own_broker.start()
    assert partition_state(own_broker.bootstrap, topic)[0] == (-1, KafkaError.LEADER_NOT_AVAILABLE)
    assert not directory.exists()
    own_broker.stop()
    start = max(before0) + 1
    args = ("--topic", topic, "--partition", "0", "--start-offset", str(start), "--execute")
    assert run_repair(own_broker.data_dir, *args).returncode == 0
    own_broker.start()
    assert min(produce(own_broker.bootstrap, topic, 0, 2, "new")) == start


def test_unknown_partition_directory_is_set_aside_not_deleted(own_broker: WeirProcess) -> None:
    """A partition directory the metadata does not name (here: a topic deleted from
    the metadata by hand) is kept under stray/, and an auto-create of the same name
    starts fresh beside it."""
    topic, before0, _ = setup_damaged_topic(own_broker)
    own_broker.stop()
    metadata_path = own_broker.data_dir / "cluster-metadata.json"
    doc = json.loads(metadata_path.read_text())
    doc["topics"] = [t for t in doc["topics"] if t["name"] != topic]
    metadata_path.write_text(json.dumps(doc))
    own_broker.start()
    kept = sorted((own_broker.data_dir / "stray").iterdir())
    assert [p.name for p in kept] == [f"{topic}-0.0", f"{topic}-1.0"]
    assert sum(p.stat().st_size for p in kept[0].glob("*.log")) > RECORDS * VALUE_BYTES
    assert "moved" in own_broker.stderr_path.read_text()


def test_corrupt_batch_read_is_logged_and_counted(own_broker: WeirProcess) -> None:
    topic = f"damage-{uuid.uuid4().hex[:8]}"
    create_topic(own_broker.bootstrap, topic, config={"segment.bytes": str(SEGMENT_BYTES)})
    produce(own_broker.bootstrap, topic, 0, RECORDS, "p0")
    first = segment_logs(own_broker.data_dir / f"{topic}-0")[0]
    with open(first, "r+b") as f:  # the broker reads through the same page cache
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 0xFF]))
    consumer = Consumer(
        {
            "bootstrap.servers": own_broker.bootstrap,
            "group.id": "corrupt-read",
            "enable.auto.commit": False,
        }  # fmt: skip
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        for _ in range(10):
            consumer.poll(0.5)
    finally:
        consumer.close()
    stderr = own_broker.stderr_path.read_text()
    assert f"{topic}-0: a stored batch is damaged reading offset 0" in stderr
    with urllib.request.urlopen(f"{own_broker.http_url}/metrics", timeout=5) as response:
        metrics = response.read().decode()
    line = next(
        row
        for row in metrics.splitlines()
        if row.startswith("weir_partition_corrupt_batches_read") and topic in row
    )
    assert float(line.rsplit(" ", 1)[1]) >= 1


def test_repair_refuses_a_data_dir_a_running_broker_uses(own_broker: WeirProcess) -> None:
    result = run_repair(own_broker.data_dir, "--execute")
    assert result.returncode == 2
    assert "in use by another weir process" in result.stderr


def test_unreadable_partition_metadata_is_offline_until_repair_rewrites_it(
    own_broker: WeirProcess,
) -> None:
    topic, before0, _ = setup_damaged_topic(own_broker)
    own_broker.stop()
    (own_broker.data_dir / f"{topic}-0" / "partition.metadata").write_bytes(b"\xff\x00garbage")
    own_broker.start()
    assert partition_state(own_broker.bootstrap, topic)[0][0] == -1
    own_broker.stop()
    assert run_repair(own_broker.data_dir, "--execute").returncode == 0
    own_broker.start()
    assert read_partition(own_broker.bootstrap, topic, 0) == before0
