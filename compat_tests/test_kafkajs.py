"""kafkajs (Node.js, from npm) against the real `weir serve` process.

`compat_tests/kafkajs/client.js` runs one scenario per process and prints a JSON
document; `scripts/test` installs its pinned kafkajs with `npm ci`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from compat_tests.harness import WeirProcess, create_topic, unique_topic_name
from compat_tests.test_confluent_kafka import read_partition
from compat_tests.test_durability import read_everything

CLIENT = Path(__file__).with_name("kafkajs") / "client.js"
RUN_TIMEOUT_S = 60
TIMESTAMP_BASE_MS = 1_700_000_000_000


def run_kafkajs(broker: WeirProcess, scenario: str, topic: str, arg: str = "") -> Any:
    node = shutil.which("node")
    if node is None or not (CLIENT.parent / "node_modules" / "kafkajs").is_dir():
        pytest.fail("node or kafkajs is missing: run scripts/test, which installs them")
    result = subprocess.run(
        [node, str(CLIENT), broker.bootstrap, scenario, topic, arg],
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    document = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert result.returncode == 0, document.get("error", result.stderr.decode())
    return document


def test_kafkajs_admin_creates_grows_describes_and_deletes_topics(
    broker: WeirProcess, topic: str
) -> None:
    result = run_kafkajs(broker, "admin", topic)
    assert result == {
        "validateOnly": True,
        "created": True,
        "badName": "INVALID_TOPIC_EXCEPTION",
        "listed": True,
        "partitions": 3,
        "grownPartitions": 4,
        "offsets": [[p, "0", "0"] for p in range(4)],
        "deleted": True,
    }


@pytest.mark.parametrize("mode", ["plain", "idempotent"])
def test_kafkajs_producer_writes_keyed_records_with_headers(
    broker: WeirProcess, topic: str, mode: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=3)
    result = run_kafkajs(broker, "produce", topic, mode)
    assert len(result["sent"]) == 15  # 5 sends x 3 partitions
    stored = read_everything(broker.bootstrap, topic, 3)
    values = sorted(int(value.decode()[1:]) for _key, value in stored.values() if value)
    assert values == list(range(100))
    # kafkajs's default partitioner is murmur2 over the key, like Java's: one key, one partition.
    partitions_of_key: dict[bytes, set[int]] = {}
    for (partition, _offset), (key, _value) in stored.items():
        assert key is not None
        partitions_of_key.setdefault(key, set()).add(partition)
    assert all(len(partitions) == 1 for partitions in partitions_of_key.values())


def test_kafkajs_group_consumer_reads_everything_and_commits(
    broker: WeirProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=3)
    run_kafkajs(broker, "produce", topic, "plain")
    result = run_kafkajs(broker, "consume-group", topic, "100")
    assert sorted(result["values"]) == sorted(f"v{i}" for i in range(100))
    high = _high_watermarks(broker, topic, 3)
    # kafkajs commits on its interval and when it disconnects: everything it read.
    assert {p: o for p, o in result["committed"]} == high


def _high_watermarks(broker: WeirProcess, topic: str, partitions: int) -> dict[int, int]:
    stored = read_everything(broker.bootstrap, topic, partitions)
    ends: dict[int, int] = {}
    for partition, offset in stored:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def test_kafkajs_describes_and_alters_topic_configs(broker: WeirProcess, topic: str) -> None:
    result = run_kafkajs(broker, "configs", topic)
    assert result["created"] == {
        "retention.ms": ["3600000", False],
        "cleanup.policy": ["delete", True],
    }
    assert result["afterValidateOnly"] == result["created"]
    # Legacy AlterConfigs replaces the whole override set: retention.ms reverts to its default.
    assert result["afterAlter"] == {
        "retention.ms": ["604800000", True],
        "cleanup.policy": ["compact", False],
    }
    assert result["unknownName"] == "INVALID_CONFIG"
    assert result["badValue"] == "INVALID_CONFIG"


def test_kafkajs_finds_offsets_by_timestamp(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    result = run_kafkajs(broker, "timestamps", topic, str(TIMESTAMP_BASE_MS))
    # Records at base + 0, 1000, ..., 4000 ms on partition 0; partition 1 is empty, and
    # kafkajs turns the broker's "no such record" (-1) into the high watermark.
    assert result == {
        "beforeAll": [[0, "0"], [1, "0"]],
        "exact": [[0, "2"], [1, "0"]],
        "between": [[0, "3"], [1, "0"]],
        "afterAll": [[0, "5"], [1, "0"]],
    }


def test_kafkajs_deletes_records_up_to_an_offset_and_to_the_end(
    broker: WeirProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=3)
    run_kafkajs(broker, "produce-exact", topic, "-1")  # 40 records per partition
    result = run_kafkajs(broker, "delete-records", topic)
    assert result["afterDelete"] == [[0, "3", "40"], [1, "0", "40"], [2, "0", "40"]]
    assert result["afterDeleteAll"] == [[0, "3", "40"], [1, "40", "40"], [2, "0", "40"]]
    assert result["beyondHigh"] == "OFFSET_OUT_OF_RANGE"
    assert [m.offset() for m in read_partition(broker, topic, 0, 3, 37)] == list(range(3, 40))


@pytest.mark.parametrize("acks", ["-1", "1"])
def test_kafkajs_records_read_back_by_confluent_kafka_are_exactly_what_was_sent(
    broker: WeirProcess, topic: str, acks: str
) -> None:
    """Null keys and values, string, binary and repeated headers, plain and GZIP batches:
    librdkafka reads from each partition what kafkajs wrote, at the offsets it reported."""
    create_topic(broker.bootstrap, topic, partitions=3)
    result = run_kafkajs(broker, "produce-exact", topic, acks)
    # Four sends of 30 records, 10 per partition each: base offsets 0, 10, 20, 30.
    assert sorted(result["sent"]) == [[p, base, 0] for p in range(3) for base in (0, 10, 20, 30)]
    for partition in range(3):
        numbers = [n for n in range(120) if n % 3 == partition]
        messages = read_partition(broker, topic, partition, 0, len(numbers))
        got = [(m.offset(), m.key(), m.value(), m.headers()) for m in messages]
        assert got == [(offset, *_expected_record(n)) for offset, n in enumerate(numbers)]


def _expected_record(n: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]:
    key = None if n % 10 == 0 else f"key-{n}".encode()
    value = None if n % 15 == 0 else f"value-{n}".encode()
    headers = [
        ("n", str(n).encode()),
        ("bin", bytes([n % 256, 0, 255])),
        ("multi", b"a"),
        ("multi", f"b{n}".encode()),
    ]
    return key, value, headers


def test_kafkajs_spreads_many_keyed_records_over_partitions_like_java_murmur2(
    broker: WeirProcess, topic: str
) -> None:
    """One GZIP send of 1000 keyed records: all stored, and each key on the partition that
    librdkafka's Java-compatible `murmur2` partitioner picks for the same partition count."""
    create_topic(broker.bootstrap, topic, partitions=4)
    result = run_kafkajs(broker, "produce-many", topic, "1000")
    assert sorted(result["sent"]) == [[p, 0] for p in range(4)]
    stored = read_everything(broker.bootstrap, topic, 4)
    assert sorted(value for _key, value in stored.values()) == sorted(
        f"v{n}".encode() for n in range(1000)
    )
    partition_of_key = {key: partition for (partition, _), (key, _) in stored.items()}
    keys = [f"k{n}".encode() for n in range(1000)]
    assert partition_of_key == _librdkafka_murmur2_partitions(broker, keys, 4)


def _librdkafka_murmur2_partitions(
    broker: WeirProcess, keys: list[bytes], partitions: int
) -> dict[bytes | None, int]:
    """The partition confluent-kafka's `murmur2` partitioner delivers each key to."""
    other_topic = unique_topic_name("murmur2")
    create_topic(broker.bootstrap, other_topic, partitions=partitions)
    chosen: dict[bytes | None, int] = {}

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        assert error is None, repr(error)
        chosen[message.key()] = message.partition()

    producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2"})
    for key in keys:
        producer.produce(other_topic, key=key, value=b"", on_delivery=on_delivery)
    assert producer.flush(RUN_TIMEOUT_S) == 0
    return chosen


def test_transactions_commit_abort_and_read_committed(broker: WeirProcess, topic: str) -> None:
    """kafkajs's transactional producer commits, aborts and commits again: its default
    (read_committed) consumer skips the aborted values, a readUncommitted one sees them all."""
    create_topic(broker.bootstrap, topic, partitions=1)
    result = run_kafkajs(broker, "transactions", topic)
    assert result["readCommitted"] == ["c1-a", "c1-b", "c2-a", "c2-b"]
    assert result["readUncommitted"] == ["c1-a", "c1-b", "a1-a", "a1-b", "c2-a", "c2-b"]


def test_transaction_send_offsets_commits_group_offsets_only_when_committed(
    broker: WeirProcess, topic: str
) -> None:
    """`transaction.sendOffsets` (AddOffsetsToTxn + TxnOffsetCommit): the group's offset is
    the one sent in the committed transaction, not the one sent in the aborted one. Each
    check is made once the next transaction's first send went through, which waits for the
    previous transaction's markers (EndTxn answers before they are written, as on Kafka)."""
    create_topic(broker.bootstrap, topic, partitions=1)
    result = run_kafkajs(broker, "transaction-offsets", topic)
    assert result == {"before": "-1", "afterCommit": "5", "afterAbort": "5"}
