"""`--security sasl_ssl`: the secured broker and the clients' settings for it.

A SASL_SSL pass starts the broker with one SASL_SSL listener (TLS with a fresh
trustme CA and broker certificate, SCRAM-SHA-512 logins, the ACL authorizer on
with the admin user a super user) and every generator logs in as that admin:
confluent-kafka with librdkafka's settings, Kafka's perf tools with a Java
client properties file (`--command-config`). Weir is configured through the
`[security]` table of a settings file (docs/security.md, "A minimal secured
broker"; the `inter_broker_sasl_*` user is stored at start and is the login);
Kafka through kafka_peer.py's `--security sasl_ssl` (PeerSecurity: SCRAM users
added at format time, StandardAuthorizer). A PLAINTEXT pass starts each broker
as it is with nothing configured.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLAINTEXT = "plaintext"
SASL_SSL = "sasl_ssl"
SECURITY_MODES = (PLAINTEXT, SASL_SSL)
SASL_MECHANISM = "SCRAM-SHA-512"
SETTINGS_FILE_NAME = "weir-security.toml"

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class ClientLogin:
    """How every generator of a pass connects: librdkafka settings (besides
    bootstrap.servers) and the Java client's properties file, None for PLAINTEXT."""

    librdkafka: dict[str, Any]
    java_properties: Path | None


PLAINTEXT_LOGIN = ClientLogin({}, None)


def _harness() -> Any:
    """compat_tests/security_harness.py (trustme certificates, client settings)."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from compat_tests import security_harness  # noqa: PLC0415  (only for secured passes)

    return security_harness


@dataclass(frozen=True)
class WeirSecurity:
    settings_file: Path
    login: ClientLogin


def weir_settings_toml(port: int, material: Any, admin_user: str) -> str:
    """The `[security]` table: one SASL_SSL listener on `port`, SCRAM-SHA-512, ACLs on."""
    return "\n".join(
        [
            "[security]",
            f'listeners = "SASL_SSL://127.0.0.1:{port}"',
            f'ssl_certfile = "{material.broker.cert}"',
            f'ssl_keyfile = "{material.broker.key}"',
            f'sasl_enabled_mechanisms = ["{SASL_MECHANISM}"]',
            "authorizer_enabled = true",
            f'super_users = ["User:{admin_user}"]',
            f'inter_broker_sasl_username = "{admin_user}"',
            f'inter_broker_sasl_password = "{material.users[admin_user]}"',
            "",
        ]
    )


def secure_weir(port: int, directory: Path) -> WeirSecurity:
    """Certificates and a settings file in `directory` for a Weir SASL_SSL listener on `port`."""
    harness = _harness()
    material = harness.make_security_material(directory / "security")
    settings_file = directory / SETTINGS_FILE_NAME
    settings_file.write_text(weir_settings_toml(port, material, harness.ADMIN_USER))
    client = harness.sasl_ssl(material, SASL_MECHANISM, harness.ADMIN_USER)
    java_properties = harness.write_java_properties(client, directory / "client.properties")
    return WeirSecurity(
        settings_file, ClientLogin(harness.confluent_config(client), java_properties)
    )


def kafka_login(data_dir: Path, peer_security: Any) -> ClientLogin:
    """The admin's login to a kafka_peer.secure_peer node whose material is in `data_dir`:
    the Java properties secure_peer wrote (SCRAM-SHA-512) and the same for librdkafka."""
    harness = _harness()
    users = peer_security.users
    admin = peer_security.admin_user
    client = harness.ClientSecurity(
        "SASL_SSL", SASL_MECHANISM, admin, users[admin], ca_file=peer_security.ca_file
    )
    return ClientLogin(harness.confluent_config(client), data_dir / "client.properties")
