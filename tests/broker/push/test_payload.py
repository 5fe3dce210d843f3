from __future__ import annotations

import base64
import json

from weir.broker.push.payload import PushRecord, delivery_body, delivery_headers
from weir.broker.push.signing import verify


def test_body_carries_text_as_text_and_binary_as_base64() -> None:
    records = [
        PushRecord(7, 1000, b"k", "héllo".encode(), (("h", b"\xff\x00"), ("n", None)), 2),
        PushRecord(8, 1001, None, None, (), 1),
    ]
    document = json.loads(delivery_body("hook", "orders", 3, records))
    assert document["subscription"] == "hook" and document["partition"] == 3
    first, second = document["records"]
    assert first["value"] == "héllo" and first["value_encoding"] == "utf8"
    assert first["key"] == "k" and first["delivery_count"] == 2
    assert first["headers"][0] == {
        "name": "h", "value": base64.b64encode(b"\xff\x00").decode(), "encoding": "base64"
    }  # fmt: skip
    assert first["headers"][1] == {"name": "n", "value": None, "encoding": None}
    assert second["key"] is None and second["value"] is None and second["value_encoding"] is None


def test_headers_name_the_records_and_sign_the_body() -> None:
    records = [PushRecord(7, 0, None, b"a", (), 1), PushRecord(9, 0, None, b"b", (), 3)]
    body = delivery_body("hook", "orders", 0, records)
    headers = delivery_headers(
        subscription="hook", topic="orders", partition=0, records=records,
        secret="k" * 64, body=body, timestamp_s=1_700_000_000,
    )  # fmt: skip
    assert headers["Weir-Offset"] == "7" and headers["Weir-Last-Offset"] == "9"
    assert headers["Weir-Record-Count"] == "2" and headers["Weir-Delivery-Count"] == "3"
    assert headers["Weir-Delivery-Id"] == "orders/0/7-9"
    assert verify(
        "k" * 64, headers["Weir-Timestamp"], headers["Weir-Signature"], body, now_s=1_700_000_000
    )
