"""`weir` client commands against a secured three-broker cluster (clients on SASL_SSL,
brokers on an internal SASL_SSL listener, ACLs on), bootstrapped through ONE broker:
the settings of `-F` reach the connections the CLI opens to the other brokers too
(partition leaders, the group coordinator, the controller).

One etcd and one cluster for the module."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from compat_tests.cluster_harness import TEST_CLUSTER_SETTINGS, WeirCluster
from compat_tests.etcd_harness import EtcdCluster
from compat_tests.harness import CliResult, free_ports, run_cli

pytestmark = pytest.mark.timeout(240)

ADMIN_PASSWORD = "cluster-cli-secret"
PARTITIONS = 6
FULL_ISR_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[trustme.CA, Path]]:
    directory = tmp_path_factory.mktemp("cluster-cli-ca")
    ca = trustme.CA()
    path = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    yield ca, path


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, ca_file: tuple[trustme.CA, Path]
) -> Iterator[WeirCluster]:
    ca, _ = ca_file
    base = tmp_path_factory.mktemp("secured-cluster-cli")
    server = ca.issue_cert("127.0.0.1", "localhost")
    server_file, key_file = base / "server.pem", base / "server-key.pem"
    server_file.write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(key_file))
    etcd = EtcdCluster.start(base / "etcd")

    def settings_for(node_id: int, kafka_port: int) -> str:
        (internal_port,) = free_ports(1)
        return (
            TEST_CLUSTER_SETTINGS
            + f"""
[security]
listeners = "CLIENT://127.0.0.1:{kafka_port},INTERNAL://127.0.0.1:{internal_port}"
listener_security_protocol_map = "CLIENT:SASL_SSL,INTERNAL:SASL_SSL"
inter_broker_listener_name = "INTERNAL"
ssl_certfile = "{server_file}"
ssl_keyfile = "{key_file}"
sasl_enabled_mechanisms = ["SCRAM-SHA-512"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
authorizer_enabled = true
super_users = ["User:admin"]
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


def ok(result: CliResult) -> str:
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout


def wait_full_isr(flags: tuple[str, ...], topic: str) -> list[dict[str, Any]]:
    """Every partition of `topic` led, with its full ISR, as `weir cluster partitions`
    (over the same secured listener) reports it."""
    deadline = time.monotonic() + FULL_ISR_TIMEOUT_S
    while True:
        listed = run_cli(*flags, "cluster", "partitions", "--topic", topic, "--format", "json")
        rows: list[dict[str, Any]] = json.loads(ok(listed))["partitions"]
        if rows and all(r["leader"] >= 0 and sorted(r["isr"]) == sorted(r["replicas"])
                        for r in rows):  # fmt: skip
            return rows
        assert time.monotonic() < deadline, f"partitions of {topic} without full ISR: {rows}"
        time.sleep(0.2)  # polling other processes: no event to wait on


def test_leaders_and_the_coordinator_on_other_brokers_are_reached_with_the_same_settings(
    cluster: WeirCluster, ca_file: tuple[trustme.CA, Path], tmp_path: Path
) -> None:
    _, ca_path = ca_file
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username=admin\nsasl.password={ADMIN_PASSWORD}\nssl.ca.location={ca_path}\n"
    )
    first = next(iter(cluster.brokers.values()))
    flags = ("-b", first.bootstrap, "-F", str(properties))
    topic = f"spread-{uuid.uuid4().hex[:8]}"
    ok(run_cli(*flags, "topic", "create", topic, "--partitions", str(PARTITIONS),
               "--replication-factor", "3"))  # fmt: skip
    rows = wait_full_isr(flags, topic)
    assert len({row["leader"] for row in rows}) > 1  # leaders beyond the bootstrap broker
    lines = "".join(f"k{n}:v{n}\n" for n in range(60)).encode()
    produced = json.loads(ok(run_cli(*flags, "produce", topic, "-K", ":", "--format", "json",
                                     stdin=lines)))  # fmt: skip
    assert produced["records_acknowledged"] == 60
    group = f"{topic}-readers"
    read = ok(run_cli(*flags, "consume", topic, "-g", group, "-o", "beginning", "-e"))
    assert sorted(read.splitlines()) == sorted(f"v{n}" for n in range(60))
    status = json.loads(ok(run_cli(*flags, "cluster", "status", "--format", "json")))
    assert status["brokers_count"] == 3
