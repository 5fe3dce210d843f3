"""Internal topics are the broker's: never auto-created for a client, reported
internal by name, and a client-made `__consumer_offsets` left in a data dir by an
older Weir is adopted at start without losing a committed offset."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crc32c
import pytest

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import GroupService, attach_group_service
from weir.broker.coordinators.offsets_topic import OFFSETS_TOPIC_CONFIGS, OFFSETS_TOPIC_NAME
from weir.broker.handlers.metadata import handle_metadata
from weir.broker.partition_replica import PartitionReplica
from weir.controller.controller import TRANSACTION_STATE_TOPIC_NAME
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.format.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, build_batch
from weir.groupcoord.committed_offsets import (
    CommittedOffset,
    encode_offset_key,
    encode_offset_value,
)
from weir.wire.protocol import (
    ApiKey,
)

from ..handler_calls import call

HOUR_MS = 3_600_000
CLIENT_CONFIGS = {"cleanup.policy": "delete", "retention.ms": "3000"}


def open_broker(data_dir: Path, **settings: Any) -> Broker:
    broker = Broker(BrokerConfig(data_dir=data_dir, **settings))
    broker.open_logs()
    return broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = open_broker(tmp_path)
    yield broker
    broker.close()


def add_client_made_topic(
    broker: Broker, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    """A topic of an internal name as a client could create it before Weir refused
    that: not internal, with the client's configs."""
    record = TopicRecord(
        name=name, topic_id=uuid.uuid4(), partition_count=partitions, configs=configs or {}
    )
    broker.create_topic(record)


def replica_of(broker: Broker, topic: str, index: int = 0) -> PartitionReplica:
    replica = broker.partition(topic, index)
    assert replica is not None
    return replica


def append_durably(replica: PartitionReplica, batch: bytes) -> None:
    replica.log.append(batch, leader_epoch=replica.leader_epoch, now_ms=wall_clock_ms())
    replica.log.flush()


def commit_record(group_id: str, topic: str, partition: int, offset: int) -> bytes:
    key = encode_offset_key(group_id, topic, partition)
    value = encode_offset_value(CommittedOffset(offset, commit_timestamp_ms=wall_clock_ms()))
    return build_batch([(key, value, [])], timestamp_ms=wall_clock_ms())


def committed(service: GroupService, group_id: str, topic: str, partition: int) -> int | None:
    found = service.offsets.fetch(group_id, topic, partition)
    return found.offset if found is not None else None


# -- Metadata ------------------------------------------------------------------------------


async def metadata(broker: Broker, *names: str) -> list[Any]:
    body = {
        "topics": [{"name": name, "topic_id": uuid.UUID(int=0)} for name in names],
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
    }
    response = await call(broker, handle_metadata, ApiKey.METADATA, 12, body)
    return list(response.topics)


async def test_metadata_never_auto_creates_an_internal_topic(broker: Broker) -> None:
    topics = await metadata(broker, OFFSETS_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME, "orders")
    assert [(t.name, t.error_code) for t in topics] == [
        (OFFSETS_TOPIC_NAME, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TRANSACTION_STATE_TOPIC_NAME, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("orders", ErrorCode.NONE),
    ]
    assert [t.name for t in broker.controller.topics()] == ["orders"]


async def test_metadata_reports_a_client_made_internal_topic_as_internal(broker: Broker) -> None:
    add_client_made_topic(broker, TRANSACTION_STATE_TOPIC_NAME)
    [topic] = await metadata(broker, TRANSACTION_STATE_TOPIC_NAME)
    assert (topic.error_code, topic.is_internal) == (ErrorCode.NONE, True)


# -- adopting a client-made offsets topic at start ---------------------------------------


def test_client_made_offsets_topic_becomes_the_brokers_and_keeps_its_offsets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = open_broker(tmp_path)
    add_client_made_topic(old, OFFSETS_TOPIC_NAME, configs=CLIENT_CONFIGS)
    append_durably(replica_of(old, OFFSETS_TOPIC_NAME), commit_record("g", "t", 0, 42))
    old.close()

    broker = open_broker(tmp_path, offsets_topic_partition_count=50)
    with caplog.at_level(logging.WARNING, logger="weir.broker.coordinators.offsets_topic"):
        service = attach_group_service(broker)
    record = broker.controller.topic(OFFSETS_TOPIC_NAME)
    assert record is not None and record.is_internal
    assert record.configs == OFFSETS_TOPIC_CONFIGS
    assert record.partition_count == 1  # groups stay where they were placed
    assert service.partition_for("g") == 0 and committed(service, "g", "t", 0) == 42
    assert "cleanup.policy: delete -> compact" in caplog.text
    assert "retention.ms: 3000 -> (default)" in caplog.text
    assert "keeping 1" in caplog.text
    replica = replica_of(broker, OFFSETS_TOPIC_NAME)
    assert replica.log.enforce_retention(wall_clock_ms() + HOUR_MS) == 0
    assert replica.log.log_start_offset == 0
    broker.close()

    caplog.clear()
    restarted = open_broker(tmp_path, offsets_topic_partition_count=1)
    with caplog.at_level(logging.WARNING, logger="weir.broker.coordinators.offsets_topic"):
        service = attach_group_service(restarted)
    assert caplog.text == ""  # now the broker's own: nothing to change
    again = restarted.controller.topic(OFFSETS_TOPIC_NAME)
    assert again is not None and again.is_internal and again.configs == OFFSETS_TOPIC_CONFIGS
    assert committed(service, "g", "t", 0) == 42
    restarted.close()


def undecodable_batch(key: bytes, value: bytes) -> bytes:
    """A batch with a valid CRC whose attributes claim gzip over an uncompressed body:
    the log accepts it (it never inflates), decoding it fails."""
    batch = bytearray(build_batch([(key, value, [])], timestamp_ms=wall_clock_ms()))
    batch[ATTRIBUTES_OFFSET + 1] |= 1  # codec 1: gzip
    crc = crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:]))
    batch[CRC_OFFSET : CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(batch)


def test_garbage_a_client_wrote_to_the_offsets_topic_does_not_stop_the_load(
    tmp_path: Path,
) -> None:
    old = open_broker(tmp_path)
    add_client_made_topic(old, OFFSETS_TOPIC_NAME, configs=CLIENT_CONFIGS)
    replica = replica_of(old, OFFSETS_TOPIC_NAME)
    append_durably(replica, commit_record("g", "t", 0, 7))
    append_durably(replica, undecodable_batch(b"k", b"v"))
    not_utf8_key = b"\x00\x04\x00\x03|r\x9f"  # a group-coordinator key with a non-UTF-8 id
    append_durably(replica, build_batch([(not_utf8_key, b"\x00\x05garbage", [])]))
    append_durably(replica, commit_record("g", "t", 1, 8))
    old.close()

    broker = open_broker(tmp_path)
    service = attach_group_service(broker)
    assert (committed(service, "g", "t", 0), committed(service, "g", "t", 1)) == (7, 8)
    broker.close()
