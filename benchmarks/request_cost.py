"""Broker CPU per request, measured from outside with a raw Kafka client.

Sends N requests over one connection (`--depth` in flight) and reads the
broker process's user+system CPU time from /proc before and after:

    .venv/bin/python benchmarks/request_cost.py --port 9092 --pid $(pgrep -f 'weir serve') \\
        --api produce --topic bench --requests 3000 --depth 1

`--api produce` sends Produce v9 (acks=all) with one batch of
`--records-per-batch` records (default 2) to partition (i mod --partitions), or
to every partition with `--all-partitions`; `--api fetch` sends Fetch v11 for
every partition from offset 0 (`--fetch-bytes` per partition, no wait: the
topic must hold data) at `--isolation` (read_uncommitted, or read_committed: data
below the last stable offset, with the aborted transactions listed);
`--api api-versions` sends ApiVersions v3.
Run it against two brokers alternately to compare builds side by side.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import time

from weir.format.record_batch import build_batch
from weir.wire.protocol import ApiKey, encode_request

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}  # Fetch's isolation_level


def build_frames(args: argparse.Namespace) -> list[bytes]:
    if args.api == "api-versions":
        body = {"client_software_name": "request-cost", "client_software_version": "1"}
        return [
            encode_request(ApiKey.API_VERSIONS, 3, i, "bench", body) for i in range(args.requests)
        ]
    if args.api == "fetch":
        return [fetch_frame(args, i) for i in range(args.requests)]
    batch = build_batch([(None, b"x" * args.value_bytes, [])] * args.records_per_batch)
    frames = []
    for i in range(args.requests):
        indexes = list(range(args.partitions)) if args.all_partitions else [i % args.partitions]
        partitions = [{"index": index, "records": batch} for index in indexes]
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [{"name": args.topic, "partition_data": partitions}],
        }
        frames.append(encode_request(ApiKey.PRODUCE, 9, i, "bench", body))
    return frames


def fetch_frame(args: argparse.Namespace, correlation_id: int) -> bytes:
    partitions = [
        {"partition": index, "fetch_offset": 0, "partition_max_bytes": args.fetch_bytes}
        for index in range(args.partitions)
    ]
    body = {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": args.fetch_bytes * args.partitions,
        "isolation_level": ISOLATION_LEVELS[args.isolation],
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": args.topic, "partitions": partitions}],
        "forgotten_topics_data": [],
    }
    return encode_request(ApiKey.FETCH, 11, correlation_id, "bench", body)


def cpu_ticks(pid: int) -> tuple[int, int]:
    """utime, stime of the process and of its live child processes (the broker's
    syncfs helper does its fsync work in a child)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    user, system = int(fields[11]), int(fields[12])
    for child in child_pids(pid):
        child_user, child_system = cpu_ticks(child)
        user += child_user
        system += child_system
    return user, system


def child_pids(pid: int) -> list[int]:
    children: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                children += [int(child) for child in f.read().split()]
        except FileNotFoundError:
            continue
    return children


def thread_ticks(pid: int) -> dict[str, int]:
    """utime+stime of the main thread, of all other threads together, and of
    child processes."""
    ticks = {"main thread": 0, "other threads": 0, "child processes": 0}
    for child in child_pids(pid):
        ticks["child processes"] += sum(cpu_ticks(child))
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        name = "main thread" if int(tid) == pid else "other threads"
        ticks[name] += int(fields[11]) + int(fields[12])
    return ticks


def recv_exact(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError("broker closed the connection")
        data += chunk
    return bytes(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True, help="the broker process")
    parser.add_argument("--api", choices=["produce", "fetch", "api-versions"], default="produce")
    parser.add_argument("--fetch-bytes", type=int, default=64 * 1024, help="per partition")
    parser.add_argument("--isolation", choices=list(ISOLATION_LEVELS), default="read_uncommitted")
    parser.add_argument("--topic", default="bench")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--records-per-batch", type=int, default=2)
    parser.add_argument(
        "--all-partitions",
        action="store_true",
        help="one batch for every partition in each request, as a saturated client sends",
    )
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--depth", type=int, default=1, help="requests in flight")
    args = parser.parse_args()
    frames = build_frames(args)
    sock = socket.create_connection((args.host, args.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    user_before, system_before = cpu_ticks(args.pid)
    threads_before = thread_ticks(args.pid)
    started = time.perf_counter()
    sent = received = 0
    while received < len(frames):
        while sent < len(frames) and sent - received < args.depth:
            sock.sendall(frames[sent])
            sent += 1
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        recv_exact(sock, size)
        received += 1
    elapsed_s = time.perf_counter() - started
    user_after, system_after = cpu_ticks(args.pid)
    threads_after = thread_ticks(args.pid)
    n = len(frames)
    user_us = 1e6 * (user_after - user_before) / ticks_per_s / n
    system_us = 1e6 * (system_after - system_before) / ticks_per_s / n
    print(
        f"{args.api} depth {args.depth}{' ' + args.isolation if args.api == 'fetch' else ''}: "
        f"{n / elapsed_s:,.0f} requests/s, broker CPU "
        f"{user_us + system_us:.0f} µs/request (user {user_us:.0f}, system {system_us:.0f})"
    )
    per_thread = {
        name: 1e6 * (ticks - threads_before.get(name, 0)) / ticks_per_s / n
        for name, ticks in threads_after.items()
    }
    print(
        "  by thread: "
        + ", ".join(f"{name} {us:.0f} µs" for name, us in sorted(per_thread.items()) if us >= 1)
    )


if __name__ == "__main__":
    main()
