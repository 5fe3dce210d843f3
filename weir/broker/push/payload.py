"""What a push delivery sends: the JSON body and the headers (docs/http-push.md).

Pure. The body is one JSON object for a batch of one partition's records:

    {"subscription": NAME, "topic": T, "partition": P,
     "records": [{"offset", "timestamp_ms", "delivery_count", "key", "key_encoding",
                  "value", "value_encoding", "headers": [{"name", "value", "encoding"}]}]}

A key, value or header value is UTF-8 text when it decodes as such
(`"encoding": "utf8"`), else base64 (`"base64"`); a null one is null (encoding null).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass

from weir.broker.push.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature

USER_AGENT = "weir-push/1"


@dataclass(frozen=True)
class PushRecord:
    """A record as a delivery needs it (the share partition's DirectRecord)."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    delivery_count: int


def encoded(data: bytes | None) -> tuple[str | None, str | None]:
    """(text, encoding) of a key, value or header value."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "utf8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def record_json(record: PushRecord) -> dict[str, object]:
    key, key_encoding = encoded(record.key)
    value, value_encoding = encoded(record.value)
    headers = []
    for name, raw in record.headers:
        text, encoding = encoded(raw)
        headers.append({"name": name, "value": text, "encoding": encoding})
    return {
        "offset": record.offset,
        "timestamp_ms": record.timestamp_ms,
        "delivery_count": record.delivery_count,
        "key": key,
        "key_encoding": key_encoding,
        "value": value,
        "value_encoding": value_encoding,
        "headers": headers,
    }


def delivery_body(
    subscription: str, topic: str, partition: int, records: Sequence[PushRecord]
) -> bytes:
    document = {
        "subscription": subscription,
        "topic": topic,
        "partition": partition,
        "records": [record_json(r) for r in records],
    }
    return json.dumps(document, separators=(",", ":")).encode()


def delivery_headers(
    *,
    subscription: str,
    topic: str,
    partition: int,
    records: Sequence[PushRecord],
    secret: str,
    body: bytes,
    timestamp_s: int,
) -> dict[str, str]:
    first, last = records[0].offset, records[-1].offset
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Weir-Subscription": subscription,
        "Weir-Topic": topic,
        "Weir-Partition": str(partition),
        "Weir-Offset": str(first),
        "Weir-Last-Offset": str(last),
        "Weir-Record-Count": str(len(records)),
        "Weir-Delivery-Count": str(max(r.delivery_count for r in records)),
        # The same for every attempt of the same records: a receiver can drop duplicates.
        "Weir-Delivery-Id": f"{topic}/{partition}/{first}-{last}",
        TIMESTAMP_HEADER: str(timestamp_s),
        SIGNATURE_HEADER: signature(secret, timestamp_s, body),
    }
