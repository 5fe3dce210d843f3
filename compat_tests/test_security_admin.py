"""The security administration APIs against the real `weir`, with real clients:
confluent-kafka's AdminClient for SCRAM credentials and ACLs, and Kafka's Java Admin
client (4.3.1, from the kafka-tools classpath, run as a single-file Java program) for
client quotas, which no Python client speaks. A cluster over a real etcd shows a
credential saved through one broker on another.

Kafka's kafka-configs tool is not in the jars the suite fetches (kafka-tools 4.3.1 has
AclCommand but not ConfigCommand), so the Java Admin client calls the same APIs
(`alterClientQuotas`, `describeClientQuotas`) kafka-configs calls.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from compat_tests.cluster_harness import WeirCluster, running_cluster
from compat_tests.harness import WeirProcess, free_ports
from compat_tests.maven import KAFKA_CONFIG_TOOLS_DIR, KAFKA_TOOLS_DIR, require_maven_build
from compat_tests.wire_client import connect, round_trip
from weir.wire.api_keys import ApiKey

pytestmark = pytest.mark.timeout(180)
ADMIN_TIMEOUT_S = 15
JAVA_TIMEOUT_S = 90

# Kafka's Java Admin client altering and describing client quotas as kafka-configs does
# (`--entity-type users --entity-name alice`, `--entity-type clients --entity-default`).
QUOTA_PROBE = """\
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.quota.*;

public class QuotaProbe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            ClientQuotaEntity alice = new ClientQuotaEntity(Map.of("user", "alice"));
            Map<String, String> defaultClient = new HashMap<>();
            defaultClient.put("client-id", null);
            ClientQuotaEntity clients = new ClientQuotaEntity(defaultClient);
            admin.alterClientQuotas(List.of(
                new ClientQuotaAlteration(alice, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0),
                    new ClientQuotaAlteration.Op("request_percentage", 25.0))),
                new ClientQuotaAlteration(clients, List.of(
                    new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0)))
            )).all().get();
            try {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alice, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", 1.5))))).all().get();
                System.out.println("fractional accepted");
            } catch (Exception e) {
                System.out.println("refused " + e.getCause().getClass().getSimpleName());
            }
            print(admin, ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofEntity("user", "alice"))));
            print(admin, ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofDefaultEntity("client-id"))));
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alice, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get();
            print(admin, ClientQuotaFilter.all());
        }
    }

    static void print(Admin admin, ClientQuotaFilter filter) throws Exception {
        Map<ClientQuotaEntity, Map<String, Double>> found =
            admin.describeClientQuotas(filter).entities().get();
        List<String> lines = new ArrayList<>();
        for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : found.entrySet()) {
            lines.add(e.getKey().entries() + " " + new TreeMap<>(e.getValue()));
        }
        Collections.sort(lines);
        System.out.println("described " + lines);
    }
}
"""


@pytest.fixture(scope="module")
def weir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("weir-security-admin"), "")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def admin_of(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def upsert(admin: AdminClient, user: str, mechanism: ScramMechanism, iterations: int) -> None:
    upsertion = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, iterations), f"{user}-secret".encode()
    )
    futures = admin.alter_user_scram_credentials([upsertion], request_timeout=ADMIN_TIMEOUT_S)
    futures[user].result(timeout=ADMIN_TIMEOUT_S)


def described_credentials(admin: AdminClient, users: list[str]) -> dict[str, list[tuple[str, int]]]:
    futures = admin.describe_user_scram_credentials(users, request_timeout=ADMIN_TIMEOUT_S)
    found: dict[str, list[tuple[str, int]]] = {}
    for user, future in futures.items():
        description = future.result(timeout=ADMIN_TIMEOUT_S)
        found[user] = sorted(
            (info.mechanism.name, info.iterations) for info in description.scram_credential_infos
        )
    return found


def test_confluent_kafka_stores_describes_and_deletes_scram_credentials(weir: WeirProcess) -> None:
    admin = admin_of(weir.bootstrap)
    upsert(admin, "alice", ScramMechanism.SCRAM_SHA_256, 8192)
    upsert(admin, "alice", ScramMechanism.SCRAM_SHA_512, 4096)
    assert described_credentials(admin, ["alice"]) == {
        "alice": [("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 4096)]
    }
    deletion = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])["alice"].result(timeout=ADMIN_TIMEOUT_S)
    assert described_credentials(admin, ["alice"]) == {"alice": [("SCRAM_SHA_256", 8192)]}


def test_confluent_kafka_sees_kafkas_scram_refusals(weir: WeirProcess) -> None:
    admin = admin_of(weir.bootstrap)
    with pytest.raises(KafkaException, match="(?i)too few iterations"):
        upsert(admin, "bob", ScramMechanism.SCRAM_SHA_256, 1024)
    with pytest.raises(KafkaException, match="(?i)does not exist"):
        deletion = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)
        admin.alter_user_scram_credentials([deletion])["nobody"].result(timeout=ADMIN_TIMEOUT_S)
    futures = admin.describe_user_scram_credentials(["nobody"], request_timeout=ADMIN_TIMEOUT_S)
    with pytest.raises(KafkaException, match="(?i)does not exist"):
        futures["nobody"].result(timeout=ADMIN_TIMEOUT_S)


def test_acl_apis_without_an_authorizer_say_security_is_disabled(weir: WeirProcess) -> None:
    admin = admin_of(weir.bootstrap)
    binding = AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    futures = admin.create_acls([binding], request_timeout=ADMIN_TIMEOUT_S)
    with pytest.raises(KafkaException, match="(?i)no authorizer"):
        futures[binding].result(timeout=ADMIN_TIMEOUT_S)
    # DescribeAcls answers SECURITY_DISABLED too (the handler tests check it); librdkafka
    # 2.x drops a DescribeAcls response's top-level error and returns no bindings.


def run_java_probe(tmp_path: Path, bootstrap: str) -> list[str]:
    java = shutil.which("java")
    require_maven_build(KAFKA_TOOLS_DIR / f"kafka-tools-{KAFKA_TOOLS_DIR.name}.jar")
    assert java is not None, "java is not on PATH (scripts/test installs a JDK)"
    source = tmp_path / "QuotaProbe.java"
    source.write_text(QUOTA_PROBE)
    completed = subprocess.run(
        [
            java,
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{KAFKA_TOOLS_DIR}/*",
            str(source),
            bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=JAVA_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed.stdout.splitlines()


def test_java_admin_alters_and_describes_client_quotas(weir: WeirProcess, tmp_path: Path) -> None:
    lines = run_java_probe(tmp_path, weir.bootstrap)
    assert lines == [
        "refused InvalidRequestException",
        "described [{user=alice} {producer_byte_rate=1048576.0, request_percentage=25.0}]",
        "described [{client-id=null} {consumer_byte_rate=2048.0}]",
        "described [{client-id=null} {consumer_byte_rate=2048.0}, "
        "{user=alice} {request_percentage=25.0}]",
    ]


# -- ACLs with an authorizer: for the lead to enable -------------------------------------

AUTHORIZER_SETTINGS = """\
[security]
authorizer_enabled = true
super_users = ["User:ANONYMOUS"]
"""


def test_confluent_kafka_creates_describes_and_deletes_acls(tmp_path: Path) -> None:
    proc = WeirProcess.configured(tmp_path / "weir", AUTHORIZER_SETTINGS)
    proc.start()
    try:
        admin = admin_of(proc.bootstrap)
        read = AclBinding(
            ResourceType.TOPIC,
            "orders",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        write = AclBinding(
            ResourceType.TOPIC,
            "ord",
            ResourcePatternType.PREFIXED,
            "User:bob",
            "*",
            AclOperation.WRITE,
            AclPermissionType.DENY,
        )
        for future in admin.create_acls([read, write]).values():
            future.result(timeout=ADMIN_TIMEOUT_S)
        everything = AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        found = admin.describe_acls(everything).result(timeout=ADMIN_TIMEOUT_S)
        assert sorted(found, key=str) == sorted([read, write], key=str)
        by_bob = AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            "User:bob",
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        deleted = admin.delete_acls([by_bob])[by_bob].result(timeout=ADMIN_TIMEOUT_S)
        assert deleted == [write]
        assert admin.describe_acls(everything).result(timeout=ADMIN_TIMEOUT_S) == [read]
    finally:
        proc.close()


# -- a cluster --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirCluster]:
    with running_cluster(tmp_path_factory.mktemp("cluster-security-admin"), brokers_count=2) as c:
        yield c


def test_a_credential_saved_through_one_broker_is_described_by_another(
    cluster: WeirCluster,
) -> None:
    first, second = cluster.brokers[1], cluster.brokers[2]
    upsert(admin_of(first.bootstrap), "carol", ScramMechanism.SCRAM_SHA_512, 8192)

    def seen_on_second() -> bool:
        # Straight to broker 2 (an AdminClient may send it to any broker).
        with connect(second) as sock:
            response = round_trip(
                sock, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": "carol"}]}
            )
        [result] = response.results
        infos = [(info.mechanism, info.iterations) for info in result.credential_infos]
        return infos == [(ScramMechanism.SCRAM_SHA_512.value, 8192)]

    cluster.wait_until(seen_on_second, timeout_s=20, what="the credential on broker 2")


SECURED_SETTINGS = """\
[security]
listeners = "SASL_PLAINTEXT://127.0.0.1:{port}"
sasl_enabled_mechanisms = ["SCRAM-SHA-512", "SCRAM-SHA-256"]
authorizer_enabled = true
super_users = ["User:admin"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "admin-secret"
"""


def _kafka_configs(bootstrap: str, command_config: Path, *arguments: str) -> str:
    """Kafka 4.4's kafka-configs.sh (ConfigCommand, java -cp), its stdout."""
    java = shutil.which("java")
    assert java is not None
    finished = subprocess.run(
        [java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
         f"{KAFKA_CONFIG_TOOLS_DIR}/*", "org.apache.kafka.tools.ConfigCommand",
         "--bootstrap-server", bootstrap, "--command-config", str(command_config), *arguments],
        capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    return finished.stdout


def test_kafka_configs_manages_users_and_quotas_of_a_secured_broker(tmp_path: Path) -> None:
    require_maven_build(KAFKA_CONFIG_TOOLS_DIR)
    (port,) = free_ports(1)
    proc = WeirProcess.configured(tmp_path / "weir", SECURED_SETTINGS.format(port=port))
    proc.start()
    bootstrap = f"127.0.0.1:{port}"
    command_config = tmp_path / "admin.properties"
    command_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="admin" password="admin-secret";\n'
    )
    try:
        scram = "SCRAM-SHA-256=[iterations=8192,password=alice-secret]"
        _kafka_configs(
            bootstrap, command_config, "--alter", "--entity-type", "users",
            "--entity-name", "alice", "--add-config", scram,
        )  # fmt: skip
        described = _kafka_configs(
            bootstrap, command_config, "--describe", "--entity-type", "users",
            "--entity-name", "alice",
        )  # fmt: skip
        assert "SCRAM-SHA-256=iterations=8192" in described
        alice = AdminClient({
            "bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
            "sasl.password": "alice-secret",
        })  # fmt: skip
        alice.list_topics(timeout=20)  # logs in with the password kafka-configs set
        _kafka_configs(
            bootstrap, command_config, "--alter", "--entity-type", "clients",
            "--entity-name", "ingest", "--add-config", "producer_byte_rate=1048576",
        )  # fmt: skip
        quotas = _kafka_configs(
            bootstrap, command_config, "--describe", "--entity-type", "clients",
            "--entity-name", "ingest",
        )  # fmt: skip
        assert "producer_byte_rate=1048576" in quotas
    finally:
        proc.stop()
