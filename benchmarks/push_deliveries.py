"""Push deliveries per second to a local receiver, with the broker's CPU per record,
against the Kafka-protocol path (a confluent-kafka ShareConsumer accepting the same
records) for comparison.

Starts one `weir serve` (fresh data dir), a threaded http.server receiver on
127.0.0.1 answering 200 at once (compat_tests/push_receiver.py, signatures not
checked, to keep the receiver's cost out of the way), produces --records records of
--value-bytes to a topic of --partitions partitions, then for each batch size:
creates a subscription (start earliest) and times until the receiver has every
record; the broker's CPU (user + system of its process) over that time divided by
the records. Then a ShareConsumer reads the same records (explicit ACCEPT, one
commit_sync per poll). Run from the repository root:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/push_deliveries.py --records 20000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests.harness import WeirProcess, create_topic  # noqa: E402
from compat_tests.push_receiver import PushReceiver  # noqa: E402

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


def produce(bootstrap: str, topic: str, records: int, value_bytes: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    value = b"x" * value_bytes
    for i in range(records):
        producer.produce(topic, value=value, key=str(i).encode())
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def push_run(
    weir: WeirProcess, topic: str, records: int, batch_size: int, concurrency: int
) -> None:
    receiver = PushReceiver().start()
    try:
        count = 0

        def counted() -> int:
            with receiver.lock:
                return sum(len(d.body["records"]) for d in receiver.deliveries)

        name = f"bench-{batch_size}-{concurrency}"
        before_s, started_s = cpu_seconds(weir.pid), time.monotonic()
        with httpx.Client(base_url=weir.http_url, trust_env=False) as client:
            response = client.post(
                "/v1/subscriptions",
                json={
                    "name": name, "topic": topic, "url": receiver.url, "start": "earliest",
                    "batch_size": batch_size, "concurrency": concurrency,
                },
            )  # fmt: skip
            response.raise_for_status()
            while (count := counted()) < records:
                if time.monotonic() - started_s > 600:
                    raise SystemExit(f"only {count} of {records} delivered in 600 s")
                time.sleep(0.05)
            elapsed_s = time.monotonic() - started_s
            cpu_s = cpu_seconds(weir.pid) - before_s
            client.delete(f"/v1/subscriptions/{name}").raise_for_status()
        print(
            f"push batch_size={batch_size:<3} concurrency={concurrency}: "
            f"{records / elapsed_s:8.0f} records/s, {len(receiver.deliveries) / elapsed_s:7.0f} "
            f"POSTs/s, broker CPU {cpu_s / records * 1e6:6.1f} us/record"
        )
    finally:
        receiver.stop()


def share_consumer_run(weir: WeirProcess, topic: str, records: int) -> None:
    group = "bench-share"
    admin = AdminClient({"bootstrap.servers": weir.bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()
    consumer = ShareConsumer(
        {
            "bootstrap.servers": weir.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    seen = 0
    before_s, started_s = cpu_seconds(weir.pid), time.monotonic()
    try:
        while seen < records and time.monotonic() - started_s < 600:
            for message in consumer.poll(1.0):
                if message.error():
                    continue
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                seen += 1
            consumer.commit_sync()
    finally:
        consumer.close()
    elapsed_s = time.monotonic() - started_s
    cpu_s = cpu_seconds(weir.pid) - before_s
    print(
        f"Kafka ShareConsumer (explicit ACCEPT): {seen / elapsed_s:8.0f} records/s, "
        f"broker CPU {cpu_s / max(seen, 1) * 1e6:6.1f} us/record"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch-sizes", default="1,10,100")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="push-bench-") as base:
        weir = WeirProcess(Path(base) / "data", Path(base) / "logs")
        weir.start()
        try:
            topic = "bench"
            create_topic(weir.bootstrap, topic, partitions=args.partitions)
            produce(weir.bootstrap, topic, args.records, args.value_bytes)
            print(
                f"{args.records} records of {args.value_bytes} B on {args.partitions} partitions "
                f"(CPU count {os.cpu_count()})"
            )
            for batch_size in (int(b) for b in args.batch_sizes.split(",")):
                push_run(weir, topic, args.records, batch_size, args.concurrency)
            share_consumer_run(weir, topic, args.records)
        finally:
            weir.close()


if __name__ == "__main__":
    main()
