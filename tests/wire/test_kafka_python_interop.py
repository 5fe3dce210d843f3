"""Cross-check every declared (api, version), served or in `DECLARED_NOT_SERVED`, against
kafka-python's independent codec.

kafka-python 3 encodes messages from Kafka's JSON specs with its own code; our
encoding of a body with non-default values must decode there and re-encode to the
very same bytes, and its encoding must decode here."""

from __future__ import annotations

import random
from typing import Any

import pytest

from weir.format.primitives import FrameIO
from weir.wire.protocol import DECLARED_APIS, ApiKey

from .sample_bodies import plain, sample_struct

api_message = pytest.importorskip("kafka.protocol.api_message")
pytest.importorskip("kafka.protocol.admin")
pytest.importorskip("kafka.protocol.admin.transactions")
pytest.importorskip("kafka.protocol.consumer")
pytest.importorskip("kafka.protocol.metadata")
pytest.importorskip("kafka.protocol.producer")
pytest.importorskip("kafka.protocol.producer.transaction")


def _subclasses(cls: Any) -> list[Any]:
    found: list[Any] = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


def _kafka_python_classes() -> dict[tuple[int, str], Any]:
    classes = {}
    for cls in _subclasses(api_message.ApiMessage):
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
            classes[(cls.API_KEY, cls.type)] = cls
    return classes


KAFKA_PYTHON = _kafka_python_classes()

CASES = [
    (api_key, version, kind)
    for api_key, api in sorted(DECLARED_APIS.items())
    for version in range(api.versions[0], api.versions[1] + 1)
    for kind in ("request", "response")
]


def _id(case: tuple[int, int, str]) -> str:
    api_key, version, kind = case
    return f"{DECLARED_APIS[api_key].request.name.removesuffix('Request')}-v{version}-{kind}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_kafka_python_reads_and_rewrites_our_bytes_identically(case: tuple[int, int, str]) -> None:
    api_key, version, kind = case
    theirs = KAFKA_PYTHON.get((api_key, kind))
    if theirs is None or version > theirs.max_version:
        pytest.skip("kafka-python does not know this version")
    message = getattr(DECLARED_APIS[api_key], kind)
    for seed in range(3):
        body = sample_struct(message.construct_for(version), random.Random(f"{case}-{seed}"))
        if api_key == ApiKey.API_VERSIONS and kind == "response":
            body["error_code"] = 0  # kafka-python reads any error response as v0
        ours = message.build(body, version)
        decoded = theirs.decode(ours, version=version)
        decoded._header = None  # decode() leaves it unset; encode() reads it
        assert decoded.encode(version=version) == ours
        assert plain(message.parse(FrameIO(ours), version)) == plain(message.value_of(body))
