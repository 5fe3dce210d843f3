"""`build_sasl_server`: a listener's enabled mechanisms and the broker's credential
sources give each exchange its mechanism's server side, and nothing else."""

from __future__ import annotations

import pytest

from weir.security.jwt_validation import JwkSet
from weir.security.oauthbearer import OAuthBearerServer, OAuthBearerSettings
from weir.security.sasl_mechanisms import (
    SUPPORTED_MECHANISMS,
    SaslSources,
    UnsupportedSaslMechanismError,
    build_sasl_server,
    servable_mechanisms,
)
from weir.security.sasl_plain import PlainServer, plain_check_from_users
from weir.security.scram import (
    ScramCredential,
    ScramMechanism,
    ScramServer,
    credential_from_password,
)

NOW_MS = 1_700_000_000_000
STORED = {
    (ScramMechanism.SCRAM_SHA_512, "alice"): credential_from_password(
        ScramMechanism.SCRAM_SHA_512, "pw", b"salt", 4096
    )
}


def scram_source(mechanism: ScramMechanism, username: str) -> ScramCredential | None:
    return STORED.get((mechanism, username))


ALL_SOURCES = SaslSources(
    unknown_user_secret=b"secret",
    plain_check=plain_check_from_users({"alice": "pw"}),
    scram_credentials=scram_source,
    oauthbearer=OAuthBearerSettings(),
    jwks=lambda: JwkSet(()),
)


def test_weir_supports_kafkas_four_mechanisms() -> None:
    assert SUPPORTED_MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@pytest.mark.parametrize(
    ("mechanism", "server_type"),
    [
        ("PLAIN", PlainServer),
        ("SCRAM-SHA-256", ScramServer),
        ("SCRAM-SHA-512", ScramServer),
        ("OAUTHBEARER", OAuthBearerServer),
    ],
)
def test_each_enabled_mechanism_gets_its_server(mechanism: str, server_type: type) -> None:
    server = build_sasl_server(mechanism, SUPPORTED_MECHANISMS, ALL_SOURCES)
    assert isinstance(server, server_type)
    assert server.mechanism == mechanism
    assert not server.complete


def test_the_scram_server_reads_the_credentials_of_its_own_mechanism() -> None:
    server = build_sasl_server("SCRAM-SHA-512", SUPPORTED_MECHANISMS, ALL_SOURCES)
    first = server.respond(b"n,,n=alice,r=abc", NOW_MS)
    assert b",s=c2FsdA==,i=4096" in first  # alice's stored SHA-512 salt, b"salt"
    other = build_sasl_server("SCRAM-SHA-256", SUPPORTED_MECHANISMS, ALL_SOURCES)
    assert b",s=c2FsdA==," not in other.respond(b"n,,n=alice,r=abc", NOW_MS)


@pytest.mark.parametrize("mechanism", ["GSSAPI", "plain", "SCRAM-SHA-1", ""])
def test_unknown_mechanisms_are_unsupported(mechanism: str) -> None:
    with pytest.raises(UnsupportedSaslMechanismError) as raised:
        build_sasl_server(mechanism, SUPPORTED_MECHANISMS, ALL_SOURCES)
    assert str(raised.value) == f"Unsupported SASL mechanism {mechanism}"


def test_a_mechanism_the_listener_does_not_enable_is_unsupported() -> None:
    with pytest.raises(UnsupportedSaslMechanismError):
        build_sasl_server("PLAIN", ("SCRAM-SHA-256",), ALL_SOURCES)


def test_a_mechanism_without_a_credential_source_is_neither_listed_nor_built() -> None:
    scram_only = SaslSources(unknown_user_secret=b"s", scram_credentials=scram_source)
    assert servable_mechanisms(SUPPORTED_MECHANISMS, scram_only) == (
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    )
    for mechanism in ("PLAIN", "OAUTHBEARER"):
        with pytest.raises(UnsupportedSaslMechanismError):
            build_sasl_server(mechanism, SUPPORTED_MECHANISMS, scram_only)


def test_servable_mechanisms_keep_the_configured_order() -> None:
    enabled = ("OAUTHBEARER", "SCRAM-SHA-512", "PLAIN")
    assert servable_mechanisms(enabled, ALL_SOURCES) == enabled
