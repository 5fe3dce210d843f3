"""Hostile and broken share-group requests (issue 23): each gets Kafka's error code,
the broker holds nothing sized by them, and it keeps serving a real share consumer.

Raw requests (`compat_tests/wire_client.py`) against the real `weir`; the byte-level
classes (truncations, huge counts, bad varints) are every served API's in
tests/wire/test_hostile_input.py, share APIs included.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.wire_client import connect, round_trip
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

pytestmark = pytest.mark.timeout(120)

TOPIC = "hostile-queue"
GROUP = "hostile-group"
MEMBER = str(uuid.uuid4())
RSS_GROWTH_MAX_BYTES = 64 * 1024 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("share-hostile"), "")
    proc.start()
    create_topic(proc.bootstrap, TOPIC, partitions=1)
    try:
        yield proc
    finally:
        proc.close()


def topic_id(broker: WeirProcess) -> uuid.UUID:
    with connect(broker) as sock:
        response = round_trip(sock, ApiKey.METADATA, 12, {"topics": [{"name": TOPIC}]})
    (topic,) = response.topics
    return topic.topic_id


def share_fetch(epoch: int, topics: list[dict[str, object]], **fields: object) -> dict[str, object]:
    body: dict[str, object] = {
        "group_id": GROUP,
        "member_id": MEMBER,
        "share_session_epoch": epoch,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 100,
        "batch_size": 100,
        "topics": topics,
        "forgotten_topics_data": [],
    }
    body.update(fields)
    return body


def rss_bytes(broker: WeirProcess) -> int:
    assert broker.process is not None
    with open(f"/proc/{broker.process.pid}/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def test_a_session_epoch_out_of_order_is_invalid_share_session_epoch(broker: WeirProcess) -> None:
    tid = topic_id(broker)
    with connect(broker) as sock:
        opened = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(0, [
            {"topic_id": tid, "partitions": [{"partition_index": 0}]},
        ]))  # fmt: skip
        assert opened.error_code == ErrorCode.NONE
        skipped = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(7, []))
        assert skipped.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        stranger = round_trip(
            sock, ApiKey.SHARE_FETCH, 2, share_fetch(1, [], member_id=str(uuid.uuid4()))
        )
        assert stranger.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        closing = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(-1, []))
        assert closing.error_code == ErrorCode.NONE


def test_a_missing_group_or_member_is_an_invalid_request(broker: WeirProcess) -> None:
    with connect(broker) as sock:
        no_group = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(0, [], group_id=None))
        no_member = round_trip(sock, ApiKey.SHARE_ACKNOWLEDGE, 2, {
            "group_id": GROUP, "member_id": "", "share_session_epoch": 1, "topics": [],
        })  # fmt: skip
    assert no_group.error_code == ErrorCode.INVALID_REQUEST
    assert no_member.error_code == ErrorCode.INVALID_REQUEST


def test_a_hundred_thousand_unknown_partitions_are_answered_and_not_kept(
    broker: WeirProcess,
) -> None:
    before = rss_bytes(broker)
    bogus = [
        {"topic_id": uuid.uuid4(), "partitions": [{"partition_index": i} for i in range(100)]}
        for _ in range(1000)
    ]
    with connect(broker) as sock:
        answer = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(0, bogus))
        assert answer.error_code == ErrorCode.NONE
        errors = {p.error_code for t in answer.responses for p in t.partitions}
        assert errors == {ErrorCode.UNKNOWN_TOPIC_ID}
        assert sum(len(t.partitions) for t in answer.responses) == 100_000
        # None of them joined the session: the next fetch answers nothing for them.
        again = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(1, []))
        assert again.error_code == ErrorCode.NONE and again.responses == []
    assert rss_bytes(broker) - before < RSS_GROWTH_MAX_BYTES


def test_acknowledging_offsets_never_acquired_is_refused_per_partition(
    broker: WeirProcess,
) -> None:
    tid = topic_id(broker)
    batches = [
        {"first_offset": 0, "last_offset": 2**63 - 1, "acknowledge_types": [1]},
        {"first_offset": 5, "last_offset": 4, "acknowledge_types": [1]},
        {"first_offset": 0, "last_offset": 0, "acknowledge_types": [99]},
    ]
    member = str(uuid.uuid4())
    with connect(broker) as sock:
        round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(0, [
            {"topic_id": tid, "partitions": [{"partition_index": 0}]},
        ], member_id=member))  # fmt: skip
        for epoch, batch in enumerate(batches, start=1):
            started = time.monotonic()
            answer = round_trip(sock, ApiKey.SHARE_ACKNOWLEDGE, 2, {
                "group_id": GROUP, "member_id": member, "share_session_epoch": epoch,
                "topics": [{"topic_id": tid, "partitions": [
                    {"partition_index": 0, "acknowledgement_batches": [batch]},
                ]}],
            })  # fmt: skip
            assert time.monotonic() - started < 2.0
            assert answer.error_code == ErrorCode.NONE
            (partition,) = answer.responses[0].partitions
            assert partition.error_code in (
                ErrorCode.INVALID_REQUEST,
                ErrorCode.INVALID_RECORD_STATE,
            ), (batch, partition)


def test_renew_outside_a_renewal_request_is_an_invalid_request(broker: WeirProcess) -> None:
    tid = topic_id(broker)
    member = str(uuid.uuid4())
    with connect(broker) as sock:
        round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(0, [
            {"topic_id": tid, "partitions": [{"partition_index": 0}]},
        ], member_id=member))  # fmt: skip
        answer = round_trip(sock, ApiKey.SHARE_ACKNOWLEDGE, 2, {
            "group_id": GROUP, "member_id": member, "share_session_epoch": 1,
            "is_renew_ack": False,
            "topics": [{"topic_id": tid, "partitions": [{"partition_index": 0,
                "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 0, "acknowledge_types": [4]},
                ]}]}],
        })  # fmt: skip
    (partition,) = answer.responses[0].partitions
    assert partition.error_code == ErrorCode.INVALID_REQUEST


def set_reset_earliest(broker: WeirProcess, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def produce_to(broker: WeirProcess, topic: str, per_partition: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, value=b"r%d" % i, partition=partition)
    assert producer.flush(30) == 0


def acquired_by_partition(answer: object) -> dict[int, list[tuple[int, int]]]:
    return {
        p.partition_index: [(r.first_offset, r.last_offset) for r in p.acquired_records]
        for t in answer.responses  # type: ignore[attr-defined]
        for p in t.partitions
        if p.acquired_records
    }


def test_a_partition_named_for_acknowledgements_and_forgotten_is_no_longer_fetched(
    broker: WeirProcess,
) -> None:
    """franz-go's ShareFetch after its member lost a partition: the partition is named
    only to carry its acknowledgements and forgotten in the same request. Kafka adds
    the named partitions to the session before removing the forgotten ones, so nothing
    more is acquired there for the member (the client would drop it unacknowledged,
    and those records would hold the head of the in-flight window until their locks
    expire: the 16-consumer benchmark's stall). Another member gets the records."""
    topic, group = "forget-queue", "forget-group"
    create_topic(broker.bootstrap, topic, partitions=2)
    set_reset_earliest(broker, group)
    with connect(broker) as sock:
        metadata = round_trip(sock, ApiKey.METADATA, 12, {"topics": [{"name": topic}]})
    tid = metadata.topics[0].topic_id
    produce_to(broker, topic, {0: 3, 1: 3})
    leaving, staying = str(uuid.uuid4()), str(uuid.uuid4())
    both = [{"topic_id": tid, "partitions": [{"partition_index": 0}, {"partition_index": 1}]}]
    with connect(broker) as sock:
        opened = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(
            0, both, group_id=group, member_id=leaving, max_wait_ms=2000))  # fmt: skip
        held = acquired_by_partition(opened)
        stop = time.monotonic() + 10
        epoch = 1
        while set(held) != {0, 1} and time.monotonic() < stop:  # both partitions' records
            more = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(
                epoch, [], group_id=group, member_id=leaving, max_wait_ms=500))  # fmt: skip
            held.update(acquired_by_partition(more))
            epoch += 1
        assert held == {0: [(0, 2)], 1: [(0, 2)]}
        produce_to(broker, topic, {0: 2, 1: 2})
        revoked = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(
            epoch, [{"topic_id": tid, "partitions": [{"partition_index": 1,
                "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]},
                ]}]}],
            group_id=group, member_id=leaving, max_wait_ms=500,
            forgotten_topics_data=[{"topic_id": tid, "partitions": [1]}]))  # fmt: skip
        assert revoked.error_code == ErrorCode.NONE
        answers = {p.partition_index: p for t in revoked.responses for p in t.partitions}
        assert answers[1].acknowledge_error_code == ErrorCode.NONE
        assert acquired_by_partition(revoked) == {0: [(3, 4)]}
        later = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(
            epoch + 1, [], group_id=group, member_id=leaving, max_wait_ms=0))  # fmt: skip
        assert 1 not in acquired_by_partition(later)
    with connect(broker) as sock:
        other = round_trip(sock, ApiKey.SHARE_FETCH, 2, share_fetch(0, [
            {"topic_id": tid, "partitions": [{"partition_index": 1}]},
        ], group_id=group, member_id=staying, max_wait_ms=2000))  # fmt: skip
    assert acquired_by_partition(other) == {1: [(3, 4)]}


def test_a_share_consumer_is_served_after_all_of_the_above(broker: WeirProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, "after-hostile", incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(TOPIC, value=b"still-served")
    assert producer.flush(30) == 0
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "after-hostile",
                              "share.acknowledgement.mode": "explicit"})  # fmt: skip
    consumer.subscribe([TOPIC])
    try:
        stop = time.monotonic() + 30
        values: list[bytes] = []
        while not values and time.monotonic() < stop:
            for message in consumer.poll(1.0):
                if message.error() is None:
                    values.append(message.value() or b"")
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.commit_sync(10.0)
        assert values == [b"still-served"]
    finally:
        consumer.close()
