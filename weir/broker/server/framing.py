"""Kafka's framing on a client connection: size-prefixed frames, read in order,
allocating only as bytes arrive, with the frame size bounded."""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable

import trio

FRAME_SIZE_PREFIX = struct.Struct(">i")
# api_key int16 + api_version int16 + correlation_id int32 + client_id length int16
REQUEST_HEADER_BYTES_MIN = 10
RECEIVE_CHUNK_BYTES = 256 * 1024


class ConnectionClosedError(Exception):
    """The peer closed, broke the framing rules, or timed out."""


class FrameSizeError(ConnectionClosedError):
    """A frame's size prefix is outside the limits: the broker closes."""


class FrameReader:
    """Reads size-prefixed frames, allocating only as bytes actually arrive.

    Frames come back as views of a `bytearray` of their own, so handlers may
    patch them in place (Produce stamps offsets into the batches it stores).
    A frame that is not wholly buffered is received in chunks of at most
    RECEIVE_CHUNK_BYTES and joined once: two copies of its bytes in all."""

    def __init__(self, stream: trio.abc.ReceiveStream, frame_bytes_max: int) -> None:
        self._stream = stream
        self.frame_bytes_max = frame_bytes_max
        # A request's header is at least this long; a bare SASL token (after
        # SaslHandshake v0) may be shorter, and the connection lowers it meanwhile.
        self.frame_bytes_min = REQUEST_HEADER_BYTES_MIN
        self._buffer = bytearray()

    async def _receive(self, byte_count_max: int) -> bytes | bytearray:
        chunk = await self._stream.receive_some(min(byte_count_max, RECEIVE_CHUNK_BYTES))
        if not chunk:
            raise ConnectionClosedError("peer closed the connection")
        return chunk

    async def _fill(self, byte_count: int) -> None:
        while len(self._buffer) < byte_count:
            self._buffer += await self._receive(max(byte_count - len(self._buffer), 4096))

    async def wait_for_frame_start(self) -> None:
        await self._fill(1)

    async def read_frame(self, admit: Callable[[int], Awaitable[None]] | None = None) -> memoryview:
        """The next frame. `admit(size)` is awaited once its size is known and
        before its body is received (the in-flight budget's charge)."""
        await self._fill(4)
        size = self._checked_size()
        if admit is not None:
            await admit(size)
        if len(self._buffer) >= 4 + size:
            return self._take(size)
        chunks: list[bytes | bytearray] = [self._buffer[4:]]
        missing = 4 + size - len(self._buffer)
        self._buffer = bytearray()
        while missing > 0:
            chunk = await self._receive(missing)
            chunks.append(chunk)
            missing -= len(chunk)
        return memoryview(bytearray().join(chunks))

    def buffered_frame(self) -> memoryview | None:
        """The next frame if it is wholly buffered already (no await), else None."""
        if len(self._buffer) < 4:
            return None
        size = self._checked_size()
        if len(self._buffer) < 4 + size:
            return None
        return self._take(size)

    def _checked_size(self) -> int:
        (size,) = FRAME_SIZE_PREFIX.unpack_from(self._buffer)
        if size < self.frame_bytes_min or size > self.frame_bytes_max:
            raise FrameSizeError(
                f"frame size {size} outside [{self.frame_bytes_min}, {self.frame_bytes_max}]"
            )
        return int(size)

    def _take(self, size: int) -> memoryview:
        frame = self._buffer[4 : 4 + size]  # a bytearray of its own
        del self._buffer[: 4 + size]
        return memoryview(frame)
