"""The real broker under a low open files limit (RLIMIT_NOFILE set in its process).

What used to happen at 20,000: the 7th CreateTopics of 1,000 partitions failed
with EMFILE but stayed half-created, new client connections timed out, an
unrelated partition went offline after a failed fsync, and the broker could not
start again; with segment.bytes=1024, thousands of small segments exhausted the
limit the same way. Here the limit is 5,000 (1,024 for the segments test) and
the broker must refuse what it cannot serve, serve everything it accepted, and
restart with it.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

from compat_tests.harness import WeirProcess

TIMEOUT_S = 30.0
PARTITIONS_LIMIT = 5000  # admits about 1,150 partitions (50 of them the offsets topic's)
SEGMENTS_LIMIT = 1024
BIG_TOPIC_PARTITIONS = 1000
CLIENTS_COUNT = 20


def start_broker(tmp_path: Path, open_files_limit: int) -> WeirProcess:
    proc = WeirProcess.configured(
        tmp_path,
        "group_initial_rebalance_delay_ms = 0\nretention_check_interval_ms = 500\n",
        open_files_limit=open_files_limit,
    )
    proc.start()
    return proc


def admin_for(broker: WeirProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_error(admin: AdminClient, name: str, partitions: int, **config: str) -> KafkaError:
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)],
        request_timeout=TIMEOUT_S,
    )
    try:
        futures[name].result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return KafkaError(KafkaError.NO_ERROR)


def grow_error(admin: AdminClient, name: str, partitions: int) -> KafkaError:
    """CreatePartitions' error (NO_ERROR when the topic grew). Returned rather than
    raised through `pytest.raises`: its ExceptionInfo would hold the test's frame in
    a reference cycle, and with it the test's AdminClient, which would go on
    reconnecting to the stopped broker until the garbage collector ran (minutes)."""
    futures = admin.create_partitions([NewPartitions(name, partitions)], request_timeout=TIMEOUT_S)
    try:
        futures[name].result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return KafkaError(KafkaError.NO_ERROR)


def latest_offsets(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    futures = admin.list_offsets(asked, request_timeout=TIMEOUT_S)
    return {tp.partition: f.result(timeout=TIMEOUT_S).offset for tp, f in futures.items()}


def produce_one_each(bootstrap: str, topic: str, partitions: int) -> None:
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for partition in range(partitions):
        producer.produce(topic, value=f"v{partition}".encode(), partition=partition,
                         on_delivery=on_delivery)  # fmt: skip
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []


def topic_directories(broker: WeirProcess, topic: str) -> list[Path]:
    return [p for p in broker.data_dir.iterdir() if p.name.startswith(f"{topic}-")]


def assert_clean_log(broker: WeirProcess) -> None:
    stderr = broker.stderr_path.read_text()
    for symptom in ("Too many open files", "goes offline", "Traceback"):
        assert symptom not in stderr, broker.stderr_text()


def test_partitions_past_the_budget_are_refused_and_everything_accepted_survives_restart(
    tmp_path: Path,
) -> None:
    broker = start_broker(tmp_path, PARTITIONS_LIMIT)
    try:
        admin = admin_for(broker)
        big, small, refused = (f"{name}-{uuid.uuid4().hex[:8]}" for name in "bsr")
        assert create_error(admin, big, BIG_TOPIC_PARTITIONS).code() == KafkaError.NO_ERROR
        assert create_error(admin, small, 10).code() == KafkaError.NO_ERROR

        error = create_error(admin, refused, 200)
        assert error.code() == KafkaError.POLICY_VIOLATION
        assert "ulimit -n" in error.str() and "200 partitions" in error.str()
        assert refused not in admin.list_topics(timeout=TIMEOUT_S).topics
        assert topic_directories(broker, refused) == []
        assert grow_error(admin, small, 200).code() == KafkaError.POLICY_VIOLATION
        assert len(admin.list_topics(small, timeout=TIMEOUT_S).topics[small].partitions) == 10
        assert len(topic_directories(broker, small)) == 10

        # Every accepted partition is served, and offsets can be committed (the
        # offsets topic was counted before it existed).
        produce_one_each(broker.bootstrap, big, BIG_TOPIC_PARTITIONS)
        assert set(latest_offsets(admin, big, BIG_TOPIC_PARTITIONS).values()) == {1}
        group = f"budget-{uuid.uuid4().hex[:8]}"
        committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        committed = [TopicPartition(big, p, 1) for p in range(BIG_TOPIC_PARTITIONS)]
        committer.commit(offsets=committed, asynchronous=False)
        committer.close()

        # New client connections are still answered.
        clients = [admin_for(broker) for _ in range(CLIENTS_COUNT)]
        for client in clients:
            assert big in client.list_topics(timeout=TIMEOUT_S).topics
        clients.clear()
        assert broker.open_files_count() < PARTITIONS_LIMIT
        limit_line = f"open files limit (RLIMIT_NOFILE) is {PARTITIONS_LIMIT}"
        assert limit_line in broker.stderr_path.read_text()
        assert_clean_log(broker)

        broker.restart(ready_timeout_s=60)
        admin = admin_for(broker)
        assert set(latest_offsets(admin, big, BIG_TOPIC_PARTITIONS).values()) == {1}
        checker = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        found = checker.committed(committed[:50], timeout=TIMEOUT_S)
        checker.close()
        assert [tp.offset for tp in found] == [1] * 50
        assert create_error(admin, refused, 200).code() == KafkaError.POLICY_VIOLATION
        assert_clean_log(broker)
    finally:
        broker.close()


def segment_files(broker: WeirProcess, topic: str) -> int:
    return sum(len(list(d.glob("*.log"))) for d in topic_directories(broker, topic))


def read_values(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < expected and time.monotonic() < deadline:
        for msg in consumer.consume(1000, timeout=0.5):
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    consumer.close()
    return values


def test_thousands_of_small_segments_stay_within_a_low_limit_across_restarts(
    tmp_path: Path,
) -> None:
    messages = 2400
    broker = start_broker(tmp_path, SEGMENTS_LIMIT)
    try:
        admin = admin_for(broker)
        topic = f"small-{uuid.uuid4().hex[:8]}"
        created = create_error(admin, topic, 2, **{"segment.bytes": "1024"})
        assert created.code() == KafkaError.NO_ERROR
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                             "batch.num.messages": 1, "linger.ms": 0})  # fmt: skip
        values = [f"{i:06d}".encode() + b"x" * 600 for i in range(messages)]
        for i, value in enumerate(values):  # one batch, so one segment, each
            producer.produce(topic, value=value, partition=i % 2)
            producer.poll(0)
        assert producer.flush(TIMEOUT_S) == 0
        assert segment_files(broker, topic) >= messages - 2  # 3 files each: 7,200 files
        assert broker.open_files_count() < SEGMENTS_LIMIT
        assert sorted(read_values(broker.bootstrap, topic, 2, messages)) == values
        assert_clean_log(broker)

        broker.restart(ready_timeout_s=60)  # clean: every sealed segment is loaded
        assert sorted(read_values(broker.bootstrap, topic, 2, messages)) == values
        broker.kill()
        broker.start(ready_timeout_s=60)  # a crash: the unsynced tail is scanned
        assert sorted(read_values(broker.bootstrap, topic, 2, messages)) == values
        assert broker.open_files_count() < SEGMENTS_LIMIT
        assert_clean_log(broker)
    finally:
        broker.close()


def test_a_share_fetch_under_a_full_budget_is_answered_not_held(tmp_path: Path) -> None:
    """`__share_group_state` is not kept room for before the first share group: when
    its 50 partitions do not fit, its creation is refused and logged, and a ShareFetch
    is answered COORDINATOR_NOT_AVAILABLE (the client retries) instead of waiting."""
    import re

    from compat_tests.wire_client import connect, round_trip
    from weir.wire.protocol import ApiKey

    broker = start_broker(tmp_path, PARTITIONS_LIMIT)
    try:
        admin = admin_for(broker)
        assert create_error(admin, f"big-{uuid.uuid4().hex[:6]}", 1000).code() == 0
        probe = create_error(admin, f"probe-{uuid.uuid4().hex[:6]}", 1000)
        found = re.search(r"at most (\d+) more partitions fit", probe.str())
        assert found is not None, probe.str()
        left = int(found.group(1))
        queue = f"queue-{uuid.uuid4().hex[:6]}"
        assert create_error(admin, queue, 1).code() == KafkaError.NO_ERROR
        filler = f"filler-{uuid.uuid4().hex[:6]}"
        if left > 11:
            assert create_error(admin, filler, left - 11).code() == KafkaError.NO_ERROR
        with connect(broker) as sock:
            metadata = round_trip(sock, ApiKey.METADATA, 12, {"topics": [{"name": queue}]})
        topic_id = metadata.topics[0].topic_id
        body = {
            "group_id": "workers", "member_id": str(uuid.uuid4()), "share_session_epoch": 0,
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10,
            "batch_size": 10, "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0}]}],
        }  # fmt: skip
        started = time.monotonic()
        with connect(broker) as sock:
            answer = round_trip(sock, ApiKey.SHARE_FETCH, 2, body)
        assert time.monotonic() - started < 10
        (topic,) = answer.responses
        (partition,) = topic.partitions
        assert partition.error_code == 15  # COORDINATOR_NOT_AVAILABLE
        assert "cannot create __share_group_state" in broker.stderr_path.read_text()
    finally:
        broker.close()
