"""A response sent from several buffers with one system call (sendmsg): a Fetch
response's record sets are the buffers the log read them into, so they are
never joined into one more copy before the kernel copies them to the socket.

Measured against `sendfile` from the log file (BENCHMARKS.md, issue 26): over
loopback, sendfile cost more broker CPU per message than this single copy.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

# Buffers per sendmsg call (Linux's UIO_MAXIOV).
IOV_MAX = 1024


async def send_buffers(
    sock: trio.socket.SocketType,
    buffers: list[bytes | bytearray | memoryview],
    expect_progress: Callable[[], None],
) -> None:
    """Send `buffers` in order on `sock`; `expect_progress` is called before each
    send (the connection's watchdog: a peer that reads nothing is timed out)."""
    views = [memoryview(buffer) for buffer in buffers]
    first = 0
    while first < len(views):
        expect_progress()
        sent = await sock.sendmsg(views[first : first + IOV_MAX])
        while sent:
            if sent >= len(views[first]):
                sent -= len(views[first])
                first += 1
            else:
                views[first] = views[first][sent:]
                sent = 0
