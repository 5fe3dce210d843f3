"""Kafka's stored records: an int16 version, then a body declared in the schema DSL.

The keys and values of Kafka's internal topics (`__consumer_offsets` today,
`__transaction_state` later) are written this way: the first two bytes say which
version of the message follows (for a coordinator key, the version is the record
type), the rest is that version's encoding. Declaring them as `Message`s gives one
encoder and one bounded decoder for every record type, the same ones the wire layer
uses for requests.

Decoding never trusts the bytes: a truncated record, a count or length larger than
the bytes left, more than `RECORD_ELEMENTS_MAX` array elements, an unknown version or
trailing bytes all raise `RecordFormatError`; nothing is allocated from a length
before it is checked against what remains.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from typing import Any

from weir.format.primitives import DecodeError, EncodeError, FrameIO
from weir.format.schema import Message

# Array elements one stored record may decode into (a group of 1,000 members with
# 100 partitions each is 100,000); its bytes bound it long before that in practice.
RECORD_ELEMENTS_MAX = 200_000

_VERSION = struct.Struct(">h")


class RecordFormatError(ValueError):
    """Stored record bytes that are not a well-formed record of a known version."""


def record_version(data: bytes) -> int:
    """The int16 version (or record type) a stored key or value starts with."""
    if len(data) < _VERSION.size:
        raise RecordFormatError(f"record of {len(data)} bytes is shorter than its version")
    version: int = _VERSION.unpack_from(data)[0]
    return version


def encode_record(message: Message, version: int, body: Mapping[str, Any]) -> bytes:
    """int16 `version`, then `body` encoded as that version of `message`."""
    stream = io.BytesIO()
    stream.write(_VERSION.pack(version))
    try:
        message.build_into(stream, body, version)
    except EncodeError as exc:
        raise RecordFormatError(f"cannot encode {message.name} v{version}: {exc}") from exc
    return stream.getvalue()


def decode_record(message: Message, data: bytes) -> tuple[int, Any]:
    """(version, fields) of a record that must be a known version of `message` and
    fill `data` exactly. Raises RecordFormatError otherwise."""
    version = record_version(data)
    valid = message.valid
    if version < valid.low or (valid.high is not None and version > valid.high):
        raise RecordFormatError(f"unknown {message.name} version {version}")
    stream = FrameIO(data, _VERSION.size, RECORD_ELEMENTS_MAX)
    try:
        body = message.parse(stream, version)
    except DecodeError as exc:
        raise RecordFormatError(f"malformed {message.name} v{version}: {exc}") from exc
    if stream.tell() != stream.end:
        raise RecordFormatError(
            f"{stream.end - stream.tell()} bytes after the end of {message.name} v{version}"
        )
    return version, body
