"""One real `weir serve` with security on, for the suites that test the HTTP APIs and the
console as a logged-in user: a SASL_PLAINTEXT Kafka listener (SCRAM), ACLs on, `admin`
the super user (its SCRAM password also logs in over HTTP Basic).

`SecuredHttpBroker.running(base)` starts one (a module-scoped fixture yields it) and
stops it after; on it, `create_users({name: password})` stores SCRAM credentials over
AlterUserScramCredentials, `grant(principal, resource, operations)` allows ACLs,
`create_topics`, `kafka_config(user)` is confluent-kafka's config for a user,
`client(user)` an httpx client logged in as one, and `cluster_path` the REST admin
API's `/v3/clusters/<id>`. A suite that needs more (its topics) subclasses it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any, Self

import httpx
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

from compat_tests.harness import WeirProcess, free_ports
from compat_tests.security_harness import ADMIN_USER, SCRAM_ITERATIONS, ScramUser

ADMIN_PASSWORD = "admin-secret"
CLIENT_MECHANISM = "SCRAM-SHA-512"  # what every client here logs in with
CLIENT_WAIT_S = 15.0
HTTP_TIMEOUT_S = 30.0
SCRAM_MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}
# (resource type, name), e.g. (ResourceType.TOPIC, "payments")
Resource = tuple[ResourceType, str]
CLUSTER: Resource = (ResourceType.BROKER, "kafka-cluster")


def security_settings(kafka_port: int, mechanisms: tuple[str, ...]) -> str:
    """The `[security]` table: SASL_PLAINTEXT only, ACLs on, `admin` the super user."""
    enabled = ", ".join(f'"{mechanism}"' for mechanism in mechanisms)
    return f"""
[security]
listeners = "SASL_PLAINTEXT://127.0.0.1:{kafka_port}"
sasl_enabled_mechanisms = [{enabled}]
authorizer_enabled = true
super_users = ["User:{ADMIN_USER}"]
inter_broker_sasl_username = "{ADMIN_USER}"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
connection_failed_authentication_delay_ms = 10
"""


def scram_upsertions(user: ScramUser) -> list[UserScramCredentialUpsertion]:
    """One upsertion per SCRAM mechanism of `user`."""
    return [
        UserScramCredentialUpsertion(
            user.name,
            ScramCredentialInfo(SCRAM_MECHANISMS[mechanism], user.iterations),
            user.password.encode(),
        )
        for mechanism in user.mechanisms
    ]


class SecuredHttpBroker:
    """A started secured broker: its process (tests may kill and restart it), its Kafka
    port, and the passwords of the users made through it."""

    def __init__(self, process: WeirProcess, kafka_port: int) -> None:
        self.process = process
        self.kafka_port = kafka_port
        self.passwords = {ADMIN_USER: ADMIN_PASSWORD}

    @classmethod
    @contextmanager
    def running(
        cls, base: Path, *, mechanisms: tuple[str, ...] = (CLIENT_MECHANISM,)
    ) -> Iterator[Self]:
        """Start one under `base` with `mechanisms` enabled; stop it on the way out."""
        [kafka_port] = free_ports(1)
        process = WeirProcess.configured(base, security_settings(kafka_port, mechanisms))
        process.start()
        try:
            yield cls(process, kafka_port)
        finally:
            process.stop()

    def kafka_config(self, user: str = ADMIN_USER, password: str | None = None) -> dict[str, Any]:
        """confluent-kafka's config for `user` (its known password unless given)."""
        return {
            "bootstrap.servers": f"127.0.0.1:{self.kafka_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": CLIENT_MECHANISM,
            "sasl.username": user,
            "sasl.password": self.passwords[user] if password is None else password,
        }

    def admin_config(self) -> dict[str, Any]:
        return self.kafka_config()

    @cached_property
    def admin(self) -> AdminClient:
        """One confluent-kafka AdminClient as the super user, for the set-up."""
        return AdminClient(self.admin_config())

    def create_users(self, passwords: Mapping[str, str]) -> None:
        """SCRAM-SHA-512 credentials for each user (name -> password), as admin."""
        users = [
            ScramUser(name, password, (CLIENT_MECHANISM,), SCRAM_ITERATIONS)
            for name, password in passwords.items()
        ]
        upserts = [upsert for user in users for upsert in scram_upsertions(user)]
        for future in self.admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=CLIENT_WAIT_S)
        self.passwords.update(passwords)

    def grant(self, principal: str, resource: Resource, operations: Iterable[AclOperation]) -> None:
        """ALLOW `principal` (`User:alice`) each operation on the literal `resource`."""
        kind, name = resource
        acls = [
            AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*", operation,
                       AclPermissionType.ALLOW)
            for operation in operations
        ]  # fmt: skip
        if acls:
            for future in self.admin.create_acls(acls).values():
                future.result(timeout=CLIENT_WAIT_S)

    def create_topics(self, *names: str) -> None:
        """Topics of one partition, one replica."""
        topics = [NewTopic(name, 1, 1) for name in names]
        for future in self.admin.create_topics(topics).values():
            future.result(timeout=CLIENT_WAIT_S)

    def client(
        self, user: str | None, password: str | None = None, *, timeout_s: float = HTTP_TIMEOUT_S
    ) -> httpx.Client:
        """An httpx client on the HTTP listener as `user` (HTTP Basic with its known
        password unless given), or anonymous for None; no kept-alive connections."""
        auth = None
        if user is not None:
            auth = httpx.BasicAuth(user, self.passwords[user] if password is None else password)
        return httpx.Client(
            base_url=self.process.http_url,
            auth=auth,
            timeout=timeout_s,
            trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def admin_http(self) -> httpx.Client:
        return self.client(ADMIN_USER)

    @cached_property
    def cluster_path(self) -> str:
        """`/v3/clusters/<cluster id>`, the REST admin API's prefix."""
        with self.admin_http() as http:
            cluster_id = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        return f"/v3/clusters/{cluster_id}"
