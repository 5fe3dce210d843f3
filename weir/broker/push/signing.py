"""Signing a push delivery, and checking a signature as a receiver does.

The signed content is the decimal Unix time in seconds from the `Weir-Timestamp`
header, a '.', then the raw request body; the key is the subscription's secret as
UTF-8 bytes; the signature is `sha256=` and the hex HMAC-SHA256 of that content, in
`Weir-Signature`. A receiver recomputes it, compares in constant time, and refuses a
timestamp further than a tolerance (5 minutes) from its clock: a captured request
cannot be replayed later, and its timestamp cannot be changed without the secret.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "Weir-Signature"
TIMESTAMP_HEADER = "Weir-Timestamp"
SIGNATURE_PREFIX = "sha256="
TOLERANCE_S_DEFAULT = 300


def signed_content(timestamp_s: int, body: bytes) -> bytes:
    return str(timestamp_s).encode("ascii") + b"." + body


def signature(secret: str, timestamp_s: int, body: bytes) -> str:
    """The `Weir-Signature` header's value."""
    digest = hmac.new(secret.encode(), signed_content(timestamp_s, body), hashlib.sha256)
    return SIGNATURE_PREFIX + digest.hexdigest()


def verify(
    secret: str,
    timestamp_header: str,
    signature_header: str,
    body: bytes,
    *,
    now_s: float,
    tolerance_s: float = TOLERANCE_S_DEFAULT,
) -> bool:
    """Whether a delivery's headers sign `body` with `secret`, sent within
    `tolerance_s` of `now_s` (the receiver's clock)."""
    if not timestamp_header.isdigit() or len(timestamp_header) > 12:
        return False
    timestamp_s = int(timestamp_header)
    if abs(now_s - timestamp_s) > tolerance_s:
        return False
    return hmac.compare_digest(signature(secret, timestamp_s, body), signature_header)
