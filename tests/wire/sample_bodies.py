"""Deterministic bodies with non-default values for any resolved schema, for tests."""

from __future__ import annotations

import dataclasses
import random
import struct
import uuid
from typing import Any

from construct import Container

from weir.format import primitives as prim
from weir.format.schema import KArray, KNullableStruct, KStruct

_INT_RANGES = {
    "b": (-(2**7), 2**7 - 1),
    "h": (-(2**15), 2**15 - 1),
    "i": (-(2**31), 2**31 - 1),
    "q": (-(2**63), 2**63 - 1),
    "H": (0, 2**16 - 1),
    "I": (0, 2**32 - 1),
}

_TEXT = "abcdefghijklmnopqrstuvwxyz-._é漢"


def sample_struct(construct: KStruct, rng: random.Random) -> dict[str, Any]:
    """A body for `construct` with every field (tagged ones too) set to a random value."""
    body: dict[str, Any] = {}
    for field in (*construct.fields, *construct.tagged):
        body[field.name] = sample_value(field.construct, field.nullable, rng)
    return body


def sample_value(construct: prim.KafkaType, nullable: bool, rng: random.Random) -> Any:
    if nullable and rng.random() < 0.25:
        return None
    if isinstance(construct, KStruct):
        return sample_struct(construct, rng)
    if isinstance(construct, KNullableStruct):
        return sample_struct(construct.inner, rng)
    if isinstance(construct, KArray):
        return [sample_value(construct.element, False, rng) for _ in range(rng.randint(1, 3))]
    if isinstance(construct, prim.FixedType):
        return _sample_fixed(construct.format_char, rng)
    return _sample_variable(construct.kafka_name, rng)


def _sample_fixed(format_char: str, rng: random.Random) -> Any:
    if format_char == "?":
        return rng.random() < 0.5
    if format_char == "d":
        return struct.unpack(">d", struct.pack(">d", rng.uniform(-1e9, 1e9)))[0]
    low, high = _INT_RANGES[format_char]
    return rng.choice([low, high, rng.randint(low, high), 1])


def _sample_variable(kafka_name: str, rng: random.Random) -> Any:
    if kafka_name == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kafka_name.endswith("string"):
        return "".join(rng.choice(_TEXT) for _ in range(rng.randint(0, 12)))
    if kafka_name.endswith(("bytes", "records")):
        return rng.randbytes(rng.randint(0, 40))
    if kafka_name in ("uvarint", "varint"):
        return rng.randint(0, 2**31 - 1)
    raise AssertionError(f"no sample for {kafka_name}")


def plain(value: Any) -> Any:
    """Generated classes and Containers -> dicts, memoryviews -> bytes, recursively:
    for comparisons."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Container | dict):
        return {key: plain(item) for key, item in value.items() if not key.startswith("_")}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value
