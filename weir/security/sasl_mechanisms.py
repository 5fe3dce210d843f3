"""Which SASL mechanisms Weir serves, and `build_sasl_server`: the one place a listener's
settings and the broker's credential sources become a mechanism's server side for one
exchange (SaslHandshake picks the name; SaslAuthenticate drives the result)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from weir.security.jwt_validation import JwkSet
from weir.security.oauthbearer import MECHANISM as OAUTHBEARER
from weir.security.oauthbearer import OAuthBearerServer, OAuthBearerSettings
from weir.security.sasl import SaslServer
from weir.security.sasl_plain import MECHANISM as PLAIN
from weir.security.sasl_plain import PlainPasswordCheck, PlainServer
from weir.security.scram import ScramCredential, ScramMechanism, ScramServer

# The mechanisms Weir implements, in the order SaslHandshake lists them by default.
SUPPORTED_MECHANISMS = (
    PLAIN,
    ScramMechanism.SCRAM_SHA_256.sasl_name,
    ScramMechanism.SCRAM_SHA_512.sasl_name,
    OAUTHBEARER,
)


# `(mechanism, username) -> the stored credential, or None`.
ScramCredentialSource = Callable[[ScramMechanism, str], ScramCredential | None]


@dataclass(frozen=True, slots=True)
class SaslSources:
    """Where each mechanism's credentials come from (the broker builds this once from
    its settings and its metadata; a mechanism whose source is None is not served).

    `unknown_user_secret`: a per-broker random secret (SCRAM's stable fake salt for
    unknown users). `jwks` returns the current key set (the broker reloads it)."""

    unknown_user_secret: bytes
    plain_check: PlainPasswordCheck | None = None
    scram_credentials: ScramCredentialSource | None = None
    oauthbearer: OAuthBearerSettings | None = None
    jwks: Callable[[], JwkSet] | None = None
    # An unknown SCRAM user's (salt bytes, iterations): the stored users' usual ones.
    scram_unknown_user_shape: Callable[[ScramMechanism], tuple[int, int]] | None = None


class UnsupportedSaslMechanismError(ValueError):
    """The client asked for a mechanism this listener does not serve
    (UNSUPPORTED_SASL_MECHANISM in the SaslHandshake response)."""

    def __init__(self, mechanism: str) -> None:
        super().__init__(f"Unsupported SASL mechanism {mechanism}")
        self.mechanism = mechanism


def servable_mechanisms(enabled: tuple[str, ...], sources: SaslSources) -> tuple[str, ...]:
    """The enabled mechanisms that have what they need, in the configured order."""
    return tuple(name for name in enabled if _can_serve(name, sources))


def _can_serve(mechanism: str, sources: SaslSources) -> bool:
    if mechanism == PLAIN:
        return sources.plain_check is not None
    if ScramMechanism.from_sasl_name(mechanism) is not None:
        return sources.scram_credentials is not None
    if mechanism == OAUTHBEARER:
        return sources.oauthbearer is not None and sources.jwks is not None
    return False


def build_sasl_server(mechanism: str, enabled: tuple[str, ...], sources: SaslSources) -> SaslServer:
    """A fresh server side for one exchange of `mechanism` (the name from
    SaslHandshake, case-sensitive as in Kafka); UnsupportedSaslMechanismError when the
    listener does not enable it or the broker has no source for it."""
    if mechanism not in enabled or not _can_serve(mechanism, sources):
        raise UnsupportedSaslMechanismError(mechanism)
    if mechanism == PLAIN and sources.plain_check is not None:
        return PlainServer(sources.plain_check)
    scram = ScramMechanism.from_sasl_name(mechanism)
    if scram is not None and sources.scram_credentials is not None:
        source = sources.scram_credentials
        shape = sources.scram_unknown_user_shape
        return ScramServer(
            scram,
            lambda username: source(scram, username),
            sources.unknown_user_secret,
            unknown_user_shape=None if shape is None else (lambda: shape(scram)),
        )
    if mechanism == OAUTHBEARER and sources.oauthbearer is not None and sources.jwks is not None:
        return OAuthBearerServer(sources.oauthbearer, sources.jwks())
    raise UnsupportedSaslMechanismError(mechanism)
