"""docs/http-admin.md's examples, run: every ```sh block of the document, in order,
in one bash (`set -euo pipefail`; the examples use `curl -sf`, so an HTTP error
fails them), against a real `weir serve` with security on, curl's credentials in
a .curlrc as the document says. The Kafka-side state the document speaks of (the
topic `payments` with the group `billing` and the open transaction
`payments-writer`, the share group `workers` on `jobs` with dead letters in
`dlq.jobs`) is made here first with confluent-kafka."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat_tests.harness import WeirProcess, clean_environment, free_ports

pytestmark = pytest.mark.timeout(120)

DOC = Path(__file__).resolve().parents[1] / "docs" / "http-admin.md"
ADMIN_PASSWORD = "admin-secret"
CLIENT_WAIT_S = 30.0
SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
REJECTED = 3
WAITING = 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WeirProcess, int]]:
    base = tmp_path_factory.mktemp("rest-admin-docs")
    [kafka_port] = free_ports(1)
    settings = f"""
group_share_min_record_lock_duration_ms = 1000
[security]
listeners = "SASL_PLAINTEXT://127.0.0.1:{kafka_port}"
sasl_enabled_mechanisms = ["SCRAM-SHA-512"]
authorizer_enabled = true
super_users = ["User:admin"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
"""
    process = WeirProcess.configured(base / "broker", settings)
    process.start()
    try:
        yield process, kafka_port
    finally:
        process.stop()


def client_config(kafka_port: int) -> dict[str, object]:
    return {
        "bootstrap.servers": f"127.0.0.1:{kafka_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": ADMIN_PASSWORD,
    }


def prepare_payments(config: dict[str, object]) -> Producer:
    """`payments` with records, `billing`'s offsets, and `payments-writer`'s open
    transaction on partition 1 (returned: the caller keeps it open)."""
    producer = Producer(config)
    for partition in (0, 1):
        for i in range(5):
            producer.produce("payments", f"p{i}".encode(), partition=partition)
    assert producer.flush(CLIENT_WAIT_S) == 0
    consumer = Consumer({**config, "group.id": "billing"})
    try:
        offsets = [TopicPartition("payments", 0, 2), TopicPartition("payments", 1, 5)]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()
    writer = Producer({**config, "transactional.id": "payments-writer"})
    writer.init_transactions(CLIENT_WAIT_S)
    writer.begin_transaction()
    writer.produce("payments", b"pending", partition=1)
    assert writer.flush(CLIENT_WAIT_S) == 0
    return writer


def prepare_workers(admin: AdminClient, config: dict[str, object]) -> None:
    """`workers` on `jobs`: REJECTED records dead-lettered to `dlq.jobs`, WAITING more."""
    configs = {
        "share.auto.offset.reset": "earliest",
        "errors.deadletterqueue.topic.name": "dlq.jobs",
        "errors.deadletterqueue.copy.record.enable": "true",
    }
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, "workers", incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(CLIENT_WAIT_S)
    producer = Producer(config)
    for i in range(REJECTED):
        producer.produce("jobs", f"job-{i}".encode())
    assert producer.flush(CLIENT_WAIT_S) == 0
    consumer = ShareConsumer(
        {**config, "group.id": "workers", "share.acknowledgement.mode": "explicit"}
    )
    consumer.subscribe(["jobs"])
    rejected = 0
    deadline = time.monotonic() + CLIENT_WAIT_S
    try:
        while rejected < REJECTED:
            assert time.monotonic() < deadline, f"rejected {rejected} of {REJECTED}"
            try:
                messages = [m for m in consumer.poll(1.0) if m.error() is None]
            except KafkaException:
                continue
            for message in messages:
                consumer.acknowledge(message, AcknowledgeType.REJECT)
                rejected += 1
            if messages:
                consumer.commit_sync(10.0)
    finally:
        consumer.close()
    for i in range(WAITING):
        producer.produce("jobs", f"later-{i}".encode())
    assert producer.flush(CLIENT_WAIT_S) == 0


def wait_dead_letters(config: dict[str, object]) -> None:
    consumer = Consumer({**config, "group.id": "dlq-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition("dlq.jobs", 0, 0)])
    seen = 0
    deadline = time.monotonic() + CLIENT_WAIT_S
    try:
        while seen < REJECTED:
            assert time.monotonic() < deadline, f"{seen} dead letters of {REJECTED}"
            message = consumer.poll(0.5)
            seen += message is not None and message.error() is None
    finally:
        consumer.close()


def test_the_documents_examples_run(broker: tuple[WeirProcess, int], tmp_path: Path) -> None:
    process, kafka_port = broker
    config = client_config(kafka_port)
    admin = AdminClient(config)
    topics = [
        NewTopic("payments", 2, 1),
        NewTopic("jobs", 1, 1),
        NewTopic("dlq.jobs", 1, 1, config={"errors.deadletterqueue.group.enable": "true"}),
    ]
    for future in admin.create_topics(topics).values():
        future.result(CLIENT_WAIT_S)
    writer = prepare_payments(config)
    prepare_workers(admin, config)
    wait_dead_letters(config)

    (tmp_path / ".curlrc").write_text(f'user = "admin:{ADMIN_PASSWORD}"\n')
    blocks = SHELL_BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 10
    script = "set -euo pipefail\n" + "\n".join(blocks)
    env = clean_environment(WEIR=process.http_url, CURL_HOME=str(tmp_path))
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=90, check=False
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    out = done.stdout
    assert '"topic_name":"orders","partitions_count":3' in out
    assert '{"name":"segment.ms","value":"3600000"}' in out
    assert '"current_offset":2,"log_end_offset":5,"lag":3' in out
    assert '{"partition_id":0,"current_offset":2,"new_offset":0}' in out  # the dry run
    assert '"current_offset":2,"new_offset":3,' in out  # shifted by one
    assert "\n204\n" in out  # billing-copy deleted
    assert '{"dead_letter_topic":"dlq.jobs","redriven":3,"records_left":0}' in out
    assert '{"redriven":0}' in out
    assert '{"mechanism":"SCRAM-SHA-512","iterations":8192}' in out
    assert "dora-secret" not in out
    assert '"values":{"producer_byte_rate":1048576,"request_percentage":50}' in out
    assert '"ALTER"' in out
    assert '"transactional_id":"payments-writer"' in out
    assert '{"high_watermark":7,"last_stable_offset":7}' in out  # 5, the record, its abort marker
    del writer
