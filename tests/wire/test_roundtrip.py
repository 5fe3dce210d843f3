"""Every declared (api, version), request and response, the served ones and those in
`DECLARED_NOT_SERVED`: encode -> decode is identity."""

from __future__ import annotations

import random

import pytest

from weir.format.primitives import EncodeError, FrameIO
from weir.format.schema import Message
from weir.wire.protocol import (
    APIS,
    DECLARED_APIS,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)

from .sample_bodies import plain, sample_struct

CASES = [
    (api_key, version)
    for api_key, api in sorted(DECLARED_APIS.items())
    for version in range(api.versions[0], api.versions[1] + 1)
]


def _ids(case: tuple[int, int]) -> str:
    api_key, version = case
    return f"{DECLARED_APIS[api_key].request.name.removesuffix('Request')}-v{version}"


def _messages(api_key: int) -> list[Message]:
    return [DECLARED_APIS[api_key].request, DECLARED_APIS[api_key].response]


@pytest.mark.parametrize("case", CASES, ids=_ids)
@pytest.mark.parametrize("seed", range(3))
def test_every_version_round_trips_non_default_values(case: tuple[int, int], seed: int) -> None:
    api_key, version = case
    for message in _messages(api_key):
        rng = random.Random(f"{message.name}-{version}-{seed}")
        body = sample_struct(message.construct_for(version), rng)
        encoded = message.build(body, version)
        decoded = message.parse(FrameIO(encoded), version)
        assert plain(decoded) == plain(message.value_of(body))


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_compiled_and_interpreted_constructs_agree(case: tuple[int, int]) -> None:
    api_key, version = case
    for message in _messages(api_key):
        body = sample_struct(message.construct_for(version), random.Random(message.name))
        compiled_bytes = message.build(body, version, compiled=True)
        assert message.build(message.value_of(body), version) == compiled_bytes
        assert message.build(body, version, compiled=False) == compiled_bytes
        compiled_result = message.parse(FrameIO(compiled_bytes), version, compiled=True)
        interpreted_result = message.parse(FrameIO(compiled_bytes), version, compiled=False)
        assert plain(compiled_result) == plain(interpreted_result)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_framed_request_and_response_round_trip(case: tuple[int, int]) -> None:
    api_key, version = case
    api = DECLARED_APIS[api_key]
    rng = random.Random(api.request.name)
    request_body = sample_struct(api.request.construct_for(version), rng)
    frame = encode_request(api_key, version, 1234, "client-é", request_body)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    view = memoryview(frame)[4:]
    header = parse_request_header(view)
    assert (header.api_key, header.api_version) == (api_key, version)
    assert (header.correlation_id, header.client_id) == (1234, "client-é")
    assert plain(decode_request(header, view)) == plain(api.request.value_of(request_body))

    response_body = sample_struct(api.response.construct_for(version), rng)
    frame = encode_response(api_key, version, -7, response_body)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id, decoded = decode_response(api_key, version, memoryview(frame)[4:])
    assert correlation_id == -7
    assert plain(decoded) == plain(api.response.value_of(response_body))


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_empty_body_encodes_with_defaults(case: tuple[int, int]) -> None:
    api_key, version = case
    for message in _messages(api_key):
        encoded = message.build({}, version)
        decoded = message.parse(FrameIO(encoded), version)
        assert plain(decoded) == plain(message.construct_for(version).zero())


def test_absent_fields_get_kafka_defaults() -> None:
    fetch = APIS[1].response
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 3}]}]}
    decoded = fetch.parse(FrameIO(fetch.build(body, 11)), 11)
    partition = decoded.responses[0].partitions[0]
    assert partition.partition_index == 3
    assert partition.last_stable_offset == -1
    assert partition.log_start_offset == -1
    assert partition.preferred_read_replica == -1
    assert partition.records is None
    assert partition.aborted_transactions == []


def test_none_for_a_non_nullable_field_means_its_default() -> None:
    metadata = APIS[3].response
    body = {"brokers": [{"node_id": 1, "host": None, "port": 9092}], "controller_id": None}
    decoded = metadata.parse(FrameIO(metadata.build(body, 1)), 1)
    assert decoded.brokers[0].host == ""
    assert decoded.controller_id == -1


def test_keys_absent_from_the_version_are_not_sent() -> None:
    produce = APIS[0].response
    endpoint = {"node_id": 1, "host": "h", "port": 1}  # node_endpoints: v10+ only
    body = {"responses": [], "throttle_time_ms": 5, "node_endpoints": [endpoint]}
    assert produce.build(body, 3) == produce.build({"throttle_time_ms": 5}, 3)
    decoded = produce.parse(FrameIO(produce.build(body, 3)), 3)
    assert (decoded.responses, decoded.throttle_time_ms, decoded.node_endpoints) == ([], 5, [])


def test_a_key_no_version_has_is_an_encode_error() -> None:
    produce = APIS[0].response
    partition = {"index": 0, "eror_code": 36}
    with pytest.raises(EncodeError, match="eror_code"):
        produce.build({"responses": [{"name": "t", "partition_responses": [partition]}]}, 9)


def test_fields_absent_in_the_version_keep_their_defaults() -> None:
    fetch = APIS[1].request
    v4 = fetch.parse(FrameIO(fetch.build({"session_id": 7, "rack_id": "r"}, 4)), 4)
    assert v4.session_id == 0 and v4.rack_id == "" and v4.cluster_id is None
    v12 = fetch.parse(FrameIO(fetch.build({}, 12)), 12)
    assert v12.session_epoch == -1 and v12.rack_id == "" and v12.cluster_id is None


def test_tagged_fields_at_default_are_not_sent() -> None:
    fetch = APIS[1].response
    partition = {
        "partition_index": 0,
        "diverging_epoch": {"epoch": -1, "end_offset": -1},
        "current_leader": {"leader_id": 5, "leader_epoch": 2},
    }
    body = {"responses": [{"topic": "t", "partitions": [partition]}]}
    with_tag = fetch.build(body, 12)
    partition["current_leader"] = {"leader_id": -1, "leader_epoch": -1}
    without_tag = fetch.build(body, 12)
    assert len(with_tag) > len(without_tag)
    decoded = fetch.parse(FrameIO(with_tag), 12).responses[0].partitions[0]
    assert plain(decoded.current_leader) == {"leader_id": 5, "leader_epoch": 2}
    assert plain(decoded.diverging_epoch) == {"epoch": -1, "end_offset": -1}
