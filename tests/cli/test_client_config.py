"""Where a client command's TLS/SASL settings come from (`-X`, `-F FILE`,
`WEIR_CLIENT_CONFIG`), what they add up to, and the one-line errors for mistakes,
which never show a setting's value."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.cli.arguments import parse_args
from weir.cli.client_config import (
    client_config,
    resolve_client_config,
    settings_from_arguments,
    settings_from_properties,
)
from weir.cli.client_security import ClientSecurity
from weir.cli.errors import CliError
from weir.cli.main import main

SCRAM_FLAGS = [
    "security.protocol=SASL_SSL",
    "sasl.mechanism=SCRAM-SHA-512",
    "sasl.username=alice",
    "sasl.password=s3cret=with=equals",
]


def from_x(*pairs: str) -> ClientSecurity:
    return client_config(settings_from_arguments(pairs)).security


def test_x_flags_as_kcat_spells_them_make_the_client_security() -> None:
    assert from_x(*SCRAM_FLAGS, "ssl.ca.location=/ca.pem") == ClientSecurity(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="alice",
        sasl_password="s3cret=with=equals",
        ssl_ca_location="/ca.pem",
    )


def test_no_settings_is_plaintext() -> None:
    config = resolve_client_config([], None, {})
    assert (config.security, config.bootstrap) == (ClientSecurity(), None)


def test_properties_file_lines_comments_and_separators() -> None:
    text = (
        "# a comment\n! another\n\n"
        "security.protocol = SSL\n"
        "ssl.ca.location: /etc/ca.pem\n"
        "  ssl.certificate.location=/etc/c.pem  \n"
    )
    settings = list(settings_from_properties(text, "c.properties"))
    assert [(s.key, s.value, s.origin) for s in settings] == [
        ("security.protocol", "SSL", "c.properties line 4"),
        ("ssl.ca.location", "/etc/ca.pem", "c.properties line 5"),
        ("ssl.certificate.location", "/etc/c.pem", "c.properties line 6"),
    ]


def test_x_flags_override_the_file_and_the_file_replaces_the_environment(
    tmp_path: Path,
) -> None:
    flag_file = tmp_path / "flag.properties"
    flag_file.write_text("security.protocol=SSL\nssl.ca.location=/from-file.pem\n")
    env_file = tmp_path / "env.properties"
    env_file.write_text("bootstrap.servers=b:9093\nsecurity.protocol=SASL_SSL\n")
    environ = {"WEIR_CLIENT_CONFIG": str(env_file)}
    config = resolve_client_config(["ssl.ca.location=/from-x.pem"], str(flag_file), environ)
    assert config.security == ClientSecurity(security_protocol="SSL", ssl_ca_location="/from-x.pem")
    assert config.bootstrap is None
    config = resolve_client_config(SCRAM_FLAGS[1:], None, environ)
    assert (config.security.security_protocol, config.bootstrap) == ("SASL_SSL", "b:9093")


def test_a_kafka_command_config_file_with_a_jaas_line_gives_the_credentials() -> None:
    text = (
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="pa\\"ss";\n'
    )
    security = client_config(settings_from_properties(text, "f")).security
    assert (security.sasl_username, security.sasl_password) == ("alice", 'pa"ss')


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["sasl.pasword=hunter2"], "-X: unknown setting sasl.pasword (known: bootstrap.servers"),
        (["hunter2"], "-X: expected key=value, e.g. -X security.protocol=SASL_SSL"),
        (
            ["security.protocol=SSL", "ssl.truststore.password=hunter2"],
            "-X: ssl.truststore.password is a Java keystore setting; give the CA certificates "
            "as a PEM file with ssl.ca.location",
        ),
        (
            ["sasl.username=alice", "sasl.password=hunter2"],
            "-X: sasl.username is set but security.protocol is not (the connection would be "
            "PLAINTEXT): add security.protocol=SASL_SSL, SASL_PLAINTEXT or SSL",
        ),
        (
            ["security.protocol=SASL_SSL", "sasl.password=hunter2"],
            "SASL_SSL needs sasl.username and sasl.password",
        ),
        (
            ["security.protocol=SASL_SSL", 'sasl.jaas.config=x password="hunter2";'],
            '-X: sasl.jaas.config needs username="..." and password="..."',
        ),
        (["security.protocol=TLS"], "security.protocol 'TLS' is not one of PLAINTEXT"),
    ],
)
def test_mistakes_are_one_line_without_the_value(pairs: list[str], message: str) -> None:
    with pytest.raises(CliError) as raised:
        from_x(*pairs)
    assert raised.value.message.startswith(message)
    assert "\n" not in raised.value.message and "hunter2" not in raised.value.message


def test_a_file_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_text("security.protocol=SSL\nssl.keystore.location=/k.jks\n")
    with pytest.raises(CliError, match=rf"^{path} line 2: ssl.keystore.location is a Java"):
        resolve_client_config([], str(path), {})
    with pytest.raises(CliError, match=r"^cannot read client config /nope \(WEIR_CLIENT_CONFIG\)"):
        resolve_client_config([], None, {"WEIR_CLIENT_CONFIG": "/nope"})
    path.write_text("sasl.password\n")
    with pytest.raises(CliError, match=rf"^{path} line 1: expected key=value$"):
        resolve_client_config([], str(path), {})


def test_x_before_and_after_the_subcommand_are_joined_in_order() -> None:
    args = parse_args(["-X", "a=1", "topic", "list", "-X", "b=2", "-X", "c=3", "-F", "f"])
    assert args.client_properties == ["a=1", "b=2", "c=3"]
    assert args.client_config_file == "f"
    args = parse_args(["--command-config", "g", "consume", "t"])
    assert (args.client_properties, args.client_config_file) == ([], "g")


def test_a_settings_mistake_exits_2_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["-b", "127.0.0.1:1", "topic", "list", "-X", "sasl.passwd=hunter2"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith("error: -X: unknown setting sasl.passwd (known: ")
    assert "hunter2" not in captured.err and captured.err.count("\n") == 1
