"""Client quotas enforced on the real `weir` process, seen through confluent-kafka:
a producer flooding past its `producer_byte_rate` is held near it (librdkafka reports
the broker's throttle times) while another client keeps its latency; a consumer is
held to its `consumer_byte_rate`; a user quota applies to that user's SASL principal
and no one else's; removing a quota lifts its throttle.

One broker for the module, with a PLAINTEXT listener (anonymous) and a SASL_PLAINTEXT
one (SCRAM; the inter-broker user `admin` is stored at start). Quotas are set with
AlterClientQuotas over the wire (the Java Admin client's calls are proven in
test_security_admin.py).

Kafka measures a rate over 11 one-second samples and counts a young sensor's time as at
least 10 s, so a new client may send about ten seconds' worth of its quota at once, and
then little more until that burst has aged: over a flood of D seconds (D < 11) it gets
about quota * (10 + D) bytes through. The bounds below are that model's."""

from __future__ import annotations

import base64
import socket
import struct
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from compat_tests.harness import WeirProcess, free_ports
from weir.wire.api_keys import ApiKey
from weir.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.timeout(120)

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"
QUOTA_BYTES_PER_S = 200_000
FLOOD_S = 6.0
# What Kafka's rate lets through a client flooding for FLOOD_S seconds (see above).
QUOTA_BYTES_IN_FLOOD = QUOTA_BYTES_PER_S * (10 + FLOOD_S)
VALUE = b"q" * 10_000
TIMEOUT_S = 20


@dataclass
class QuotaBroker:
    process: WeirProcess
    plaintext_port: int
    sasl_port: int

    @property
    def plaintext(self) -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.plaintext_port}"}

    def sasl(self, user: str, password: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": password,
        }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuotaBroker]:
    plaintext_port, sasl_port = free_ports(2)
    settings = f"""
[security]
listeners = "PLAINTEXT://127.0.0.1:{plaintext_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
sasl_enabled_mechanisms = ["SCRAM-SHA-256"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
"""
    process = WeirProcess.configured(tmp_path_factory.mktemp("quotas"), settings)
    process.start()
    try:
        quota_broker = QuotaBroker(process, plaintext_port, sasl_port)
        admin = AdminClient(quota_broker.sasl("admin", ADMIN_PASSWORD))
        upsertion = UserScramCredentialUpsertion(
            "alice",
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
            ALICE_PASSWORD.encode(),
        )
        admin.alter_user_scram_credentials([upsertion])["alice"].result(timeout=TIMEOUT_S)
        yield quota_broker
    finally:
        process.stop()


def _alter_quota(
    broker: QuotaBroker, entity: dict[str, str], key: str, value: float | None
) -> None:
    """AlterClientQuotas over the PLAINTEXT listener (no authorizer: allowed)."""
    body = {
        "entries": [
            {
                "entity": [{"entity_type": k, "entity_name": v} for k, v in entity.items()],
                "ops": [{"key": key, "value": value or 0.0, "remove": value is None}],
            }
        ],
        "validate_only": False,
    }
    with socket.create_connection(("127.0.0.1", broker.plaintext_port), timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.ALTER_CLIENT_QUOTAS, 1, 5, "quota-test", body))
        (size,) = struct.unpack(">i", _recv(sock, 4))
        _, response = decode_response(ApiKey.ALTER_CLIENT_QUOTAS, 1, memoryview(_recv(sock, size)))
    assert [entry.error_code for entry in response.entries] == [0]


def _recv(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return bytes(data)


def _topic(broker: QuotaBroker) -> str:
    name = f"quotas-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(broker.plaintext)
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(timeout=TIMEOUT_S)
    return name


@dataclass
class Flood:
    """A producer sending as fast as librdkafka lets it, for a while."""

    throttles: list[tuple[float, int]] = field(default_factory=list)  # (when, throttle ms)
    acked: list[tuple[float, int]] = field(default_factory=list)  # (when, bytes)

    def run(self, config: dict[str, Any], topic: str, duration_s: float) -> None:
        producer = Producer(
            {
                **config,
                "acks": 1,
                "linger.ms": 5,
                "batch.size": 200_000,
                "queue.buffering.max.kbytes": 1024,
                "throttle_cb": self._throttled,
            }
        )

        def delivered(error: object, message: Any) -> None:
            if error is None:
                self.acked.append((time.monotonic(), len(message.value())))

        deadline = time.monotonic() + duration_s
        while time.monotonic() < deadline:
            try:
                producer.produce(topic, VALUE, on_delivery=delivered)
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        # What still waits for the quota is dropped, in flight too (reported failed).
        producer.purge(in_queue=True, in_flight=True)
        producer.flush(TIMEOUT_S)

    def _throttled(self, event: Any) -> None:
        # librdkafka also reports a throttle's end (0 ms): only throttles count.
        throttle_ms = int(event.throttle_time * 1000)
        if throttle_ms > 0:
            self.throttles.append((time.monotonic(), throttle_ms))

    def acked_bytes(self, since: float = 0.0) -> int:
        return sum(size for when, size in self.acked if when >= since)


def _metric(broker: QuotaBroker, name: str, labels: str) -> float:
    request = urllib.request.Request(f"{broker.process.http_url}/metrics")
    credentials = base64.b64encode(f"admin:{ADMIN_PASSWORD}".encode()).decode()
    request.add_header("Authorization", f"Basic {credentials}")
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith(f"{name}{{{labels}}}"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_producer_over_its_byte_rate_is_throttled_while_others_keep_their_latency(
    broker: QuotaBroker,
) -> None:
    topic = _topic(broker)
    _alter_quota(broker, {"client-id": "flooder"}, "producer_byte_rate", QUOTA_BYTES_PER_S)
    flood = Flood()
    flooding = threading.Thread(
        target=flood.run, args=({**broker.plaintext, "client.id": "flooder"}, topic, FLOOD_S)
    )
    flooding.start()
    bystander = Producer({**broker.plaintext, "client.id": "bystander", "acks": 1})
    latencies_s = []
    try:
        while flooding.is_alive():
            started = time.monotonic()
            bystander.produce(topic, b"ping")
            assert bystander.flush(TIMEOUT_S) == 0
            latencies_s.append(time.monotonic() - started)
            time.sleep(0.1)
    finally:
        flooding.join()
    assert flood.throttles, "the producer was never throttled"
    acked = flood.acked_bytes()
    assert QUOTA_BYTES_PER_S * 10 * 0.8 < acked < QUOTA_BYTES_IN_FLOOD * 1.2, acked
    assert max(latencies_s) < 1.0, max(latencies_s)
    assert _metric(broker, "weir_quota_throttle_ms_total", 'quota_type="produce"') > 0


def test_a_consumer_over_its_byte_rate_is_throttled(broker: QuotaBroker) -> None:
    topic = _topic(broker)
    total_bytes = 6_000_000
    filler = Producer({**broker.plaintext, "client.id": "filler", "linger.ms": 5})
    for _ in range(total_bytes // len(VALUE)):
        filler.produce(topic, VALUE)
        filler.poll(0)
    assert filler.flush(TIMEOUT_S) == 0
    _alter_quota(broker, {"client-id": "slow-reader"}, "consumer_byte_rate", QUOTA_BYTES_PER_S)

    def read(client_id: str, duration_s: float) -> tuple[int, list[int]]:
        throttles: list[int] = []
        consumer = Consumer(
            {
                **broker.plaintext,
                "client.id": client_id,
                "group.id": f"g-{client_id}-{topic}",
                "enable.auto.commit": False,
                "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        received = 0
        deadline = time.monotonic() + duration_s
        try:
            while time.monotonic() < deadline and received < total_bytes:
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    received += len(message.value())
        finally:
            consumer.close()
        return received, throttles

    # Unthrottled, the whole topic is read in well under the time allowed.
    fast_bytes, fast_throttles = read("fast-reader", 10.0)
    assert fast_bytes == total_bytes and not fast_throttles
    # At 200 kB/s: ten seconds' worth (2 MB) at once, then the quota; 6 MB would take 20 s.
    slow_bytes, slow_throttles = read("slow-reader", 5.0)
    assert slow_throttles
    assert slow_bytes < QUOTA_BYTES_PER_S * (10 + 5) * 1.3, slow_bytes
    assert slow_bytes < total_bytes


def test_a_user_quota_applies_to_that_sasl_principal_only(broker: QuotaBroker) -> None:
    topic = _topic(broker)
    _alter_quota(broker, {"user": "alice"}, "producer_byte_rate", QUOTA_BYTES_PER_S)
    alice, admin = Flood(), Flood()
    runs = [
        threading.Thread(
            target=alice.run, args=(broker.sasl("alice", ALICE_PASSWORD), topic, FLOOD_S)
        ),
        threading.Thread(target=admin.run, args=(broker.sasl("admin", ADMIN_PASSWORD), topic, 4.0)),
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert alice.throttles
    assert not admin.throttles, admin.throttles
    assert alice.acked_bytes() < QUOTA_BYTES_IN_FLOOD * 1.2, alice.acked_bytes()
    assert admin.acked_bytes() > QUOTA_BYTES_IN_FLOOD * 1.2, admin.acked_bytes()


def test_removing_the_quota_lifts_the_throttle(broker: QuotaBroker) -> None:
    topic = _topic(broker)
    _alter_quota(broker, {"client-id": "lifted"}, "producer_byte_rate", QUOTA_BYTES_PER_S)
    flood = Flood()
    flooding = threading.Thread(
        target=flood.run, args=({**broker.plaintext, "client.id": "lifted"}, topic, 8.0)
    )
    flooding.start()
    deadline = time.monotonic() + 12
    while not flood.throttles and time.monotonic() < deadline:
        time.sleep(0.1)
    assert flood.throttles, "the producer was never throttled"
    time.sleep(1)
    _alter_quota(broker, {"client-id": "lifted"}, "producer_byte_rate", None)
    lifted_at = time.monotonic()
    # The connection stays muted for the throttle it was last given (as in Kafka).
    lifted_fully_at = lifted_at + max(ms for _, ms in flood.throttles) / 1000 + 0.5
    flooding.join()
    throttled_late = [when for when, _ in flood.throttles if when > lifted_fully_at]
    assert not throttled_late, [(round(when - lifted_at, 2), ms) for when, ms in flood.throttles]
    assert flood.acked_bytes(since=lifted_fully_at) > QUOTA_BYTES_IN_FLOOD
