"""`weir txn` against a real broker, with confluent-kafka's transactional producer holding
a transaction open: list, describe, find-hanging (an ongoing transaction is not
hanging) and abort (the partition's last stable offset moves past the aborted records).

They run against a `weir serve` process; with `WEIR_TXN_CLI_PEER_BOOTSTRAP=HOST:PORT`
they run against that broker instead (Apache Kafka 4.4 from
`benchmarks/kafka_peer.py start`), to check the CLI reads Kafka's answers the same way.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.harness import WeirProcess, run_cli

PEER_ENV = "WEIR_TXN_CLI_PEER_BOOTSTRAP"
TRANSACTION_TIMEOUT_MS = 120_000
CLIENT_TIMEOUT_S = 30

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    peer = os.environ.get(PEER_ENV)
    if peer:
        yield peer
        return
    base: Path = tmp_path_factory.mktemp("weir-txn-cli")
    proc = WeirProcess(base / "data", base / "logs")
    try:
        proc.start()
        yield proc.bootstrap
    finally:
        proc.stop()


@pytest.fixture
def topic(bootstrap: str) -> str:
    name = f"txn-cli-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(CLIENT_TIMEOUT_S)
    return name


def txn(bootstrap: str, *args: str) -> tuple[int, str, str]:
    result = run_cli("--bootstrap", bootstrap, "txn", *args)
    return result.returncode, result.stdout, result.stderr


def ok(bootstrap: str, *args: str) -> str:
    code, out, err = txn(bootstrap, *args)
    assert code == 0, f"weir txn {' '.join(args)} exited {code}\nstdout: {out}\nstderr: {err}"
    assert err == "", err
    return out


def ok_json(bootstrap: str, *args: str) -> Any:
    return json.loads(ok(bootstrap, *args, "--format", "json"))


@contextmanager
def open_transaction(
    bootstrap: str, topic: str, partition: int, count: int = 2
) -> Iterator[tuple[str, Producer]]:
    """A transactional producer with `count` records written to `topic`/`partition`
    in a transaction it neither commits nor aborts (until the block ends: abort)."""
    transactional_id = f"tx-{uuid.uuid4().hex[:10]}"
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        }
    )
    producer.init_transactions(CLIENT_TIMEOUT_S)
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, b"v%d" % i, partition=partition)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    try:
        yield transactional_id, producer
    finally:
        try:
            producer.abort_transaction(CLIENT_TIMEOUT_S)
        finally:
            producer.flush(0)


def last_stable_offset(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"}
    )
    try:
        _, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=CLIENT_TIMEOUT_S
        )
        return int(high)
    finally:
        consumer.close()


def test_list_and_describe_show_an_ongoing_transaction(bootstrap: str, topic: str) -> None:
    with open_transaction(bootstrap, topic, 0) as (transactional_id, _):
        listed = ok_json(bootstrap, "list")
        [mine] = [t for t in listed["transactions"] if t["transactional_id"] == transactional_id]
        assert mine["state"] == "Ongoing"
        producer_id = mine["producer_id"]

        pattern = f"^{transactional_id}$"
        filtered = ok_json(
            bootstrap, "list", "--state", "Ongoing", "--transactional-id-pattern", pattern
        )
        assert [t["transactional_id"] for t in filtered["transactions"]] == [transactional_id]
        by_producer = ok_json(bootstrap, "list", "--producer-id", str(producer_id))
        assert [t["transactional_id"] for t in by_producer["transactions"]] == [transactional_id]
        other_state = ok_json(bootstrap, "list", "--state", "CompleteCommit", "--state", "Bogus")
        assert transactional_id not in [t["transactional_id"] for t in other_state["transactions"]]
        assert other_state["unknown_state_filters"] == ["Bogus"]
        younger = ok_json(bootstrap, "list", "--duration-filter-ms", "3600000")
        assert transactional_id not in [t["transactional_id"] for t in younger["transactions"]]

        described = ok_json(bootstrap, "describe", transactional_id)
        assert (described["transactional_id"], described["state"]) == (transactional_id, "Ongoing")
        assert described["producer_id"] == producer_id
        assert described["transaction_timeout_ms"] == TRANSACTION_TIMEOUT_MS
        assert described["transaction_start_time_ms"] is not None
        assert described["partitions"] == [{"topic": topic, "partition": 0}]
        table = ok(bootstrap, "describe", "--transactional-id", transactional_id)
        assert table.splitlines()[1].split()[0] == transactional_id
        assert f"{topic}:0" in table


def test_describe_of_an_unknown_transactional_id_is_one_error_line(bootstrap: str) -> None:
    code, out, err = txn(bootstrap, "describe", "no-such-transactional-id")
    assert (code, out) == (1, "")
    assert err == (
        "error: transactional id 'no-such-transactional-id' does not exist "
        "(TRANSACTIONAL_ID_NOT_FOUND)\n"
    )


def test_find_hanging_does_not_report_a_transaction_its_coordinator_runs(
    bootstrap: str, topic: str
) -> None:
    with open_transaction(bootstrap, topic, 1):
        found = ok_json(
            bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"
        )
        assert found == {"max_transaction_timeout_ms": 0, "hanging": []}
        described = run_cli(
            "--bootstrap", bootstrap, "topic", "describe", topic, "--format", "json"
        )
        leader = json.loads(described.stdout)["partitions"][1]["leader"]
        by_broker = ok_json(
            bootstrap, "find-hanging", "--broker-id", str(leader), "--max-transaction-timeout", "0"
        )
        assert [h for h in by_broker["hanging"] if h["topic"] == topic] == []
        assert ok(bootstrap, "find-hanging", "--topic", topic) == "no hanging transactions\n"


def test_abort_by_start_offset_lets_read_committed_consumers_past_the_records(
    bootstrap: str, topic: str
) -> None:
    with open_transaction(bootstrap, topic, 0, count=2) as (transactional_id, _):
        assert last_stable_offset(bootstrap, topic, 0) == 0
        described = ok_json(bootstrap, "describe", transactional_id)
        aborted = ok_json(
            bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0"
        )
        assert aborted == {
            "topic": topic,
            "partition": 0,
            "producer_id": described["producer_id"],
            "producer_epoch": described["producer_epoch"],
            "coordinator_epoch": aborted["coordinator_epoch"],
            "start_offset": 0,
            "aborted": True,
        }
        assert last_stable_offset(bootstrap, topic, 0) == 3  # two records and the marker


def test_abort_by_producer_id_and_epochs(bootstrap: str, topic: str) -> None:
    with open_transaction(bootstrap, topic, 1, count=1) as (transactional_id, _):
        described = ok_json(bootstrap, "describe", transactional_id)
        out = ok(
            bootstrap, "abort", "--topic", topic, "--partition", "1",
            "--producer-id", str(described["producer_id"]),
            "--producer-epoch", str(described["producer_epoch"]),
            "--coordinator-epoch", "-1",
        )  # fmt: skip
        assert out == (
            f"aborted the transaction of producer {described['producer_id']} "
            f"(epoch {described['producer_epoch']}) on topic '{topic}' partition 1\n"
        )
        assert last_stable_offset(bootstrap, topic, 1) == 2


def test_abort_at_an_offset_where_no_transaction_starts_is_refused(
    bootstrap: str, topic: str
) -> None:
    with open_transaction(bootstrap, topic, 0):
        code, out, err = txn(
            bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "1"
        )
    assert (code, out) == (1, "")
    assert err == (
        f"error: no open transaction starts at offset 1 on topic '{topic}' partition 0\n"
    )
