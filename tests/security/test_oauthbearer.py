"""SASL/OAUTHBEARER's server side and the JWT validation under it: tokens signed here
with keys made by `cryptography`, checked against a JWKS built from their public
halves, and every way a token can be refused."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from weir.security.jwt_validation import (
    ClaimRules,
    JwkSet,
    JwksFormatError,
    JwtValidationError,
    validate_jwt,
)
from weir.security.oauthbearer import (
    INVALID_TOKEN_CHALLENGE,
    InitialResponseError,
    OAuthBearerServer,
    OAuthBearerSettings,
    parse_initial_response,
)
from weir.security.sasl import SaslAuthenticationError, SaslExchangeStateError

NOW_S = 1_700_000_000
NOW_MS = NOW_S * 1000
ISSUER = "https://idp.example"
AUDIENCE = "weir"
SETTINGS = OAuthBearerSettings(expected_issuer=ISSUER, expected_audiences=(AUDIENCE, "other"))
RULES = SETTINGS.claim_rules()
GENERIC = (
    "Authentication failed during authentication due to invalid credentials"
    " with SASL mechanism OAUTHBEARER"
)

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
FORGER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC256_KEY = ec.generate_private_key(ec.SECP256R1())
EC384_KEY = ec.generate_private_key(ec.SECP384R1())


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def int_b64url(value: int) -> str:
    return b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def rsa_jwk(key: rsa.RSAPrivateKey, kid: str, **extra: str) -> dict[str, str]:
    numbers = key.public_key().public_numbers()
    return {
        "kty": "RSA",
        "kid": kid,
        "n": int_b64url(numbers.n),
        "e": int_b64url(numbers.e),
        **extra,
    }


def ec_jwk(key: ec.EllipticCurvePrivateKey, kid: str, crv: str) -> dict[str, str]:
    numbers = key.public_key().public_numbers()
    size = (key.curve.key_size + 7) // 8
    return {
        "kty": "EC",
        "kid": kid,
        "crv": crv,
        "x": b64url(numbers.x.to_bytes(size, "big")),
        "y": b64url(numbers.y.to_bytes(size, "big")),
    }


JWKS = JwkSet.from_document(
    {
        "keys": [
            rsa_jwk(RSA_KEY, "rsa-1"),
            ec_jwk(EC256_KEY, "ec-256", "P-256"),
            ec_jwk(EC384_KEY, "ec-384", "P-384"),
            {"kty": "oct", "kid": "hmac", "k": b64url(b"shared-secret")},
            rsa_jwk(RSA_KEY, "rsa-enc", use="enc"),
        ]
    }
)


def claims(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "sub": "alice",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": NOW_S - 10,
        "exp": NOW_S + 3600,
        "scope": "produce consume",
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


def sign(
    payload: dict[str, Any],
    alg: str = "RS256",
    kid: str | None = "rsa-1",
    key: Any = None,
    **header_extra: Any,
) -> str:
    header: dict[str, Any] = {"alg": alg, "typ": "JWT", **header_extra}
    if kid is not None:
        header["kid"] = kid
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(payload).encode())}"
    data = signing_input.encode()
    digests = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}
    digest = digests.get(alg[2:], hashes.SHA256())
    if alg == "none":
        signature = b""
    elif alg.startswith("RS"):
        signature = (key or RSA_KEY).sign(data, padding.PKCS1v15(), digest)
    elif alg.startswith("PS"):
        pss = padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
        signature = (key or RSA_KEY).sign(data, pss, digest)
    elif alg.startswith("ES"):
        signer = key or {"256": EC256_KEY, "384": EC384_KEY}[alg[2:]]
        r, s = decode_dss_signature(signer.sign(data, ec.ECDSA(digest)))
        size = (signer.curve.key_size + 7) // 8
        signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    elif alg.startswith("HS"):
        mac = hmac.HMAC(key, digest)
        mac.update(data)
        signature = mac.finalize()
    return f"{signing_input}.{b64url(signature)}"


def initial_response(token: str, authzid: str = "", extensions: str = "") -> bytes:
    authz = f"a={authzid}" if authzid else ""
    return f"n,{authz},\x01auth=Bearer {token}{extensions}\x01\x01".encode()


def refusal(token: str, rules: ClaimRules = RULES, now_ms: int = NOW_MS) -> str:
    with pytest.raises(JwtValidationError) as raised:
        validate_jwt(token, JWKS, rules, now_ms)
    return str(raised.value)


# --- The exchange --------------------------------------------------------------------


def test_a_valid_token_completes_with_the_subject_as_principal_and_expiry_as_lifetime() -> None:
    server = OAuthBearerServer(SETTINGS, JWKS)
    assert server.respond(initial_response(sign(claims())), NOW_MS) == b""
    assert server.complete
    assert server.principal_name() == "alice"
    assert server.session_lifetime_ms(NOW_MS) == 3600 * 1000
    assert server.session_lifetime_ms(NOW_MS + 1000) == 3599 * 1000
    assert server.token is not None and server.token.scopes == {"produce", "consume"}


def test_an_invalid_token_gets_the_json_challenge_then_fails_with_it() -> None:
    server = OAuthBearerServer(SETTINGS, JWKS)
    challenge = server.respond(initial_response(sign(claims(exp=NOW_S - 3600))), NOW_MS)
    assert challenge == INVALID_TOKEN_CHALLENGE == b'{"status":"invalid_token"}'
    assert not server.complete
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(b"\x01", NOW_MS)
    assert raised.value.client_message() == '{"status":"invalid_token"}'
    assert "expired" in raised.value.log_detail
    assert server.last_validation_error is not None
    with pytest.raises(SaslExchangeStateError):
        server.respond(initial_response(sign(claims())), NOW_MS)


def test_a_second_token_after_the_error_challenge_is_not_a_second_try() -> None:
    server = OAuthBearerServer(SETTINGS, JWKS)
    server.respond(initial_response(sign(claims(iss="https://evil.example"))), NOW_MS)
    with pytest.raises(SaslAuthenticationError):
        server.respond(initial_response(sign(claims())), NOW_MS)
    assert not server.complete


def test_a_malformed_initial_response_fails_at_once_with_the_generic_text() -> None:
    server = OAuthBearerServer(SETTINGS, JWKS)
    with pytest.raises(SaslAuthenticationError) as raised:
        server.respond(b"n,,auth=Bearer abc", NOW_MS)
    assert raised.value.client_message() == GENERIC


def test_an_authzid_equal_to_the_subject_is_accepted_and_a_different_one_refused() -> None:
    server = OAuthBearerServer(SETTINGS, JWKS)
    server.respond(initial_response(sign(claims()), authzid="alice"), NOW_MS)
    assert server.principal_name() == "alice"
    other = OAuthBearerServer(SETTINGS, JWKS)
    with pytest.raises(SaslAuthenticationError) as raised:
        other.respond(initial_response(sign(claims()), authzid="admin"), NOW_MS)
    assert raised.value.client_message() == (
        "Authentication failed: Client requested an authorization id (admin)"
        " that is different from the token's principal name (alice)"
    )


def test_the_principal_comes_from_the_configured_subject_claim() -> None:
    settings = OAuthBearerSettings(sub_claim_name="client_id")
    server = OAuthBearerServer(settings, JWKS)
    server.respond(initial_response(sign(claims(client_id="svc-42", aud=None, iss=None))), NOW_MS)
    assert server.principal_name() == "svc-42"


def test_extensions_are_accepted_and_kept() -> None:
    parsed = parse_initial_response(
        initial_response("a.b.c", extensions="\x01traceId=123\x01region=eu")
    )
    assert parsed.extensions == {"traceId": "123", "region": "eu"}
    assert parsed.token == "a.b.c"


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"y,,\x01auth=Bearer a.b.c\x01\x01",
        b"n,,\x01auth=Bearer a.b.c\x01",
        b"n,,\x01\x01",
        b"n,,\x01auth=Basic a.b.c\x01\x01",
        b"n,,\x01auth=Bearer\x01\x01",
        b"n,,\x01auth=Bearer a b\x01\x01",
        b"n,,\x01auth=Bearer a.b.c\x011key=v\x01\x01",
        b"n,,\x01auth=Bearer a.b.c\x01auth=Bearer d.e.f\x01\x01",
        b"n,a=x=y,\x01auth=Bearer a.b.c\x01\x01",
        "n,,\x01auth=Bearer a.b.c\x01k=é\x01\x01".encode(),
        b"n,,\x01auth=Bearer " + b"a" * 40_000 + b"\x01\x01",
    ],
)
def test_malformed_initial_responses_are_refused(message: bytes) -> None:
    with pytest.raises(InitialResponseError):
        parse_initial_response(message)


def test_the_settings_default_to_kafkas() -> None:
    defaults = OAuthBearerSettings()
    assert (defaults.sub_claim_name, defaults.scope_claim_name, defaults.clock_skew_s) == (
        "sub",
        "scope",
        30,
    )
    assert defaults.expected_issuer is None and defaults.expected_audiences == ()


# --- Signatures ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alg", "kid"),
    [
        ("RS256", "rsa-1"),
        ("RS384", "rsa-1"),
        ("RS512", "rsa-1"),
        ("PS256", "rsa-1"),
        ("PS384", "rsa-1"),
        ("PS512", "rsa-1"),
        ("ES256", "ec-256"),
        ("ES384", "ec-384"),
    ],
)
def test_every_accepted_algorithm_verifies(alg: str, kid: str) -> None:
    token = validate_jwt(sign(claims(), alg=alg, kid=kid), JWKS, RULES, NOW_MS)
    assert token.principal_name == "alice"
    assert token.expires_at_ms == (NOW_S + 3600) * 1000
    assert token.issued_at_ms == (NOW_S - 10) * 1000


def test_a_token_signed_by_another_key_is_refused() -> None:
    assert "signature" in refusal(sign(claims(), key=FORGER_KEY))


def test_a_token_whose_payload_was_changed_after_signing_is_refused() -> None:
    header, _, signature = sign(claims()).split(".")
    forged_payload = b64url(json.dumps(claims(sub="admin")).encode())
    assert "signature" in refusal(f"{header}.{forged_payload}.{signature}")


def test_alg_none_is_refused() -> None:
    assert "algorithm 'none'" in refusal(sign(claims(), alg="none"))


@pytest.mark.parametrize("kid", ["hmac", "rsa-1"])
def test_hmac_tokens_are_refused_even_keyed_with_a_public_key(kid: str) -> None:
    # The algorithm-confusion attack: HS256 keyed with the RSA public key's bytes.
    key = b"shared-secret" if kid == "hmac" else json.dumps(rsa_jwk(RSA_KEY, "rsa-1")).encode()
    assert "algorithm 'HS256'" in refusal(sign(claims(), alg="HS256", kid=kid, key=key))


def test_an_unknown_kid_is_refused_and_flagged_for_a_jwks_refresh() -> None:
    with pytest.raises(JwtValidationError) as raised:
        validate_jwt(sign(claims(), kid="rotated-away"), JWKS, RULES, NOW_MS)
    assert raised.value.unknown_kid


def test_a_key_of_the_wrong_family_for_the_algorithm_is_refused() -> None:
    assert "fits" in refusal(sign(claims(), alg="ES256", kid="rsa-1", key=EC256_KEY))
    assert "fits" in refusal(sign(claims(), alg="ES384", kid="ec-256", key=EC384_KEY))


def test_a_key_marked_for_encryption_does_not_verify_signatures() -> None:
    with pytest.raises(JwtValidationError) as raised:
        validate_jwt(sign(claims(), kid="rsa-enc"), JWKS, RULES, NOW_MS)
    assert raised.value.unknown_kid


def test_a_key_whose_alg_differs_from_the_tokens_is_refused() -> None:
    jwks = JwkSet.from_document({"keys": [rsa_jwk(RSA_KEY, "k", alg="PS256")]})
    with pytest.raises(JwtValidationError):
        validate_jwt(sign(claims(), alg="RS256", kid="k"), jwks, RULES, NOW_MS)
    assert validate_jwt(sign(claims(), alg="PS256", kid="k"), jwks, RULES, NOW_MS)


def test_without_a_kid_the_one_fitting_key_is_used_and_two_are_ambiguous() -> None:
    single = JwkSet.from_document({"keys": [rsa_jwk(RSA_KEY, "k")]})
    assert validate_jwt(sign(claims(), kid=None), single, RULES, NOW_MS).principal_name == "alice"
    double = JwkSet.from_document({"keys": [rsa_jwk(RSA_KEY, "k"), rsa_jwk(FORGER_KEY, "j")]})
    with pytest.raises(JwtValidationError):
        validate_jwt(sign(claims(), kid=None), double, RULES, NOW_MS)


def test_short_rsa_keys_are_left_out_of_the_set() -> None:
    short = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    assert JwkSet.from_document({"keys": [rsa_jwk(short, "short")]}).keys == ()


@pytest.mark.parametrize("document", [[], {}, {"keys": {}}, "keys"])
def test_a_jwks_of_the_wrong_shape_is_refused(document: object) -> None:
    with pytest.raises(JwksFormatError):
        JwkSet.from_document(document)


def test_malformed_jwks_entries_are_skipped() -> None:
    good = rsa_jwk(RSA_KEY, "good")
    jwks = JwkSet.from_document(
        {"keys": ["x", {"kty": "RSA", "n": "!!", "e": "AQAB"}, {"kty": "EC", "crv": "P-999"}, good]}
    )
    assert [key.kid for key in jwks.keys] == ["good"]


# --- Malformed tokens ------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [
        "",
        "a.b",
        "a.b.c.d",
        "!!!.e30.AAAA",
        "e30.e30.AAAA",
        b64url(b'{"alg":"RS256","kid":"rsa-1"}') + ".e30.AAA=",
        b64url(b"[1]") + ".e30.AAAA",
        b64url(b'{"alg":"RS256","alg":"none"}') + ".e30.AAAA",
        b64url(b'{"alg":"RS256","kid":7}') + ".e30.AAAA",
    ],
)
def test_malformed_tokens_are_refused(token: str) -> None:
    refusal(token)


def test_a_signed_token_with_critical_header_parameters_is_refused() -> None:
    assert "critical" in refusal(sign(claims(), crit=["exp"]))


def test_a_valid_signature_over_a_payload_that_is_not_json_is_refused() -> None:
    header = b64url(json.dumps({"alg": "RS256", "kid": "rsa-1"}).encode())
    payload = b64url(b"not json")
    data = f"{header}.{payload}".encode()
    signature = RSA_KEY.sign(data, padding.PKCS1v15(), hashes.SHA256())
    assert "payload" in refusal(f"{header}.{payload}.{b64url(signature)}")


def test_an_oversized_token_is_refused_before_decoding() -> None:
    assert "exceeds" in refusal(sign(claims(padding="x" * 40_000)))


def test_an_es_signature_of_the_wrong_length_is_refused() -> None:
    header, payload, _ = sign(claims(), alg="ES256", kid="ec-256").split(".")
    assert "bytes" in refusal(f"{header}.{payload}.{b64url(b'x' * 70)}")


# --- Claims ----------------------------------------------------------------------------


def test_an_expired_token_is_refused_after_the_clock_skew() -> None:
    token = sign(claims(exp=NOW_S - 20))
    assert validate_jwt(token, JWKS, RULES, NOW_MS).principal_name == "alice"
    assert "expired" in refusal(token, now_ms=NOW_MS + 10_000)
    assert "expired" in refusal(
        token,
        rules=OAuthBearerSettings(
            expected_issuer=ISSUER, expected_audiences=(AUDIENCE,), clock_skew_s=0
        ).claim_rules(),
    )


def test_a_token_not_yet_valid_is_refused_beyond_the_clock_skew() -> None:
    assert "not valid before" in refusal(sign(claims(nbf=NOW_S + 60)))
    assert validate_jwt(sign(claims(nbf=NOW_S + 20)), JWKS, RULES, NOW_MS)


@pytest.mark.parametrize("missing", ["exp", "iat"])
def test_exp_and_iat_are_required(missing: str) -> None:
    assert "required" in refusal(sign(claims(**{missing: None})))


@pytest.mark.parametrize("value", ["soon", True, None, [1]])
def test_a_non_numeric_exp_is_refused(value: object) -> None:
    token = claims()
    token["exp"] = value
    refusal(sign(token))


def test_a_wrong_issuer_is_refused_and_none_configured_accepts_any() -> None:
    assert "issuer" in refusal(sign(claims(iss="https://evil.example")))
    assert "issuer" in refusal(sign(claims(iss=None)))
    lax = ClaimRules(expected_audiences=(AUDIENCE,))
    assert validate_jwt(sign(claims(iss="https://any.example")), JWKS, lax, NOW_MS)


@pytest.mark.parametrize("aud", ["weir", ["x", "weir"], ["other"]])
def test_an_expected_audience_as_string_or_list_is_accepted(aud: object) -> None:
    assert validate_jwt(sign(claims(aud=aud)), JWKS, RULES, NOW_MS)


@pytest.mark.parametrize("aud", ["nobody", ["x", "y"], None, 7, [7]])
def test_a_wrong_or_missing_audience_is_refused(aud: object) -> None:
    refusal(sign(claims(aud=aud)))


@pytest.mark.parametrize("sub", [None, "", "   ", 7])
def test_a_missing_or_empty_subject_is_refused(sub: object) -> None:
    assert "'sub'" in refusal(sign(claims(sub=sub)))


def test_scopes_are_parsed_from_a_string_or_a_list_and_not_required() -> None:
    assert validate_jwt(sign(claims(scope=["a", "b"])), JWKS, RULES, NOW_MS).scopes == {"a", "b"}
    assert validate_jwt(sign(claims(scope=None)), JWKS, RULES, NOW_MS).scopes == frozenset()
    rules = ClaimRules(scope_claim_name="scp")
    assert validate_jwt(sign(claims(scp="x y", aud=None)), JWKS, rules, NOW_MS).scopes == {"x", "y"}
    refusal(sign(claims(scope=[1])))


def test_the_session_lifetime_is_never_zero_inside_the_skew() -> None:
    server = OAuthBearerServer(SETTINGS, JWKS)
    server.respond(initial_response(sign(claims(exp=NOW_S - 5))), NOW_MS)
    assert server.complete
    assert server.session_lifetime_ms(NOW_MS) == 1
