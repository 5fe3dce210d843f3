"""The connection watchdog never charges a peer for time the event loop was
stalled (issue 9: a client pinging every 10 ms was reset during a long
produce).

A stall longer than a timeout used to wake the watchdog and the reader in the
same batch: the peer's frame had arrived during the stall, but the watchdog
could run first, see the deadline stamped before the stall as passed, and close
the connection with the frame unread (the peer sees a reset)."""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import replace
from pathlib import Path

import pytest
import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.server.connection_watchdog import ConnectionWatchdog
from weir.broker.server.kafka_listener import KafkaServer
from weir.wire.protocol import ApiKey, encode_request

TIMEOUT_MS = 200
STALL_S = 3 * TIMEOUT_MS / 1000
ROUNDS = 6


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    config = BrokerConfig(data_dir=tmp_path)
    limits = replace(
        config.limits,
        connection_idle_timeout_ms=TIMEOUT_MS,
        request_receive_timeout_ms=TIMEOUT_MS,
    )
    return Broker(replace(config, limits=limits))


def broker_stream(sock: socket.socket) -> trio.SocketStream:
    return trio.SocketStream(trio.socket.from_stdlib_socket(sock))


def api_versions_frame(correlation_id: int) -> bytes:
    return encode_request(ApiKey.API_VERSIONS, 0, correlation_id, "pinger", {})


def receive_response(peer: socket.socket) -> int:
    """The correlation id of the next response; raises if the broker closed."""
    peer.settimeout(5)
    header = peer.recv(4, socket.MSG_WAITALL)
    if len(header) < 4:
        raise ConnectionError("the broker closed the connection")
    (size,) = struct.unpack(">i", header)
    body = peer.recv(size, socket.MSG_WAITALL)
    (correlation_id,) = struct.unpack_from(">i", body)
    return int(correlation_id)


async def test_a_frame_sent_during_a_loop_stall_is_answered(broker: Broker) -> None:
    """Each round: the peer sends a request while the loop is blocked for
    longer than both timeouts, then waits for its answer."""
    peer, broker_side = socket.socketpair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(KafkaServer(broker).serve_connection, broker_stream(broker_side))
        for correlation_id in range(ROUNDS):
            await trio.sleep(0.05)  # the reader waits for the next frame
            peer.sendall(api_versions_frame(correlation_id))
            time.sleep(STALL_S)  # the loop stalls (as under a long produce)
            answered = await trio.to_thread.run_sync(receive_response, peer)
            assert answered == correlation_id
        peer.close()


async def test_an_idle_peer_is_still_closed(broker: Broker) -> None:
    peer, broker_side = socket.socketpair()
    with trio.fail_after(5):
        await KafkaServer(broker).serve_connection(broker_stream(broker_side))
    peer.settimeout(1)
    assert peer.recv(1) == b""  # closed by the watchdog, not by the peer


async def test_a_deadline_seen_passed_twice_unchanged_closes() -> None:
    watchdog = ConnectionWatchdog(idle_timeout_s=0.1, receive_timeout_s=0.1)
    watchdog.expect_frame_start()
    scope = trio.CancelScope()
    started = trio.current_time()
    with trio.fail_after(2):
        await watchdog.run(scope)
    assert scope.cancel_called
    assert watchdog.expired_reason == "idle for too long"
    # Enforced up to two check intervals late: one to see it, one to confirm.
    assert trio.current_time() - started <= 0.1 + 3 * watchdog.check_interval_s + 0.2
