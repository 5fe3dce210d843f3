"""The confluent-kafka ShareConsumer driver (see driver_spec.py for the protocol).

    python -m compat_tests.share_clients.python_consumer < spec.json

confluent-kafka 2.16.1 (librdkafka 2.16.0) has AcknowledgeType ACCEPT, RELEASE and
REJECT only: a spec asking for RENEW gets an "unsupported" event and exit code 3.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, Message, ShareConsumer

from compat_tests.share_clients.driver_spec import HOLD, UNSUPPORTED_EXIT_CODE, DriverSpec

CLIENT = "confluent-kafka"
ACK_TYPES = {
    "ACCEPT": AcknowledgeType.ACCEPT,
    "RELEASE": AcknowledgeType.RELEASE,
    "REJECT": AcknowledgeType.REJECT,
}


class Driver:
    def __init__(self, spec: DriverSpec) -> None:
        self.spec = spec
        self.sightings: dict[tuple[str, int, int], int] = {}
        self.deliveries = 0

    def emit(self, event: str, **fields: Any) -> None:
        line = {"event": event, "consumer": self.spec.client_id, "t_ms": now_ms(), **fields}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()

    def config(self) -> dict[str, Any]:
        spec = self.spec
        config: dict[str, Any] = {
            "bootstrap.servers": spec.bootstrap,
            "group.id": spec.group,
            "client.id": spec.client_id,
            "share.acknowledgement.mode": "explicit",
        }
        if spec.max_poll_records:
            config["max.poll.records"] = spec.max_poll_records
        if spec.debug:
            config["debug"] = "protocol,msg,cgrp"
        return config

    def on_ack_committed(self, offsets: dict[Any, set[int]], exc: KafkaException | None) -> None:
        for tp, acked in offsets.items():
            self.emit(
                "ack_result",
                topic=tp.topic,
                partition=tp.partition,
                offsets=sorted(acked),
                error=error_name(exc),
            )

    def run(self) -> int:
        spec = self.spec
        self.emit("started", client=CLIENT)
        listed = [*spec.actions.values(), *spec.value_actions.values()]
        wanted = {spec.default_action, *(a for v in listed for a in v)}
        if "RENEW" in wanted:
            self.emit("unsupported", what="RENEW: confluent-kafka's AcknowledgeType has no RENEW")
            return UNSUPPORTED_EXIT_CODE
        consumer = ShareConsumer(self.config())
        consumer.set_acknowledgement_commit_callback(self.on_ack_committed)
        consumer.subscribe(spec.topics)
        started = time.monotonic()
        last_delivery: float | None = None
        try:
            while time.monotonic() - started < spec.deadline_ms / 1000:
                if (
                    last_delivery is not None
                    and time.monotonic() - last_delivery > spec.idle_ms / 1000
                ):
                    break
                try:
                    messages = list(consumer.poll(spec.poll_ms / 1000))
                except KafkaException as exc:
                    self.emit("error", where="poll", error=error_name(exc), message=str(exc))
                    continue
                records = [m for m in messages if self.report(m)]
                if not records:
                    continue
                if not self.handle(consumer, records, started):
                    break
                last_delivery = time.monotonic()  # idle counts from the end of handling
                if spec.max_deliveries and self.deliveries >= spec.max_deliveries:
                    break
        finally:
            try:
                consumer.close()
            except KafkaException as exc:
                self.emit("error", where="close", error=error_name(exc), message=str(exc))
            self.emit("closed")
        return 0

    def report(self, message: Message) -> bool:
        """Prints a delivered record (True) or a poll error (False)."""
        error = message.error()
        if error is not None:
            self.emit("error", where="poll", error=error.name(), message=error.str())
            return False
        self.deliveries += 1
        self.emit(
            "delivered",
            topic=message.topic(),
            partition=message.partition(),
            offset=message.offset(),
            key=text(message.key()),
            value=text(message.value()),
            delivery_count=message.delivery_count(),
        )
        return True

    def handle(self, consumer: ShareConsumer, records: list[Message], started: float) -> bool:
        """Acknowledges one poll's records and commits; False after a HOLD (then exit)."""
        spec = self.spec
        if spec.pause_ms:
            time.sleep(spec.pause_ms / 1000)
        released_keys: set[bytes | str | None] = set()
        for message in records:
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            assert topic is not None and partition is not None and offset is not None
            key = (topic, partition, offset)
            self.sightings[key] = self.sightings.get(key, 0) + 1
            value = text(message.value())
            action = spec.action_for(partition, offset, self.sightings[key], value)
            if spec.ordered_by_key and message.key() is not None:
                if message.key() in released_keys:
                    action = "RELEASE"
                elif action == "RELEASE":
                    released_keys.add(message.key())
            if action == HOLD:
                self.emit("holding")
                remaining_s = spec.deadline_ms / 1000 - (time.monotonic() - started)
                time.sleep(max(0.0, remaining_s))
                return False
            try:
                consumer.acknowledge(message, ACK_TYPES[action])
            except KafkaException as exc:
                self.emit("error", where="acknowledge", error=error_name(exc), message=str(exc))
                continue
            self.emit("acknowledge", topic=topic, partition=partition, offset=offset, type=action)
        self.commit(consumer)
        return True

    def commit(self, consumer: ShareConsumer) -> None:
        if self.spec.commit == "async":
            consumer.commit_async()
        elif self.spec.commit == "sync":
            try:
                results = consumer.commit_sync(10.0)
            except KafkaException as exc:
                self.emit("error", where="commit", error=error_name(exc), message=str(exc))
                return
            self.emit(
                "commit",
                results=[
                    {"topic": tp.topic, "partition": tp.partition, "error": error_name(exc)}
                    for tp, exc in results.items()
                ],
            )


def error_name(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].name())
    return type(exc).__name__


def text(data: bytes | str | None) -> str | None:
    if data is None or isinstance(data, str):
        return data
    return data.decode("utf-8", "replace")


def now_ms() -> int:
    return int(time.time() * 1000)


def main() -> int:
    spec = DriverSpec.from_json(sys.stdin.read())
    return Driver(spec).run()


if __name__ == "__main__":
    sys.exit(main())
