"""A Fetch response leaves as its buffers, gathered by sendmsg: the records the log
read are sent from their own buffers (never joined into a copy), in order, however
the kernel splits the sends."""

from __future__ import annotations

import socket

import trio

from weir.broker.server.dispatch import ChunkedFrame
from weir.broker.server.gather_send import IOV_MAX, send_buffers
from weir.wire.messages.fetch import FetchResponse, FetchResponsePartition, FetchResponseResponse
from weir.wire.protocol import ApiKey, encode_response, encode_response_chunks


async def sent_through_a_small_socket_buffer(buffers: list[bytes]) -> bytes:
    """What the peer receives of `buffers`, read slowly through 4 KiB buffers."""
    left, right = trio.socket.socketpair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    right.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    expected_bytes = sum(len(buffer) for buffer in buffers)
    received = bytearray()
    progress_calls = 0

    def progress() -> None:
        nonlocal progress_calls
        progress_calls += 1

    async def receive() -> None:
        while len(received) < expected_bytes:
            received.extend(await right.recv(3000))
            await trio.sleep(0)

    with left, right:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            await send_buffers(left, buffers, progress)
    assert progress_calls >= 1
    return bytes(received)


async def test_buffers_arrive_whole_and_in_order_across_partial_sends() -> None:
    buffers = [bytes([index % 251]) * (1 + index * 37 % 9000) for index in range(300)]
    assert await sent_through_a_small_socket_buffer(buffers) == b"".join(buffers)


async def test_more_buffers_than_one_sendmsg_takes_are_all_sent() -> None:
    buffers = [index.to_bytes(2, "big") for index in range(IOV_MAX * 2 + 5)]
    assert await sent_through_a_small_socket_buffer(buffers) == b"".join(buffers)


def test_a_fetch_responses_record_sets_are_its_own_chunks_not_copies() -> None:
    records = [bytes([partition]) * 16_384 for partition in range(3)]
    body = FetchResponse(
        responses=[
            FetchResponseResponse(
                topic="t",
                partitions=[
                    FetchResponsePartition(partition_index=index, records=data)
                    for index, data in enumerate(records)
                ],
            )
        ]
    )
    chunks = encode_response_chunks(ApiKey.FETCH, 12, 7, body)
    frame = ChunkedFrame(chunks)
    assert [chunk for chunk in chunks if len(chunk) == 16_384] == records
    assert all(any(chunk is data for chunk in chunks) for data in records)
    assert frame.joined() == encode_response(ApiKey.FETCH, 12, 7, body)
    assert len(frame) == len(frame.joined())
