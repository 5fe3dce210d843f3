"""Transactions with confluent-kafka (librdkafka) against the real `weir serve` (issue 21).

init_transactions / begin / produce / commit / abort under read_committed and
read_uncommitted consumers, the last stable offset holding back read_committed
readers, a consume-transform-produce loop whose offsets commit with its
transaction (send_offsets_to_transaction), fencing of a zombie by a second
producer with the same transactional.id, recovery from an abortable error, and
the broker aborting a transaction that outlived its transaction.timeout.ms.

A transaction's markers are written after EndTxn answers, so each check of what a
read_committed consumer sees first waits until the partitions are stable (last
stable offset = high watermark, asked with ListOffsets at each isolation level).
The same checks pass against Apache Kafka 4.4 (the `bootstrap` fixture is the
only thing that names the broker).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka.admin import AdminClient, OffsetSpec

from compat_tests.harness import WeirProcess, create_topic

TIMEOUT_S = 30.0
# Long enough that no transaction times out unless the test means it to.
TRANSACTION_TIMEOUT_MS = 30_000
# The timed-out transaction's timeout; the broker looks for timed-out ones periodically.
SHORT_TRANSACTION_TIMEOUT_MS = 1_000
ABORT_BY_BROKER_TIMEOUT_S = 40.0
POLL_INTERVAL_S = 0.1
# librdkafka recovers from a refused record in two aborts (the second bumps the epoch).
RECOVERY_ATTEMPTS = 3

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def bootstrap(module_broker: WeirProcess) -> str:
    """The broker under test: one Weir per module (open transactions stay in this module)."""
    return module_broker.bootstrap


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def transactional_producer(bootstrap: str, transactional_id: str, **config: object) -> Producer:
    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        "linger.ms": 5,
    }
    settings.update(config)
    return Producer(settings)


def plain_producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})


def send(producer: Producer, topic: str, partitions: int, values: list[str]) -> None:
    """Value i to partition i % partitions; waits until every one is acknowledged."""
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(err)

    for i, value in enumerate(values):
        producer.produce(
            topic, value=value.encode(), partition=i % partitions, on_delivery=on_delivery
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []


def latest_offsets(
    bootstrap: str, topic: str, partitions: int, isolation: IsolationLevel
) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
        isolation_level=isolation,
        request_timeout=TIMEOUT_S,
    )
    return {tp.partition: future.result(TIMEOUT_S).offset for tp, future in futures.items()}


def wait_until(condition: Callable[[], bool], timeout_s: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what()}")
        time.sleep(POLL_INTERVAL_S)  # polling another process: no event to wait on


def await_stable(bootstrap: str, topic: str, partitions: int) -> None:
    """Until every partition's last stable offset has caught up with its high watermark."""

    def offsets() -> tuple[dict[int, int], dict[int, int]]:
        return (
            latest_offsets(bootstrap, topic, partitions, IsolationLevel.READ_COMMITTED),
            latest_offsets(bootstrap, topic, partitions, IsolationLevel.READ_UNCOMMITTED),
        )

    wait_until(
        lambda: offsets()[0] == offsets()[1],
        TIMEOUT_S,
        lambda: "last stable offsets {} behind high watermarks {}".format(*offsets()),
    )


def read_values(
    bootstrap: str, topic: str, partitions: int, isolation: str
) -> dict[int, list[tuple[int, str]]]:
    """(offset, value) of every record a consumer at `isolation` reads, by partition, from the
    start up to the end it is allowed to read (the LSO for read_committed)."""
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("txn-reader"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    read: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + TIMEOUT_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"did not reach the end of {topic}: read {read}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, f"consumer error: {error!r}"
                at_end.add(msg.partition())
                continue
            value = msg.value()
            assert value is not None
            read[msg.partition()].append((msg.offset(), value.decode()))
    finally:
        consumer.close()
    return read


def values(read: dict[int, list[tuple[int, str]]]) -> dict[int, list[str]]:
    return {p: [value for _offset, value in records] for p, records in read.items()}


# --------------------------------------------------------------------------- commit and abort


def test_committed_records_are_read_committed_and_aborted_ones_only_read_uncommitted(
    bootstrap: str,
) -> None:
    topic = unique("txn-commit-abort")
    create_topic(bootstrap, topic, partitions=2)
    producer = transactional_producer(bootstrap, unique("commit-abort"))
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    send(producer, topic, 2, ["c0", "c1", "c2", "c3"])
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    send(producer, topic, 2, ["a0", "a1", "a2", "a3"])
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    send(producer, topic, 2, ["c4", "c5", "c6", "c7"])
    producer.commit_transaction(TIMEOUT_S)

    await_stable(bootstrap, topic, 2)
    committed = read_values(bootstrap, topic, 2, "read_committed")
    assert values(committed) == {0: ["c0", "c2", "c4", "c6"], 1: ["c1", "c3", "c5", "c7"]}
    # One marker per partition per transaction, each taking an offset.
    assert [offset for offset, _ in committed[0]] == [0, 1, 6, 7]
    everything = read_values(bootstrap, topic, 2, "read_uncommitted")
    assert values(everything) == {
        0: ["c0", "c2", "a0", "a2", "c4", "c6"],
        1: ["c1", "c3", "a1", "a3", "c5", "c7"],
    }
    assert latest_offsets(bootstrap, topic, 2, IsolationLevel.READ_COMMITTED) == {0: 9, 1: 9}


def test_an_open_transaction_holds_read_committed_consumers_at_its_first_offset(
    bootstrap: str,
) -> None:
    topic = unique("txn-lso")
    create_topic(bootstrap, topic)
    plain = plain_producer(bootstrap)
    send(plain, topic, 1, ["before0", "before1"])  # offsets 0, 1
    producer = transactional_producer(bootstrap, unique("lso"))
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    send(producer, topic, 1, ["t0", "t1", "t2"])  # offsets 2..4, not committed yet
    send(plain, topic, 1, ["after"])  # offset 5, behind the open transaction

    assert latest_offsets(bootstrap, topic, 1, IsolationLevel.READ_UNCOMMITTED) == {0: 6}
    assert latest_offsets(bootstrap, topic, 1, IsolationLevel.READ_COMMITTED) == {0: 2}
    assert values(read_values(bootstrap, topic, 1, "read_committed")) == {0: ["before0", "before1"]}
    everything = ["before0", "before1", "t0", "t1", "t2", "after"]
    assert values(read_values(bootstrap, topic, 1, "read_uncommitted")) == {0: everything}

    producer.commit_transaction(TIMEOUT_S)
    await_stable(bootstrap, topic, 1)
    assert latest_offsets(bootstrap, topic, 1, IsolationLevel.READ_COMMITTED) == {0: 7}
    assert values(read_values(bootstrap, topic, 1, "read_committed")) == {0: everything}


# --------------------------------------------------------------------------- fencing and errors


def test_a_second_producers_init_transactions_fences_the_first(bootstrap: str) -> None:
    topic = unique("txn-fence")
    create_topic(bootstrap, topic)
    transactional_id = unique("fenced")
    zombie = transactional_producer(bootstrap, transactional_id)
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    send(zombie, topic, 1, ["zombie0"])

    successor = transactional_producer(bootstrap, transactional_id)
    successor.init_transactions(TIMEOUT_S)  # bumps the epoch, aborts the zombie's transaction
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    error: KafkaError = raised.value.args[0]
    assert error.code() == KafkaError._FENCED, error
    assert error.fatal(), error
    assert not error.txn_requires_abort(), error

    successor.begin_transaction()
    send(successor, topic, 1, ["successor0"])
    successor.commit_transaction(TIMEOUT_S)
    await_stable(bootstrap, topic, 1)
    assert values(read_values(bootstrap, topic, 1, "read_committed")) == {0: ["successor0"]}
    assert values(read_values(bootstrap, topic, 1, "read_uncommitted")) == {
        0: ["zombie0", "successor0"]
    }


def test_an_abortable_error_is_recovered_by_aborting_and_starting_again(bootstrap: str) -> None:
    """A record the partition refuses (larger than the topic's max.message.bytes) makes the
    transaction abortable, not the producer fatal. librdkafka then finds a gap in its
    sequence numbers, so its next transaction fails abortably too and the abort after it
    bumps the epoch with InitProducerId (KIP-360); the transaction after that commits."""
    topic = unique("txn-abortable")
    create_topic(bootstrap, topic, config={"max.message.bytes": "2000"})
    producer = transactional_producer(bootstrap, unique("abortable"))
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    refused: list[KafkaError] = []
    producer.produce(
        topic,
        value=b"x" * 5000,
        partition=0,
        on_delivery=lambda err, _msg: refused.append(err) if err else None,
    )
    producer.flush(TIMEOUT_S)
    assert [e.code() for e in refused] == [KafkaError.MSG_SIZE_TOO_LARGE], refused
    errors: list[KafkaError] = []
    for attempt in range(RECOVERY_ATTEMPTS):
        try:
            producer.commit_transaction(TIMEOUT_S)
            break
        except KafkaException as failed:
            errors.append(failed.args[0])
        producer.abort_transaction(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce(topic, value=f"attempt{attempt}".encode(), partition=0)
        producer.flush(TIMEOUT_S)
    else:
        pytest.fail(f"no commit after {RECOVERY_ATTEMPTS} aborts: {errors}")
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors
    assert all(e.txn_requires_abort() and not e.fatal() for e in errors), errors
    await_stable(bootstrap, topic, 1)
    assert values(read_values(bootstrap, topic, 1, "read_committed")) == {
        0: [f"attempt{len(errors) - 1}"]
    }


def test_the_broker_aborts_a_transaction_that_outlives_its_timeout(bootstrap: str) -> None:
    topic = unique("txn-timeout")
    create_topic(bootstrap, topic)
    transactional_id = unique("timeout")
    producer = transactional_producer(
        bootstrap, transactional_id, **{"transaction.timeout.ms": SHORT_TRANSACTION_TIMEOUT_MS}
    )
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    send(producer, topic, 1, ["stalled0", "stalled1"])
    # The producer stalls; the coordinator aborts and writes the abort marker on its own.
    wait_until(
        lambda: latest_offsets(bootstrap, topic, 1, IsolationLevel.READ_COMMITTED) == {0: 3},
        ABORT_BY_BROKER_TIMEOUT_S,
        lambda: (
            f"no abort marker: {latest_offsets(bootstrap, topic, 1, IsolationLevel.READ_COMMITTED)}"
        ),
    )
    assert values(read_values(bootstrap, topic, 1, "read_committed")) == {0: []}
    # The coordinator bumped the epoch when it aborted: the late commit finds the producer
    # fenced, which is fatal; a new producer with the same transactional.id carries on.
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(TIMEOUT_S)
    error: KafkaError = raised.value.args[0]
    assert error.code() == KafkaError._FENCED, error
    assert error.fatal(), error
    successor = transactional_producer(bootstrap, transactional_id)
    successor.init_transactions(TIMEOUT_S)
    successor.begin_transaction()
    send(successor, topic, 1, ["next"])
    successor.commit_transaction(TIMEOUT_S)
    await_stable(bootstrap, topic, 1)
    assert values(read_values(bootstrap, topic, 1, "read_committed")) == {0: ["next"]}
    assert values(read_values(bootstrap, topic, 1, "read_uncommitted")) == {
        0: ["stalled0", "stalled1", "next"]
    }


# ------------------------------------------------------------------ consume-transform-produce


def committed_offsets(
    bootstrap: str, group: str, topic: str, *, require_stable: bool
) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)],
        require_stable=require_stable,
        request_timeout=TIMEOUT_S,
    )
    listed = futures[group].result(TIMEOUT_S)
    return {
        tp.partition: tp.offset
        for tp in listed.topic_partitions
        if tp.topic == topic and tp.offset >= 0 and tp.error is None
    }


def await_committed(bootstrap: str, group: str, topic: str, expected: dict[int, int]) -> None:
    """Until the group's committed offsets are `expected` (markers land after EndTxn answers)."""
    wait_until(
        lambda: committed_offsets(bootstrap, group, topic, require_stable=False) == expected,
        TIMEOUT_S,
        lambda: f"committed {committed_offsets(bootstrap, group, topic, require_stable=False)}",
    )


@contextmanager
def group_member(bootstrap: str, group: str, topic: str) -> Iterator[KafkaConsumer]:
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    try:
        yield consumer
    finally:
        consumer.close()


def poll_at_least(consumer: KafkaConsumer, count: int) -> list[Message]:
    batch: list[Message] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(batch) < count:
        assert time.monotonic() < deadline, f"polled {len(batch)} of {count} records"
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        batch.append(msg)
    return batch


def transform_in_transaction(
    producer: Producer, consumer: KafkaConsumer, output: str, batch: list[Message]
) -> None:
    """Begin; each input value upper-cased to the same output partition; the consumer's
    positions into the transaction."""
    producer.begin_transaction()
    for msg in batch:
        value = msg.value()
        assert value is not None
        producer.produce(output, value=value.upper(), partition=msg.partition())
    # Written before the transaction ends: an abort would otherwise purge them unsent.
    assert producer.flush(TIMEOUT_S) == 0
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), TIMEOUT_S
    )


def test_consume_transform_produce_commits_offsets_only_with_its_transaction(
    bootstrap: str,
) -> None:
    source, output = unique("txn-ctp-in"), unique("txn-ctp-out")
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, output, partitions=2)
    group = unique("txn-ctp-group")
    send(plain_producer(bootstrap), source, 2, ["i0", "i1", "i2", "i3", "i4", "i5"])
    producer = transactional_producer(bootstrap, unique("ctp"))
    producer.init_transactions(TIMEOUT_S)

    with group_member(bootstrap, group, source) as consumer:
        batch = poll_at_least(consumer, 6)
        transform_in_transaction(producer, consumer, output, batch)
        assert committed_offsets(bootstrap, group, source, require_stable=False) == {}
        producer.commit_transaction(TIMEOUT_S)
        await_committed(bootstrap, group, source, {0: 3, 1: 3})

        # An aborted round: its output and its offsets both vanish.
        send(plain_producer(bootstrap), source, 2, ["i6", "i7", "i8", "i9"])
        batch = poll_at_least(consumer, 4)
        transform_in_transaction(producer, consumer, output, batch)
        producer.abort_transaction(TIMEOUT_S)
        wait_until(
            lambda: len(committed_offsets(bootstrap, group, source, require_stable=True)) == 2,
            TIMEOUT_S,
            lambda: "no stable committed offsets",
        )
        assert committed_offsets(bootstrap, group, source, require_stable=True) == {0: 3, 1: 3}

    # A new member resumes from the committed offsets and processes the rest again.
    with group_member(bootstrap, group, source) as consumer:
        batch = poll_at_least(consumer, 4)
        assert sorted(m.value() or b"" for m in batch) == [b"i6", b"i7", b"i8", b"i9"]
        transform_in_transaction(producer, consumer, output, batch)
        producer.commit_transaction(TIMEOUT_S)

    await_committed(bootstrap, group, source, {0: 5, 1: 5})
    await_stable(bootstrap, output, 2)
    committed = values(read_values(bootstrap, output, 2, "read_committed"))
    assert sorted(committed[0] + committed[1]) == [f"I{i}" for i in range(10)]
    everything = values(read_values(bootstrap, output, 2, "read_uncommitted"))
    assert len(everything[0] + everything[1]) == 14
