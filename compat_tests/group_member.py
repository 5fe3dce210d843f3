"""One consumer-group member as its own process, for the group compatibility tests.

    python group_member.py BOOTSTRAP TOPIC GROUP PROTOCOL OUT_FILE [DELAY_MS [INSTANCE_ID]]

PROTOCOL: `consumer` (KIP-848), `classic-eager` or `classic-cooperative`. Each consumed
message is processed (DELAY_MS of sleep), appended to OUT_FILE as "partition offset
value" (line-buffered), then committed synchronously: at-least-once, so a SIGKILL can
repeat only the one recorded-but-uncommitted message per partition. Runs until
killed or 60 s pass.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer

RUN_S_MAX = 60.0


def main() -> None:
    bootstrap, topic, group_id, protocol, out_path = sys.argv[1:6]
    delay_s = int(sys.argv[6]) / 1000 if len(sys.argv) > 6 else 0.0
    instance_id = sys.argv[7] if len(sys.argv) > 7 else None
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if instance_id is not None:
        config["group.instance.id"] = instance_id  # static membership (KIP-345)
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = 6000
        config["heartbeat.interval.ms"] = 500
        if protocol == "classic-cooperative":
            config["partition.assignment.strategy"] = "cooperative-sticky"
    consumer = Consumer(config)
    consumer.subscribe([topic])
    deadline = time.monotonic() + RUN_S_MAX
    with open(out_path, "a", buffering=1) as out:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            time.sleep(delay_s)  # a slow consumer, as the test asked for
            value = (message.value() or b"").decode()
            out.write(f"{message.partition()} {message.offset()} {value}\n")
            consumer.commit(message=message, asynchronous=False)
    consumer.close()


if __name__ == "__main__":
    main()
