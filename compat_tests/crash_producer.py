"""A producer process for the crash test (run as a script, not collected by pytest).

    python crash_producer.py BOOTSTRAP TOPIC ACK_FILE MESSAGES_MAX

Produces keyed messages (key-N / value-N) with acks=all through confluent-kafka
and appends one line per *acknowledged* message to ACK_FILE:
`<partition> <offset> <N>`; each line is flushed to the OS as soon as the
delivery report arrives, so a SIGKILL of this process loses no recorded line
except possibly a torn last one. Failed deliveries are counted, not recorded.
"""

from __future__ import annotations

import sys
from typing import Any

from confluent_kafka import KafkaError, Message, Producer


def main(argv: list[str]) -> int:
    bootstrap, topic, ack_path, messages_max_text = argv
    messages_max = int(messages_max_text)
    failures = 0
    with open(ack_path, "a", buffering=1) as acks:

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            nonlocal failures
            if err is not None:
                failures += 1
                return
            seq = int(msg.key().decode().removeprefix("key-"))
            acks.write(f"{msg.partition()} {msg.offset()} {seq}\n")
            acks.flush()

        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": "compat-crash-producer",
            "acks": "all",
            "linger.ms": 2,
            "batch.num.messages": 200,
            "message.timeout.ms": 30_000,
        }
        producer = Producer(config)
        for seq in range(messages_max):
            while True:
                try:
                    producer.produce(
                        topic,
                        key=f"key-{seq}".encode(),
                        value=f"value-{seq}".encode(),
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        producer.flush(30)
    print(f"produced {messages_max}, failed deliveries {failures}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
