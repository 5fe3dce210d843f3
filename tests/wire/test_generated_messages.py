"""The generated message classes: current with the declarations, and strict."""

from __future__ import annotations

from typing import Any

import pytest

from weir.format.errors import ErrorCode
from weir.format.primitives import FrameIO
from weir.wire.codegen import rendered_files
from weir.wire.messages.list_offsets import ListOffsetsResponsePartition
from weir.wire.messages.produce import (
    ProduceResponse,
    ProduceResponsePartitionResponse,
    ProduceResponseResponse,
)
from weir.wire.protocol import APIS, ApiKey


def test_regenerating_the_message_classes_changes_nothing() -> None:
    stale = [path.name for path, source in rendered_files().items() if path.read_text() != source]
    assert stale == [], "run `python -m weir.wire.codegen` and commit the result"


def test_a_misspelled_produce_response_field_is_a_type_error() -> None:
    misspelled: dict[str, Any] = {"index": 0, "eror_code": ErrorCode.NOT_ENOUGH_REPLICAS}
    with pytest.raises(TypeError, match="eror_code"):
        ProduceResponsePartitionResponse(**misspelled)


def test_a_misspelled_list_offsets_response_field_is_a_type_error() -> None:
    misspelled: dict[str, Any] = {"partition_index": 0, "eror_code": 3}
    with pytest.raises(TypeError, match="eror_code"):
        ListOffsetsResponsePartition(**misspelled)


def test_a_field_left_out_takes_its_declared_default() -> None:
    partition = ProduceResponsePartitionResponse(index=2, base_offset=10)
    assert (partition.error_code, partition.log_append_time_ms) == (ErrorCode.NONE, -1)
    assert (partition.log_start_offset, partition.error_message) == (-1, None)
    assert ListOffsetsResponsePartition(partition_index=1).offset == -1


def test_mutable_defaults_are_not_shared_between_instances() -> None:
    first, second = ProduceResponse(), ProduceResponse()
    first.responses.append(ProduceResponseResponse(name="t"))
    assert second.responses == []


def test_decoding_constructs_the_generated_classes() -> None:
    produce = APIS[ApiKey.PRODUCE].response
    body = ProduceResponse(
        responses=[
            ProduceResponseResponse(
                name="t", partition_responses=[ProduceResponsePartitionResponse(index=3)]
            )
        ]
    )
    for compiled in (True, False):
        decoded = produce.parse(FrameIO(produce.build(body, 9)), 9, compiled=compiled)
        assert decoded == body
        assert type(decoded.responses[0].partition_responses[0]) is ProduceResponsePartitionResponse
