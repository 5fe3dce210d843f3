"""`weir user` and `weir acl` against a real `weir serve` process.

`weir user create` salts the password itself: the credential the broker stored (read
back from its metadata document) is the one the password derives, and confluent-kafka
describes what the CLI created. `weir acl` without an authorizer reports Kafka's
SECURITY_DISABLED; its round trip with one is written for the lead to enable once the
app builds the authorizer from `[security]`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from compat_tests.harness import WeirProcess, run_cli
from weir.controller.metadata import METADATA_FILE_NAME, metadata_from_json
from weir.security.scram import ScramMechanism, credential_from_password

pytestmark = pytest.mark.timeout(120)
CLIENT_TIMEOUT_S = 15


@pytest.fixture(scope="module")
def weir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("weir-security-cli"), "")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def cli(weir: WeirProcess, *args: str) -> tuple[int, str, str]:
    result = run_cli("--bootstrap", weir.bootstrap, *args)
    return result.returncode, result.stdout, result.stderr


def test_user_create_stores_the_credential_the_password_derives(weir: WeirProcess) -> None:
    code, out, err = cli(
        weir, "user", "create", "alice", "--password", "alice-secret",
        "--mechanism", "SCRAM-SHA-512", "--iterations", "8192", "--format", "json",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "user": "alice",
        "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}],
    }
    stored = metadata_from_json((weir.data_dir / METADATA_FILE_NAME).read_bytes())
    credential = stored.scram_credentials["alice"][ScramMechanism.SCRAM_SHA_512]
    assert len(credential.salt) >= 16
    assert credential == credential_from_password(
        ScramMechanism.SCRAM_SHA_512, "alice-secret", credential.salt, 8192
    )
    assert b"alice-secret" not in (weir.data_dir / METADATA_FILE_NAME).read_bytes()


def test_user_list_and_delete_as_table_and_json(weir: WeirProcess) -> None:
    assert cli(weir, "user", "create", "bob", "--password", "pw")[0] == 0
    assert (
        cli(weir, "user", "create", "bob", "--password", "pw", "--mechanism", "SCRAM-SHA-512")[0]
        == 0
    )
    code, out, _ = cli(weir, "user", "list", "bob")
    assert code == 0
    assert out.splitlines() == [
        "USER  MECHANISM      ITERATIONS",
        "bob   SCRAM-SHA-256  4096",
        "bob   SCRAM-SHA-512  4096",
    ]
    admin = AdminClient({"bootstrap.servers": weir.bootstrap})  # alive until answered
    futures = admin.describe_user_scram_credentials(["bob"])
    described = futures["bob"].result(timeout=CLIENT_TIMEOUT_S)
    assert sorted((i.mechanism.name, i.iterations) for i in described.scram_credential_infos) == [
        ("SCRAM_SHA_256", 4096),
        ("SCRAM_SHA_512", 4096),
    ]
    code, out, _ = cli(weir, "user", "delete", "bob", "--format", "json")
    assert (code, json.loads(out)) == (
        0,
        {"user": "bob", "deleted": ["SCRAM-SHA-256", "SCRAM-SHA-512"]},
    )
    code, _, err = cli(weir, "user", "list", "bob")
    assert (code, err) == (1, "error: user 'bob' has no SCRAM credential\n")


def test_user_create_refuses_iterations_kafka_refuses(weir: WeirProcess) -> None:
    code, _, err = cli(weir, "user", "create", "carol", "--password", "pw", "--iterations", "1000")
    assert (code, err) == (
        1,
        "error: --iterations: Iterations 1000 is less than the minimum 4096\n",
    )


def test_acl_commands_without_an_authorizer_say_security_is_disabled(weir: WeirProcess) -> None:
    code, _, err = cli(weir, "acl", "list")
    assert code == 1
    assert err == (
        "error: cannot list ACLs: No Authorizer is configured on the broker (SECURITY_DISABLED)\n"
    )
    code, _, err = cli(
        weir, "acl", "create", "--allow-principal", "User:alice", "--operation", "Read",
        "--topic", "orders",
    )  # fmt: skip
    assert code == 1 and "(SECURITY_DISABLED)" in err


AUTHORIZER_SETTINGS = """\
[security]
authorizer_enabled = true
super_users = ["User:ANONYMOUS"]
"""


def test_acl_create_list_delete_round_trip(tmp_path_factory: pytest.TempPathFactory) -> None:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("weir-acl-cli"), AUTHORIZER_SETTINGS)
    proc.start()
    try:
        code, out, err = cli(
            proc, "acl", "create", "--allow-principal", "User:alice", "--operation", "Read",
            "--operation", "Describe", "--topic", "orders", "--resource-pattern-type", "prefixed",
            "--format", "json",
        )  # fmt: skip
        assert (code, err) == (0, "")
        assert len(json.loads(out)["created"]) == 2
        code, out, _ = cli(proc, "acl", "list", "--topic", "orders-eu",
                           "--resource-pattern-type", "match")  # fmt: skip
        assert code == 0
        assert out.splitlines()[1:] == [
            "TOPIC          orders         PREFIXED  User:alice  *     DESCRIBE   ALLOW",
            "TOPIC          orders         PREFIXED  User:alice  *     READ       ALLOW",
        ]
        code, out, _ = cli(proc, "acl", "delete", "--principal", "User:alice",
                           "--operation", "read", "--format", "json")  # fmt: skip
        assert [d["operation"] for d in json.loads(out)["deleted"]] == ["READ"]
        code, out, _ = cli(proc, "acl", "list", "--format", "json")
        assert [d["operation"] for d in json.loads(out)["acls"]] == ["DESCRIBE"]
    finally:
        proc.close()
