"""The HTTP queue APIs' session-less share operations (`ShareDirect`, through the
`KafkaGateway` on this broker): records acquired under the caller's own lock with no
share session and no membership, acknowledged per offset, their locks renewed or
given up."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import attach_group_service
from weir.broker.coordinators.share_service import ShareService, attach_share_service
from weir.broker.http import share_direct
from weir.broker.http.kafka_gateway import HttpCaller
from weir.broker.http.share_direct import ShareDirect, share_direct_of
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch, iter_batch_headers
from weir.sharecoord.share_partition import AcknowledgeType, RecordState

GROUP = "queue"
TOPIC = "t"
RECORDS = 5
LOCK_MS = 600_000  # ten minutes: far from the group's default (30 s)
OPEN = HttpCaller(None)


@pytest.fixture
async def broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path, offsets_topic_partition_count=1))
    broker.open_logs()
    groups = attach_group_service(broker)
    shares = attach_share_service(broker)
    await nursery.start(broker.flusher.run)
    await groups.prepare()
    await nursery.start(shares.run)
    broker.create_topic(broker.controller.plan_topic(TOPIC, 1, 1))
    yield broker
    broker.close()


def append_records(broker: Broker) -> None:
    replica = broker.partition(TOPIC, 0)
    assert replica is not None
    batch = build_batch(
        [(b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(RECORDS)],
        timestamp_ms=wall_clock_ms(),
    )
    replica.log.append(batch, leader_epoch=0, now_ms=wall_clock_ms())
    replica.log.flush()


async def started(broker: Broker) -> ShareDirect:
    """The group starts at the log's end on its first fetch: fetch the empty topic
    once, then append the records."""
    direct = share_direct_of(broker)
    first = await direct.acquire(OPEN, GROUP, TOPIC, 0, "m0", records_max=10, lock_ms=LOCK_MS)
    assert (first.error, first.records) == (ErrorCode.NONE, [])
    append_records(broker)
    return direct


def shares_of(broker: Broker) -> ShareService:
    assert isinstance(broker.shares, ShareService)
    return broker.shares


def state_of(broker: Broker, offset: int) -> tuple[RecordState, int, str | None] | None:
    (leader,) = shares_of(broker).partitions.leaders.values()
    return leader.partition.record_state(offset)


async def test_acquired_records_come_decoded_with_their_delivery_counts_and_no_session(
    broker: Broker,
) -> None:
    direct = await started(broker)
    got = await direct.acquire(OPEN, GROUP, TOPIC, 0, "m1", records_max=3, lock_ms=LOCK_MS)
    assert got.error == ErrorCode.NONE
    assert [(r.offset, r.key, r.value, r.headers, r.delivery_count) for r in got.records] == [
        (i, b"k%d" % i, b"v%d" % i, (("h", b"x"),), 1) for i in range(3)
    ]
    assert shares_of(broker).sessions.get(GROUP, "m1") is None
    assert state_of(broker, 0) == (RecordState.ACQUIRED, 1, "m1")


async def test_the_lock_is_the_callers_not_the_groups(broker: Broker) -> None:
    direct = await started(broker)
    before_ms = wall_clock_ms()
    await direct.acquire(OPEN, GROUP, TOPIC, 0, "m1", records_max=1, lock_ms=LOCK_MS)
    (leader,) = shares_of(broker).partitions.leaders.values()
    group_lock_ms = leader.partition.settings.record_lock_duration_ms
    assert group_lock_ms < LOCK_MS
    leader.partition.expire_locks(before_ms + group_lock_ms + 1000)
    assert state_of(broker, 0) == (RecordState.ACQUIRED, 1, "m1")
    leader.partition.expire_locks(wall_clock_ms() + LOCK_MS + 1000)
    assert state_of(broker, 0) == (RecordState.AVAILABLE, 1, None)


async def test_a_record_held_by_one_caller_goes_to_another_once_given_up(broker: Broker) -> None:
    direct = await started(broker)
    await direct.acquire(OPEN, GROUP, TOPIC, 0, "m1", records_max=RECORDS, lock_ms=LOCK_MS)
    second = await direct.acquire(OPEN, GROUP, TOPIC, 0, "m2", records_max=10, lock_ms=LOCK_MS)
    assert second.records == []
    outcome = await direct.change_lock(OPEN, GROUP, TOPIC, 0, "m1", [1], 0)
    assert outcome == {1: ErrorCode.NONE}
    third = await direct.acquire(OPEN, GROUP, TOPIC, 0, "m2", records_max=10, lock_ms=LOCK_MS)
    assert [(r.offset, r.delivery_count) for r in third.records] == [(1, 2)]


async def test_a_lock_is_renewed_for_the_callers_length_whatever_the_groups_setting(
    broker: Broker,
) -> None:
    direct = await started(broker)
    await direct.acquire(OPEN, GROUP, TOPIC, 0, "m1", records_max=1, lock_ms=1000)
    (leader,) = shares_of(broker).partitions.leaders.values()
    settings = leader.partition.settings
    leader.partition.settings = dataclasses.replace(settings, renew_acknowledge_enabled=False)
    outcome = await direct.change_lock(OPEN, GROUP, TOPIC, 0, "m1", [0], LOCK_MS)
    assert outcome == {0: ErrorCode.NONE}
    leader.partition.expire_locks(wall_clock_ms() + 60_000)
    assert state_of(broker, 0) == (RecordState.ACQUIRED, 1, "m1")


async def test_acknowledgements_answer_per_offset_when_some_are_not_held(broker: Broker) -> None:
    direct = await started(broker)
    await direct.acquire(OPEN, GROUP, TOPIC, 0, "m1", records_max=2, lock_ms=LOCK_MS)
    outcome = await direct.acknowledge(
        OPEN, GROUP, TOPIC, 0, "m1", [0, 1, 3], AcknowledgeType.ACCEPT
    )
    assert outcome == {
        0: ErrorCode.NONE,
        1: ErrorCode.NONE,
        3: ErrorCode.INVALID_RECORD_STATE,
    }
    again = await direct.acknowledge(OPEN, GROUP, TOPIC, 0, "m2", [2], AcknowledgeType.ACCEPT)
    assert again == {2: ErrorCode.INVALID_RECORD_STATE}


async def test_a_lock_out_of_range_and_an_unknown_partition_are_refused(broker: Broker) -> None:
    direct = share_direct_of(broker)
    too_long = await direct.acquire(
        OPEN, GROUP, TOPIC, 0, "m1", records_max=1, lock_ms=13 * 3600 * 1000
    )
    assert too_long.error == ErrorCode.INVALID_REQUEST
    unknown = await direct.acquire(OPEN, GROUP, TOPIC, 7, "m1", records_max=1, lock_ms=LOCK_MS)
    assert unknown.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_only_the_batches_holding_the_acquired_offsets_are_decoded() -> None:
    batches = b"".join(
        bytes(build_batch([(None, b"v", [])] * 5, base_offset=base)) for base in (0, 5, 10)
    )
    held = share_direct._batches_holding(batches, 6, 7)
    assert [h.base_offset for _, h in iter_batch_headers(held)] == [5]
    assert len(share_direct._batches_holding(batches, 4, 10)) == len(batches)
    assert share_direct._batches_holding(batches, 20, 21) == b""
