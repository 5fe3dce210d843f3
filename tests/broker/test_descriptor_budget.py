"""The open files limit is a budget: connections and the broker's own work are
reserved, and partitions are admitted only while the rest can serve them all."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from weir.broker import broker as broker_module
from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig, Limits
from weir.broker.coordinators.group_service import attach_group_service
from weir.broker.descriptor_budget import BROKER_WORK_DESCRIPTORS, DescriptorBudget
from weir.broker.handlers.admin_topics import handle_create_partitions, handle_create_topics
from weir.controller.controller import ControllerError
from weir.format.errors import ErrorCode
from weir.log.descriptors import DESCRIPTORS_PER_PARTITION, shared_log_files
from weir.wire.protocol import (
    ApiKey,
)

from .handler_calls import call

# The usual default soft limit: connections get 480 (connections_max 400), log
# files 480, less 48 of headroom: 144 partitions, 50 of them the offsets topic's.
LOW_LIMIT = 1024
PARTITIONS_MAX = 144
OFFSETS_PARTITIONS = 50


async def create_topic(broker: Broker, name: str, partitions: int, **kw: Any) -> Any:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": 1,
             "assignments": [], "configs": []}  # fmt: skip
    body = {"topics": [topic], "timeout_ms": 30_000, **kw}
    response = await call(broker, handle_create_topics, ApiKey.CREATE_TOPICS, 7, body)
    return response.topics[0]


async def add_partitions(broker: Broker, name: str, count: int) -> Any:
    body = {"topics": [{"name": name, "count": count, "assignments": None}],
            "timeout_ms": 30_000, "validate_only": False}  # fmt: skip
    response = await call(broker, handle_create_partitions, ApiKey.CREATE_PARTITIONS, 3, body)
    return response.results[0]


@pytest.fixture
def low_limit_brokers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Broker]]:
    """make(**config): a broker whose process seems to have an open files limit
    of LOW_LIMIT, with group support (the offsets topic's partitions are counted
    before they exist)."""
    capacity = shared_log_files().capacity
    monkeypatch.setattr(broker_module, "open_files_limit", lambda: LOW_LIMIT)
    brokers: list[Broker] = []

    def make(**config: Any) -> Broker:
        broker = Broker(BrokerConfig(data_dir=tmp_path, **config))
        broker.open_logs()
        attach_group_service(broker)
        brokers.append(broker)
        return broker

    yield make
    for broker in brokers:
        broker.close()
    shared_log_files().resize(capacity)


@pytest.fixture
def low_limit_broker(low_limit_brokers: Callable[..., Broker]) -> Broker:
    return low_limit_brokers()


def partition_dirs(data_dir: Path) -> list[str]:
    return sorted(path.name for path in data_dir.iterdir() if path.is_dir())


def test_the_budget_reserves_connections_and_broker_work_before_log_files() -> None:
    budget = DescriptorBudget.plan(20_000, Limits())
    assert budget.connections == 1000 + 64 + 16
    assert budget.connections_max == 1000
    assert budget.log_files == 20_000 - budget.connections - BROKER_WORK_DESCRIPTORS
    assert (
        budget.partitions_max
        == (budget.log_files - budget.log_files_headroom) // DESCRIPTORS_PER_PARTITION
    )
    assert budget.log_files_headroom >= budget.log_files // 10


def test_a_limit_too_low_for_connections_max_lowers_it(low_limit_broker: Broker) -> None:
    budget = low_limit_broker.descriptor_budget
    assert budget.connections == (LOW_LIMIT - BROKER_WORK_DESCRIPTORS) // 2
    assert low_limit_broker.config.limits.connections_max == budget.connections_max < 1000
    assert shared_log_files().capacity == budget.log_files
    assert budget.partitions_max == PARTITIONS_MAX


async def test_creating_topics_past_the_budget_is_refused_and_leaves_no_trace(
    low_limit_broker: Broker,
) -> None:
    broker = low_limit_broker
    data_dir = broker.config.data_dir
    fits = PARTITIONS_MAX - OFFSETS_PARTITIONS - 4
    assert (await create_topic(broker, "fits", fits)).error_code == ErrorCode.NONE
    before = partition_dirs(data_dir)
    refused = await create_topic(broker, "too-many", 5)
    assert refused.error_code == ErrorCode.POLICY_VIOLATION
    assert "creating 5 partitions would need 15 file descriptors" in refused.error_message
    assert "ulimit -n" in refused.error_message
    assert broker.controller.topic("too-many") is None
    assert partition_dirs(data_dir) == before
    validated = await create_topic(broker, "too-many", 5, validate_only=True)
    assert validated.error_code == ErrorCode.POLICY_VIOLATION


async def test_adding_partitions_past_the_budget_is_refused(low_limit_broker: Broker) -> None:
    broker = low_limit_broker
    assert (await create_topic(broker, "grows", 1)).error_code == 0
    too_many = PARTITIONS_MAX - OFFSETS_PARTITIONS + 1
    refused = await add_partitions(broker, "grows", too_many)
    assert refused.error_code == ErrorCode.POLICY_VIOLATION
    record = broker.controller.topic("grows")
    assert record is not None and record.partition_count == 1
    assert partition_dirs(broker.config.data_dir) == ["grows-0"]
    assert (await add_partitions(broker, "grows", too_many - 1)).error_code == ErrorCode.NONE


def test_auto_creating_a_topic_past_the_budget_is_refused(
    low_limit_brokers: Callable[..., Broker],
) -> None:
    broker = low_limit_brokers(default_partition_count=PARTITIONS_MAX)
    with pytest.raises(ControllerError) as refused:
        broker.auto_create_topic("auto")
    assert refused.value.error_code == ErrorCode.POLICY_VIOLATION
    assert broker.controller.topic("auto") is None
    assert partition_dirs(broker.config.data_dir) == []


def test_the_broker_raises_its_soft_open_files_limit_to_the_hard_limit() -> None:
    script = (
        "import logging, resource; "
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE); "
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)); "
        "from weir.broker.descriptor_budget import raise_open_files_limit; "
        "level, message = raise_open_files_limit(); "
        "print(level == logging.INFO, message); "
        "print(resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    logged, raised = done.stdout.strip().splitlines()
    assert raised == "True", done.stderr
    assert logged.startswith("True open files limit (RLIMIT_NOFILE) raised from 256 to")
