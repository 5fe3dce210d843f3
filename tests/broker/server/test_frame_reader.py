"""FrameReader: frames split anywhere across reads come back whole, each in a
writable buffer of its own; bad sizes close the connection."""

from __future__ import annotations

import struct

import pytest
import trio
import trio.testing

from weir.broker.server.framing import (
    RECEIVE_CHUNK_BYTES,
    ConnectionClosedError,
    FrameReader,
)


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def read_all_frames(data: bytes, piece_bytes: int, frames_count: int) -> list[memoryview]:
    send, receive = trio.testing.memory_stream_one_way_pair()
    reader = FrameReader(receive, frame_bytes_max=64 * 1024 * 1024)

    async def sender() -> None:
        for start in range(0, len(data), piece_bytes):
            await send.send_all(data[start : start + piece_bytes])
            await trio.lowlevel.checkpoint()  # the reader sees each piece alone
        await send.aclose()

    frames = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        for _ in range(frames_count):
            frames.append(await reader.read_frame())
    return frames


@pytest.mark.parametrize("piece_bytes", [1, 7, 4096, 300_000])
async def test_frames_split_across_reads_come_back_whole(piece_bytes: int) -> None:
    payloads = [
        b"a" * 10,
        bytes(range(256)) * 1000,  # 256,000 bytes: more than one receive chunk
        b"b" * 11,
        b"c" * (RECEIVE_CHUNK_BYTES * 2 + 3),
    ]
    if piece_bytes == 1:
        payloads = payloads[:1] + [bytes(range(256)) * 4] + payloads[2:3]
    data = b"".join(framed(p) for p in payloads)
    with trio.fail_after(30):
        frames = await read_all_frames(data, piece_bytes, len(payloads))
    assert [bytes(frame) for frame in frames] == payloads


async def test_frames_are_writable_and_independent() -> None:
    data = framed(b"x" * 20) + framed(b"y" * 200_000)
    with trio.fail_after(10):
        small, large = await read_all_frames(data, 65_536, 2)
    for frame in (small, large):
        assert not frame.readonly
        frame[0] = ord("z")
    assert bytes(small) == b"z" + b"x" * 19
    assert bytes(large) == b"z" + b"y" * 199_999


@pytest.mark.parametrize("size", [-1, 0, 9, 64 * 1024 * 1024 + 1])
async def test_frame_size_outside_limits_closes(size: int) -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    reader = FrameReader(receive, frame_bytes_max=64 * 1024 * 1024)
    await send.send_all(struct.pack(">i", size) + b"\0" * 16)
    with pytest.raises(ConnectionClosedError), trio.fail_after(5):
        await reader.read_frame()


async def test_peer_closing_mid_frame_closes() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    reader = FrameReader(receive, frame_bytes_max=1 << 20)
    await send.send_all(struct.pack(">i", 100_000) + b"\0" * 5000)
    await send.aclose()
    with pytest.raises(ConnectionClosedError), trio.fail_after(5):
        await reader.read_frame()
