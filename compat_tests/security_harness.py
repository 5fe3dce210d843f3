"""Client-side security material for the compatibility tests: certificates, users, tokens,
and each client's settings for them.

`make_security_material(directory)` writes, as PEM files:

- ``ca.pem``: the test CA every client trusts; ``other-ca.pem``: a CA nobody's
  certificates chain to (a client trusting only it must fail the TLS handshake);
- ``broker.pem`` / ``broker.key``: the broker's certificate (SANs 127.0.0.1, ::1 and
  localhost, subject ``CN=broker,OU=brokers,O=Weir``) and its PKCS#8 key, and
  ``broker-keystore.pem``: key then chain in one file, what Kafka's
  ``ssl.keystore.type=PEM`` reads;
- for each client identity (``alice``: ``CN=alice,OU=eng,O=Weir``; ``mallory``: signed
  by the other CA): ``NAME.pem``, ``NAME.key`` (PKCS#8) and ``NAME-keystore.pem``;
- ``jwks.json``: the public key (RS256, with a ``kid``) OAUTHBEARER tokens are checked
  against, and ``NAME.jwt``: a valid token per OAUTHBEARER user.

Passwords are the SCRAM/PLAIN users the broker must know (`SecurityMaterial.users`);
`admin` is the super user. `ClientSecurity` says how one client connects (protocol,
mechanism, credentials, trust); the builders below turn it into each client's own
settings: confluent-kafka (`confluent_config`), kafka-python and aiokafka
(`kafka_python_kwargs`, `aiokafka_kwargs`), kcat (`kcat_args`), kafkajs
(`kafkajs_json`), franz-go and sarama (`go_env`), the Java client and Kafka's tools
(`java_properties`, `write_java_properties`), and Spark's connector (`spark_options`).
"""

from __future__ import annotations

import base64
import json
import ssl
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import trustme
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

ORGANIZATION = "Weir"
BROKER_HOSTS = ("127.0.0.1", "::1", "localhost")
ADMIN_USER = "admin"
# name -> password. Letters and digits only: no client needs quoting for them.
DEFAULT_USERS = {ADMIN_USER: "admin-secret-1", "alice": "alice-secret-2"}
# name -> organizational unit of the client certificate (CN=name,OU=unit,O=Weir)
CLIENT_CERT_UNITS = {"alice": "eng", "admin": "ops"}
UNTRUSTED_CLIENT = "mallory"  # a certificate from the CA the broker does not trust
JWT_ISSUER = "https://issuer.weir.test"
JWT_AUDIENCE = "weir"
JWT_KEY_ID = "weir-test-key-1"
JWT_LIFETIME_S = 3600
SCRAM_ITERATIONS = 4096
# Kafka's ssl.principal.mapping.rules: the certificate CN=alice,OU=eng,O=Weir is User:alice
SSL_PRINCIPAL_MAPPING_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


# --------------------------------------------------------------------------- material


@dataclass(frozen=True)
class CertificateFiles:
    cert: Path  # the certificate (then its chain, if any) as PEM
    key: Path  # its private key, unencrypted PKCS#8 PEM
    keystore: Path  # key then certificate chain in one PEM file (Kafka's PEM keystore)
    subject: str  # RFC 2253, as Kafka prints it: CN=alice,OU=eng,O=Weir


@dataclass(frozen=True)
class SecurityMaterial:
    directory: Path
    ca_file: Path
    other_ca_file: Path
    broker: CertificateFiles
    clients: dict[str, CertificateFiles]
    users: dict[str, str]
    jwks_file: Path
    jwt_signer: JwtSigner
    token_files: dict[str, Path]

    @property
    def admin_password(self) -> str:
        return self.users[ADMIN_USER]


def _pkcs8(key_pem: bytes) -> bytes:
    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_leaf(
    directory: Path, name: str, leaf: trustme.LeafCert, subject: str
) -> CertificateFiles:
    chain = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
    key = _pkcs8(leaf.private_key_pem.bytes())
    files = CertificateFiles(
        cert=directory / f"{name}.pem",
        key=directory / f"{name}.key",
        keystore=directory / f"{name}-keystore.pem",
        subject=subject,
    )
    files.cert.write_bytes(chain)
    files.key.write_bytes(key)
    files.keystore.write_bytes(key + chain)
    for path in (files.key, files.keystore):
        path.chmod(0o600)
    return files


def _issue(
    ca: trustme.CA, directory: Path, name: str, unit: str, *identities: str
) -> CertificateFiles:
    leaf = ca.issue_cert(
        *identities,
        common_name=name,
        organization_name=ORGANIZATION,
        organization_unit_name=unit,
    )
    # trustme writes the subject O, OU, CN: RFC 2253 lists it last to first
    return _write_leaf(directory, name, leaf, f"CN={name},OU={unit},O={ORGANIZATION}")


def make_security_material(
    directory: Path, users: dict[str, str] | None = None
) -> SecurityMaterial:
    """Write a fresh CA, broker and client certificates, a JWKS and tokens into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    users = dict(users or DEFAULT_USERS)
    ca = trustme.CA(organization_name=ORGANIZATION, organization_unit_name="Weir test CA")
    other_ca = trustme.CA(organization_name="Elsewhere", organization_unit_name="Untrusted CA")
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca.cert_pem.bytes())
    other_ca_file = directory / "other-ca.pem"
    other_ca_file.write_bytes(other_ca.cert_pem.bytes())
    broker = _issue(ca, directory, "broker", "brokers", *BROKER_HOSTS)
    clients = {
        name: _issue(ca, directory, name, unit, f"{name}.clients.weir.test")
        for name, unit in CLIENT_CERT_UNITS.items()
    }
    clients[UNTRUSTED_CLIENT] = _issue(
        other_ca, directory, UNTRUSTED_CLIENT, "eng", f"{UNTRUSTED_CLIENT}.clients.weir.test"
    )
    signer = JwtSigner.generate(JWT_KEY_ID)
    jwks_file = directory / "jwks.json"
    jwks_file.write_text(json.dumps(signer.jwks()))
    token_files = {}
    for name in users:
        token_files[name] = directory / f"{name}.jwt"
        token_files[name].write_text(signer.mint(name))
    return SecurityMaterial(
        directory=directory,
        ca_file=ca_file,
        other_ca_file=other_ca_file,
        broker=broker,
        clients=clients,
        users=users,
        jwks_file=jwks_file,
        jwt_signer=signer,
        token_files=token_files,
    )


# --------------------------------------------------------------------------- JWT (RS256)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_uint(value: int) -> str:
    return _b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


@dataclass(frozen=True)
class JwtSigner:
    """Signs RS256 JWTs with one RSA key and publishes its public half as a JWKS."""

    key_id: str
    private_key: rsa.RSAPrivateKey
    issuer: str = JWT_ISSUER
    audience: str = JWT_AUDIENCE

    @classmethod
    def generate(cls, key_id: str) -> JwtSigner:
        return cls(key_id, rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def jwks(self) -> dict[str, Any]:
        numbers = self.private_key.public_key().public_numbers()
        key = {
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": self.key_id,
            "n": _b64url_uint(numbers.n),
            "e": _b64url_uint(numbers.e),
        }
        return {"keys": [key]}

    def mint(
        self,
        subject: str,
        *,
        now_s: int | None = None,
        lifetime_s: int = JWT_LIFETIME_S,
        claims: dict[str, Any] | None = None,
    ) -> str:
        """A compact JWS: iss, aud, sub, iat, exp (and `claims` over them)."""
        issued_s = int(time.time()) if now_s is None else now_s
        header = {"alg": "RS256", "typ": "JWT", "kid": self.key_id}
        payload: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": subject,
            "iat": issued_s,
            "exp": issued_s + lifetime_s,
            "scope": "kafka",
        }
        payload.update(claims or {})
        signing_input = (
            _b64url(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64url(json.dumps(payload, separators=(",", ":")).encode())
        )
        signature = self.private_key.sign(
            signing_input.encode(), padding.PKCS1v15(), hashes.SHA256()
        )
        return signing_input + "." + _b64url(signature)


def token_expiry_s(token: str) -> float:
    """The `exp` claim of a compact JWS (unverified: the client only needs its lifetime)."""
    payload = token.split(".")[1]
    decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    return float(json.loads(decoded)["exp"])


# --------------------------------------------------------------------------- one client


@dataclass(frozen=True)
class ClientSecurity:
    """How one client connects: what every builder below translates."""

    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    mechanism: str | None = None  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
    username: str | None = None
    password: str | None = None
    ca_file: Path | None = None  # the CA the client trusts (TLS protocols)
    cert: CertificateFiles | None = None  # the client certificate (mutual TLS)
    token_file: Path | None = None  # OAUTHBEARER: a file holding the JWT

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown security protocol {self.protocol!r}")
        if self.mechanism is not None and self.mechanism not in MECHANISMS:
            raise ValueError(f"unknown SASL mechanism {self.mechanism!r}")
        if self.sasl != (self.mechanism is not None):
            raise ValueError(f"{self.protocol} with mechanism {self.mechanism!r}")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def scram(self) -> bool:
        return bool(self.mechanism and self.mechanism.startswith("SCRAM-"))

    @property
    def oauth(self) -> bool:
        return self.mechanism == "OAUTHBEARER"

    def token(self) -> str:
        if self.token_file is None:
            raise ValueError("OAUTHBEARER without a token file")
        return self.token_file.read_text().strip()

    def with_password(self, password: str) -> ClientSecurity:
        return replace(self, password=password)

    def trusting(self, ca_file: Path) -> ClientSecurity:
        return replace(self, ca_file=ca_file)


def sasl_ssl(
    material: SecurityMaterial, mechanism: str = "SCRAM-SHA-256", user: str = "alice"
) -> ClientSecurity:
    """SASL over TLS as `user` (password or, for OAUTHBEARER, token from `material`)."""
    if mechanism == "OAUTHBEARER":
        return ClientSecurity(
            "SASL_SSL", mechanism, ca_file=material.ca_file, token_file=material.token_files[user]
        )
    return ClientSecurity(
        "SASL_SSL", mechanism, user, material.users[user], ca_file=material.ca_file
    )


def sasl_plaintext(
    material: SecurityMaterial, mechanism: str = "SCRAM-SHA-256", user: str = "alice"
) -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", mechanism, user, material.users[user])


def mutual_tls(material: SecurityMaterial, user: str = "alice") -> ClientSecurity:
    """TLS with the client certificate of `user` (its subject is the principal)."""
    return ClientSecurity("SSL", ca_file=material.ca_file, cert=material.clients[user])


# --------------------------------------------------------------------------- builders


def confluent_config(security: ClientSecurity) -> dict[str, Any]:
    """librdkafka's properties (confluent-kafka's config dict). OAUTHBEARER: an `oauth_cb`
    that hands librdkafka the token (librdkafka's own OIDC support fetches tokens from an
    HTTP token endpoint, not from a file)."""
    config: dict[str, Any] = {"security.protocol": security.protocol.lower()}
    config.update(_librdkafka_properties(security))
    if security.oauth:

        def oauth_cb(_config_str: str) -> tuple[str, float]:
            token = security.token()
            return token, token_expiry_s(token)

        config["oauth_cb"] = oauth_cb
    return config


def _librdkafka_properties(security: ClientSecurity) -> dict[str, str]:
    properties: dict[str, str] = {}
    if security.sasl:
        properties["sasl.mechanisms"] = str(security.mechanism)
        if not security.oauth:
            properties["sasl.username"] = str(security.username)
            properties["sasl.password"] = str(security.password)
    if security.tls:
        if security.ca_file is not None:
            properties["ssl.ca.location"] = str(security.ca_file)
        if security.cert is not None:
            properties["ssl.certificate.location"] = str(security.cert.cert)
            properties["ssl.key.location"] = str(security.cert.key)
    return properties


def kcat_args(security: ClientSecurity) -> list[str]:
    """kcat's `-X key=value` arguments (librdkafka's properties). OAUTHBEARER has no
    token-from-file option in librdkafka: kcat is not given one."""
    if security.oauth:
        raise ValueError("kcat cannot read an OAUTHBEARER token from a file")
    args = ["-X", f"security.protocol={security.protocol.lower()}"]
    for key, value in _librdkafka_properties(security).items():
        args += ["-X", f"{key}={value}"]
    return args


def _kafka_python_token_provider(path: Path) -> Any:
    """kafka-python's OAUTHBEARER token provider (it must subclass kafka-python's own
    AbstractTokenProvider): the token in `path`, read at each login."""
    from kafka.net.sasl.oauth import AbstractTokenProvider  # noqa: PLC0415  (kafka-python 3)

    class FileTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return path.read_text().strip()

    return FileTokenProvider()


def _aiokafka_token_provider(path: Path) -> Any:
    """aiokafka's provider: its own AbstractTokenProvider, with an async `token`."""
    from aiokafka.abc import AbstractTokenProvider  # noqa: PLC0415

    class FileTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return path.read_text().strip()

    return FileTokenProvider()


def kafka_python_kwargs(security: ClientSecurity) -> dict[str, Any]:
    """kafka-python's keyword arguments (KafkaProducer, KafkaConsumer, KafkaAdminClient)."""
    kwargs: dict[str, Any] = {"security_protocol": security.protocol}
    if security.sasl:
        kwargs["sasl_mechanism"] = security.mechanism
        if security.oauth:
            assert security.token_file is not None
            kwargs["sasl_oauth_token_provider"] = _kafka_python_token_provider(security.token_file)
        else:
            kwargs["sasl_plain_username"] = security.username
            kwargs["sasl_plain_password"] = security.password
    if security.tls:
        kwargs["ssl_check_hostname"] = True
        if security.ca_file is not None:
            kwargs["ssl_cafile"] = str(security.ca_file)
        if security.cert is not None:
            kwargs["ssl_certfile"] = str(security.cert.cert)
            kwargs["ssl_keyfile"] = str(security.cert.key)
    return kwargs


def aiokafka_kwargs(security: ClientSecurity) -> dict[str, Any]:
    """aiokafka's keyword arguments: TLS as an `ssl.SSLContext` (aiokafka takes no file
    names), SASL as kafka-python's names."""
    kwargs: dict[str, Any] = {"security_protocol": security.protocol}
    if security.sasl:
        kwargs["sasl_mechanism"] = security.mechanism
        if security.oauth:
            assert security.token_file is not None
            kwargs["sasl_oauth_token_provider"] = _aiokafka_token_provider(security.token_file)
        else:
            kwargs["sasl_plain_username"] = security.username
            kwargs["sasl_plain_password"] = security.password
    if security.tls:
        kwargs["ssl_context"] = client_ssl_context(security)
    return kwargs


def client_ssl_context(security: ClientSecurity) -> ssl.SSLContext:
    """A TLS client context trusting `security.ca_file`, presenting its certificate if any."""
    context = ssl.create_default_context(cafile=str(security.ca_file) if security.ca_file else None)
    if security.cert is not None:
        context.load_cert_chain(str(security.cert.cert), str(security.cert.key))
    return context


def kafkajs_json(security: ClientSecurity) -> str:
    """What compat_tests/kafkajs/security.js reads (WEIR_KAFKAJS_SECURITY): file names;
    the script reads the PEM files into kafkajs's `ssl` (tls.connect options) and builds
    its `sasl` (mechanism in kafkajs's lower-case spelling)."""
    document: dict[str, Any] = {}
    if security.tls:
        ssl_files: dict[str, str] = {}
        if security.ca_file is not None:
            ssl_files["caFile"] = str(security.ca_file)
        if security.cert is not None:
            ssl_files["certFile"] = str(security.cert.cert)
            ssl_files["keyFile"] = str(security.cert.key)
        document["ssl"] = ssl_files
    if security.sasl:
        sasl: dict[str, str] = {"mechanism": str(security.mechanism).lower()}
        if security.oauth:
            sasl["tokenFile"] = str(security.token_file)
        else:
            sasl["username"] = str(security.username)
            sasl["password"] = str(security.password)
        document["sasl"] = sasl
    return json.dumps(document)


def go_env(security: ClientSecurity) -> dict[str, str]:
    """The WEIR_SECURITY_* variables compat_tests/go/security_test.go reads (franz-go and
    sarama are configured in Go code from them)."""
    env = {"WEIR_SECURITY_PROTOCOL": security.protocol}
    if security.sasl:
        env["WEIR_SECURITY_SASL_MECHANISM"] = str(security.mechanism)
        if security.oauth:
            env["WEIR_SECURITY_TOKEN_FILE"] = str(security.token_file)
        else:
            env["WEIR_SECURITY_USERNAME"] = str(security.username)
            env["WEIR_SECURITY_PASSWORD"] = str(security.password)
    if security.tls:
        if security.ca_file is not None:
            env["WEIR_SECURITY_CA_FILE"] = str(security.ca_file)
        if security.cert is not None:
            env["WEIR_SECURITY_CERT_FILE"] = str(security.cert.cert)
            env["WEIR_SECURITY_KEY_FILE"] = str(security.cert.key)
    return env


JAVA_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
JAVA_OAUTH_LOGIN_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
)
# KIP-1139 (kafka-clients 4.1+): the token read from a file, re-read when it changes
JAVA_FILE_JWT_RETRIEVER = "org.apache.kafka.common.security.oauthbearer.FileJwtRetriever"
# kafka-clients 3.9.1+/4.x refuse file and URL OAuth endpoints not listed in these JVM
# system properties (CVE-2025-27817)
JAVA_OAUTH_ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
JAVA_OAUTH_ALLOWED_FILES = "org.apache.kafka.sasl.oauthbearer.allowed.files"


def java_properties(security: ClientSecurity) -> dict[str, str]:
    """The Java client's properties (also Kafka's tools' `--command-config`): PEM
    trust and key stores (kafka-clients 2.7+, KIP-651), SASL through `sasl.jaas.config`.
    OAUTHBEARER reads the JWT from a file (`FileJwtRetriever`); the JVM must list that
    file in `java_oauth_system_properties`."""
    properties = {"security.protocol": security.protocol}
    if security.sasl:
        mechanism = str(security.mechanism)
        properties["sasl.mechanism"] = mechanism
        module = JAVA_LOGIN_MODULES[mechanism]
        if security.oauth:
            properties["sasl.jaas.config"] = f"{module} required;"
            properties["sasl.login.callback.handler.class"] = JAVA_OAUTH_LOGIN_HANDLER
            properties["sasl.oauthbearer.jwt.retriever.class"] = JAVA_FILE_JWT_RETRIEVER
            properties["sasl.oauthbearer.token.endpoint.url"] = _file_url(security.token_file)
        else:
            properties["sasl.jaas.config"] = (
                f'{module} required username="{security.username}" password="{security.password}";'
            )
    if security.tls:
        if security.ca_file is not None:
            properties["ssl.truststore.type"] = "PEM"
            properties["ssl.truststore.location"] = str(security.ca_file)
        if security.cert is not None:
            properties["ssl.keystore.type"] = "PEM"
            properties["ssl.keystore.location"] = str(security.cert.keystore)
    return properties


def java_oauth_system_properties(security: ClientSecurity) -> dict[str, str]:
    """The JVM system properties an OAUTHBEARER client with a token file needs."""
    if not security.oauth:
        return {}
    return {
        JAVA_OAUTH_ALLOWED_URLS: _file_url(security.token_file),
        JAVA_OAUTH_ALLOWED_FILES: str(security.token_file),
    }


def _file_url(path: Path | None) -> str:
    if path is None:
        raise ValueError("OAUTHBEARER without a token file")
    return path.resolve().as_uri()


def write_java_properties(security: ClientSecurity, path: Path) -> Path:
    """`java_properties` as a .properties file (backslashes escaped)."""
    lines = [
        f"{key}={value.replace(chr(92), chr(92) * 2)}"
        for key, value in java_properties(security).items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def spark_options(security: ClientSecurity) -> dict[str, str]:
    """Spark's Kafka connector options: the Java client's properties prefixed `kafka.`."""
    return {f"kafka.{key}": value for key, value in java_properties(security).items()}


@dataclass(frozen=True)
class ScramUser:
    name: str
    password: str
    mechanisms: tuple[str, ...] = field(default=("SCRAM-SHA-256", "SCRAM-SHA-512"))
    iterations: int = SCRAM_ITERATIONS


def scram_users(material: SecurityMaterial) -> list[ScramUser]:
    """Every user of `material` with both SCRAM mechanisms (what the broker must hold)."""
    return [ScramUser(name, password) for name, password in material.users.items()]
