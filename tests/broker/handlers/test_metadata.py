"""Metadata through the handler, on a real Broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.handlers.metadata import handle_metadata
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

from ..handler_calls import call


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    broker.create_topic(broker.controller.plan_topic("orders", 2, 1))
    yield broker
    broker.close()


def by_id(topic_id: uuid.UUID, name: str | None) -> dict[str, Any]:
    return {
        "topics": [{"name": name, "topic_id": topic_id}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }


@pytest.mark.parametrize("name", [None, ""])
async def test_metadata_v12_looks_a_topic_up_by_its_id_whatever_the_name(
    broker: Broker, name: str | None
) -> None:
    """The Java AdminClient's describeTopics(TopicCollection.ofTopicIds(...)) sends the
    id with the name left at "" (its generated default), not null."""
    record = broker.controller.topic("orders")
    assert record is not None
    response = await call(
        broker, handle_metadata, ApiKey.METADATA, 12, by_id(record.topic_id, name)
    )
    [topic] = response.topics
    assert (topic.error_code, topic.name, topic.topic_id) == (
        ErrorCode.NONE,
        "orders",
        record.topic_id,
    )
    assert len(topic.partitions) == 2


async def test_metadata_v12_answers_an_unknown_id_with_unknown_topic_id(broker: Broker) -> None:
    missing = uuid.uuid4()
    response = await call(broker, handle_metadata, ApiKey.METADATA, 12, by_id(missing, ""))
    [topic] = response.topics
    assert (topic.error_code, topic.name, topic.topic_id) == (
        ErrorCode.UNKNOWN_TOPIC_ID,
        None,
        missing,
    )
