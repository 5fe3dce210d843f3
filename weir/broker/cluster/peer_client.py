"""A broker's own Kafka client of another broker: the follower's connection to a
partition's leader (Fetch with its replica id, OffsetForLeaderEpoch).

One request at a time on one TCP stream; every response frame's size is checked
against `frame_bytes_max` before it is read, and every wait is bounded.
"""

from __future__ import annotations

import struct
from typing import Any

import trio

from weir.format.primitives import DecodeError
from weir.wire.protocol import decode_response, encode_request

_INT32 = struct.Struct(">i")
# One receive at most (a large frame arrives in pieces of this size).
RECEIVE_BYTES_MAX = 1024 * 1024


class PeerError(Exception):
    """The peer is unreachable, closed the connection, or answered nonsense."""


class PeerConnection:
    def __init__(self, stream: trio.SocketStream, client_id: str, *, frame_bytes_max: int) -> None:
        self._stream = stream
        self._client_id = client_id
        self._frame_bytes_max = frame_bytes_max
        self._correlation_id = 0
        self._buffer = bytearray()

    @classmethod
    async def open(
        cls, host: str, port: int, client_id: str, *, frame_bytes_max: int, timeout_s: float
    ) -> PeerConnection:
        try:
            with trio.fail_after(timeout_s):
                stream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            raise PeerError(f"cannot connect to {host}:{port}: {exc}") from exc
        return cls(stream, client_id, frame_bytes_max=frame_bytes_max)

    async def request(self, api_key: int, api_version: int, body: object, timeout_s: float) -> Any:
        """Send one request and return its decoded response body."""
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        frame = encode_request(api_key, api_version, correlation_id, self._client_id, body)
        try:
            with trio.fail_after(timeout_s):
                await self._stream.send_all(frame)
                response = await self._read_frame()
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise PeerError(f"connection lost: {exc}") from exc
        except trio.TooSlowError as exc:
            raise PeerError(f"no answer within {timeout_s:.1f} s") from exc
        try:
            answered_id, decoded = decode_response(api_key, api_version, memoryview(response))
        except DecodeError as exc:
            raise PeerError(f"undecodable response: {exc}") from exc
        if answered_id != correlation_id:
            raise PeerError(f"response to request {answered_id}, expected {correlation_id}")
        return decoded

    async def _read_frame(self) -> bytes:
        size = _INT32.unpack(await self._read_exactly(4))[0]
        if not 4 <= size <= self._frame_bytes_max:
            raise PeerError(f"response frame of {size} bytes")
        return await self._read_exactly(size)

    async def _read_exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:
            chunk = await self._stream.receive_some(
                min(count - len(self._buffer), RECEIVE_BYTES_MAX)
            )
            if not chunk:
                raise PeerError("the peer closed the connection")
            self._buffer += chunk
        taken = bytes(self._buffer[:count])
        del self._buffer[:count]
        return taken

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._stream.aclose()


class PeerPool:
    """One connection per peer broker for a broker's own requests to the others
    (the transaction coordinator's WriteTxnMarkers, a leader's AddPartitionsToTxn
    verification): opened on first use, one request at a time per peer, dropped
    on any failure (the next request opens a new one)."""

    def __init__(self, client_id: str, *, frame_bytes_max: int, timeout_s: float) -> None:
        self._client_id = client_id
        self._frame_bytes_max = frame_bytes_max
        self._timeout_s = timeout_s
        self._connections: dict[int, PeerConnection] = {}
        self._locks: dict[int, trio.Lock] = {}

    async def request(
        self, node_id: int, address: tuple[str, int], api_key: int, api_version: int, body: object
    ) -> Any:
        """Send one request to broker `node_id` at `address`; PeerError on failure."""
        async with self._locks.setdefault(node_id, trio.Lock()):
            connection = self._connections.get(node_id)
            if connection is None:
                connection = await PeerConnection.open(
                    *address,
                    self._client_id,
                    frame_bytes_max=self._frame_bytes_max,
                    timeout_s=self._timeout_s,
                )
                self._connections[node_id] = connection
            try:
                return await connection.request(api_key, api_version, body, self._timeout_s)
            except PeerError:
                self._connections.pop(node_id, None)
                await connection.aclose()
                raise

    async def aclose(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.aclose()
