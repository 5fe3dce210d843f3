"""`weir` client commands against a real secured `weir serve`: SASL_SSL with
SCRAM-SHA-512 (`-X`), mutual TLS (`-F FILE`), SASL_PLAINTEXT with PLAIN
(`WEIR_CLIENT_CONFIG`), ACLs enforced (a user the CLI created, granted READ on one
topic by the CLI, reads it and is refused another), and what a mistaken client sees
(a wrong password, an untrusted CA): one line on stderr, a non-zero exit, no traceback,
no password.

One broker for the module, with the authorizer on; its admin user is the inter-broker
user (stored at start, as docs/security.md bootstraps it), and the client certificate's
CN maps to the same principal."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from compat_tests.harness import CliResult, WeirProcess, clean_environment, free_ports, run_cli

pytestmark = pytest.mark.timeout(180)

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-in-wonderland"


@dataclass(frozen=True)
class SecuredBroker:
    broker: WeirProcess
    sasl_ssl: str
    sasl_plaintext: str
    ssl: str
    certificates: dict[str, Path]

    def admin_scram(self) -> tuple[str, ...]:
        """`-X` flags for the admin over SASL_SSL with SCRAM-SHA-512, as kcat takes them."""
        return (
            "-b", self.sasl_ssl,
            "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=SCRAM-SHA-512",
            "-X", "sasl.username=admin", "-X", f"sasl.password={ADMIN_PASSWORD}",
            "-X", f"ssl.ca.location={self.certificates['ca']}",
        )  # fmt: skip


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    broker_cert = ca.issue_cert("127.0.0.1", "localhost")
    client_cert = ca.issue_cert("admin@example.com", common_name="admin")
    paths = {
        name: directory / f"{name}.pem"
        for name in ("ca", "broker", "broker_key", "client", "client_key", "other_ca")
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    broker_cert.private_key_pem.write_to_path(str(paths["broker_key"]))
    paths["broker"].write_bytes(b"".join(blob.bytes() for blob in broker_cert.cert_chain_pems))
    client_cert.private_key_pem.write_to_path(str(paths["client_key"]))
    paths["client"].write_bytes(b"".join(blob.bytes() for blob in client_cert.cert_chain_pems))
    trustme.CA().cert_pem.write_to_path(str(paths["other_ca"]))
    return paths


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, certificates: dict[str, Path]
) -> Iterator[SecuredBroker]:
    sasl_ssl, sasl_plaintext, ssl = (f"127.0.0.1:{port}" for port in free_ports(3))
    settings = f"""
[security]
listeners = "SASL_SSL://{sasl_ssl},SASL_PLAINTEXT://{sasl_plaintext},SSL://{ssl}"
ssl_certfile = "{certificates["broker"]}"
ssl_keyfile = "{certificates["broker_key"]}"
ssl_cafile = "{certificates["ca"]}"
ssl_client_auth = "requested"
ssl_principal_mapping_rules = "RULE:^CN=([^,]+).*$/$1/"
sasl_enabled_mechanisms = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
authorizer_enabled = true
super_users = ["User:admin"]
"""
    broker = WeirProcess.configured(tmp_path_factory.mktemp("secured-cli"), settings)
    broker.start()
    try:
        yield SecuredBroker(broker, sasl_ssl, sasl_plaintext, ssl, certificates)
    finally:
        broker.stop()


def weir(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> CliResult:
    return run_cli(*args, stdin=stdin, env=env)


def ok(result: CliResult) -> str:
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout


def one_line_error(result: CliResult) -> str:
    """The stderr of a command that failed as it should: one `error: ...` line."""
    assert result.returncode != 0, result
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


def round_trip(flags: tuple[str, ...], env: dict[str, str] | None = None) -> None:
    """topic create and list, produce, consume by offsets and as a group member."""
    topic = f"secured-{uuid.uuid4().hex[:8]}"
    ok(weir(*flags, "topic", "create", topic, "--partitions", "2", env=env))
    assert topic in ok(weir(*flags, "topic", "list", env=env)).split()
    produced = ok(weir(*flags, "produce", topic, "-K", ":", "--format", "json",
                       stdin=b"k1:one\nk2:two\nk3:three\n", env=env))  # fmt: skip
    assert json.loads(produced)["records_acknowledged"] == 3
    read = ok(weir(*flags, "consume", topic, "-o", "beginning", "-e", env=env))
    assert sorted(read.splitlines()) == ["one", "three", "two"]
    group = f"{topic}-readers"
    read = ok(weir(*flags, "consume", topic, "-g", group, "-o", "beginning", "-e", env=env))
    assert sorted(read.splitlines()) == ["one", "three", "two"]
    described = json.loads(ok(weir(*flags, "group", "describe", group, "--format", "json",
                                   env=env)))  # fmt: skip
    assert sum(p["committed_offset"] for p in described["offsets"]) == 3


def test_round_trip_over_sasl_ssl_with_scram_sha_512_from_x_flags(
    secured: SecuredBroker,
) -> None:
    round_trip(secured.admin_scram())


def test_round_trip_over_mutual_tls_from_a_properties_file(
    secured: SecuredBroker, tmp_path: Path
) -> None:
    certificates = secured.certificates
    properties = tmp_path / "client.properties"
    properties.write_text(
        "# mutual TLS, as kcat -F reads it\n"
        "security.protocol=SSL\n"
        f"ssl.ca.location={certificates['ca']}\n"
        f"ssl.certificate.location = {certificates['client']}\n"
        f"ssl.key.location: {certificates['client_key']}\n"
    )
    round_trip(("-b", secured.ssl, "-F", str(properties)))


def test_round_trip_over_sasl_plaintext_with_plain_from_the_environment(
    secured: SecuredBroker, tmp_path: Path
) -> None:
    properties = tmp_path / "plain.properties"
    properties.write_text(
        f"bootstrap.servers={secured.sasl_plaintext}\n"
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f"sasl.username=admin\nsasl.password={ADMIN_PASSWORD}\n"
    )
    round_trip((), env=clean_environment(WEIR_CLIENT_CONFIG=str(properties)))


def test_every_client_command_family_reaches_a_secured_broker(secured: SecuredBroker) -> None:
    flags = secured.admin_scram()
    info = json.loads(ok(weir(*flags, "cluster", "info", "--format", "json")))
    assert info["brokers"]
    ok(weir(*flags, "cluster", "status"))
    ok(weir(*flags, "group", "list"))
    ok(weir(*flags, "txn", "list"))
    ok(weir(*flags, "acl", "list"))
    ok(weir(*flags, "user", "list"))


def test_a_user_the_cli_created_reads_only_the_topic_an_acl_grants(
    secured: SecuredBroker,
) -> None:
    admin = secured.admin_scram()
    granted, other = (f"alice-{name}-{uuid.uuid4().hex[:6]}" for name in ("granted", "other"))
    for topic in (granted, other):
        ok(weir(*admin, "topic", "create", topic))
        ok(weir(*admin, "produce", topic, stdin=f"in {topic}\n".encode()))
    ok(weir(*admin, "user", "create", "alice", "--password", ALICE_PASSWORD,
            "--mechanism", "SCRAM-SHA-512"))  # fmt: skip
    ok(weir(*admin, "acl", "create", "--allow-principal", "User:alice",
            "--operation", "Read", "--topic", granted))  # fmt: skip
    alice = (
        "-b", secured.sasl_ssl, "-X", "security.protocol=SASL_SSL",
        "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=alice",
        "-X", f"sasl.password={ALICE_PASSWORD}",
        "-X", f"ssl.ca.location={secured.certificates['ca']}",
    )  # fmt: skip
    listed = ok(weir(*alice, "topic", "list"))
    assert granted in listed and other not in listed
    assert ok(weir(*alice, "consume", granted, "-o", "beginning", "-e")) == f"in {granted}\n"
    refused = one_line_error(weir(*alice, "consume", other, "-o", "beginning", "-e"))
    assert "TOPIC_AUTHORIZATION_FAILED" in refused


def test_a_wrong_password_is_one_line_without_the_password(secured: SecuredBroker) -> None:
    result = weir(
        "-b", secured.sasl_ssl, "-X", "security.protocol=SASL_SSL",
        "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=admin",
        "-X", "sasl.password=not-the-password",
        "-X", f"ssl.ca.location={secured.certificates['ca']}", "topic", "list",
    )  # fmt: skip
    error = one_line_error(result)
    assert "SCRAM-SHA-512" in error and "not-the-password" not in error


def test_an_untrusted_ca_is_one_line(secured: SecuredBroker) -> None:
    flags = [*secured.admin_scram()]
    flags[-1] = f"ssl.ca.location={secured.certificates['other_ca']}"
    error = one_line_error(weir(*flags, "topic", "list"))
    assert "not trusted" in error and ADMIN_PASSWORD not in error


def test_an_unknown_setting_is_a_usage_error_without_its_value(secured: SecuredBroker) -> None:
    result = weir(
        "-b", secured.sasl_ssl, "-X", "security.protocol=SASL_SSL",
        "-X", "sasl.pasword=hunter2", "topic", "list",
    )  # fmt: skip
    error = one_line_error(result)
    assert result.returncode == 2
    assert "unknown setting sasl.pasword" in error and "hunter2" not in error
