"""The hand-written Produce response encoder writes exactly what the schema
encoder writes, for every version and any field values."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.format.primitives import EncodeError
from weir.wire.produce_response import (
    PRODUCE_RESPONSE_VERSIONS,
    NodeEndpoint,
    PartitionResult,
    encode_produce_response,
)
from weir.wire.protocol import ApiKey, decode_response, encode_response

VERSIONS = range(PRODUCE_RESPONSE_VERSIONS[0], PRODUCE_RESPONSE_VERSIONS[1] + 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

partitions = st.builds(
    PartitionResult,
    partition_index=INT32,
    error_code=INT16,
    base_offset=INT64,
    log_append_time_ms=INT64,
    log_start_offset=INT64,
    error_message=st.none() | st.text(max_size=40),
    record_errors=st.lists(st.tuples(INT32, st.none() | st.text(max_size=20)), max_size=3).map(
        tuple
    ),
    current_leader=st.just((-1, -1)) | st.tuples(INT32, INT32),
)
endpoints = st.lists(
    st.builds(NodeEndpoint, INT32, st.text(max_size=20), INT32, st.none() | st.text(max_size=8)),
    max_size=3,
)
topics = st.lists(st.tuples(st.text(max_size=30), st.lists(partitions, max_size=5)), max_size=4)


def schema_frame(
    version: int,
    correlation_id: int,
    body_topics: Any,
    throttle_time_ms: int,
    node_endpoints: list[NodeEndpoint],
) -> bytes:
    body = {
        "responses": [
            {
                "name": name,
                "partition_responses": [
                    {
                        "index": p.partition_index,
                        "error_code": p.error_code,
                        "base_offset": p.base_offset,
                        "log_append_time_ms": p.log_append_time_ms,
                        "log_start_offset": p.log_start_offset,
                        "record_errors": [
                            {"batch_index": index, "batch_index_error_message": message}
                            for index, message in p.record_errors
                        ],
                        "error_message": p.error_message,
                        "current_leader": {
                            "leader_id": p.current_leader[0],
                            "leader_epoch": p.current_leader[1],
                        },
                    }
                    for p in partition_results
                ],
            }
            for name, partition_results in body_topics
        ],
        "throttle_time_ms": throttle_time_ms,
        "node_endpoints": [e._asdict() for e in node_endpoints],
    }
    return encode_response(ApiKey.PRODUCE, version, correlation_id, body)


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(VERSIONS),
    correlation_id=INT32,
    body_topics=topics,
    throttle_time_ms=INT32,
    node_endpoints=endpoints,
)
def test_matches_the_schema_encoder_byte_for_byte(
    version: int,
    correlation_id: int,
    body_topics: Any,
    throttle_time_ms: int,
    node_endpoints: list[NodeEndpoint],
) -> None:
    fast = encode_produce_response(
        version, correlation_id, body_topics, throttle_time_ms, node_endpoints
    )
    assert fast == schema_frame(
        version, correlation_id, body_topics, throttle_time_ms, node_endpoints
    )


@pytest.mark.parametrize("version", [10, 11])
def test_a_leader_hint_decodes_with_the_schema(version: int) -> None:
    moved = PartitionResult(3, 6, -1, -1, -1, None, current_leader=(2, 7))
    endpoint = NodeEndpoint(2, "broker2.example", 9093, "rack-b")
    frame = encode_produce_response(version, 9, [("orders", [moved])], 0, [endpoint])
    _, body = decode_response(ApiKey.PRODUCE, version, memoryview(frame)[4:])
    partition = body.responses[0].partition_responses[0]
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (2, 7)
    assert [(e.node_id, e.host, e.port, e.rack) for e in body.node_endpoints] == [
        (2, "broker2.example", 9093, "rack-b")
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_typical_response_decodes_with_the_schema(version: int) -> None:
    results = [PartitionResult(i, 0, 1000 * i, -1, 0, None) for i in range(8)]
    frame = encode_produce_response(version, 42, [("orders", results)])
    correlation_id, body = decode_response(ApiKey.PRODUCE, version, memoryview(frame)[4:])
    assert correlation_id == 42
    decoded = body.responses[0].partition_responses
    assert [(p.index, p.base_offset) for p in decoded] == [(i, 1000 * i) for i in range(8)]


@pytest.mark.parametrize("version", [2, 13])
def test_versions_outside_3_to_12_are_refused(version: int) -> None:
    with pytest.raises(EncodeError):
        encode_produce_response(version, 1, [])
