"""AWS Signature Version 4, checked (the header form the AWS SDKs and CLI send:
`Authorization: AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/SERVICE/aws4_request,
SignedHeaders=..., Signature=...` with `X-Amz-Date`), pure: the request's parts and
the secret come in, a verdict goes out.

The server recomputes the canonical request (method, path, query, the signed
headers, the body's SHA-256), the string to sign and the signing key derived from
the secret through the credential's date, region and service, and compares the
signature in constant time. The request's time must be within `SKEW_MS_MAX` of the
server's clock (AWS's 15 minutes), so a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"
SKEW_MS_MAX = 15 * 60 * 1000
_CREDENTIAL = re.compile(
    r"([A-Za-z0-9_+/=.-]{1,128})/(\d{8})/([a-z0-9-]{1,32})/([a-z0-9-]{1,32})/aws4_request"
)
_SIGNATURE = re.compile(r"[0-9a-f]{64}")
_HEADER_NAME = re.compile(r"[a-z0-9-]+")
_SPACES = re.compile(r" +")
_AMZ_DATE = re.compile(r"\d{8}T\d{6}Z")
SIGNED_HEADERS_MAX = 32


class SignatureError(Exception):
    """Why a request's signature is refused: `kind` is `missing` (no signature),
    `malformed`, `unknown_key`, `expired` or `mismatch`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class SignedRequest:
    """What the Authorization header claims."""

    access_key: str
    date: str  # YYYYMMDD, the credential scope's
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/aws4_request"


def parse_authorization(header: str) -> SignedRequest:
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SignatureError("missing", "the request is not signed with AWS4-HMAC-SHA256")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, separator, value = part.strip().partition("=")
        if not separator:
            raise SignatureError(
                "malformed", f"malformed Authorization field {part.strip()[:40]!r}"
            )
        fields[name] = value
    credential = _CREDENTIAL.fullmatch(fields.get("Credential", ""))
    signature = fields.get("Signature", "")
    signed = fields.get("SignedHeaders", "")
    headers = tuple(signed.split(";")) if signed else ()
    if (
        credential is None
        or not _SIGNATURE.fullmatch(signature)
        or not headers
        or len(headers) > SIGNED_HEADERS_MAX
        or not all(_HEADER_NAME.fullmatch(h) for h in headers)
        or "host" not in headers
    ):
        raise SignatureError("malformed", "the Authorization header is incomplete or malformed")
    key, date, region, service = credential.groups()
    return SignedRequest(key, date, region, service, headers, signature)


def canonical_request(
    method: str,
    path: str,
    query: Sequence[tuple[str, str]],
    headers: Mapping[str, str],
    signed_headers: Sequence[str],
    payload: bytes,
) -> str:
    """SigV4's canonical request; `headers` by lower-case name (the request's own)."""
    canonical_query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query)
    )
    canonical_headers = "".join(
        f"{name}:{_SPACES.sub(' ', headers.get(name, '').strip())}\n" for name in signed_headers
    )
    return "\n".join(
        [
            method,
            quote(path or "/", safe="/~"),
            canonical_query,
            canonical_headers,
            ";".join(signed_headers),
            hashlib.sha256(payload).hexdigest(),
        ]
    )


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def signature_of(secret: str, signed: SignedRequest, amz_date: str, canonical: str) -> str:
    string_to_sign = "\n".join(
        [ALGORITHM, amz_date, signed.scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = signing_key(secret, signed.date, signed.region, signed.service)
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


def request_time_ms(amz_date: str) -> int:
    """X-Amz-Date (`YYYYMMDDTHHMMSSZ`) in epoch milliseconds."""
    try:
        if not _AMZ_DATE.fullmatch(amz_date):
            raise ValueError(amz_date)
        parsed = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise SignatureError(
            "malformed", f"X-Amz-Date {amz_date[:40]!r} is not YYYYMMDDTHHMMSSZ"
        ) from None
    return int(parsed.timestamp() * 1000)


def verify(
    *,
    method: str,
    path: str,
    query: Sequence[tuple[str, str]],
    headers: Mapping[str, str],
    payload: bytes,
    secrets: Mapping[str, str],
    now_ms: int,
) -> str:
    """The access key that signed the request; SignatureError when it is not one of
    `secrets` (access key -> secret), out of date, or the signature differs."""
    authorization = headers.get("authorization")
    if not authorization:
        raise SignatureError("missing", "the request must be signed (AWS Signature Version 4)")
    signed = parse_authorization(authorization)
    amz_date = headers.get("x-amz-date", "")
    if not amz_date or not amz_date.startswith(signed.date):
        raise SignatureError("malformed", "X-Amz-Date is missing or not the credential's date")
    if abs(request_time_ms(amz_date) - now_ms) > SKEW_MS_MAX:
        raise SignatureError("expired", f"Signature expired: {amz_date} is more than 15 minutes "
                                        "away from the server's time")  # fmt: skip
    secret = secrets.get(signed.access_key)
    if secret is None:
        raise SignatureError(
            "unknown_key", "The security token included in the request is invalid."
        )
    canonical = canonical_request(method, path, query, headers, signed.signed_headers, payload)
    expected = signature_of(secret, signed, amz_date, canonical)
    if not hmac.compare_digest(expected, signed.signature):
        raise SignatureError("mismatch", "The request signature we calculated does not match the "
                                         "signature you provided.")  # fmt: skip
    return signed.access_key
