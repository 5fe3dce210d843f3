"""The listeners' TLS contexts: which ones ask for a client certificate."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from weir.broker.security_config import SecurityConfig
from weir.broker.tls import ServerTlsContext


@pytest.fixture
def security(tmp_path: Path) -> SecurityConfig:
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    certfile, keyfile, cafile = tmp_path / "b.pem", tmp_path / "b.key", tmp_path / "ca.pem"
    leaf.cert_chain_pems[0].write_to_path(str(certfile))
    leaf.private_key_pem.write_to_path(str(keyfile))
    ca.cert_pem.write_to_path(str(cafile))
    return SecurityConfig(
        ssl_certfile=str(certfile),
        ssl_keyfile=str(keyfile),
        ssl_cafile=str(cafile),
        ssl_client_auth="required",
    )


def test_ssl_listener_requires_the_client_certificate_ssl_client_auth_asks_for(
    security: SecurityConfig,
) -> None:
    assert ServerTlsContext(security).context().verify_mode == ssl.CERT_REQUIRED


def test_sasl_ssl_listener_asks_no_client_certificate_whatever_ssl_client_auth_says(
    security: SecurityConfig,
) -> None:
    context = ServerTlsContext(security, client_certificates=False).context()
    assert context.verify_mode == ssl.CERT_NONE
