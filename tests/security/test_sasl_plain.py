"""SASL/PLAIN's server side: RFC 4616's message, Kafka's texts, bounded sizes, and the
two password checks (a configured list, stored SCRAM credentials)."""

from __future__ import annotations

import pytest

from weir.security.sasl import SaslAuthenticationError, SaslExchangeStateError
from weir.security.sasl_plain import (
    MESSAGE_BYTES_MAX,
    PlainServer,
    passwords_equal,
    plain_check_from_scram,
    plain_check_from_users,
)
from weir.security.scram import ScramCredential, ScramMechanism, credential_from_password

NOW_MS = 1_700_000_000_000
INVALID = "Authentication failed: Invalid username or password"
USERS = plain_check_from_users({"alice": "wonderland", "bob": "builder"})


def refusal(message: bytes) -> str:
    server = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(message, NOW_MS)
    assert not server.complete
    return raised.value.client_message()


def test_right_password_completes_with_an_empty_answer_and_the_username() -> None:
    server = PlainServer(USERS)
    assert server.respond(b"\x00alice\x00wonderland", NOW_MS) == b""
    assert server.complete
    assert server.principal_name() == "alice"
    assert server.mechanism == "PLAIN"
    assert server.session_lifetime_ms(NOW_MS) is None


def test_an_authzid_equal_to_the_username_is_accepted() -> None:
    server = PlainServer(USERS)
    server.respond(b"alice\x00alice\x00wonderland", NOW_MS)
    assert server.principal_name() == "alice"


def test_wrong_password_and_unknown_user_get_the_same_text() -> None:
    assert refusal(b"\x00alice\x00wrong") == INVALID
    assert refusal(b"\x00mallory\x00wonderland") == INVALID
    assert refusal(b"\x00alice\x00Wonderland") == INVALID


def test_another_users_password_does_not_log_in() -> None:
    assert refusal(b"\x00alice\x00builder") == INVALID


def test_an_authzid_different_from_the_username_is_refused() -> None:
    assert refusal(b"admin\x00alice\x00wonderland") == (
        "Authentication failed: Client requested an authorization id"
        " that is different from username"
    )


def test_an_authzid_mismatch_with_a_wrong_password_says_only_invalid_credentials() -> None:
    assert refusal(b"admin\x00alice\x00wrong") == INVALID


@pytest.mark.parametrize(
    ("message", "text"),
    [
        (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (b"alice\x00wonderland", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"\x00alice\x00wonder\x00land", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"\x00\x00wonderland", "Authentication failed: username not specified"),
        (b"\x00alice\x00", "Authentication failed: password not specified"),
        (b"\x00alice\x00\xff\xfe", INVALID),
    ],
)
def test_malformed_messages_get_kafkas_texts(message: bytes, text: str) -> None:
    assert refusal(message) == text


def test_oversized_messages_and_fields_are_refused_before_any_check() -> None:
    calls: list[str] = []

    def check(username: str, password: str) -> bool:
        calls.append(username)
        return True

    for message in [b"\x00alice\x00" + b"p" * MESSAGE_BYTES_MAX, b"\x00" + b"u" * 1025 + b"\x00pw"]:
        with pytest.raises(SaslAuthenticationError):
            PlainServer(check).respond(message, NOW_MS)
    assert calls == []


def test_a_password_of_1024_bytes_is_accepted() -> None:
    password = "p" * 1024
    server = PlainServer(plain_check_from_users({"alice": password}))
    server.respond(b"\x00alice\x00" + password.encode(), NOW_MS)
    assert server.complete


def test_non_ascii_credentials_compare_as_utf8() -> None:
    server = PlainServer(plain_check_from_users({"zoë": "mot-de-passe-é"}))
    server.respond("\x00zoë\x00mot-de-passe-é".encode(), NOW_MS)
    assert server.principal_name() == "zoë"


def test_one_message_only_and_no_principal_before_completion() -> None:
    server = PlainServer(USERS)
    with pytest.raises(SaslExchangeStateError):
        server.principal_name()
    server.respond(b"\x00alice\x00wonderland", NOW_MS)
    with pytest.raises(SaslExchangeStateError):
        server.respond(b"\x00alice\x00wonderland", NOW_MS)


def test_passwords_equal_compares_whole_strings() -> None:
    assert passwords_equal("secret", "secret")
    assert not passwords_equal("secret", "secre")
    assert not passwords_equal("secret", "secret ")


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_plain_checks_against_stored_scram_credentials(mechanism: ScramMechanism) -> None:
    stored: dict[str, ScramCredential] = {
        "alice": credential_from_password(mechanism, "wonderland", b"salty", 4096)
    }
    check = plain_check_from_scram(stored.get, mechanism, b"secret")
    assert check("alice", "wonderland")
    assert not check("alice", "wonderlan")
    assert not check("mallory", "wonderland")
    server = PlainServer(check)
    server.respond(b"\x00alice\x00wonderland", NOW_MS)
    assert server.principal_name() == "alice"
