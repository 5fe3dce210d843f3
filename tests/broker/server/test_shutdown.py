"""Shutdown within shutdown_timeout_ms: the Kafka listener closes, requests
already read are answered until the drain deadline, and closing the logs stops
at its timeout (the logs left are recovered at the next start)."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig, HostPort
from weir.broker.server.kafka_listener import KafkaServer
from weir.format.record_batch import build_batch
from weir.log.config import LogConfig
from weir.log.flusher import GroupFlusher
from weir.log.manager import LogManager
from weir.log.partition_metadata import PartitionIdentity
from weir.wire.protocol import ApiKey, decode_response, encode_request

TOPIC_T = PartitionIdentity(uuid.uuid4(), "t")
NOW_MS = 1_700_000_000_000
FETCH_VERSION = 12
CLEAN_SHUTDOWN_FILE_NAME = ".clean-shutdown"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path, kafka_listen=HostPort("127.0.0.1", 0)))
    broker.open_logs()
    broker.create_topic(broker.controller.plan_topic("t", 1, 1))
    yield broker
    broker.close()


def long_poll_fetch(correlation_id: int, max_wait_ms: int) -> bytes:
    """A Fetch at the log end of the empty topic `t`: it waits `max_wait_ms`."""
    body = {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return encode_request(ApiKey.FETCH, FETCH_VERSION, correlation_id, "shutdown-test", body)


async def receive_all(stream: trio.abc.ReceiveStream) -> bytes:
    data = bytearray()
    while chunk := await stream.receive_some(65536):
        data += chunk
    return bytes(data)


async def test_stop_answers_requests_already_read_then_closes(broker: Broker) -> None:
    server = KafkaServer(broker)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        client = await trio.open_tcp_stream("127.0.0.1", port)
        await client.send_all(long_poll_fetch(7, max_wait_ms=500))
        await trio.testing.wait_all_tasks_blocked()  # read and parked
        started = trio.current_time()
        server.stop(drain_deadline=started + 5)
        with trio.fail_after(3):
            received = await receive_all(client)  # the answer, then EOF
        (size,) = struct.unpack_from(">i", received)
        assert len(received) == 4 + size
        correlation_id, _ = decode_response(ApiKey.FETCH, FETCH_VERSION, memoryview(received)[4:])
        assert correlation_id == 7
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", port)
    assert trio.current_time() - started < 2


async def test_stop_cuts_long_polls_at_the_drain_deadline(broker: Broker) -> None:
    server = KafkaServer(broker)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        client = await trio.open_tcp_stream("127.0.0.1", port)
        await client.send_all(long_poll_fetch(8, max_wait_ms=30_000))
        await trio.testing.wait_all_tasks_blocked()  # read and parked
        started = trio.current_time()
        server.stop(drain_deadline=started + 0.3)
        with trio.fail_after(3):
            assert await receive_all(client) == b""
    assert trio.current_time() - started < 1.5
    assert broker.metrics.connections_open == 0


def test_closing_logs_stops_at_the_timeout_and_the_rest_recover_on_open(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, GroupFlusher())
    for index in range(10):
        partition_log = manager.create("t", index, LogConfig(), TOPIC_T)
        batch = build_batch([(b"k", b"v", [])], timestamp_ms=NOW_MS)
        partition_log.append(batch, leader_epoch=0, now_ms=NOW_MS)
        partition_log.flush()
    ticks = iter(range(100))
    left = manager.close_all(timeout_s=4.5, clock_s=lambda: float(next(ticks)))
    assert left == 6  # the clock read 0 (start), then 1..4 before each close, 5: stop
    clean = [(tmp_path / f"t-{i}" / CLEAN_SHUTDOWN_FILE_NAME).exists() for i in range(10)]
    assert clean == [True] * 4 + [False] * 6
    reopened = LogManager(tmp_path, GroupFlusher())
    logs = [reopened.open_existing(t, i, LogConfig(), TOPIC_T) for t, i in reopened.on_disk()]
    assert [partition_log.log_end_offset for partition_log in logs] == [1] * 10
    reopened.close_all()


def test_closing_logs_on_worker_threads_closes_every_one_cleanly(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, GroupFlusher())
    for index in range(40):
        batch = build_batch([(b"k", b"v", [])], timestamp_ms=NOW_MS)
        manager.create("t", index, LogConfig(), TOPIC_T).append(
            batch, leader_epoch=0, now_ms=NOW_MS
        )
    assert manager.close_all(threads_count=8) == 0
    assert all((tmp_path / f"t-{i}" / CLEAN_SHUTDOWN_FILE_NAME).exists() for i in range(40))
    reopened = LogManager(tmp_path, GroupFlusher())
    logs = [reopened.open_existing(t, i, LogConfig(), TOPIC_T) for t, i in reopened.on_disk()]
    assert [partition_log.log_end_offset for partition_log in logs] == [1] * 40
    reopened.close_all()
