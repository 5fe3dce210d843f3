"""The HTTP listener's cost on /metrics and /health/ready under 64 concurrent
clients, for several builds side by side in one run.

Starts one `weir serve` per source tree (own ports, fresh data dir, a topic of
8 partitions so /metrics has per-partition samples), then, per round and per
path, runs CLIENTS concurrent HTTP/1.1 clients for --seconds against each build
in turn. A client keeps its connection alive while the server does and opens a
new one when the server closes it (the hand-written server closed after every
answer). Prints requests/s, p99 latency and broker CPU per request (user +
system time of the broker process over the run), then the medians:

    git archive <commit> | (mkdir /tmp/weir-before && tar -x -C /tmp/weir-before)
    .venv/bin/python benchmarks/http_cost.py before=/tmp/weir-before after=. --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import trio
from source_builds import SourceBuild, parse_builds, start, stop  # this directory

CLIENTS = 64
PATHS = ("/health/ready", "/metrics")
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S  # utime, stime


async def read_response(stream: trio.SocketStream, buffer: bytearray) -> bool:
    """Read one response; True when the server keeps the connection open."""
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise EOFError
        buffer += chunk
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(b":") for line in head.split(b"\r\n")[1:])
    }
    length = int(headers.get(b"content-length", b"0"))
    while len(rest) < length:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise EOFError
        rest += chunk
    buffer[:] = rest[length:]
    return headers.get(b"connection", b"").lower() != b"close"


async def client(port: int, path: str, until_s: float, latencies_s: list[float]) -> None:
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()
    stream: trio.SocketStream | None = None
    buffer = bytearray()
    while trio.current_time() < until_s:
        started_s = trio.current_time()
        try:
            if stream is None:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                buffer.clear()
            await stream.send_all(request)
            keep = await read_response(stream, buffer)
        except (OSError, EOFError, trio.BrokenResourceError):
            stream = None  # refused or dropped: counted as nothing, tried again
            continue
        latencies_s.append(trio.current_time() - started_s)
        if not keep:
            await stream.aclose()
            stream = None
    if stream is not None:
        await stream.aclose()


async def hammer(port: int, path: str, seconds: float) -> list[float]:
    latencies_s: list[float] = []
    until_s = trio.current_time() + seconds
    async with trio.open_nursery() as nursery:
        for _ in range(CLIENTS):
            nursery.start_soon(client, port, path, until_s, latencies_s)
    return latencies_s


Rows = dict[str, list[tuple[float, float, float]]]  # path: (requests/s, p99 ms, CPU µs)


def measure(build: SourceBuild, results: Rows, path: str, seconds: float) -> None:
    assert build.process is not None
    pid = build.process.pid
    cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
    latencies_s = trio.run(hammer, build.port + 1, path, seconds)
    cpu_s, wall_s = cpu_seconds(pid) - cpu_before, time.monotonic() - wall_before
    count = len(latencies_s)
    p99_ms = statistics.quantiles(latencies_s, n=100)[98] * 1000 if count > 1 else float("nan")
    row = (count / wall_s, p99_ms, cpu_s / max(count, 1) * 1e6)
    results.setdefault(path, []).append(row)
    print(
        f"  {build.name:>10} {path:<14} {row[0]:>8,.0f} requests/s  p99 {row[1]:7.1f} ms  "
        f"broker CPU {row[2]:6.0f} µs/request",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("builds", nargs="+", metavar="NAME=SOURCE_TREE")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base-port", type=int, default=47500)
    args = parser.parse_args()
    builds = parse_builds(args.builds, args.base_port, "http-cost")
    # Per build and path: requests/s, p99 ms, CPU µs per request, one row per round.
    results: dict[str, Rows] = {build.name: {} for build in builds}
    try:
        for build in builds:
            start(build)
        for round_index in range(args.rounds):
            print(f"round {round_index + 1}/{args.rounds} ({CLIENTS} clients)", flush=True)
            for path in PATHS:
                for build in builds:
                    measure(build, results[build.name], path, args.seconds)
        print("medians:")
        for path in PATHS:
            for build in builds:
                rows = results[build.name][path]
                rate, p99, cpu = (statistics.median(column) for column in zip(*rows, strict=True))
                print(
                    f"  {build.name:>10} {path:<14} {rate:>8,.0f} requests/s  p99 {p99:7.1f} ms  "
                    f"broker CPU {cpu:6.0f} µs/request"
                )
    finally:
        for build in builds:
            stop(build)


if __name__ == "__main__":
    main()
