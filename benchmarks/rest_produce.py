"""REST produce (docs/http-records.md) against Kafka-protocol produce of the same
records, in one run against one `weir serve` of this tree: records/s and the
broker's CPU per record (user + system time of the broker process over each mode).

    PYTHONPATH=. .venv/bin/python benchmarks/rest_produce.py --records 20000 --rounds 3

Modes, each writing --records records of --value-bytes (a JSON string value) to its
own 1-partition topic, acks=all:

- `rest-single`: --clients concurrent keep-alive HTTP/1.1 clients, one record per
  POST (Confluent's plain request);
- `rest-stream`: --streams chunked POSTs, records concatenated, the delivery
  reports read as they come (Confluent's streaming mode);
- `kafka`: confluent-kafka's Producer (librdkafka, its default batching), the
  Kafka-protocol path for the same records.

The client runs on the same machine (its CPU is not the broker's, which is what
the per-record figure counts).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import trio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

READY_TIMEOUT_S = 30.0
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
STREAM_CHUNK_RECORDS = 50


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S  # utime, stime


class Broker:
    def __init__(self) -> None:
        self.kafka_port, self.http_port = free_port(), free_port()
        self.data_dir = Path(tempfile.mkdtemp(prefix="weir-rest-produce-"))
        tree = Path(__file__).resolve().parent.parent
        self.process = subprocess.Popen(
            [sys.executable, "-m", "weir.cli.main", "serve", "--data-dir", str(self.data_dir),
             "--kafka-listen", f"127.0.0.1:{self.kafka_port}",
             "--http-listen", f"127.0.0.1:{self.http_port}"],
            env=dict(os.environ, PYTHONPATH=str(tree)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/health/ready", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the broker did not come up") from None
                time.sleep(0.2)
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.cluster_id = str(self.admin.list_topics(timeout=10).cluster_id)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def topic(self, name: str) -> str:
        self.admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=10)
        return name

    def path(self, topic: str) -> str:
        return f"/v3/clusters/{self.cluster_id}/topics/{topic}/records"

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def record_json(i: int, value: str) -> bytes:
    return json.dumps({"value": {"type": "STRING", "data": f"{i}:{value}"}}).encode()


async def read_head_and_body(stream: trio.SocketStream, buffer: bytearray) -> bytes:
    """One response with a Content-Length; returns its body."""
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise EOFError
        buffer += chunk
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise EOFError
        rest += chunk
    buffer[:] = rest[length:]
    return rest[:length]


async def rest_single(broker: Broker, topic: str, count: int, value: str, clients: int) -> None:
    path = broker.path(topic)
    next_index = iter(range(count))

    async def client() -> None:
        stream = await trio.open_tcp_stream("127.0.0.1", broker.http_port)
        buffer = bytearray()
        async with stream:
            for i in next_index:
                body = record_json(i, value)
                head = (f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
                await stream.send_all(head + body)
                answer = await read_head_and_body(stream, buffer)
                assert b'"error_code":200' in answer, answer

    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(client)


async def rest_stream(broker: Broker, topic: str, count: int, value: str, streams: int) -> None:
    path = broker.path(topic)
    per_stream = count // streams

    async def one(first: int) -> None:
        stream = await trio.open_tcp_stream("127.0.0.1", broker.http_port)
        async with stream:
            head = (f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n").encode()  # fmt: skip
            await stream.send_all(head)

            async def send() -> None:
                for start in range(first, first + per_stream, STREAM_CHUNK_RECORDS):
                    end = min(start + STREAM_CHUNK_RECORDS, first + per_stream)
                    data = b"".join(record_json(i, value) for i in range(start, end))
                    await stream.send_all(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await stream.send_all(b"0\r\n\r\n")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send)
                marker = b'"error_code":200'
                reported, tail = 0, b""
                while reported < per_stream:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        raise EOFError(tail)
                    seen = tail + chunk
                    reported += seen.count(marker)
                    tail = seen[-(len(marker) - 1) :]

    async with trio.open_nursery() as nursery:
        for index in range(streams):
            nursery.start_soon(one, index * per_stream)


def kafka(broker: Broker, topic: str, count: int, value: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(count):
        payload = json.dumps(f"{i}:{value}")  # the same bytes REST stores for STRING
        while True:
            try:
                producer.produce(topic, value=payload[1:-1].encode())
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(60) == 0


def measure(broker: Broker, run: Callable[[], None], count: int) -> tuple[float, float]:
    """(records/s, broker CPU µs per record) of one run."""
    cpu_before = cpu_seconds(broker.process.pid)
    started = time.perf_counter()
    run()
    elapsed_s = time.perf_counter() - started
    cpu_s = cpu_seconds(broker.process.pid) - cpu_before
    return count / elapsed_s, cpu_s / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="rest-single,rest-stream,kafka")
    args = parser.parse_args()
    value = "v" * args.value_bytes
    broker = Broker()
    results: dict[str, list[tuple[float, float]]] = {
        "rest-single": [],
        "rest-stream": [],
        "kafka": [],
    }
    try:
        count, clients, streams = args.records, args.clients, args.streams
        modes: dict[str, Callable[[str], None]] = {
            "rest-single": lambda t: trio.run(rest_single, broker, t, count, value, clients),
            "rest-stream": lambda t: trio.run(rest_stream, broker, t, count, value, streams),
            "kafka": lambda t: kafka(broker, t, count, value),
        }
        for round_index in range(args.rounds):
            for name, run in modes.items():
                if name not in args.modes.split(","):
                    continue
                topic = broker.topic(f"bench-{name}-{round_index}")
                rate, cpu_us = measure(
                    broker, lambda run=run, topic=topic: run(topic), args.records
                )
                results[name].append((rate, cpu_us))
                print(f"round {round_index + 1} {name:12} {rate:9.0f} records/s  "
                      f"broker CPU {cpu_us:7.1f} µs/record", flush=True)  # fmt: skip
    finally:
        broker.stop()
    print(f"\nmedians ({args.records} records of {args.value_bytes} B, {args.rounds} rounds):")
    for name, rows in results.items():
        if not rows:
            continue
        rate = statistics.median(r for r, _ in rows)
        cpu_us = statistics.median(c for _, c in rows)
        print(f"  {name:12} {rate:9.0f} records/s  broker CPU {cpu_us:7.1f} µs/record")


if __name__ == "__main__":
    main()
