"""A real Broker with its group and transaction services, topics `orders` (2
partitions) and `secret` (1), for the authorization tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import attach_group_service
from weir.broker.coordinators.transaction_service import (
    TransactionService,
    attach_transaction_service,
)


@pytest.fixture
async def broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    broker = Broker(
        BrokerConfig(
            data_dir=tmp_path, offsets_topic_partition_count=2, transaction_state_partition_count=2
        )
    )
    broker.open_logs()
    attach_group_service(broker)
    transactions = attach_transaction_service(broker)
    assert isinstance(transactions, TransactionService)
    await nursery.start(broker.flusher.run)
    await nursery.start(transactions.run, wall_clock_ms)
    await transactions.prepare()
    assert broker.groups is not None
    await broker.groups.prepare()
    broker.create_topic(broker.controller.plan_topic("orders", 2, 1))
    broker.create_topic(broker.controller.plan_topic("secret", 1, 1))
    yield broker
    broker.close()
