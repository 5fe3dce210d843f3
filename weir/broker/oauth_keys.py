"""OAUTHBEARER's keys on the broker: the JWKS loaded from a file or an http(s) URL
at start (a broker that cannot load it does not start), refreshed every
`JWKS_REFRESH_INTERVAL_S`; a refresh that fails is logged and the keys it had are
kept. Token checks themselves are `weir.security.jwt_validation`'s."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import trio

from weir.broker.config_errors import ConfigError
from weir.broker.security_config import SecurityConfig
from weir.security.jwt_validation import JwkSet, JwksFormatError, ValidatedToken, validate_jwt
from weir.security.oauthbearer import OAuthBearerSettings

log = logging.getLogger(__name__)

JWKS_REFRESH_INTERVAL_S = 300.0
JWKS_BYTES_MAX = 1024 * 1024
JWKS_FETCH_TIMEOUT_S = 10.0


def oauthbearer_settings(security: SecurityConfig) -> OAuthBearerSettings:
    return OAuthBearerSettings(
        jwks_endpoint_url=security.sasl_oauthbearer_jwks_endpoint_url,
        expected_issuer=security.sasl_oauthbearer_expected_issuer or None,
        expected_audiences=security.sasl_oauthbearer_expected_audience,
        sub_claim_name=security.sasl_oauthbearer_sub_claim_name,
        clock_skew_s=security.sasl_oauthbearer_clock_skew_seconds,
    )


class OAuthBearerKeys:
    """The current JWKS, and OAUTHBEARER exchanges and HTTP bearer checks over it."""

    def __init__(self, settings: OAuthBearerSettings, keys: JwkSet) -> None:
        self.settings = settings
        self.keys = keys

    @classmethod
    async def load(cls, security: SecurityConfig) -> OAuthBearerKeys:
        settings = oauthbearer_settings(security)
        try:
            keys = await fetch_jwks(settings.jwks_endpoint_url)
        except (OSError, httpx.HTTPError, ValueError) as exc:
            raise ConfigError(
                f"security.sasl_oauthbearer_jwks_endpoint_url: cannot load the JWKS from "
                f"{settings.jwks_endpoint_url}: {exc}"
            ) from None
        return cls(settings, keys)

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        """An HTTP `Authorization: Bearer` token, checked as OAUTHBEARER checks one;
        raises JwtValidationError."""
        return validate_jwt(token, self.keys, self.settings.claim_rules(), now_ms)

    async def refresh_forever(self) -> None:
        while True:
            await trio.sleep(JWKS_REFRESH_INTERVAL_S)
            try:
                self.keys = await fetch_jwks(self.settings.jwks_endpoint_url)
            except (OSError, httpx.HTTPError, ValueError) as exc:
                log.warning("cannot refresh the JWKS, keeping the keys loaded before: %s", exc)


async def fetch_jwks(location: str) -> JwkSet:
    """The JWKS at `location`: a path, a file: URL or an http(s) URL, bounded in size."""
    scheme = urlsplit(location).scheme
    if scheme in ("http", "https"):
        async with httpx.AsyncClient(timeout=JWKS_FETCH_TIMEOUT_S) as client:
            response = await client.get(location)
            response.raise_for_status()
            body = response.content
    else:
        path = Path(urlsplit(location).path if scheme == "file" else location)
        body = await trio.to_thread.run_sync(_read_bounded, path)
    if len(body) > JWKS_BYTES_MAX:
        raise JwksFormatError(f"the JWKS is larger than {JWKS_BYTES_MAX} bytes")
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise JwksFormatError(f"the JWKS is not JSON: {exc}") from None
    return JwkSet.from_document(document)


def _read_bounded(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(JWKS_BYTES_MAX + 1)
