"""A handler learns when the connection its request came on ends: the leader's
cue that a killed follower's fetch connection closed (cluster_member.py)."""

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
from weir.broker.handlers.context import ClientConnection, RequestContext
from weir.wire.protocol import ApiKey, encode_request


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    return Broker(BrokerConfig(data_dir=tmp_path))


async def test_close_callbacks_run_once_when_the_client_goes_away(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    metadata = dispatch.HANDLERS[ApiKey.METADATA]
    seen: list[ClientConnection | None] = []
    closed: list[str] = []

    def watching(ctx: RequestContext, request: Any) -> Any:
        seen.append(ctx.connection)
        if ctx.connection is not None and len(seen) == 1:
            ctx.connection.on_close(lambda: closed.append("closed"))
        return metadata(ctx, request)

    monkeypatch.setitem(dispatch.HANDLERS, ApiKey.METADATA, watching)
    client, server_side = trio.testing.memory_stream_pair()
    for correlation_id in (1, 2):
        await client.send_all(
            encode_request(ApiKey.METADATA, 1, correlation_id, "c", {"topics": []})
        )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.KafkaServer(broker).serve_connection, server_side)
        await trio.testing.wait_all_tasks_blocked()
        assert len(seen) == 2
        assert closed == []  # open while the client is there
        await client.aclose()
    assert seen[0] is not None and seen[0] is seen[1]  # one object per connection
    assert closed == ["closed"]
    late: list[str] = []
    seen[0].on_close(lambda: late.append("at once"))  # registered after the end: runs now
    assert late == ["at once"]
