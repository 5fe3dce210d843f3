"""CreateTopics, DeleteTopics and CreatePartitions handlers against a real Broker.

Requests are encoded and decoded by the wire layer, and responses are encoded and
decoded back, so field names and per-version fields are the wire's own."""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.offsets_topic import OFFSETS_TOPIC_NAME, ensure_offsets_topic
from weir.broker.handlers.admin_topics import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from weir.broker.handlers.broker_configs import ConfigSource
from weir.controller.controller import TRANSACTION_STATE_TOPIC_NAME
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.log.config import TOPIC_CONFIGS
from weir.wire.protocol import (
    ApiKey,
)

from ..handler_calls import call

ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    yield broker
    broker.close()


def new_topic(
    name: str,
    num_partitions: int = 1,
    replication_factor: int = 1,
    *,
    assignments: Sequence[tuple[int, list[int]]] = (),
    configs: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": num_partitions,
        "replication_factor": replication_factor,
        "assignments": [{"partition_index": i, "broker_ids": ids} for i, ids in assignments],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


async def create(
    broker: Broker, *topics: dict[str, Any], version: int = 7, validate_only: bool = False
) -> Any:
    body = {"topics": list(topics), "timeout_ms": 30_000, "validate_only": validate_only}
    return await call(broker, handle_create_topics, ApiKey.CREATE_TOPICS, version, body)


async def create_one(broker: Broker, topic: dict[str, Any], **kw: Any) -> Any:
    response = await create(broker, topic, **kw)
    assert len(response.topics) == 1
    return response.topics[0]


def partition_dirs(broker: Broker, topic: str) -> list[str]:
    return sorted(
        p.name for p in broker.config.data_dir.iterdir() if p.name.startswith(f"{topic}-")
    )


# -- CreateTopics ------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(2, 8))
async def test_create_topic_makes_partitions_and_logs(broker: Broker, version: int) -> None:
    result = await create_one(broker, new_topic("orders", 3), version=version)
    assert result.name == "orders"
    assert result.error_code == ErrorCode.NONE
    assert result.error_message is None
    record = broker.controller.topic("orders")
    assert record is not None and record.partition_count == 3
    assert [broker.partition("orders", i) is not None for i in range(3)] == [True] * 3
    assert partition_dirs(broker, "orders") == ["orders-0", "orders-1", "orders-2"]
    if version >= 5:
        assert result.num_partitions == 3
        assert result.replication_factor == 1
        assert {c.name for c in result.configs} == set(TOPIC_CONFIGS)
    if version >= 7:
        assert result.topic_id == record.topic_id


async def test_created_topic_reports_its_configs_with_sources(broker: Broker) -> None:
    topic = new_topic("t", configs={"retention.ms": "1000", "cleanup.policy": "compact,delete"})
    result = await create_one(broker, topic, version=5)
    configs = {c.name: c for c in result.configs}
    assert configs["retention.ms"].value == "1000"
    assert configs["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert not any(c.read_only or c.is_sensitive for c in result.configs)
    record = broker.controller.topic("t")
    assert record is not None
    assert record.configs == {"retention.ms": "1000", "cleanup.policy": "compact,delete"}
    replica = broker.partition("t", 0)
    assert replica is not None and replica.log.config.retention_ms == 1000


async def test_defaults_apply_for_minus_one(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path, default_partition_count=4))
    try:
        result = await create_one(broker, new_topic("t", -1, -1))
        assert result.error_code == ErrorCode.NONE
        assert (result.num_partitions, result.replication_factor) == (4, 1)
        assert partition_dirs(broker, "t") == [f"t-{i}" for i in range(4)]
    finally:
        broker.close()


@pytest.mark.parametrize("version", [5, 7])
async def test_validate_only_creates_nothing(broker: Broker, version: int) -> None:
    result = await create_one(
        broker, new_topic("t", 2, configs={"retention.ms": "5"}), version=version,
        validate_only=True,
    )  # fmt: skip
    assert result.error_code == ErrorCode.NONE
    assert result.num_partitions == 2
    assert {c.name: c.value for c in result.configs}["retention.ms"] == "5"
    if version >= 7:
        assert result.topic_id == ZERO_UUID
    assert broker.controller.topic("t") is None
    assert broker.partition("t", 0) is None
    assert partition_dirs(broker, "t") == []


async def test_validate_only_still_reports_errors(broker: Broker) -> None:
    result = await create_one(broker, new_topic("t", 0), validate_only=True)
    assert result.error_code == ErrorCode.INVALID_PARTITIONS


async def test_duplicate_names_fail_only_those_topics(broker: Broker) -> None:
    response = await create(broker, new_topic("dup"), new_topic("ok"), new_topic("dup", 2))
    by_name = {t.name: t for t in response.topics}
    assert len(response.topics) == 2
    assert by_name["dup"].error_code == ErrorCode.INVALID_REQUEST
    assert by_name["dup"].error_message
    assert by_name["dup"].num_partitions == -1
    assert by_name["ok"].error_code == ErrorCode.NONE
    assert broker.controller.topic("dup") is None
    assert broker.controller.topic("ok") is not None


async def test_existing_topic_is_refused(broker: Broker) -> None:
    await create_one(broker, new_topic("t", 2))
    result = await create_one(broker, new_topic("t", 5))
    assert result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert result.error_message == "Topic 't' already exists."
    assert result.topic_id == ZERO_UUID
    record = broker.controller.topic("t")
    assert record is not None and record.partition_count == 2


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (new_topic("bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (new_topic(".."), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (new_topic(""), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (new_topic("x" * 250), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (new_topic("__cluster_metadata"), ErrorCode.INVALID_REQUEST),
        (new_topic("t", 0), ErrorCode.INVALID_PARTITIONS),
        (new_topic("t", -2), ErrorCode.INVALID_PARTITIONS),
        (new_topic("t", 1_000_000), ErrorCode.INVALID_PARTITIONS),
        (new_topic("t", 1, 3), ErrorCode.INVALID_REPLICATION_FACTOR),
        (new_topic("t", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (new_topic("t", 1, -5), ErrorCode.INVALID_REPLICATION_FACTOR),
        (new_topic("t", configs={"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
        (new_topic("t", configs={"no.such.config": "1"}), ErrorCode.INVALID_CONFIG),
        (new_topic("t", configs={"retention.ms": None}), ErrorCode.INVALID_CONFIG),
        (new_topic("t", configs={"cleanup.policy": "delete,shred"}), ErrorCode.INVALID_CONFIG),
        # manual assignments: numPartitions/replicationFactor must then be -1
        (new_topic("t", 1, -1, assignments=[(0, [1])]), ErrorCode.INVALID_REQUEST),
        (new_topic("t", -1, 1, assignments=[(0, [1])]), ErrorCode.INVALID_REQUEST),
        (new_topic("t", -1, -1, assignments=[(0, [2])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (new_topic("t", -1, -1, assignments=[(0, [1, 1])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (new_topic("t", -1, -1, assignments=[(0, [1, 2])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (new_topic("t", -1, -1, assignments=[(0, [])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (new_topic("t", -1, -1, assignments=[(1, [1])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (
            new_topic("t", -1, -1, assignments=[(0, [1]), (0, [1])]),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
    ],
)
async def test_invalid_topics_are_refused_with_a_message(
    broker: Broker, topic: dict[str, Any], error: ErrorCode
) -> None:
    result = await create_one(broker, topic)
    assert result.error_code == error
    assert result.error_message
    assert (result.num_partitions, result.replication_factor) == (-1, -1)
    assert broker.controller.topics() == []
    assert list(broker.config.data_dir.glob("*-0")) == []


@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize("name", [OFFSETS_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME])
async def test_clients_cannot_create_internal_topics(
    broker: Broker, name: str, validate_only: bool
) -> None:
    topic = new_topic(name, 1, configs={"cleanup.policy": "delete", "retention.ms": "3000"})
    result = await create_one(broker, topic, validate_only=validate_only)
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert result.error_message == f"Creation of internal topic {name} is prohibited."
    assert broker.controller.topic(name) is None
    assert partition_dirs(broker, name) == []


async def test_creating_the_existing_offsets_topic_is_refused_as_internal(broker: Broker) -> None:
    ensure_offsets_topic(broker, partition_count=2)
    result = await create_one(broker, new_topic(OFFSETS_TOPIC_NAME, 1))
    assert result.error_code == ErrorCode.INVALID_REQUEST
    record = broker.controller.topic(OFFSETS_TOPIC_NAME)
    assert record is not None and record.partition_count == 2


async def test_manual_assignment_sets_the_partition_count(broker: Broker) -> None:
    topic = new_topic("t", -1, -1, assignments=[(1, [1]), (0, [1]), (2, [1])])
    result = await create_one(broker, topic)
    assert result.error_code == ErrorCode.NONE
    assert result.num_partitions == 3
    assert partition_dirs(broker, "t") == ["t-0", "t-1", "t-2"]


async def test_names_differing_by_dot_and_underscore_collide(broker: Broker) -> None:
    await create_one(broker, new_topic("a.b"))
    result = await create_one(broker, new_topic("a_b"))
    assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "collides" in result.error_message
    response = await create(broker, new_topic("x_y"), new_topic("x.y"))
    assert [t.error_code for t in response.topics] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    ]


async def test_one_bad_topic_does_not_fail_the_others(broker: Broker) -> None:
    response = await create(broker, new_topic("good"), new_topic("bad", 1, 2))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("good", ErrorCode.NONE),
        ("bad", ErrorCode.INVALID_REPLICATION_FACTOR),
    ]


async def test_created_topic_survives_restart(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    await create_one(broker, new_topic("kept", 2, configs={"retention.ms": "77"}))
    broker.close()
    again = Broker(BrokerConfig(data_dir=tmp_path))
    again.open_logs()
    try:
        replica = again.partition("kept", 1)
        assert replica is not None and replica.log.config.retention_ms == 77
    finally:
        again.close()


# -- DeleteTopics ------------------------------------------------------------------------


async def delete_by_name(broker: Broker, *names: str, version: int = 5) -> Any:
    if version >= 6:
        body: dict[str, Any] = {"topics": [{"name": n} for n in names], "timeout_ms": 1000}
    else:
        body = {"topic_names": list(names), "timeout_ms": 1000}
    return await call(broker, handle_delete_topics, ApiKey.DELETE_TOPICS, version, body)


async def delete_by_id(broker: Broker, *ids: uuid.UUID) -> Any:
    body = {"topics": [{"name": None, "topic_id": i} for i in ids], "timeout_ms": 1000}
    return await call(broker, handle_delete_topics, ApiKey.DELETE_TOPICS, 6, body)


@pytest.mark.parametrize("version", range(1, 7))
async def test_delete_topic_by_name_removes_it_and_its_logs(broker: Broker, version: int) -> None:
    await create_one(broker, new_topic("doomed", 2))
    await create_one(broker, new_topic("kept"))
    response = await delete_by_name(broker, "doomed", version=version)
    assert len(response.responses) == 1
    result = response.responses[0]
    assert (result.name, result.error_code) == ("doomed", ErrorCode.NONE)
    if version >= 5:
        assert result.error_message is None
    assert broker.controller.topic("doomed") is None
    assert broker.partition("doomed", 0) is None and broker.partition("doomed", 1) is None
    assert partition_dirs(broker, "doomed") == []
    assert partition_dirs(broker, "kept") == ["kept-0"]


async def test_delete_topic_by_id(broker: Broker) -> None:
    await create_one(broker, new_topic("doomed"))
    record = broker.controller.topic("doomed")
    assert record is not None
    response = await delete_by_id(broker, record.topic_id)
    result = response.responses[0]
    assert (result.name, result.topic_id, result.error_code) == (
        "doomed",
        record.topic_id,
        ErrorCode.NONE,
    )
    assert broker.controller.topic("doomed") is None
    assert partition_dirs(broker, "doomed") == []


async def test_deleted_name_can_be_created_again_with_a_new_id(broker: Broker) -> None:
    first = await create_one(broker, new_topic("t"))
    await delete_by_name(broker, "t")
    second = await create_one(broker, new_topic("t"))
    assert second.error_code == ErrorCode.NONE
    assert second.topic_id != first.topic_id


async def test_delete_unknown_topics(broker: Broker) -> None:
    by_name = await delete_by_name(broker, "nope", version=6)
    assert by_name.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by_name.responses[0].topic_id == ZERO_UUID
    unknown_id = uuid.uuid4()
    by_id = await delete_by_id(broker, unknown_id)
    result = by_id.responses[0]
    assert (result.name, result.topic_id, result.error_code) == (
        None,
        unknown_id,
        ErrorCode.UNKNOWN_TOPIC_ID,
    )


async def test_delete_v6_refuses_malformed_entries(broker: Broker) -> None:
    await create_one(broker, new_topic("a"))
    await create_one(broker, new_topic("b"))
    a = broker.controller.topic("a")
    assert a is not None
    body = {
        "topics": [
            {"name": None, "topic_id": ZERO_UUID},  # neither
            {"name": "a", "topic_id": a.topic_id},  # both
            {"name": "b", "topic_id": ZERO_UUID},
            {"name": "b", "topic_id": ZERO_UUID},  # duplicate name
        ],
        "timeout_ms": 1000,
    }
    response = await call(broker, handle_delete_topics, ApiKey.DELETE_TOPICS, 6, body)
    codes = sorted((r.name or "", r.error_code) for r in response.responses)
    assert codes == [
        ("", ErrorCode.INVALID_REQUEST),
        ("a", ErrorCode.INVALID_REQUEST),
        ("b", ErrorCode.INVALID_REQUEST),
    ]
    assert all(r.error_message for r in response.responses)
    assert broker.controller.topic("a") is not None
    assert broker.controller.topic("b") is not None


async def test_delete_by_name_and_id_of_the_same_topic_is_refused(broker: Broker) -> None:
    await create_one(broker, new_topic("a"))
    a = broker.controller.topic("a")
    assert a is not None
    body = {
        "topics": [{"name": None, "topic_id": a.topic_id}, {"name": "a", "topic_id": ZERO_UUID}],
        "timeout_ms": 1000,
    }
    response = await call(broker, handle_delete_topics, ApiKey.DELETE_TOPICS, 6, body)
    assert [r.error_code for r in response.responses] == [ErrorCode.INVALID_REQUEST]
    assert broker.controller.topic("a") is not None


async def test_duplicate_ids_are_refused(broker: Broker) -> None:
    await create_one(broker, new_topic("a"))
    a = broker.controller.topic("a")
    assert a is not None
    response = await delete_by_id(broker, a.topic_id, a.topic_id)
    assert [r.error_code for r in response.responses] == [ErrorCode.INVALID_REQUEST]
    assert broker.controller.topic("a") is not None


async def test_internal_topics_are_not_deleted(broker: Broker) -> None:
    record = TopicRecord(name="__internal", topic_id=uuid.uuid4(), partition_count=1)
    record.is_internal = True
    broker.create_topic(record)
    response = await delete_by_name(broker, "__internal")
    assert response.responses[0].error_code == ErrorCode.INVALID_REQUEST
    assert broker.controller.topic("__internal") is not None


async def test_a_client_made_topic_of_an_internal_name_is_not_deleted(broker: Broker) -> None:
    # As an older Weir let a client create it: not marked internal.
    record = TopicRecord(name=OFFSETS_TOPIC_NAME, topic_id=uuid.uuid4(), partition_count=1)
    broker.create_topic(record)
    by_name = await delete_by_name(broker, OFFSETS_TOPIC_NAME)
    by_id = await delete_by_id(broker, record.topic_id)
    assert [r.error_code for r in by_name.responses + by_id.responses] == [
        ErrorCode.INVALID_REQUEST
    ] * 2
    assert broker.controller.topic(OFFSETS_TOPIC_NAME) is not None
    assert partition_dirs(broker, OFFSETS_TOPIC_NAME) == [f"{OFFSETS_TOPIC_NAME}-0"]


async def test_deleting_wakes_parked_fetches(broker: Broker) -> None:
    import trio

    await create_one(broker, new_topic("t"))
    replica = broker.partition("t", 0)
    assert replica is not None
    event = trio.Event()
    replica.waiters.add(event)
    await delete_by_name(broker, "t")
    assert event.is_set()


# -- CreatePartitions --------------------------------------------------------------------


async def add_partitions(
    broker: Broker,
    *topics: dict[str, Any],
    version: int = 3,
    validate_only: bool = False,
) -> Any:
    body = {"topics": list(topics), "timeout_ms": 1000, "validate_only": validate_only}
    return await call(broker, handle_create_partitions, ApiKey.CREATE_PARTITIONS, version, body)


def grow(name: str, count: int, assignments: list[list[int]] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "count": count,
        "assignments": None if assignments is None else [{"broker_ids": a} for a in assignments],
    }


@pytest.mark.parametrize("version", range(0, 4))
async def test_create_partitions_adds_partitions(broker: Broker, version: int) -> None:
    await create_one(broker, new_topic("t", 1))
    response = await add_partitions(broker, grow("t", 3), version=version)
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        ("t", ErrorCode.NONE, None)
    ]
    record = broker.controller.topic("t")
    assert record is not None and record.partition_count == 3
    assert record.leader_epochs == [0, 0, 0]
    assert partition_dirs(broker, "t") == ["t-0", "t-1", "t-2"]
    assert broker.partition("t", 2) is not None


async def test_new_partitions_get_the_topic_configs(broker: Broker) -> None:
    await create_one(broker, new_topic("t", 1, configs={"retention.ms": "123"}))
    await add_partitions(broker, grow("t", 2))
    replica = broker.partition("t", 1)
    assert replica is not None and replica.log.config.retention_ms == 123


async def test_create_partitions_validate_only_changes_nothing(broker: Broker) -> None:
    await create_one(broker, new_topic("t", 1))
    response = await add_partitions(broker, grow("t", 4), validate_only=True)
    assert response.results[0].error_code == ErrorCode.NONE
    record = broker.controller.topic("t")
    assert record is not None and record.partition_count == 1
    assert partition_dirs(broker, "t") == ["t-0"]


@pytest.mark.parametrize(
    ("request_topic", "error"),
    [
        (grow("t", 2), ErrorCode.INVALID_PARTITIONS),
        (grow("t", 1), ErrorCode.INVALID_PARTITIONS),
        (grow("t", 0), ErrorCode.INVALID_PARTITIONS),
        (grow("t", 1_000_000), ErrorCode.INVALID_PARTITIONS),
        (grow("nope", 3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (grow("t", 4, [[1]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (grow("t", 3, [[2]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (grow("t", 3, [[1, 2]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (grow("t", 3, [[]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ],
)
async def test_invalid_partition_increases_are_refused(
    broker: Broker, request_topic: dict[str, Any], error: ErrorCode
) -> None:
    await create_one(broker, new_topic("t", 2))
    response = await add_partitions(broker, request_topic)
    assert response.results[0].error_code == error
    assert response.results[0].error_message
    record = broker.controller.topic("t")
    assert record is not None and record.partition_count == 2


@pytest.mark.parametrize("validate_only", [False, True])
async def test_internal_topics_get_no_partitions_from_clients(
    broker: Broker, validate_only: bool
) -> None:
    ensure_offsets_topic(broker, partition_count=2)
    response = await add_partitions(
        broker,
        grow(OFFSETS_TOPIC_NAME, 4),
        grow(TRANSACTION_STATE_TOPIC_NAME, 4),
        validate_only=validate_only,
    )
    assert [(r.name, r.error_code) for r in response.results] == [
        (OFFSETS_TOPIC_NAME, ErrorCode.INVALID_REQUEST),
        (TRANSACTION_STATE_TOPIC_NAME, ErrorCode.INVALID_REQUEST),
    ]
    assert all("internal topic" in r.error_message for r in response.results)
    record = broker.controller.topic(OFFSETS_TOPIC_NAME)
    assert record is not None and record.partition_count == 2
    assert broker.partition(OFFSETS_TOPIC_NAME, 2) is None


async def test_create_partitions_with_assignments(broker: Broker) -> None:
    await create_one(broker, new_topic("t", 1))
    response = await add_partitions(broker, grow("t", 3, [[1], [1]]))
    assert response.results[0].error_code == ErrorCode.NONE
    assert partition_dirs(broker, "t") == ["t-0", "t-1", "t-2"]


async def test_create_partitions_duplicate_topic_is_refused(broker: Broker) -> None:
    await create_one(broker, new_topic("t", 1))
    await create_one(broker, new_topic("u", 1))
    response = await add_partitions(broker, grow("t", 2), grow("t", 3), grow("u", 2))
    assert [(r.name, r.error_code) for r in response.results] == [
        ("t", ErrorCode.INVALID_REQUEST),
        ("u", ErrorCode.NONE),
    ]
    record = broker.controller.topic("t")
    assert record is not None and record.partition_count == 1


def test_recreated_topic_does_not_resurrect_data_a_crash_left_behind(tmp_path: Path) -> None:
    """Deletion updates the metadata, then removes the files; a crash between the
    two leaves the directory. A topic created later with that name starts empty."""
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    broker.create_topic(broker.controller.plan_topic("t", 1, 1))
    replica = broker.partition("t", 0)
    assert replica is not None
    replica.log.append(build_batch([(b"k", b"old", [])]), leader_epoch=0, now_ms=wall_clock_ms())
    broker.controller.remove_topic("t")  # the crash comes before the files go
    broker.close()

    restarted = Broker(BrokerConfig(data_dir=tmp_path))
    restarted.open_logs()
    restarted.create_topic(restarted.controller.plan_topic("t", 1, 1))
    recreated = restarted.partition("t", 0)
    assert recreated is not None and recreated.log.log_end_offset == 0
    restarted.close()


# -- all or nothing ----------------------------------------------------------------------


def fail_log_creation_after(
    monkeypatch: pytest.MonkeyPatch, broker: Broker, successes: int, errno_code: int
) -> None:
    """The log manager's creation of a partition (`build_log`, on the disk
    executor) fails (EMFILE, ENOSPC) after `successes` partitions."""
    original = broker.log_manager.build_log
    calls = {"count": 0}

    def failing_create(*args: Any, **kwargs: Any) -> Any:
        calls["count"] += 1
        if calls["count"] > successes:
            raise OSError(errno_code, os.strerror(errno_code))
        return original(*args, **kwargs)

    monkeypatch.setattr(broker.log_manager, "build_log", failing_create)


async def test_a_topic_whose_partitions_cannot_all_be_created_leaves_no_trace(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_log_creation_after(monkeypatch, broker, 2, errno.EMFILE)
    result = await create_one(broker, new_topic("half", 5))
    assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert broker.controller.topic("half") is None
    assert partition_dirs(broker, "half") == []
    assert not [key for key in broker.partitions if key[0] == "half"]
    monkeypatch.undo()
    assert (await create_one(broker, new_topic("half", 5))).error_code == ErrorCode.NONE


async def test_partitions_that_cannot_all_be_added_leave_the_topic_as_it_was(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_one(broker, new_topic("grow", 2))
    fail_log_creation_after(monkeypatch, broker, 1, errno.ENOSPC)
    body = {
        "topics": [{"name": "grow", "count": 4, "assignments": None}],
        "timeout_ms": 1000,
        "validate_only": False,
    }
    response = await call(broker, handle_create_partitions, ApiKey.CREATE_PARTITIONS, 3, body)
    assert response.results[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    record = broker.controller.topic("grow")
    assert record is not None and record.partition_count == 2
    assert partition_dirs(broker, "grow") == ["grow-0", "grow-1"]


async def test_a_delete_the_metadata_cannot_record_changes_nothing(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_one(broker, new_topic("stays", 2))

    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(broker.controller._store, "save", full_disk)
    result = (await delete_by_name(broker, "stays")).responses[0]
    assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert broker.controller.topic("stays") is not None
    assert partition_dirs(broker, "stays") == ["stays-0", "stays-1"]
    assert broker.partition("stays", 0) is not None
