"""Validating a JWT access token (RFC 7519) against a JSON Web Key Set (RFC 7517), as
Kafka's `BrokerJwtValidator` does for OAUTHBEARER: the signature first, then the
claims.

Signatures: RS256/384/512, PS256/384/512 and ES256/384/512, with public keys only.
`alg: none` and the HMAC algorithms (HS*) are refused: the broker holds no shared
secret, and a JWKS key is never used as one (the algorithm-confusion attack). A key
names the algorithm family it serves (RSA for RS/PS, an EC curve for each ES); a key
whose `alg` is set must match the token's. A token's `kid` must name a key of the set;
without a `kid`, exactly one key of the set may fit the algorithm.

Claims (time is `now_ms`, with `clock_skew_s` either way): `exp` and `iat` required
(as Kafka's validator requires them), `nbf` honoured, `iss` equal to the expected
issuer when one is configured, `aud` (a string or a list) holding one of the expected
audiences when any are configured, the principal from the configured subject claim
(`sub` by default), and scopes from the scope claim (space-separated string or list;
parsed, not required).

The errors say what failed for the broker's log; the client only learns
`invalid_token` (see `oauthbearer.py`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

# A token larger than this is refused before it is decoded.
TOKEN_CHARS_MAX = 32 * 1024
# RSA keys shorter than this are refused (as jose4j refuses them for RS/PS).
RSA_KEY_BITS_MIN = 2048


class JwtValidationError(ValueError):
    """The token is not valid; the message is for the broker's log. `unknown_kid` says
    the token named a key the set does not hold (the broker may refresh its JWKS)."""

    def __init__(self, message: str, unknown_kid: bool = False) -> None:
        super().__init__(message)
        self.unknown_kid = unknown_kid


class JwksFormatError(ValueError):
    """A JWKS document is not `{"keys": [...]}`."""


@dataclass(frozen=True, slots=True)
class _Algorithm:
    family: str  # "RSA" (PKCS#1 v1.5), "PSS", or "EC"
    hash_name: str
    curve: str | None = None  # the JWK `crv` an ES algorithm requires


ALGORITHMS: Mapping[str, _Algorithm] = {
    "RS256": _Algorithm("RSA", "sha256"),
    "RS384": _Algorithm("RSA", "sha384"),
    "RS512": _Algorithm("RSA", "sha512"),
    "PS256": _Algorithm("PSS", "sha256"),
    "PS384": _Algorithm("PSS", "sha384"),
    "PS512": _Algorithm("PSS", "sha512"),
    "ES256": _Algorithm("EC", "sha256", "P-256"),
    "ES384": _Algorithm("EC", "sha384", "P-384"),
    "ES512": _Algorithm("EC", "sha512", "P-521"),
}
_HASHES: Mapping[str, type[hashes.HashAlgorithm]] = {
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}
_CURVES: Mapping[str, ec.EllipticCurve] = {
    "P-256": ec.SECP256R1(),
    "P-384": ec.SECP384R1(),
    "P-521": ec.SECP521R1(),
}
# Bytes in each half (r, s) of an ES signature, per curve.
_EC_COORDINATE_BYTES = {"P-256": 32, "P-384": 48, "P-521": 66}


@dataclass(frozen=True, slots=True)
class Jwk:
    """One public signing key of a JWKS."""

    kid: str | None
    alg: str | None
    kty: str  # "RSA" or "EC"
    crv: str | None
    public_key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey

    def serves(self, alg: str) -> bool:
        algorithm = ALGORITHMS[alg]
        if self.alg is not None and self.alg != alg:
            return False
        if algorithm.family == "EC":
            return self.kty == "EC" and self.crv == algorithm.curve
        return self.kty == "RSA"


@dataclass(frozen=True, slots=True)
class JwkSet:
    """The usable public signing keys of a JWKS document (RSA and EC keys whose `use`
    is absent or `sig`; symmetric keys and unknown key types are left out)."""

    keys: tuple[Jwk, ...]

    @classmethod
    def from_document(cls, document: object) -> JwkSet:
        """From a parsed JWKS (`{"keys": [...]}`); a key that cannot serve is skipped,
        a document of the wrong shape is a JwksFormatError."""
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise JwksFormatError('a JWKS is a JSON object with a "keys" list')
        keys = []
        for entry in document["keys"]:
            key = _parse_jwk(entry)
            if key is not None:
                keys.append(key)
        return cls(tuple(keys))

    def key_for(self, alg: str, kid: str | None) -> Jwk:
        if kid is not None:
            named = [key for key in self.keys if key.kid == kid]
            if not named:
                raise JwtValidationError(f"no key with kid {kid!r} in the JWKS", unknown_kid=True)
            fitting = [key for key in named if key.serves(alg)]
        else:
            fitting = [key for key in self.keys if key.serves(alg)]
            if len(fitting) > 1:
                raise JwtValidationError(f"token has no kid and {len(fitting)} JWKS keys fit {alg}")
        if not fitting:
            raise JwtValidationError(
                f"no JWKS key {('with kid ' + repr(kid)) if kid else ''} fits {alg}"
            )
        return fitting[0]


def _parse_jwk(entry: object) -> Jwk | None:
    if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
        return None
    kid, alg, kty = entry.get("kid"), entry.get("alg"), entry.get("kty")
    if (kid is not None and not isinstance(kid, str)) or (
        alg is not None and alg not in ALGORITHMS
    ):
        return None
    try:
        if kty == "RSA":
            numbers = rsa.RSAPublicNumbers(
                e=_b64url_int(entry.get("e")), n=_b64url_int(entry.get("n"))
            )
            rsa_key = numbers.public_key()
            if rsa_key.key_size < RSA_KEY_BITS_MIN:
                return None
            return Jwk(kid, alg, "RSA", None, rsa_key)
        if kty == "EC":
            crv = entry.get("crv")
            if not isinstance(crv, str) or crv not in _CURVES:
                return None
            point = ec.EllipticCurvePublicNumbers(
                x=_b64url_int(entry.get("x")), y=_b64url_int(entry.get("y")), curve=_CURVES[crv]
            )
            return Jwk(kid, alg, "EC", crv, point.public_key())
    except (ValueError, TypeError):
        return None
    return None


def _b64url_decode(text: object) -> bytes:
    if not isinstance(text, str) or not text.isascii():
        raise ValueError("not base64url text")
    if any(not (c.isalnum() or c in "-_") for c in text):
        raise ValueError("not base64url text")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as error:
        raise ValueError("not base64url text") from error


def _b64url_int(text: object) -> int:
    data = _b64url_decode(text)
    if not data:
        raise ValueError("empty integer")
    return int.from_bytes(data, "big")


@dataclass(frozen=True, slots=True)
class ClaimRules:
    """What the claims must satisfy (Kafka's `sasl.oauthbearer.*` settings)."""

    expected_issuer: str | None = None
    expected_audiences: tuple[str, ...] = ()
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_s: int = 30


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    """A token whose signature and claims held."""

    principal_name: str
    scopes: frozenset[str]
    expires_at_ms: int
    issued_at_ms: int
    claims: Mapping[str, object]


def validate_jwt(token: str, jwks: JwkSet, rules: ClaimRules, now_ms: int) -> ValidatedToken:
    """Check a compact JWS token's signature against `jwks`, then its claims;
    JwtValidationError on the first failure."""
    if len(token) > TOKEN_CHARS_MAX:
        raise JwtValidationError(f"token of {len(token)} characters exceeds {TOKEN_CHARS_MAX}")
    parts = token.split(".")
    if len(parts) != 3:
        raise JwtValidationError("a JWT has three dot-separated parts")
    header = _json_part(parts[0], "header")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        raise JwtValidationError(f"algorithm {alg!r} is not accepted")
    if "crit" in header:
        raise JwtValidationError("critical header parameters are not supported")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise JwtValidationError("kid is not a string")
    key = jwks.key_for(alg, kid)
    signature = _decoded_part(parts[2], "signature")
    _verify(key, alg, f"{parts[0]}.{parts[1]}".encode("ascii"), signature)
    return _check_claims(_json_part(parts[1], "payload"), rules, now_ms)


def _decoded_part(part: str, name: str) -> bytes:
    try:
        return _b64url_decode(part)
    except ValueError as error:
        raise JwtValidationError(f"the {name} is not base64url") from error


def _json_part(part: str, name: str) -> dict[str, object]:
    try:
        value = json.loads(_decoded_part(part, name), object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as error:
        raise JwtValidationError(f"the {name} is not a JSON object: {error}") from error
    if not isinstance(value, dict):
        raise JwtValidationError(f"the {name} is not a JSON object")
    return value


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate member names")
    return result


def _verify(key: Jwk, alg: str, signing_input: bytes, signature: bytes) -> None:
    algorithm = ALGORITHMS[alg]
    digest = _HASHES[algorithm.hash_name]()
    try:
        if isinstance(key.public_key, rsa.RSAPublicKey):
            scheme: padding.AsymmetricPadding = (
                padding.PKCS1v15()
                if algorithm.family == "RSA"
                else padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
            )
            key.public_key.verify(signature, signing_input, scheme, digest)
        else:
            size = _EC_COORDINATE_BYTES[key.crv or ""]
            if len(signature) != 2 * size:
                raise JwtValidationError(f"an {alg} signature is {2 * size} bytes")
            der = encode_dss_signature(
                int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
            )
            key.public_key.verify(der, signing_input, ec.ECDSA(digest))
    except InvalidSignature as error:
        raise JwtValidationError("the signature does not verify") from error


def _check_claims(claims: dict[str, object], rules: ClaimRules, now_ms: int) -> ValidatedToken:
    skew_ms = rules.clock_skew_s * 1000
    expires_at_ms = _numeric_date_ms(claims, "exp", required=True)
    issued_at_ms = _numeric_date_ms(claims, "iat", required=True)
    not_before_ms = _numeric_date_ms(claims, "nbf", required=False)
    assert expires_at_ms is not None and issued_at_ms is not None
    if now_ms >= expires_at_ms + skew_ms:
        raise JwtValidationError(f"the token expired at {expires_at_ms} ms (now {now_ms} ms)")
    if not_before_ms is not None and now_ms + skew_ms < not_before_ms:
        raise JwtValidationError(
            f"the token is not valid before {not_before_ms} ms (now {now_ms} ms)"
        )
    if rules.expected_issuer is not None and claims.get("iss") != rules.expected_issuer:
        raise JwtValidationError(f"issuer {claims.get('iss')!r} is not {rules.expected_issuer!r}")
    if rules.expected_audiences:
        _check_audience(claims.get("aud"), rules.expected_audiences)
    subject = claims.get(rules.sub_claim_name)
    if not isinstance(subject, str) or not subject.strip():
        raise JwtValidationError(f"the {rules.sub_claim_name!r} claim is missing or empty")
    return ValidatedToken(
        principal_name=subject.strip(),
        scopes=_scopes(claims.get(rules.scope_claim_name), rules.scope_claim_name),
        expires_at_ms=expires_at_ms,
        issued_at_ms=issued_at_ms,
        claims=claims,
    )


def _numeric_date_ms(claims: Mapping[str, object], name: str, required: bool) -> int | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise JwtValidationError(f"the {name!r} claim is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise JwtValidationError(f"the {name!r} claim is not a number")
    if not -(2**53) < value < 2**53:
        raise JwtValidationError(f"the {name!r} claim is out of range")
    return int(value * 1000)


def _check_audience(audience: object, expected: Sequence[str]) -> None:
    if isinstance(audience, str):
        audiences = [audience]
    elif isinstance(audience, list) and all(isinstance(item, str) for item in audience):
        audiences = audience
    else:
        raise JwtValidationError("the 'aud' claim is missing or not a string or list of strings")
    if not set(audiences) & set(expected):
        raise JwtValidationError(f"audience {audiences!r} holds none of {list(expected)!r}")


def _scopes(raw: object, claim_name: str) -> frozenset[str]:
    if raw is None:
        return frozenset()
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list) and all(isinstance(item, str) and item.strip() for item in raw):
        return frozenset(item.strip() for item in raw)
    raise JwtValidationError(f"the {claim_name!r} claim is not a string or a list of strings")
