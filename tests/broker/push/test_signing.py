from __future__ import annotations

import hashlib
import hmac

from weir.broker.push.signing import signature, verify

SECRET = "3f" * 32
BODY = b'{"records":[]}'


def test_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET.encode(), b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert signature(SECRET, 1_700_000_000, BODY) == "sha256=" + expected


def test_a_signed_delivery_verifies_within_the_tolerance() -> None:
    header = signature(SECRET, 1_700_000_000, BODY)
    assert verify(SECRET, "1700000000", header, BODY, now_s=1_700_000_100)


def test_a_replayed_delivery_is_refused_after_the_tolerance() -> None:
    header = signature(SECRET, 1_700_000_000, BODY)
    assert not verify(SECRET, "1700000000", header, BODY, now_s=1_700_000_301)


def test_a_changed_body_timestamp_or_secret_is_refused() -> None:
    header = signature(SECRET, 1_700_000_000, BODY)
    assert not verify(SECRET, "1700000000", header, BODY + b" ", now_s=1_700_000_000)
    assert not verify(SECRET, "1700000001", header, BODY, now_s=1_700_000_000)
    assert not verify("00" * 32, "1700000000", header, BODY, now_s=1_700_000_000)
    assert not verify(SECRET, "-1700000000", header, BODY, now_s=1_700_000_000)
    assert not verify(SECRET, "", header, BODY, now_s=1_700_000_000)
