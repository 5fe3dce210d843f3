"""The signature check docs/http-push.md gives receivers works on what the broker sends."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from weir.broker.push.payload import PushRecord, delivery_body, delivery_headers

DOC = Path(__file__).resolve().parents[3] / "docs" / "http-push.md"


def snippet_verifier() -> Any:
    text = DOC.read_text()
    (code,) = [c for c in re.findall(r"```python\n(.*?)```", text, re.S) if "def verify_weir" in c]
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 (the documentation's own code)
    return namespace["verify_weir_signature"]


def test_the_documented_snippet_verifies_a_delivery_and_refuses_a_tampered_one() -> None:
    verify = snippet_verifier()
    records = [PushRecord(1, 0, b"k", b"v", (), 1)]
    body = delivery_body("hook", "orders", 0, records)
    headers = delivery_headers(
        subscription="hook", topic="orders", partition=0, records=records,
        secret="secret-1", body=body, timestamp_s=int(time.time()),
    )  # fmt: skip
    assert verify("secret-1", headers, body)
    assert not verify("secret-2", headers, body)
    assert not verify("secret-1", headers, body.replace(b'"v"', b'"w"'))
    old = delivery_headers(
        subscription="hook", topic="orders", partition=0, records=records,
        secret="secret-1", body=body, timestamp_s=int(time.time()) - 3600,
    )  # fmt: skip
    assert not verify("secret-1", old, body)
