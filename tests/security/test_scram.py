"""SCRAM-SHA-256/512's server side: RFC 7677's and RFC 5802's published exchanges, a
client written here against the RFC, and every way a login can fail (each failing
without saying whether the user exists)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from weir.security.sasl import SaslAuthenticationError, SaslExchangeStateError
from weir.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    CredentialFormatError,
    ScramCredential,
    ScramFormatError,
    ScramMechanism,
    ScramServer,
    credential_from_json,
    credential_from_password,
    credential_from_salted_password,
    credential_to_json,
    iterations_refusal,
    parse_client_final,
    parse_client_first,
    sasl_name_to_username,
    username_to_sasl_name,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
SECRET = b"broker-secret"
NOW_MS = 1_700_000_000_000

# RFC 7677 §3: user "user", password "pencil".
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")

GENERIC_256 = (
    "Authentication failed during authentication due to invalid credentials"
    " with SASL mechanism SCRAM-SHA-256"
)


class RfcClient:
    """A SCRAM client written from RFC 5802 §3, independent of the server's code."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str) -> None:
        self.hash_name = {SHA256: "sha256", SHA512: "sha512"}[mechanism]
        self.username = username
        self.password = password
        self.nonce = "clientnonce0123456789"
        self.gs2 = "n,,"

    def first(self, authzid: str = "", extensions: str = "") -> bytes:
        self.gs2 = f"n,{'a=' + authzid if authzid else ''},"
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        self.bare = f"n={name},r={self.nonce}{extensions}"
        return (self.gs2 + self.bare).encode()

    def final(self, server_first: bytes, password: str | None = None) -> bytes:
        attributes = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(
            self.hash_name,
            (password or self.password).encode(),
            base64.b64decode(attributes["s"]),
            int(attributes["i"]),
        )
        client_key = hmac.new(salted, b"Client Key", self.hash_name).digest()
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        self.server_key = hmac.new(salted, b"Server Key", self.hash_name).digest()
        channel = base64.b64encode(self.gs2.encode()).decode()
        without_proof = f"c={channel},r={attributes['r']}"
        self.auth_message = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, self.auth_message, self.hash_name).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def expected_server_final(self) -> bytes:
        signature = hmac.new(self.server_key, self.auth_message, self.hash_name).digest()
        return b"v=" + base64.b64encode(signature)


def server_for(
    mechanism: ScramMechanism, users: dict[str, ScramCredential], nonce: str = "servernonce"
) -> ScramServer:
    return ScramServer(mechanism, users.get, SECRET, make_server_nonce=lambda: nonce)


def users_with(mechanism: ScramMechanism, **passwords: str) -> dict[str, ScramCredential]:
    return {
        name: credential_from_password(mechanism, password, b"salt-" + name.encode(), 4096)
        for name, password in passwords.items()
    }


def test_rfc7677_sha256_exchange_is_reproduced_byte_for_byte() -> None:
    credential = credential_from_password(SHA256, "pencil", RFC7677_SALT, 4096)
    server = server_for(SHA256, {"user": credential}, nonce=RFC7677_SERVER_NONCE)
    assert server.respond(RFC7677_CLIENT_FIRST, NOW_MS) == RFC7677_SERVER_FIRST
    assert not server.complete
    assert server.respond(RFC7677_CLIENT_FINAL, NOW_MS) == RFC7677_SERVER_FINAL
    assert server.complete
    assert server.principal_name() == "user"
    assert server.session_lifetime_ms(NOW_MS) is None


def test_rfc5802_example_messages_parse() -> None:
    # RFC 5802 §5 (SCRAM-SHA-1, which Kafka does not offer): its messages' grammar.
    first = parse_client_first(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL")
    assert (first.gs2_header, first.username, first.nonce) == (
        "n,,",
        "user",
        "fyko+d2lbbFgONRv9qkxdawL",
    )
    assert first.bare == "n=user,r=fyko+d2lbbFgONRv9qkxdawL"
    final = parse_client_final(
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    )
    assert final.channel_binding == b"n,,"
    assert final.nonce == "fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j"
    assert final.proof == base64.b64decode("v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=")
    assert final.without_proof == "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j"


def test_rfc5802_example_stored_keys_match_the_formulas() -> None:
    # The RFC's SHA-1 proof, verified with the same StoredKey formula the server uses.
    salted = hashlib.pbkdf2_hmac("sha1", b"pencil", base64.b64decode("QSXCR+Q6sek8bf92"), 4096)
    client_key = hmac.new(salted, b"Client Key", "sha1").digest()
    auth_message = (
        b"n=user,r=fyko+d2lbbFgONRv9qkxdawL,"
        b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096,"
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j"
    )
    signature = hmac.new(hashlib.sha1(client_key).digest(), auth_message, "sha1").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    assert base64.b64encode(proof) == b"v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_a_client_with_the_right_password_completes_and_gets_the_server_signature(
    mechanism: ScramMechanism,
) -> None:
    server = server_for(mechanism, users_with(mechanism, alice="wonderland"))
    client = RfcClient(mechanism, "alice", "wonderland")
    server_first = server.respond(client.first(), NOW_MS)
    assert server.respond(client.final(server_first), NOW_MS) == client.expected_server_final()
    assert server.complete and server.principal_name() == "alice"
    assert server.mechanism == mechanism.sasl_name


def test_a_username_with_escaped_comma_and_equals_authenticates_as_itself() -> None:
    server = server_for(SHA256, users_with(SHA256, **{"a,b=c": "pw"}))
    client = RfcClient(SHA256, "a,b=c", "pw")
    server.respond(client.final(server.respond(client.first(), NOW_MS)), NOW_MS)
    assert server.principal_name() == "a,b=c"


def test_an_authzid_equal_to_the_username_is_accepted() -> None:
    server = server_for(SHA256, users_with(SHA256, alice="pw"))
    client = RfcClient(SHA256, "alice", "pw")
    server.respond(client.final(server.respond(client.first(authzid="alice"), NOW_MS)), NOW_MS)
    assert server.complete


def test_an_authzid_different_from_the_username_is_refused_with_kafkas_text() -> None:
    server = server_for(SHA256, users_with(SHA256, alice="pw"))
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(RfcClient(SHA256, "alice", "pw").first(authzid="admin"), NOW_MS)
    assert raised.value.client_message() == (
        "Authentication failed: Client requested an authorization id"
        " that is different from username"
    )


def _fail_final(
    server: ScramServer, client: RfcClient, password: str | None = None
) -> SaslAuthenticationError:
    server_first = server.respond(client.first(), NOW_MS)
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(client.final(server_first, password), NOW_MS)
    assert not server.complete
    return raised.value


def test_wrong_password_and_unknown_user_fail_alike_at_the_final_message() -> None:
    users = users_with(SHA256, alice="right")
    wrong_password = _fail_final(server_for(SHA256, users), RfcClient(SHA256, "alice", "wrong"))
    unknown_user = _fail_final(server_for(SHA256, users), RfcClient(SHA256, "mallory", "right"))
    assert wrong_password.client_message() == unknown_user.client_message() == GENERIC_256
    assert unknown_user.client_message(reauthenticating=True) == GENERIC_256.replace(
        "during authentication", "during re-authentication"
    )


def test_an_unknown_user_sees_the_same_salt_and_iterations_on_every_try() -> None:
    def server_first_of(username: str) -> bytes:
        server = server_for(SHA256, {}, nonce="n")
        return server.respond(RfcClient(SHA256, username, "x").first(), NOW_MS)

    assert server_first_of("mallory") == server_first_of("mallory")
    assert server_first_of("mallory") != server_first_of("eve")
    salt = base64.b64decode(server_first_of("mallory").decode().split(",")[1][2:])
    assert len(salt) == 32 and server_first_of("mallory").endswith(b",i=4096")


def test_an_unknown_user_is_logged_as_unknown_but_told_only_the_generic_text() -> None:
    server = ScramServer(SHA256, {}.get, SECRET)
    error = _fail_final(server, RfcClient(SHA256, "ghost", "anything"))
    assert "Invalid user credentials" in error.log_detail
    assert error.client_message() == GENERIC_256


def test_a_proof_for_another_nonce_is_refused() -> None:
    users = users_with(SHA256, alice="pw")
    server = server_for(SHA256, users, nonce="one")
    other = server_for(SHA256, users, nonce="two")
    client = RfcClient(SHA256, "alice", "pw")
    server.respond(client.first(), NOW_MS)
    replayed = client.final(other.respond(client.first(), NOW_MS))
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(replayed, NOW_MS)
    assert raised.value.client_message() == GENERIC_256
    assert "nonce" in raised.value.log_detail


def test_channel_binding_other_than_the_gs2_header_is_refused() -> None:
    server = server_for(SHA256, users_with(SHA256, alice="pw"))
    client = RfcClient(SHA256, "alice", "pw")
    final = client.final(server.respond(client.first(), NOW_MS))
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(final.replace(b"c=biws", b"c=eSws"), NOW_MS)
    assert "channel binding" in raised.value.log_detail


def test_the_delegation_token_extension_is_refused() -> None:
    server = server_for(SHA256, users_with(SHA256, alice="pw"))
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(RfcClient(SHA256, "alice", "pw").first(extensions=",tokenauth=true"), NOW_MS)
    assert raised.value.client_message() == GENERIC_256


def test_unknown_extensions_are_ignored() -> None:
    server = server_for(SHA256, users_with(SHA256, alice="pw"))
    client = RfcClient(SHA256, "alice", "pw")
    server.respond(
        client.final(server.respond(client.first(extensions=",foo=bar"), NOW_MS)), NOW_MS
    )
    assert server.complete


def test_a_stored_credential_below_the_minimum_iterations_is_refused() -> None:
    weak = credential_from_password(SHA256, "pw", b"salt", 1024)
    server = server_for(SHA256, {"alice": weak})
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(RfcClient(SHA256, "alice", "pw").first(), NOW_MS)
    assert raised.value.client_message() == GENERIC_256


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"p=tls-unique,,n=user,r=abc",
        b"n,,r=abc,n=user",
        b"n,,n=user",
        b"n,,n=,r=abc",
        b"n,,n=us=er,r=abc",
        b"n,,n=user,r=a,bc=",
        b"n,x=y,n=user,r=abc",
        b"n,,m=ext,n=user,r=abc",
        b"n,,n=user,r=abc\x00",
        b"\xff\xfe",
        b"n,,n=" + b"u" * 5000 + b",r=abc",
    ],
)
def test_malformed_client_first_messages_are_refused_without_details(message: bytes) -> None:
    server = server_for(SHA256, users_with(SHA256, user="pw"))
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(message, NOW_MS)
    assert raised.value.client_message() == GENERIC_256


@pytest.mark.parametrize(
    "final",
    [
        b"c=biws,r=abc",
        b"r=abc,c=biws,p=AAAA",
        b"c=biws,r=abcservernonce,p=not base64!",
        b"c=biws,r=abcservernonce,p=AAAA",
    ],
)
def test_malformed_client_final_messages_are_refused_without_details(final: bytes) -> None:
    server = server_for(SHA256, users_with(SHA256, user="pw"))
    server.respond(b"n,,n=user,r=abc", NOW_MS)
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(final, NOW_MS)
    assert raised.value.client_message() == GENERIC_256


def test_tokens_after_completion_or_failure_are_a_caller_bug() -> None:
    server = server_for(SHA256, users_with(SHA256, user="pw"))
    with pytest.raises(SaslExchangeStateError):
        server.principal_name()
    with pytest.raises(SaslAuthenticationError):
        server.respond(b"garbage", NOW_MS)
    with pytest.raises(SaslExchangeStateError):
        server.respond(b"n,,n=user,r=abc", NOW_MS)


def test_credential_from_salted_password_equals_credential_from_password() -> None:
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", b"salt", 4096)
    assert credential_from_salted_password(
        SHA512, b"salt", salted, 4096
    ) == credential_from_password(SHA512, "pw", b"salt", 4096)


def test_credential_json_round_trips_and_rejects_malformed_documents() -> None:
    credential = credential_from_password(SHA256, "pw", b"\x00\xffsalt", 8192)
    assert credential_from_json(credential_to_json(credential)) == credential
    for bad in [
        [],
        {},
        {**credential_to_json(credential), "salt": "%%%"},
        {**credential_to_json(credential), "iterations": "1"},
    ]:
        with pytest.raises(CredentialFormatError):
            credential_from_json(bad)


def test_mechanisms_carry_kafkas_codes_and_names() -> None:
    assert (int(SHA256), SHA256.sasl_name, SHA256.hash_name) == (1, "SCRAM-SHA-256", "sha256")
    assert (int(SHA512), SHA512.sasl_name, SHA512.hash_name) == (2, "SCRAM-SHA-512", "sha512")
    assert ScramMechanism.from_sasl_name("SCRAM-SHA-512") is SHA512
    assert ScramMechanism.from_sasl_name("PLAIN") is None


def test_iteration_bounds_are_kafkas() -> None:
    assert (MIN_ITERATIONS, MAX_ITERATIONS) == (4096, 16384)
    assert iterations_refusal(4096) is None and iterations_refusal(16384) is None
    assert iterations_refusal(4095) is not None and iterations_refusal(16385) is not None


def test_sasl_name_escapes_round_trip() -> None:
    for name in ["plain", "a,b", "a=b", "=2C", ",=,="]:
        assert sasl_name_to_username(username_to_sasl_name(name)) == name
    for bad in ["a=", "a=2", "a=2c", "a=41"]:
        with pytest.raises(ScramFormatError):
            sasl_name_to_username(bad)
