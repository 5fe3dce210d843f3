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
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
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
# The fenced producer's: longer than the test waits for its transaction to end.
ZOMBIE_TRANSACTION_TIMEOUT_MS = 120_000
REPO_ROOT = Path(__file__).resolve().parents[1]


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


def describe(bootstrap: str, transactional_id: str) -> dict[str, object]:
    """`weir txn describe` (DescribeTransactions at the id's coordinator)."""
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
    print(found.summary())  # the counts, with -s
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


# --------------------------------------------------------------------------- faults


@contextmanager
def running_load(
    cluster: WeirCluster, partitions: Sequence[TopicPartition], transactional_ids: Sequence[str]
) -> Iterator[tuple[list[TxnProducer], list[TxnConsumer]]]:
    """A read_committed and a read_uncommitted consumer, and one transactional
    producer per id (each transaction to a random subset of `partitions`); the
    producers stop first, then the consumers get a moment to reach the end."""
    producers = [
        TxnProducer(cluster.bootstrap, tid, f"p{i}", partitions, seed=i)
        for i, tid in enumerate(transactional_ids)
    ]
    consumers = consumers_of(cluster, partitions)
    with ExitStack() as stack:
        for consumer in consumers:
            stack.enter_context(consumer)
        with ExitStack() as producing:
            for producer in producers:
                producing.enter_context(producer)
            yield producers, consumers
        time.sleep(1)  # the consumers read what was committed last


def committed_since(producers: Sequence[TxnProducer], count: int) -> None:
    for producer in producers:
        producer.committed_since(count, PROGRESS_S)


def txns_of(producers: Sequence[TxnProducer]) -> list[Txn]:
    return [txn for producer in producers for txn in producer.journal.txns()]


def test_killing_the_transaction_coordinator_loses_and_exposes_nothing(
    healed: WeirCluster,
) -> None:
    cluster = healed
    partitions = two_topics(cluster, "coordinator")
    prefix = f"coordinator-{uuid.uuid4().hex[:8]}"
    victim = coordinator_of(cluster, f"{prefix}-probe")
    ids = ids_coordinated(cluster, prefix, {victim}, 2)
    with running_load(cluster, partitions, ids) as (producers, consumers):
        committed_since(producers, 5)
        cluster.brokers[victim].kill()
        cluster.wait_until(
            lambda: coordinator_of(cluster, ids[0]) not in (victim, -1),
            FAILOVER_S,
            "a new coordinator",
        )
        committed_since(producers, 5)
        cluster.brokers[victim].start(ready_timeout_s=60)
        cluster.wait_full_isr(TRANSACTION_STATE_TOPIC_NAME, timeout_s=60)
        committed_since(producers, 3)
    check_history(cluster, partitions, txns_of(producers), consumers)


def test_killing_a_partition_leader_mid_transaction_loses_and_exposes_nothing(
    healed: WeirCluster,
) -> None:
    cluster = healed
    partitions = two_topics(cluster, "leader")
    victim = cluster.leader_of(*partitions[0])
    others = {1, 2, 3} - {victim}
    ids = ids_coordinated(cluster, f"leader-{uuid.uuid4().hex[:8]}", others, 2)
    with running_load(cluster, partitions, ids) as (producers, consumers):
        committed_since(producers, 5)
        cluster.brokers[victim].kill()
        cluster.wait_until(
            lambda: cluster.leader_of(*partitions[0]) not in (victim, -1),
            FAILOVER_S,
            "a new leader",
        )
        committed_since(producers, 5)
        cluster.brokers[victim].start(ready_timeout_s=60)
        for topic in {t for t, _ in partitions}:
            cluster.wait_full_isr(topic, timeout_s=60)
        committed_since(producers, 3)
    check_history(cluster, partitions, txns_of(producers), consumers)


def test_a_transaction_caught_mid_commit_completes_on_the_next_coordinator(
    healed: WeirCluster, tmp_path: Path
) -> None:
    """The coordinator has made the commit durable (PrepareCommit) but cannot write
    the marker of one partition: its only replica's broker is stopped. The
    coordinator is killed; the next one loads PrepareCommit and, once the partition
    is back, writes its marker and completes the commit."""
    cluster = healed
    transactional_id = f"prepare-{uuid.uuid4().hex[:8]}"
    coordinator = coordinator_of(cluster, transactional_id)
    held, survivor = sorted({1, 2, 3} - {coordinator})
    single = f"prepare-single-{uuid.uuid4().hex[:8]}"
    admin = cluster.admin()
    admin.create_topics([NewTopic(single, num_partitions=1, replica_assignment=[[held]])])[
        single
    ].result(20)
    partitions = [(single, 0), *two_topics(cluster, "prepare")[:3]]
    cluster.wait_until(lambda: cluster.leader_of(single, 0) == held, 20, "the single replica leads")
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id}
    )
    producer.init_transactions(CLIENT_TIMEOUT_S)
    journal = Journal()
    consumers = consumers_of(cluster, partitions)
    with ExitStack() as stack:
        for consumer in consumers:
            stack.enter_context(consumer)
        one_transaction(producer, journal, "q-t0", partitions, commit=False)
        producer.begin_transaction()
        journal.begin("q-t1")
        for index, (topic, partition) in enumerate(partitions):
            journal.write("q-t1", (topic, partition), f"q-t1-v{index}")
            producer.produce(topic, value=f"q-t1-v{index}".encode(), partition=partition)
        assert producer.flush(CLIENT_TIMEOUT_S) == 0
        via = cluster.brokers[survivor]
        os.kill(cluster.brokers[held].pid, signal.SIGSTOP)
        try:
            journal.committing("q-t1")
            producer.commit_transaction(CLIENT_TIMEOUT_S)
            journal.end("q-t1", Outcome.COMMITTED)
            before = describe(via.bootstrap, transactional_id)
            assert (before["coordinator"], before["state"]) == (coordinator, "PrepareCommit")
            cluster.brokers[coordinator].kill()
            cluster.wait_until(
                lambda: describe(via.bootstrap, transactional_id)["coordinator"] == survivor,
                FAILOVER_S,
                "the survivor coordinates the id",
            )
            assert describe(via.bootstrap, transactional_id)["state"] == "PrepareCommit"
        finally:
            os.kill(cluster.brokers[held].pid, signal.SIGCONT)
        cluster.brokers[coordinator].start(ready_timeout_s=60)
        cluster.wait_until(
            lambda: describe(via.bootstrap, transactional_id)["state"] == "CompleteCommit",
            FAILOVER_S,
            "the commit completes",
        )
        await_stable(via.bootstrap, partitions, timeout_s=FAILOVER_S)
        time.sleep(1)  # the consumers reach the end
    check_history(cluster, partitions, journal.txns(), consumers)


def start_producer_process(
    cluster: WeirCluster,
    transactional_id: str,
    name: str,
    partitions: Sequence[TopicPartition],
    journal: Path,
    transaction_timeout_ms: int,
) -> subprocess.Popen[bytes]:
    """A transactional producer process that holds its first transaction open after
    writing its values (for a minute), journaling to `journal`."""
    command = [
        sys.executable, "-m", "compat_tests.txn_load", "produce",
        "--bootstrap", cluster.bootstrap, "--transactional-id", transactional_id,
        "--name", name, "--partitions", ",".join(f"{t}:{p}" for t, p in partitions),
        "--journal", str(journal), "--transaction-timeout-ms", str(transaction_timeout_ms),
        "--pause-before-commit-s", "60", "--abort-ratio", "0",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with open(journal.with_suffix(".stderr"), "wb") as stderr:
        return subprocess.Popen(command, cwd=REPO_ROOT, env=env, stderr=stderr)


def kill_mid_transaction(process: subprocess.Popen[bytes], journal: Path) -> Txn:
    """SIGKILL the producer once its first transaction's values are all written."""
    try:
        wait_until(
            lambda: journal.exists() and bool(Journal.read(journal).sent),
            PROGRESS_S,
            lambda: f"the producer process wrote no transaction ({journal}, its .stderr)",
        )
    finally:
        process.kill()
        process.wait()
    (txn,) = Journal.read(journal).txns()
    assert txn.outcome == Outcome.ABORTED  # never asked to commit
    return txn


def read_after(
    consumer: TxnConsumer, producer: TxnProducer, first_txn: int, partitions: set[TopicPartition]
) -> bool:
    """Has the read_committed consumer read, on each of `partitions`, a value of a
    transaction `producer` began at or after its `first_txn`-th?"""
    reached: set[TopicPartition] = set()
    for event in consumer.log.events:
        for record in getattr(event, "records", ()):
            name, _, rest = record.value.partition("-t")
            if name == producer.name and int(rest.split("-")[0]) >= first_txn:
                reached.add(record.partition)
    return partitions <= reached


def test_a_killed_producers_transaction_is_aborted_and_read_committed_moves_on(
    healed: WeirCluster, tmp_path: Path
) -> None:
    """A producer process SIGKILLed with its transaction open: the coordinator aborts
    it when its transaction.timeout.ms passes; another, killed the same way with a
    long timeout, is aborted by the next producer with its transactional.id. Either
    way read_committed consumers never see its values and read past them (the last
    stable offset moves on), while another producer's transactions go on."""
    cluster = healed
    partitions = two_topics(cluster, "zombie")
    tag = uuid.uuid4().hex[:8]
    steady_ids = ids_coordinated(cluster, f"steady-{tag}", {1, 2, 3}, 1)
    with running_load(cluster, partitions, steady_ids) as (producers, consumers):
        (steady,) = producers
        read_committed = consumers[0]
        committed_since(producers, 3)

        timed_out_journal = tmp_path / "timed-out.jsonl"
        process = start_producer_process(
            cluster, f"zombie-timeout-{tag}", "z1", partitions, timed_out_journal,
            SHORT_TRANSACTION_TIMEOUT_MS,
        )  # fmt: skip
        timed_out = kill_mid_transaction(process, timed_out_journal)
        after = steady.transactions_begun
        wait_until(
            lambda: read_after(read_committed, steady, after, {tp for tp, _ in timed_out.writes}),
            SHORT_TRANSACTION_TIMEOUT_MS / 1000 + PROGRESS_S / 2,
            lambda: "read_committed is held back by the killed producer's transaction",
        )

        fenced_journal = tmp_path / "fenced.jsonl"
        zombie_id = f"zombie-fenced-{tag}"
        process = start_producer_process(cluster, zombie_id, "z2", partitions, fenced_journal,
                                         ZOMBIE_TRANSACTION_TIMEOUT_MS)  # fmt: skip
        fenced = kill_mid_transaction(process, fenced_journal)
        fenced_at = time.monotonic()
        after = steady.transactions_begun
        with TxnProducer(cluster.bootstrap, zombie_id, "z2s", partitions, abort_ratio=0) as heir:
            heir.committed_since(2, PROGRESS_S)
            wait_until(
                lambda: read_after(read_committed, steady, after, {tp for tp, _ in fenced.writes}),
                PROGRESS_S / 2,
                lambda: "read_committed is held back by the fenced producer's transaction",
            )
        # Well before the zombie's own timeout: the heir's init_transactions aborted it.
        assert time.monotonic() - fenced_at < ZOMBIE_TRANSACTION_TIMEOUT_MS / 1000
    txns = [*txns_of(producers), timed_out, fenced, *heir.journal.txns()]
    check_history(cluster, partitions, txns, consumers)
    _, uncommitted = final_scans(cluster.bootstrap, partitions)
    written = {value for records in uncommitted.values() for _, value in records}
    assert {v for _, v in timed_out.writes + fenced.writes} <= written  # they were written
