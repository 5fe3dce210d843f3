"""TLS for the broker's listeners: the server context built from PEM files and
rebuilt when they change (a renewed certificate is served to the next connection,
no restart), and a client certificate's subject mapped to a principal.

A context is checked against its files at most once per `RELOAD_CHECK_INTERVAL_S`
(two `stat` calls). A replacement that cannot be loaded (a half-written file, a key
that does not match) is logged and the previous context kept: a bad renewal never
takes a working listener down."""

from __future__ import annotations

import logging
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from weir.broker.security_config import SecurityConfig
from weir.security.principal_mapping import (
    Rule,
    java_rfc2253_name,
    parse_mapping_rules,
    principal_name,
)

log = logging.getLogger(__name__)

RELOAD_CHECK_INTERVAL_S = 1.0
# A TLS handshake must finish within this, or the connection is closed.
HANDSHAKE_TIMEOUT_S = 10.0

_CLIENT_AUTH_MODES = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


@dataclass(frozen=True)
class _FilesState:
    paths: tuple[Path, ...]
    mtimes_ns: tuple[int, ...]


def _state_of(paths: tuple[Path, ...]) -> _FilesState:
    mtimes = []
    for path in paths:
        try:
            mtimes.append(path.stat().st_mtime_ns)
        except OSError:
            mtimes.append(-1)
    return _FilesState(paths, tuple(mtimes))


class ServerTlsContext:
    """The listeners' TLS server context, current with its certificate files."""

    def __init__(
        self, security: SecurityConfig, *, http: bool = False, client_certificates: bool = True
    ) -> None:
        """The SSL listeners' context (client certificates as `ssl_client_auth` says);
        without `client_certificates` a SASL_SSL listener's (none asked for: Kafka
        applies the broker-wide `ssl.client.auth` to SSL listeners only, KIP-684); with
        `http` the HTTP listener's (no client certificates; ALPN offers HTTP/1.1)."""
        self._certfile = Path(security.ssl_certfile)
        self._keyfile = Path(security.ssl_keyfile)
        self._http = http
        asks_certificates = client_certificates and not http
        self._cafile = (
            Path(security.ssl_cafile) if security.ssl_cafile and asks_certificates else None
        )
        self._verify_mode = (
            _CLIENT_AUTH_MODES[security.ssl_client_auth] if asks_certificates else ssl.CERT_NONE
        )
        paths = [self._certfile, self._keyfile]
        if self._cafile is not None:
            paths.append(self._cafile)
        self._paths = tuple(paths)
        self._state = _state_of(self._paths)
        self._context = self._build()  # raises at start: a broker never serves without it
        self._checked_s = time.monotonic()
        self.reloads_total = 0

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self._certfile, self._keyfile)
        context.verify_mode = self._verify_mode
        if self._cafile is not None:
            context.load_verify_locations(cafile=self._cafile)
        if self._http:
            context.set_alpn_protocols(["http/1.1"])
        return context

    def context(self) -> ssl.SSLContext:
        """The current context, rebuilt first if a file changed since it was built."""
        now_s = time.monotonic()
        if now_s - self._checked_s >= RELOAD_CHECK_INTERVAL_S:
            self._checked_s = now_s
            state = _state_of(self._paths)
            if state != self._state:
                self._reload(state)
        return self._context

    def _reload(self, state: _FilesState) -> None:
        try:
            context = self._build()
        except (OSError, ssl.SSLError, ValueError) as exc:
            log.warning("TLS files changed but cannot be loaded, keeping the old ones: %s", exc)
            return
        self._context = context
        self._state = state
        self.reloads_total += 1
        log.info("TLS certificate reloaded from %s", self._certfile)


class CertificatePrincipals:
    """A client certificate (DER) to its principal name, by Kafka's
    `ssl.principal.mapping.rules` over the subject as Java's X500Principal renders it
    in RFC 2253 form (what Kafka's rules are written against)."""

    def __init__(self, rules_text: str) -> None:
        self._rules: list[Rule] = parse_mapping_rules(rules_text)

    def name_of(self, certificate_der: bytes) -> str:
        """Raises NoMatchingRuleError when no rule maps the subject (the connection is
        then refused, as Kafka refuses it)."""
        subject = x509.load_der_x509_certificate(certificate_der).subject
        return principal_name(self._rules, java_rfc2253_name(subject))
