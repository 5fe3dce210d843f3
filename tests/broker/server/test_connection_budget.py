"""Connections against the in-flight budget, over in-memory streams: a peer
that reads nothing stops being read at its share and frees everything when it
goes; a lone pipelining peer always gets every answer; stuck peers holding the
whole pool do not starve a well-behaved one."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig, Limits
from weir.broker.server.kafka_listener import KafkaServer
from weir.format.record_batch import build_batch
from weir.wire.protocol import ApiKey, decode_response, encode_request

KIB = 1024
MIB = 1024 * KIB
NOW_MS = 1_700_000_000_000
FETCH_VERSION = 12
LIMITS = Limits(
    frame_bytes_max=MIB,
    in_flight_bytes_max=4 * MIB,
    connection_in_flight_bytes_max=MIB,
    connection_in_flight_bytes_min=64 * KIB,
)
BIG_BATCH_BYTES = 64 * KIB


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path, limits=LIMITS))
    broker.open_logs()
    broker.create_topic(broker.controller.plan_topic("big", 1, 1))
    broker.create_topic(broker.controller.plan_topic("small", 1, 1))
    append(broker, "big", [(None, b"b" * BIG_BATCH_BYTES, [])], batches_count=64)
    append(broker, "small", [(None, b"s" * 100, [])], batches_count=10)
    yield broker
    broker.close()


def append(broker: Broker, topic: str, records: Any, batches_count: int) -> None:
    replica = broker.partition(topic, 0)
    assert replica is not None
    for _ in range(batches_count):
        replica.log.append(build_batch(records, timestamp_ms=NOW_MS), leader_epoch=0, now_ms=NOW_MS)
    replica.log.flush()


def log_bytes(broker: Broker, topic: str) -> int:
    replica = broker.partition(topic, 0)
    assert replica is not None
    return replica.log.size_bytes


def fetch_frame(correlation_id: int, topic: str, max_bytes: int) -> bytes:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return encode_request(ApiKey.FETCH, FETCH_VERSION, correlation_id, "budget-test", body)


async def receive_exactly(stream: trio.abc.ReceiveStream, byte_count: int) -> bytes:
    data = bytearray()
    while len(data) < byte_count:
        chunk = await stream.receive_some(byte_count - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return bytes(data)


async def receive_fetch(stream: trio.abc.ReceiveStream) -> tuple[int, int]:
    """(correlation id, record bytes) of the next Fetch response."""
    (size,) = struct.unpack(">i", await receive_exactly(stream, 4))
    frame = await receive_exactly(stream, size)
    correlation_id, body = decode_response(ApiKey.FETCH, FETCH_VERSION, memoryview(frame))
    records = body.responses[0].partitions[0].records
    return correlation_id, len(records or b"")


async def send_quietly(stream: trio.abc.SendStream, data: bytes) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(data)


async def start_stuck_peer(
    nursery: trio.Nursery, server: KafkaServer, fetches_count: int
) -> trio.abc.Stream:
    """A peer that pipelines big fetches and never reads (a lockstep stream:
    the broker's sends block until the peer takes the bytes)."""
    client, server_side = trio.testing.lockstep_stream_pair()
    nursery.start_soon(server.serve_connection, server_side)
    frames = b"".join(fetch_frame(i, "big", 4 * MIB) for i in range(fetches_count))
    nursery.start_soon(send_quietly, client, frames)
    return client


async def test_a_peer_that_reads_nothing_stops_being_read_at_its_share(broker: Broker) -> None:
    server = KafkaServer(broker)
    async with trio.open_nursery() as nursery:
        client = await start_stuck_peer(nursery, server, fetches_count=20)
        await trio.testing.wait_all_tasks_blocked()
        handled = broker.metrics.requests_total["FETCH"]
        assert handled < 5, f"{handled} of 20 fetches read from a peer that reads nothing"
        # Its share, plus the frame and the response that crossed it.
        assert MIB < server.budget.held_bytes <= 2 * MIB + 2 * KIB
        await client.aclose()
    assert server.budget.held_bytes == 0
    assert server.budget.pooled_bytes == 0
    assert broker.metrics.connections_open == 0


async def test_a_lone_peer_pipelining_past_its_share_gets_every_answer(broker: Broker) -> None:
    server = KafkaServer(broker)
    client, server_side = trio.testing.memory_stream_pair()
    frames = b"".join(fetch_frame(i, "big", 2 * MIB) for i in range(16))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_connection, server_side)
        await client.send_all(frames)
        with trio.fail_after(10):
            answers = [await receive_fetch(client) for _ in range(16)]
        assert [correlation_id for correlation_id, _ in answers] == list(range(16))
        assert all(record_bytes >= BIG_BATCH_BYTES for _, record_bytes in answers)
        assert max(record_bytes for _, record_bytes in answers) <= MIB
        await client.aclose()
    assert server.budget.held_bytes == 0


async def test_stuck_peers_holding_the_whole_pool_do_not_starve_a_reading_one(
    broker: Broker,
) -> None:
    server = KafkaServer(broker)
    async with trio.open_nursery() as nursery:
        stuck = [await start_stuck_peer(nursery, server, fetches_count=8) for _ in range(6)]
        await trio.testing.wait_all_tasks_blocked()
        assert server.budget.pooled_bytes >= LIMITS.in_flight_bytes_max - BIG_BATCH_BYTES
        client, server_side = trio.testing.memory_stream_pair()
        nursery.start_soon(server.serve_connection, server_side)
        small_log_bytes = log_bytes(broker, "small")
        for correlation_id in range(3):
            await client.send_all(fetch_frame(correlation_id, "small", MIB))
            with trio.fail_after(5):
                assert await receive_fetch(client) == (correlation_id, small_log_bytes)
        held_before = server.budget.held_bytes
        await client.aclose()
        for peer in stuck:
            await peer.aclose()
    assert held_before > LIMITS.in_flight_bytes_max
    assert server.budget.held_bytes == 0


async def test_a_frame_cut_short_by_a_dying_peer_frees_its_charge(broker: Broker) -> None:
    server = KafkaServer(broker)
    client, server_side = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_connection, server_side)
        await client.send_all(struct.pack(">i", 512 * KIB) + b"\x00" * 1000)
        await trio.testing.wait_all_tasks_blocked()
        assert server.budget.held_bytes == 512 * KIB  # charged before its body arrives
        await client.aclose()
    assert server.budget.held_bytes == 0
