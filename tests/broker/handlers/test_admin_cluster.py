"""DescribeCluster against a real Broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig, HostPort
from weir.broker.handlers.describe_cluster import handle_describe_cluster
from weir.format.errors import ErrorCode
from weir.wire.protocol import (
    ApiKey,
)

from ..handler_calls import call

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)
# Kafka's cluster operations without an authorizer: CREATE(5), ALTER(7), DESCRIBE(8),
# CLUSTER_ACTION(9), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11), IDEMPOTENT_WRITE(12).
CLUSTER_OPERATION_CODES = {5, 7, 8, 9, 10, 11, 12}


async def describe_cluster(broker: Broker, version: int, **body: Any) -> Any:
    return await call(broker, handle_describe_cluster, ApiKey.DESCRIBE_CLUSTER, version, body)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("include_operations", [False, True])
async def test_describes_this_node_as_the_whole_cluster(
    tmp_path: Path, version: int, include_operations: bool
) -> None:
    config = BrokerConfig(
        data_dir=tmp_path,
        node_id=5,
        kafka_listen=HostPort("0.0.0.0", 9092),
        kafka_advertise=HostPort("broker.example", 29092),
    )
    broker = Broker(config)
    try:
        response = await describe_cluster(
            broker, version, include_cluster_authorized_operations=include_operations
        )
    finally:
        broker.close()
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    assert response.cluster_id == broker.controller.cluster_id
    assert len(response.cluster_id) == 22
    assert response.controller_id == 5
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (5, "broker.example", 29092, None)
    ]
    if include_operations:
        bits = response.cluster_authorized_operations
        assert {code for code in range(32) if bits >> code & 1} == CLUSTER_OPERATION_CODES
    else:
        assert response.cluster_authorized_operations == AUTHORIZED_OPERATIONS_UNKNOWN
    if version >= 1:
        assert response.endpoint_type == 1


async def test_without_advertise_the_listener_is_described(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path, kafka_listen=HostPort("127.0.0.1", 9999)))
    try:
        response = await describe_cluster(broker, 1, endpoint_type=1)
    finally:
        broker.close()
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", 9999)]


@pytest.mark.parametrize(
    ("endpoint_type", "error"),
    [
        (2, ErrorCode.MISMATCHED_ENDPOINT_TYPE),
        (0, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
        (3, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
        (-1, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
    ],
)
async def test_other_endpoint_types_are_refused(
    tmp_path: Path, endpoint_type: int, error: ErrorCode
) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    try:
        response = await describe_cluster(broker, 1, endpoint_type=endpoint_type)
    finally:
        broker.close()
    assert response.error_code == error
    assert response.error_message
    assert (response.cluster_id, list(response.brokers)) == ("", [])
