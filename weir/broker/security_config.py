"""The broker's security settings: the `[security]` table of the settings file.

Listeners are written as Kafka writes them: `listeners` is a comma-separated list of
`NAME://HOST:PORT`, `listener_security_protocol_map` maps each name to PLAINTEXT, SSL,
SASL_PLAINTEXT or SASL_SSL (a name that is itself a protocol maps to it by default),
`advertised_listeners` gives the address clients are told per name. With no
`listeners`, the broker has one PLAINTEXT listener on `kafka_listen` (advertised as
`kafka_advertise`): today's behaviour, nothing to configure."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from weir.broker.config_errors import ConfigError
from weir.security.principal_mapping import MappingRuleError, parse_mapping_rules


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True)
class Listener:
    """One Kafka listener: its name, where it binds, its protocol, and the address
    other brokers and clients are told to use."""

    name: str
    host: str
    port: int
    protocol: SecurityProtocol
    advertised_host: str
    advertised_port: int


@dataclass(frozen=True)
class SqsAccessKey:
    """An AWS access key pair the SQS API accepts, and the Weir user it stands for."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    user: str


SQS_ACCESS_KEY_FIELDS = ("access_key_id", "secret_access_key", "user")


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SSL_CLIENT_AUTH_VALUES = ("none", "requested", "required")


@dataclass(frozen=True)
class SecurityConfig:
    """Every `[security]` setting, under its TOML key (Kafka's name with underscores)."""

    # Kafka's listeners / advertised.listeners / listener.security.protocol.map /
    # inter.broker.listener.name, as Kafka writes their values.
    listeners: str = ""
    advertised_listeners: str = ""
    listener_security_protocol_map: str = ""
    inter_broker_listener_name: str = ""
    # TLS: the broker's certificate chain and key (PEM; reread when either file
    # changes), the CAs client certificates must chain to, and whether a client
    # certificate is asked for (Kafka's ssl.client.auth).
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    ssl_cafile: str = ""
    ssl_client_auth: str = "none"
    # Kafka's ssl.principal.mapping.rules: a client certificate's subject to a name.
    ssl_principal_mapping_rules: str = "DEFAULT"
    # HTTP listener over TLS (the same certificate and key).
    http_tls: bool = False
    sasl_enabled_mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")
    # OAUTHBEARER: JWTs checked against this JWKS (a file path or an http(s) URL).
    sasl_oauthbearer_jwks_endpoint_url: str = ""
    sasl_oauthbearer_expected_issuer: str = ""
    sasl_oauthbearer_expected_audience: tuple[str, ...] = ()
    sasl_oauthbearer_sub_claim_name: str = "sub"
    sasl_oauthbearer_clock_skew_seconds: int = 30
    # KIP-368: a SASL session lasts at most this long (0: until the connection
    # closes); a client re-authenticates on the same connection before it ends.
    connections_max_reauth_ms: int = 0
    # A failed login's answer is delayed by this much (Kafka's
    # connection.failed.authentication.delay.ms).
    connection_failed_authentication_delay_ms: int = 100
    # The largest frame a connection may send before it authenticates (Kafka's
    # sasl.server.max.receive.size; the class of CVE-2022-34917).
    sasl_server_max_receive_size: int = 524_288
    # Authorization: Kafka's ACLs, deny by default once enabled.
    authorizer_enabled: bool = False
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    # The credentials this broker presents on the inter-broker listener.
    inter_broker_sasl_mechanism: str = "SCRAM-SHA-512"
    inter_broker_sasl_username: str = ""
    inter_broker_sasl_password: str = ""
    # etcd over TLS: the CA etcd's certificate chains to, and this broker's client
    # certificate and key (etcd's --client-cert-auth).
    etcd_cafile: str = ""
    etcd_certfile: str = ""
    etcd_keyfile: str = ""
    # The SQS API's receipt handles are MACed with a key from the cluster id and this
    # (set it, the same on every broker, so a client cannot forge a handle).
    sqs_receipt_secret: str = ""
    # The SQS API's access keys: AWS Signature Version 4 is checked against them, and
    # a request signed with one runs as its Weir user (docs/http-sqs.md).
    sqs_access_keys: tuple[SqsAccessKey, ...] = ()
    listener_list: tuple[Listener, ...] = field(default=(), compare=False)

    @property
    def enabled(self) -> bool:
        """Anything beyond plaintext and no ACLs is configured."""
        return self.authorizer_enabled or any(
            listener.protocol is not SecurityProtocol.PLAINTEXT for listener in self.listener_list
        )


_BOOL_SETTINGS = ("authorizer_enabled", "allow_everyone_if_no_acl_found", "http_tls")
_LIST_SETTINGS = ("sasl_enabled_mechanisms", "super_users", "sasl_oauthbearer_expected_audience")
_INT_SETTINGS = (
    "sasl_oauthbearer_clock_skew_seconds",
    "connections_max_reauth_ms",
    "connection_failed_authentication_delay_ms",
    "sasl_server_max_receive_size",
)
SETTING_NAMES = tuple(f.name for f in fields(SecurityConfig) if f.name != "listener_list")


def parse_security_table(
    table: Any, source: str, default_listen: tuple[str, int], default_advertise: tuple[str, int]
) -> SecurityConfig:
    """The `[security]` table, checked, with its listeners resolved (one PLAINTEXT
    listener on `default_listen` when it names none). Raises ConfigError."""
    if table is None:
        table = {}
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: expected a table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        name = key.replace("-", "_").replace(".", "_")
        if name not in SETTING_NAMES:
            raise ConfigError(f"{source}: unknown setting 'security.{key}'")
        values[name] = _convert(name, value, f"{source}: security.{key}")
    config = SecurityConfig(**values)
    listeners = resolve_listeners(config, source, default_listen, default_advertise)
    config = replace(config, listener_list=listeners)
    _check(config, source)
    return config


def _convert(name: str, value: Any, setting: str) -> Any:
    if name == "sqs_access_keys":
        return _sqs_access_keys(value, setting)
    if name in _BOOL_SETTINGS:
        if not isinstance(value, bool):
            raise ConfigError(f"{setting}: expected true or false, got {value!r}")
        return value
    if name in _LIST_SETTINGS:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{setting}: expected a list of strings, got {value!r}")
        return tuple(item.strip() for item in items if item.strip())
    if name in _INT_SETTINGS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{setting}: expected an integer >= 0, got {value!r}")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{setting}: expected a string, got {value!r}")
    return value


def _sqs_access_keys(value: Any, setting: str) -> tuple[SqsAccessKey, ...]:
    """`[{access_key_id = "...", secret_access_key = "...", user = "..."}, ...]`."""
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{setting}: expected a list of tables, got {type(value).__name__}")
    keys = []
    for item in value:
        if not isinstance(item, Mapping) or set(item) != set(SQS_ACCESS_KEY_FIELDS):
            raise ConfigError(
                f"{setting}: each access key is a table of {', '.join(SQS_ACCESS_KEY_FIELDS)}"
            )
        if not all(isinstance(item[f], str) and item[f] for f in SQS_ACCESS_KEY_FIELDS):
            raise ConfigError(f"{setting}: {', '.join(SQS_ACCESS_KEY_FIELDS)} must be non-empty")
        keys.append(SqsAccessKey(item["access_key_id"], item["secret_access_key"], item["user"]))
    if len({k.access_key_id for k in keys}) != len(keys):
        raise ConfigError(f"{setting}: an access key id is given twice")
    return tuple(keys)


def _check(config: SecurityConfig, source: str) -> None:
    for mechanism in config.sasl_enabled_mechanisms:
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(
                f"{source}: security.sasl_enabled_mechanisms: {mechanism!r} is not one of "
                f"{', '.join(SASL_MECHANISMS)}"
            )
    if config.ssl_client_auth not in SSL_CLIENT_AUTH_VALUES:
        raise ConfigError(
            f"{source}: security.ssl_client_auth: expected one of "
            f"{', '.join(SSL_CLIENT_AUTH_VALUES)}, got {config.ssl_client_auth!r}"
        )
    needs_tls = config.http_tls or any(
        listener.protocol.uses_tls for listener in config.listener_list
    )
    if needs_tls and not (config.ssl_certfile and config.ssl_keyfile):
        raise ConfigError(
            f"{source}: a TLS listener needs security.ssl_certfile and security.ssl_keyfile"
        )
    if config.ssl_client_auth != "none" and not config.ssl_cafile:
        raise ConfigError(
            f"{source}: security.ssl_client_auth = {config.ssl_client_auth!r} needs "
            "security.ssl_cafile (the CAs client certificates chain to)"
        )
    sasl_listener = any(listener.protocol.uses_sasl for listener in config.listener_list)
    oauth = "OAUTHBEARER" in config.sasl_enabled_mechanisms
    if sasl_listener and oauth and not config.sasl_oauthbearer_jwks_endpoint_url:
        raise ConfigError(
            f"{source}: OAUTHBEARER needs security.sasl_oauthbearer_jwks_endpoint_url"
        )
    names = {listener.name for listener in config.listener_list}
    if config.inter_broker_listener_name and config.inter_broker_listener_name not in names:
        raise ConfigError(
            f"{source}: security.inter_broker_listener_name "
            f"{config.inter_broker_listener_name!r} is not one of the listeners"
        )
    try:
        parse_mapping_rules(config.ssl_principal_mapping_rules)
    except MappingRuleError as exc:
        raise ConfigError(f"{source}: security.ssl_principal_mapping_rules: {exc}") from None
    for path_setting in ("ssl_certfile", "ssl_keyfile", "ssl_cafile"):
        path = getattr(config, path_setting)
        if path and not Path(path).is_file():
            raise ConfigError(f"{source}: security.{path_setting}: no file {path}")


def resolve_listeners(
    config: SecurityConfig,
    source: str,
    default_listen: tuple[str, int],
    default_advertise: tuple[str, int],
) -> tuple[Listener, ...]:
    protocols = _protocol_map(config.listener_security_protocol_map, source)
    if not config.listeners:
        if config.advertised_listeners:
            raise ConfigError(f"{source}: security.advertised_listeners needs security.listeners")
        host, port = default_listen
        advertised_host, advertised_port = default_advertise
        return (
            Listener(
                "PLAINTEXT",
                host,
                port,
                SecurityProtocol.PLAINTEXT,
                advertised_host,
                advertised_port,
            ),
        )
    bound = _endpoints(config.listeners, "listeners", source)
    advertised = _endpoints(config.advertised_listeners, "advertised_listeners", source)
    listeners = []
    for name, (host, port) in bound.items():
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError(
                f"{source}: security.listeners: listener {name!r} has no protocol: add it to "
                "security.listener_security_protocol_map"
            )
        advertised_host, advertised_port = advertised.get(name, (host, port))
        listeners.append(Listener(name, host, port, protocol, advertised_host, advertised_port))
    unknown = set(advertised) - set(bound)
    if unknown:
        raise ConfigError(
            f"{source}: security.advertised_listeners names {sorted(unknown)}, "
            "which security.listeners does not"
        )
    return tuple(listeners)


def _protocol_map(text: str, source: str) -> dict[str, SecurityProtocol]:
    protocols = {protocol.value: protocol for protocol in SecurityProtocol}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, separator, protocol_name = entry.partition(":")
        if not separator or protocol_name not in protocols:
            raise ConfigError(
                f"{source}: security.listener_security_protocol_map: {entry!r} is not "
                "NAME:PROTOCOL with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
            )
        protocols[name.strip().upper()] = protocols[protocol_name]
    return protocols


def _endpoints(text: str, setting: str, source: str) -> dict[str, tuple[str, int]]:
    endpoints: dict[str, tuple[str, int]] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, separator, address = entry.partition("://")
        host, colon, port_text = address.rpartition(":")
        if not separator or not colon or not port_text.isdigit() or int(port_text) > 65535:
            raise ConfigError(f"{source}: security.{setting}: {entry!r} is not NAME://HOST:PORT")
        key = name.strip().upper()
        if key in endpoints:
            raise ConfigError(f"{source}: security.{setting}: listener {key!r} appears twice")
        endpoints[key] = (host.strip("[]") or "0.0.0.0", int(port_text))
    return endpoints
