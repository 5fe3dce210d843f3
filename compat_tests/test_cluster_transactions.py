"""Transactions on a three-broker Weir cluster over a real etcd, under faults.

confluent-kafka transactional producers write unique values to partitions of two
topics (replication factor 3, min.insync.replicas 2) led by all three brokers,
while a read_committed and a read_uncommitted consumer record every poll; the
transaction history checker (compat_tests/txn_history.py) then compares what the
producers were told with what the consumers saw and a final read of every
partition. Faults: the transaction coordinator SIGKILLed (and a transaction caught
mid-commit finishing on the next coordinator), a partition leader SIGKILLed, the
producer process SIGKILLed mid-transaction (the transaction aborted by its timeout,
or by the next producer with the same transactional.id).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import NewTopic

from compat_tests.cluster_harness import WeirCluster, running_cluster
from compat_tests.harness import run_cli
from compat_tests.txn_history import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Outcome,
    TopicPartition,
    Txn,
    check,
)
from compat_tests.txn_load import (
    CLIENT_TIMEOUT_S,
    Journal,
    TxnConsumer,
    TxnProducer,
    await_stable,
    final_scans,
    wait_until,
)
from weir.broker.coordinators.transaction_service import transaction_partition
from weir.controller.controller import TRANSACTION_STATE_TOPIC_NAME

pytestmark = pytest.mark.timeout(150)

STATE_PARTITIONS = 50  # the broker's default transaction_state_partition_count
FAILOVER_S = 60.0
PROGRESS_S = 60.0
# The killed producer's transaction timeout (the coordinator aborts it after that).
SHORT_TRANSACTION_TIMEOUT_MS = 3_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirCluster]:
    with running_cluster(tmp_path_factory.mktemp("txn-cluster")) as weir:
        _init_state_topic(weir)
        yield weir


@pytest.fixture
def healed(cluster: WeirCluster) -> Iterator[WeirCluster]:
    """The cluster; after the test, every broker running again with full ISRs."""
    yield cluster
    for broker in cluster.brokers.values():
        if not broker.is_running():
            broker.start(ready_timeout_s=60)
    cluster.wait_full_isr(TRANSACTION_STATE_TOPIC_NAME, timeout_s=60)


def _init_state_topic(cluster: WeirCluster) -> None:
    """The first transactional producer makes the brokers create __transaction_state."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "warm-up"})
    producer.init_transactions(CLIENT_TIMEOUT_S)
    cluster.wait_full_isr(TRANSACTION_STATE_TOPIC_NAME, timeout_s=60)


def two_topics(cluster: WeirCluster, name: str) -> list[TopicPartition]:
    """Two fresh topics of three partitions, RF 3, min.insync.replicas 2: six partitions."""
    partitions: list[TopicPartition] = []
    for kind in ("a", "b"):
        topic = f"{name}-{kind}-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, 3, 3, **{"min.insync.replicas": "2"})
        cluster.wait_full_isr(topic)
        partitions.extend((topic, p) for p in range(3))
    return partitions


def coordinator_of(cluster: WeirCluster, transactional_id: str) -> int:
    """The broker leading the id's __transaction_state partition (Kafka's placement)."""
    partition = transaction_partition(transactional_id, STATE_PARTITIONS)
    return cluster.leader_of(TRANSACTION_STATE_TOPIC_NAME, partition)


def ids_coordinated(cluster: WeirCluster, prefix: str, by: set[int], count: int) -> list[str]:
    """`count` transactional ids whose coordinator is one of the brokers `by`."""
    chosen: list[str] = []
    for i in range(1000):
        candidate = f"{prefix}-{i}"
        if coordinator_of(cluster, candidate) in by:
            chosen.append(candidate)
            if len(chosen) == count:
                return chosen
    raise AssertionError(f"no {count} ids coordinated by {by}")


def describe(cluster: WeirCluster, transactional_id: str) -> dict[str, object]:
    """`weir txn describe` (DescribeTransactions at the id's coordinator)."""
    bootstrap = ",".join(b.bootstrap for b in cluster.running())
    result = run_cli("--bootstrap", bootstrap, "--format", "json", "txn", "describe",
                     transactional_id)  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def check_history(
    cluster: WeirCluster,
    partitions: Sequence[TopicPartition],
    txns: Sequence[Txn],
    consumers: Sequence[TxnConsumer],
) -> None:
    """Zero anomalies (the final reads go to the running brokers)."""
    bootstrap = ",".join(b.bootstrap for b in cluster.running())
    committed, uncommitted = final_scans(bootstrap, partitions, timeout_s=FAILOVER_S)
    found = check(txns, [c.log for c in consumers], committed, uncommitted)
    assert found.ok, found.summary()
    assert found.counts["committed"] > 0, found.summary()


def consumers_of(cluster: WeirCluster, partitions: Sequence[TopicPartition]) -> list[TxnConsumer]:
    return [
        TxnConsumer(cluster.bootstrap, "rc", READ_COMMITTED, partitions),
        TxnConsumer(cluster.bootstrap, "ru", READ_UNCOMMITTED, partitions),
    ]


# --------------------------------------------------------------------------- markers


def one_transaction(
    producer: Producer,
    journal: Journal,
    txn_id: str,
    partitions: Sequence[TopicPartition],
    commit: bool,
) -> None:
    producer.begin_transaction()
    journal.begin(txn_id)
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(err)

    for index, (topic, partition) in enumerate(partitions):
        value = f"{txn_id}-v{index}"
        journal.write(txn_id, (topic, partition), value)
        producer.produce(topic, value=value.encode(), partition=partition, on_delivery=on_delivery)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0 and errors == [], errors
    if commit:
        journal.committing(txn_id)
        producer.commit_transaction(CLIENT_TIMEOUT_S)
        journal.end(txn_id, Outcome.COMMITTED)
    else:
        producer.abort_transaction(CLIENT_TIMEOUT_S)
        journal.end(txn_id, Outcome.ABORTED)


def test_markers_reach_partitions_led_by_every_broker(cluster: WeirCluster) -> None:
    partitions = two_topics(cluster, "markers")
    assert {cluster.leader_of(t, p) for t, p in partitions} == {1, 2, 3}
    transactional_id = f"markers-{uuid.uuid4().hex[:8]}"
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id}
    )
    producer.init_transactions(CLIENT_TIMEOUT_S)
    journal = Journal()
    consumers = consumers_of(cluster, partitions)
    for consumer in consumers:
        consumer.__enter__()
    try:
        one_transaction(producer, journal, "m-t0", partitions, commit=True)
        one_transaction(producer, journal, "m-t1", partitions, commit=False)
        one_transaction(producer, journal, "m-t2", partitions, commit=True)
        await_stable(cluster.bootstrap, partitions, timeout_s=30)
        time.sleep(1)  # the consumers reach the end
    finally:
        for consumer in consumers:
            consumer.__exit__(None, None, None)
    check_history(cluster, partitions, journal.txns(), consumers)
    committed, _ = final_scans(cluster.bootstrap, partitions)
    for index, tp in enumerate(partitions):
        assert [v for _, v in committed[tp]] == [f"m-t0-v{index}", f"m-t2-v{index}"]
    # Each partition: t0, marker, t1, marker, t2, marker.
    assert all([o for o, _ in committed[tp]] == [0, 4] for tp in partitions), committed
