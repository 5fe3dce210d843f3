"""Receipt handles: what DeleteMessage and ChangeMessageVisibility need, on any broker,
to find the delivery they act on, opaque to the client and tamper-evident.

A handle is base64url(payload | mac): the payload a compact JSON array of the topic,
partition, offset, the member id the record was acquired for (one per ReceiveMessage
call), its delivery count and when it was received; the mac the first 16 bytes of an
HMAC-SHA256 over it with a key derived from the cluster id and the broker setting
`security.sqs_receipt_secret` (the same on every broker of the cluster). A handle that
was altered, truncated or made for another cluster is refused (ReceiptHandleIsInvalid);
one for a delivery that is over (deleted, lock run out and received again) is refused by
the share partition (the member no longer holds the record) and, as SQS does for an
expired handle, DeleteMessage then succeeds without deleting anything.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass

MAC_BYTES = 16
HANDLE_CHARS_MAX = 1024


@dataclass(frozen=True)
class Receipt:
    topic: str
    partition: int
    offset: int
    member_id: str
    delivery_count: int
    received_ms: int


def receipt_key(cluster_id: str, secret: str) -> bytes:
    return hashlib.sha256(
        b"weir-sqs-receipt\x00" + cluster_id.encode() + b"\x00" + secret.encode()
    ).digest()


def encode_receipt(key: bytes, receipt: Receipt) -> str:
    payload = json.dumps(
        [
            receipt.topic,
            receipt.partition,
            receipt.offset,
            receipt.member_id,
            receipt.delivery_count,
            receipt.received_ms,
        ],
        separators=(",", ":"),
    ).encode()
    mac = hmac.new(key, payload, hashlib.sha256).digest()[:MAC_BYTES]
    return base64.urlsafe_b64encode(payload + mac).decode().rstrip("=")


def decode_receipt(key: bytes, handle: object) -> Receipt | None:
    """The receipt a handle carries, or None when it is not one this cluster made."""
    if not isinstance(handle, str) or not handle or len(handle) > HANDLE_CHARS_MAX:
        return None
    try:
        raw = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) <= MAC_BYTES:
        return None
    payload, mac = raw[:-MAC_BYTES], raw[-MAC_BYTES:]
    expected = hmac.new(key, payload, hashlib.sha256).digest()[:MAC_BYTES]
    if not hmac.compare_digest(mac, expected):
        return None
    try:
        topic, partition, offset, member_id, delivery_count, received_ms = json.loads(payload)
    except (ValueError, TypeError):
        return None
    if not (
        isinstance(topic, str)
        and isinstance(member_id, str)
        and all(
            isinstance(n, int) and n >= 0 for n in (partition, offset, delivery_count, received_ms)
        )
    ):
        return None
    return Receipt(topic, partition, offset, member_id, delivery_count, received_ms)
