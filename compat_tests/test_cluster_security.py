"""A secured three-broker cluster: clients on a SASL_SSL listener, brokers replicating
over an internal SASL_SSL listener with their own SCRAM user, etcd over TLS with
client certificates, and ACLs on. Replication, a leader's failover and the ACL
denials hold as on a plaintext cluster.

One etcd and one cluster for the module."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from compat_tests.cluster_harness import TEST_CLUSTER_SETTINGS, WeirCluster
from compat_tests.etcd_harness import EtcdCluster, EtcdTlsFiles
from compat_tests.harness import free_ports

pytestmark = pytest.mark.timeout(240)

ADMIN_PASSWORD = "cluster-admin-secret"


def _write_pem(blobs: object, path: Path) -> Path:
    path.write_bytes(b"".join(blob.bytes() for blob in blobs))  # type: ignore[attr-defined]
    return path


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("cluster-certs")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("weir-broker", common_name="weir-broker")
    paths = {"ca": directory / "ca.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    paths["server"] = _write_pem(server.cert_chain_pems, directory / "server.pem")
    paths["server_key"] = directory / "server-key.pem"
    server.private_key_pem.write_to_path(str(paths["server_key"]))
    paths["client"] = _write_pem(client.cert_chain_pems, directory / "client.pem")
    paths["client_key"] = directory / "client-key.pem"
    client.private_key_pem.write_to_path(str(paths["client_key"]))
    return paths


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, certificates: dict[str, Path]
) -> Iterator[WeirCluster]:
    base = tmp_path_factory.mktemp("secured-cluster")
    tls = EtcdTlsFiles(
        certificates["ca"],
        certificates["server"],
        certificates["server_key"],
        certificates["client"],
        certificates["client_key"],
    )
    etcd = EtcdCluster.start(base / "etcd", tls=tls)

    def settings_for(node_id: int, kafka_port: int) -> str:
        (internal_port,) = free_ports(1)
        return (
            TEST_CLUSTER_SETTINGS
            + f"""
[security]
listeners = "CLIENT://127.0.0.1:{kafka_port},INTERNAL://127.0.0.1:{internal_port}"
listener_security_protocol_map = "CLIENT:SASL_SSL,INTERNAL:SASL_SSL"
inter_broker_listener_name = "INTERNAL"
ssl_certfile = "{certificates["server"]}"
ssl_keyfile = "{certificates["server_key"]}"
ssl_cafile = "{certificates["ca"]}"
sasl_enabled_mechanisms = ["SCRAM-SHA-512", "SCRAM-SHA-256"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
authorizer_enabled = true
super_users = ["User:admin"]
etcd_cafile = "{certificates["ca"]}"
etcd_certfile = "{certificates["client"]}"
etcd_keyfile = "{certificates["client_key"]}"
"""
        )

    brokers = WeirCluster(base / "brokers", etcd, settings_for=settings_for)
    for broker in brokers.brokers.values():  # its /metrics (WeirCluster.wait_whole)
        broker.http_credentials = ("admin", ADMIN_PASSWORD)
    try:
        brokers.start()
        yield brokers
    finally:
        try:
            brokers.stop()
        finally:
            etcd.stop()


def client_config(
    cluster: WeirCluster, ca: Path, username: str = "admin", password: str = ADMIN_PASSWORD
) -> dict[str, object]:
    return {
        "bootstrap.servers": ",".join(b.bootstrap for b in cluster.running()),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": username,
        "sasl.password": password,
        "ssl.ca.location": str(ca),
    }


def _consume(config: dict[str, object], topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_replicates_over_the_internal_sasl_ssl_listener_and_fails_over(
    cluster: WeirCluster, certificates: dict[str, Path]
) -> None:
    config = client_config(cluster, certificates["ca"])
    topic = f"replicated-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=30)
    producer = Producer({**config, "acks": "all", "enable.idempotence": True})
    for index in range(50):
        producer.produce(topic, f"before-{index}".encode())
    assert producer.flush(60) == 0
    leader = admin.list_topics(topic, timeout=20).topics[topic].partitions[0].leader
    assert len(admin.list_topics(topic, timeout=20).topics[topic].partitions[0].isrs) == 3
    cluster.brokers[leader].kill()
    for index in range(50):
        producer.produce(topic, f"after-{index}".encode())
    assert producer.flush(90) == 0
    values = _consume(client_config(cluster, certificates["ca"]), topic, 100)
    assert sorted(values) == sorted(
        [f"before-{i}".encode() for i in range(50)] + [f"after-{i}".encode() for i in range(50)]
    )
    cluster.brokers[leader].start()


def _collect_into(errors: list[KafkaError | None]) -> Callable[[KafkaError | None, object], None]:
    return lambda error, _message: errors.append(error)


def test_a_user_without_acls_is_refused_on_every_broker(
    cluster: WeirCluster, certificates: dict[str, Path]
) -> None:
    admin = AdminClient(client_config(cluster, certificates["ca"]))

    admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"mallory-pw"
            )
        ]
    )["mallory"].result(timeout=20)
    topic = f"guarded-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=30)
    errors: list[KafkaError] = []
    for broker in cluster.running():
        config = {
            **client_config(cluster, certificates["ca"], "mallory", "mallory-pw"),
            "bootstrap.servers": broker.bootstrap,
        }
        producer = Producer({**config, "error_cb": errors.append, "message.timeout.ms": 5000})
        delivered: list[KafkaError | None] = []
        producer.produce(topic, b"denied", on_delivery=_collect_into(delivered))
        producer.flush(15)
        assert delivered and delivered[0] is not None
        assert delivered[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_an_acl_created_through_one_broker_is_applied_by_every_broker(
    cluster: WeirCluster, certificates: dict[str, Path]
) -> None:
    brokers = list(cluster.running())
    first = {
        **client_config(cluster, certificates["ca"]),
        "bootstrap.servers": brokers[0].bootstrap,
    }
    admin = AdminClient(first)
    admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "trent", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"trent-pw"
            )
        ]
    )["trent"].result(timeout=20)
    topic = f"granted-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=30)
    grant = AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:trent", "*",
        AclOperation.WRITE, AclPermissionType.ALLOW,
    )  # fmt: skip
    admin.create_acls([grant])[grant].result(timeout=20)
    deadline = time.monotonic() + 30
    for broker in brokers:  # a fresh client asks its one bootstrap broker
        config = {
            **client_config(cluster, certificates["ca"], "trent", "trent-pw"),
            "bootstrap.servers": broker.bootstrap,
        }
        while True:
            described = AdminClient(config).list_topics(topic, timeout=15).topics[topic]
            if described.error is None:
                break  # WRITE implies DESCRIBE: this broker applies the new ACL
            assert described.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
            assert time.monotonic() < deadline, f"broker {broker.bootstrap} never applied it"
            time.sleep(0.5)  # the ACL reaches the other brokers through etcd's watch
    delivered: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10000})
    producer.produce(topic, b"allowed", on_delivery=_collect_into(delivered))
    producer.flush(20)
    assert delivered == [None]
