"""SigV4 verification (weir/broker/http/sqs/sigv4.py) against botocore's own signer:
what botocore signs verifies, anything altered does not."""

from __future__ import annotations

import datetime
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from weir.broker.http.sqs.sigv4 import SignatureError, verify

SECRETS = {"AKIDWEIR": "secret-one", "AKIDOTHER": "secret-two"}
BODY = b'{"QueueName": "jobs"}'
NOW = datetime.datetime(2026, 11, 27, 12, 0, 0, tzinfo=datetime.UTC)
NOW_MS = int(NOW.timestamp() * 1000)


def _signed(
    key: str = "AKIDWEIR",
    secret: str = "secret-one",
    url: str = "http://127.0.0.1:8090/",
    at: datetime.datetime = NOW,
    body: bytes = BODY,
) -> dict[str, str]:
    request = AWSRequest(
        method="POST",
        url=url,
        data=body,
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "AmazonSQS.CreateQueue",
        },
    )
    with mock.patch("botocore.auth.get_current_datetime", return_value=at.replace(tzinfo=None)):
        SigV4Auth(Credentials(key, secret), "sqs", "us-east-1").add_auth(request)
    headers = {name.lower(): value for name, value in request.headers.items()}
    headers["host"] = "127.0.0.1:8090"
    return headers


def _verify(
    headers: dict[str, str], *, path: str = "/", body: bytes = BODY, now_ms: int = NOW_MS
) -> str:
    return verify(
        method="POST", path=path, query=[], headers=headers, payload=body, secrets=SECRETS,
        now_ms=now_ms,
    )  # fmt: skip


def test_a_request_botocore_signed_verifies_as_its_access_key() -> None:
    assert _verify(_signed()) == "AKIDWEIR"
    other = _signed(
        key="AKIDOTHER", secret="secret-two", url="http://127.0.0.1:8090/000000000000/q"
    )
    assert _verify(other, path="/000000000000/q") == "AKIDOTHER"


def _swap_key(headers: dict[str, str], key: str) -> None:
    headers["authorization"] = headers["authorization"].replace("AKIDWEIR", key)


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        (lambda h: h.update({"x-amz-target": "AmazonSQS.DeleteQueue"}), "mismatch"),
        (lambda h: h.update({"host": "evil:8090"}), "mismatch"),
        (lambda h: _swap_key(h, "AKIDOTHER"), "mismatch"),
        (lambda h: _swap_key(h, "AKIDNONE"), "unknown_key"),
        (lambda h: h.update({"authorization": h["authorization"][:-1] + "0"}), "mismatch"),
        (lambda h: h.update({"authorization": "AWS4-HMAC-SHA256 Credential=x"}), "malformed"),
        (lambda h: h.update({"authorization": "Basic dXNlcjpwYXNz"}), "missing"),
        (lambda h: h.pop("authorization"), "missing"),
        (lambda h: h.pop("x-amz-date"), "malformed"),
        (lambda h: h.update({"x-amz-date": "20261127T12000Z"}), "malformed"),
    ],
    ids=["header-changed", "host-changed", "other-key", "unknown-key", "signature-changed",
         "malformed", "not-sigv4", "unsigned", "no-date", "bad-date"],
)  # fmt: skip
def test_an_altered_request_is_refused(change: object, kind: str) -> None:
    headers = _signed()
    change(headers)  # type: ignore[operator]
    with pytest.raises(SignatureError) as refused:
        _verify(headers)
    assert refused.value.kind == kind


def test_a_changed_body_or_path_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        _verify(_signed(), body=b'{"QueueName": "other"}')
    with pytest.raises(SignatureError, match="does not match"):
        _verify(_signed(), path="/000000000000/q")


def test_a_request_signed_more_than_15_minutes_away_is_expired() -> None:
    late = _signed(at=NOW - datetime.timedelta(minutes=16))
    with pytest.raises(SignatureError) as expired:
        _verify(late)
    assert expired.value.kind == "expired"
    early = _signed(at=NOW + datetime.timedelta(minutes=16))
    with pytest.raises(SignatureError):
        _verify(early)
    assert _verify(_signed(at=NOW - datetime.timedelta(minutes=14))) == "AKIDWEIR"
