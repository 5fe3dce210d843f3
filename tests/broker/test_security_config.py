"""The `[security]` table: Kafka's listener syntax resolved, and every mistake a
one-line error naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.broker.config import BrokerConfig, ConfigError, HostPort, load_config
from weir.broker.security_config import SecurityProtocol


def _load(tmp_path: Path, table: str) -> BrokerConfig:
    settings = tmp_path / "weir.toml"
    settings.write_text("[security]\n" + table)
    return load_config(["--config", str(settings)], {})


def test_without_listeners_there_is_one_plaintext_listener_on_kafka_listen() -> None:
    config = load_config(["--kafka-listen", "127.0.0.1:9999", "--kafka-advertise", "h:1"], {})
    (listener,) = config.kafka_listeners
    assert (listener.name, listener.protocol) == ("PLAINTEXT", SecurityProtocol.PLAINTEXT)
    assert (listener.port, listener.advertised_host, listener.advertised_port) == (9999, "h", 1)
    assert not config.security.enabled


def test_listeners_resolve_names_protocols_and_advertised_addresses(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        'listeners = "CLIENT://0.0.0.0:9093,INTERNAL://127.0.0.1:9094,PLAINTEXT://:9092"\n'
        'advertised_listeners = "CLIENT://broker.example:9093"\n'
        'listener_security_protocol_map = "CLIENT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT"\n'
        'inter_broker_listener_name = "INTERNAL"\n',
    )
    by_name = {listener.name: listener for listener in config.kafka_listeners}
    assert by_name["CLIENT"].protocol is SecurityProtocol.SASL_PLAINTEXT
    assert by_name["PLAINTEXT"].protocol is SecurityProtocol.PLAINTEXT  # a protocol's own name
    assert by_name["PLAINTEXT"].host == "0.0.0.0"
    assert config.advertised_on("CLIENT") == HostPort("broker.example", 9093)
    assert config.advertised == HostPort("127.0.0.1", 9094)  # the inter-broker listener's
    assert config.advertised_on("UNKNOWN") == HostPort("127.0.0.1", 9094)
    assert config.security.enabled


@pytest.mark.parametrize(
    ("table", "names"),
    [
        ('listeners = "CLIENT://:9093"\n', "listener_security_protocol_map"),
        ('listeners = "PLAINTEXT://nohost"\n', "security.listeners"),
        ('listeners = "PLAINTEXT://:1,PLAINTEXT://:2"\n', "appears twice"),
        ('listeners = "SSL://:9093"\n', "ssl_certfile"),
        ('listener_security_protocol_map = "A:TLS"\n', "listener_security_protocol_map"),
        ('advertised_listeners = "OTHER://h:1"\n', "advertised_listeners"),
        ('inter_broker_listener_name = "NOPE"\n', "inter_broker_listener_name"),
        ('sasl_enabled_mechanisms = ["GSSAPI"]\n', "sasl_enabled_mechanisms"),
        ('ssl_client_auth = "always"\n', "ssl_client_auth"),
        ('ssl_principal_mapping_rules = "RULE:broken"\n', "ssl_principal_mapping_rules"),
        ("authorizer_enabled = 1\n", "authorizer_enabled"),
        ('connections_max_reauth_ms = "soon"\n', "connections_max_reauth_ms"),
        ('nonsense = "x"\n', "security.nonsense"),
        (
            'listeners = "SASL_SSL://:9093"\nssl_certfile = "/nonexistent.pem"\n'
            'ssl_keyfile = "/nonexistent-key.pem"\n',
            "no file",
        ),
    ],
)
def test_a_mistake_is_one_line_naming_the_setting(tmp_path: Path, table: str, names: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, table)
    message = str(raised.value)
    assert names in message
    assert "\n" not in message


def test_oauthbearer_on_a_sasl_listener_needs_a_jwks(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sasl_oauthbearer_jwks_endpoint_url"):
        _load(
            tmp_path,
            'listeners = "SASL_PLAINTEXT://:9093"\nsasl_enabled_mechanisms = ["OAUTHBEARER"]\n',
        )
