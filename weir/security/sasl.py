"""What every SASL mechanism's server side offers the connection (`SaslServer`), the
one error they raise (`SaslAuthenticationError`), and the texts Kafka sends a client
whose login failed.

The connection (SaslHandshake, then SaslAuthenticate) hands each client token to
`respond` and sends back what it returns, until `complete`; a raised
`SaslAuthenticationError` becomes SASL_AUTHENTICATION_FAILED with
`client_message(...)` as the error message, and the connection closes. No message
ever says which half of a login (user or password) was wrong.
"""

from __future__ import annotations

from typing import Protocol


class SaslServer(Protocol):
    """One authentication exchange on one connection, server side."""

    @property
    def mechanism(self) -> str:
        """The SASL mechanism name: `PLAIN`, `SCRAM-SHA-256`, `OAUTHBEARER`..."""
        ...

    def respond(self, client_bytes: bytes, now_ms: int) -> bytes:
        """The server's answer to the client's next token (empty when there is
        nothing to say); SaslAuthenticationError when the login fails."""
        ...

    @property
    def complete(self) -> bool:
        """The exchange succeeded: `principal_name` is known."""
        ...

    def principal_name(self) -> str:
        """Who authenticated (the `User:` principal's name); only once complete."""
        ...

    def session_lifetime_ms(self, now_ms: int) -> int | None:
        """How long the session may last before the client must re-authenticate
        (KIP-368), when the credential itself bounds it (OAUTHBEARER: until the token
        expires); None when it does not."""
        ...


class SaslAuthenticationError(Exception):
    """A failed login. `message` is safe to send to the client (Kafka's
    SaslAuthenticationException texts); `log_detail` is for the broker's log only."""

    def __init__(self, message: str, log_detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.log_detail = log_detail if log_detail is not None else message

    def client_message(self, reauthenticating: bool = False) -> str:
        return self.message


class SaslInvalidCredentialsError(SaslAuthenticationError):
    """A failure the mechanism does not describe to the client (Kafka's plain
    `SaslException`): the client gets only the phase and the mechanism, as
    `SaslServerAuthenticator.handleSaslToken` sends it."""

    def __init__(self, mechanism: str, log_detail: str) -> None:
        self.mechanism = mechanism
        super().__init__(invalid_credentials_message(mechanism, reauthenticating=False), log_detail)

    def client_message(self, reauthenticating: bool = False) -> str:
        return invalid_credentials_message(self.mechanism, reauthenticating)


def invalid_credentials_message(mechanism: str, reauthenticating: bool) -> str:
    """Kafka's text for a login refused without details."""
    phase = "re-authentication" if reauthenticating else "authentication"
    return (
        f"Authentication failed during {phase} due to invalid credentials"
        f" with SASL mechanism {mechanism}"
    )


class SaslExchangeStateError(RuntimeError):
    """The connection drove a mechanism out of order (a token after completion or
    failure, the principal before completion): a bug in the caller, not a login."""
