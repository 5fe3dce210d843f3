"""A bug in one request costs that connection, never the broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import weir.broker.server.dispatch as dispatch
import weir.broker.server.kafka_listener as server
from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.handlers.context import RequestContext
from weir.wire.protocol import ApiKey, encode_request


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    return Broker(BrokerConfig(data_dir=tmp_path))


def metadata_frame() -> bytes:
    return encode_request(ApiKey.METADATA, 1, 9, "bug-test", {"topics": []})


async def test_unencodable_handler_body_closes_only_that_connection(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_handler(ctx: RequestContext, request: Any) -> dict[str, Any]:
        return {"brokers": "not a list"}

    monkeypatch.setitem(dispatch.HANDLERS, ApiKey.METADATA, broken_handler)
    outcome = await dispatch.handle_frame(broker, memoryview(metadata_frame()[4:]))
    assert outcome.close_connection


async def test_unexpected_error_in_a_connection_is_contained(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def exploding(broker: Broker, frame: memoryview) -> dispatch.RequestOutcome:
        raise RuntimeError("a bug")

    monkeypatch.setattr(server, "handle_frame", exploding)
    client, server_side = trio.testing.memory_stream_pair()
    await client.send_all(metadata_frame())
    with trio.fail_after(5):
        await server.KafkaServer(broker).serve_connection(server_side)  # returns, does not raise
    assert broker.metrics.connections_open == 0
