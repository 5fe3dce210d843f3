"""KIP-932's internal share-state APIs (83-87) byte for byte with Kafka 4.4's own
serialization.

`data/share_state_kafka_4_4.txt` holds what kafka-clients 4.4.0's generated classes
write for the samples in `compat_tests/java/wire-check/.../ShareStateWireCheck.java`;
`SAMPLES` below builds the same values with Weir's generated classes. Rerun
`compat_tests/java/wire-check/regenerate.sh` after changing a sample there.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from weir.format.primitives import FrameIO
from weir.format.schema import Message
from weir.wire.apis.share_state import (
    DELETE_SHARE_GROUP_STATE,
    INITIALIZE_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE_SUMMARY,
    WRITE_SHARE_GROUP_STATE,
)
from weir.wire.messages.share_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateRequestPartition,
    DeleteShareGroupStateRequestTopic,
    DeleteShareGroupStateResponse,
    DeleteShareGroupStateResponsePartition,
    DeleteShareGroupStateResponseResult,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateRequestPartition,
    InitializeShareGroupStateRequestTopic,
    InitializeShareGroupStateResponse,
    InitializeShareGroupStateResponsePartition,
    InitializeShareGroupStateResponseResult,
    ReadShareGroupStateRequest,
    ReadShareGroupStateRequestPartition,
    ReadShareGroupStateRequestTopic,
    ReadShareGroupStateResponse,
    ReadShareGroupStateResponsePartition,
    ReadShareGroupStateResponseResult,
    ReadShareGroupStateResponseStateBatch,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryRequestPartition,
    ReadShareGroupStateSummaryRequestTopic,
    ReadShareGroupStateSummaryResponse,
    ReadShareGroupStateSummaryResponsePartition,
    ReadShareGroupStateSummaryResponseResult,
    WriteShareGroupStateRequest,
    WriteShareGroupStateRequestPartition,
    WriteShareGroupStateRequestStateBatch,
    WriteShareGroupStateRequestTopic,
    WriteShareGroupStateResponse,
    WriteShareGroupStateResponsePartition,
    WriteShareGroupStateResponseResult,
)
from weir.wire.protocol import DECLARED_NOT_SERVED, SUPPORTED_VERSIONS, ApiKey

from .sample_bodies import plain

FIXTURE = Path(__file__).parent / "data" / "share_state_kafka_4_4.txt"

TOPIC_A = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TOPIC_B = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")
FENCED_LEADER_EPOCH = 74
FENCED_STATE_EPOCH = 124
NOT_COORDINATOR = 16
APIS = (
    INITIALIZE_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE,
    WRITE_SHARE_GROUP_STATE,
    DELETE_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE_SUMMARY,
)


def _read_fixture() -> dict[tuple[str, int], tuple[str, bytes]]:
    cases: dict[tuple[str, int], tuple[str, bytes]] = {}
    for line in FIXTURE.read_text().splitlines():
        name, message_name, version, data = line.split(" ")
        cases[(name, int(version))] = (message_name, bytes.fromhex(data))
    return cases


KAFKA_BYTES = _read_fixture()


def _read_response(version: int) -> ReadShareGroupStateResponse:
    return ReadShareGroupStateResponse(
        results=[
            ReadShareGroupStateResponseResult(
                topic_id=TOPIC_A,
                partitions=[
                    ReadShareGroupStateResponsePartition(
                        partition=0,
                        state_epoch=1,
                        start_offset=100,
                        state_batches=[
                            ReadShareGroupStateResponseStateBatch(100, 104, 2, 1),
                            ReadShareGroupStateResponseStateBatch(105, 105, 0, 3),
                        ],
                    ),
                    ReadShareGroupStateResponsePartition(partition=1, start_offset=-1),
                    ReadShareGroupStateResponsePartition(
                        partition=2,
                        error_code=FENCED_LEADER_EPOCH,
                        error_message="The leader epoch in the request is older than the "
                        "epoch on the broker.",
                    ),
                ],
            )
        ]
    )


def _write_request(version: int) -> WriteShareGroupStateRequest:
    return WriteShareGroupStateRequest(
        group_id="queue-g",
        topics=[
            WriteShareGroupStateRequestTopic(
                topic_id=TOPIC_A,
                partitions=[
                    WriteShareGroupStateRequestPartition(
                        partition=0,
                        state_epoch=1,
                        leader_epoch=5,
                        start_offset=100,
                        delivery_complete_count=5 if version >= 1 else -1,
                        state_batches=[
                            WriteShareGroupStateRequestStateBatch(100, 104, 2, 1),
                            WriteShareGroupStateRequestStateBatch(107, 109, 4, 5),
                        ],
                    )
                ],
            )
        ],
    )


SAMPLES: dict[str, tuple[Message, Callable[[int], Any]]] = {
    "initialize-request": (
        INITIALIZE_SHARE_GROUP_STATE.request,
        lambda v: InitializeShareGroupStateRequest(
            "queue-g",
            [
                InitializeShareGroupStateRequestTopic(
                    TOPIC_A, [InitializeShareGroupStateRequestPartition(3, 2, -1)]
                )
            ],
        ),
    ),
    "initialize-response": (
        INITIALIZE_SHARE_GROUP_STATE.response,
        lambda v: InitializeShareGroupStateResponse(
            [
                InitializeShareGroupStateResponseResult(
                    TOPIC_A, [InitializeShareGroupStateResponsePartition(3)]
                )
            ]
        ),
    ),
    "read-request": (
        READ_SHARE_GROUP_STATE.request,
        lambda v: ReadShareGroupStateRequest(
            "queue-g",
            [
                ReadShareGroupStateRequestTopic(
                    TOPIC_A,
                    [
                        ReadShareGroupStateRequestPartition(0, 5),
                        ReadShareGroupStateRequestPartition(1, -1),
                    ],
                )
            ],
        ),
    ),
    "read-response": (READ_SHARE_GROUP_STATE.response, _read_response),
    "write-request": (WRITE_SHARE_GROUP_STATE.request, _write_request),
    "write-response": (
        WRITE_SHARE_GROUP_STATE.response,
        lambda v: WriteShareGroupStateResponse(
            [
                WriteShareGroupStateResponseResult(
                    TOPIC_A,
                    [
                        WriteShareGroupStateResponsePartition(0),
                        WriteShareGroupStateResponsePartition(
                            1, FENCED_STATE_EPOCH, "stale state epoch"
                        ),
                    ],
                )
            ]
        ),
    ),
    "delete-request": (
        DELETE_SHARE_GROUP_STATE.request,
        lambda v: DeleteShareGroupStateRequest(
            "queue-g",
            [
                DeleteShareGroupStateRequestTopic(
                    TOPIC_B, [DeleteShareGroupStateRequestPartition(2)]
                )
            ],
        ),
    ),
    "delete-response": (
        DELETE_SHARE_GROUP_STATE.response,
        lambda v: DeleteShareGroupStateResponse(
            [
                DeleteShareGroupStateResponseResult(
                    TOPIC_B, [DeleteShareGroupStateResponsePartition(2, NOT_COORDINATOR, "moved")]
                )
            ]
        ),
    ),
    "summary-request": (
        READ_SHARE_GROUP_STATE_SUMMARY.request,
        lambda v: ReadShareGroupStateSummaryRequest(
            "queue-g",
            [
                ReadShareGroupStateSummaryRequestTopic(
                    TOPIC_A, [ReadShareGroupStateSummaryRequestPartition(0, -1)]
                )
            ],
        ),
    ),
    "summary-response": (
        READ_SHARE_GROUP_STATE_SUMMARY.response,
        lambda v: ReadShareGroupStateSummaryResponse(
            [
                ReadShareGroupStateSummaryResponseResult(
                    TOPIC_A,
                    [
                        ReadShareGroupStateSummaryResponsePartition(
                            partition=0,
                            state_epoch=1,
                            leader_epoch=4,
                            start_offset=120,
                            delivery_complete_count=7 if v >= 1 else -1,
                        )
                    ],
                )
            ]
        ),
    ),
}

KAFKA_CASES = sorted(KAFKA_BYTES)


def _case_id(case: tuple[str, int]) -> str:
    return f"{case[0]}-v{case[1]}"


def test_the_samples_here_and_in_the_java_generator_name_the_same_cases() -> None:
    assert {name for name, _ in KAFKA_BYTES} == set(SAMPLES)
    for (name, _), (message_name, _) in KAFKA_BYTES.items():
        assert SAMPLES[name][0].name == message_name


@pytest.mark.parametrize("case", KAFKA_CASES, ids=_case_id)
def test_weir_encodes_the_sample_as_kafka_4_4_does(case: tuple[str, int]) -> None:
    name, version = case
    message, sample = SAMPLES[name]
    _, kafka_bytes = KAFKA_BYTES[case]
    for compiled in (True, False):
        assert message.build(sample(version), version, compiled=compiled).hex() == kafka_bytes.hex()


@pytest.mark.parametrize("case", KAFKA_CASES, ids=_case_id)
def test_weir_decodes_kafka_4_4s_bytes_to_the_sample(case: tuple[str, int]) -> None:
    name, version = case
    message, sample = SAMPLES[name]
    _, kafka_bytes = KAFKA_BYTES[case]
    for compiled in (True, False):
        stream = FrameIO(kafka_bytes)
        decoded = message.parse(stream, version, compiled=compiled)
        assert stream.tell() == len(kafka_bytes)
        assert plain(message.as_container(decoded, version)) == plain(
            message.as_container(sample(version), version)
        )


def test_every_share_state_api_version_is_checked_against_kafka_both_ways() -> None:
    checked = {(message_name, version) for (_, version), (message_name, _) in KAFKA_BYTES.items()}
    for api in APIS:
        for version in range(api.versions[0], api.versions[1] + 1):
            assert (api.request.name, version) in checked
            assert (api.response.name, version) in checked


def test_the_versions_declared_are_kafka_4_4s() -> None:
    assert {api.key: api.versions for api in APIS} == {
        ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
        ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
        ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1),
        ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
    }


def test_weir_serves_read_write_delete_and_summary_and_declares_initialize() -> None:
    for api in APIS[1:]:
        assert SUPPORTED_VERSIONS[api.key] == api.versions
    assert ApiKey.INITIALIZE_SHARE_GROUP_STATE in DECLARED_NOT_SERVED
    assert ApiKey.INITIALIZE_SHARE_GROUP_STATE not in SUPPORTED_VERSIONS


def test_a_v0_write_drops_the_delivery_complete_count() -> None:
    """Kafka's field is ignorable: v0 has no room for it and sends none."""
    v0 = WRITE_SHARE_GROUP_STATE.request.build(_write_request(1), 0)
    assert v0 == KAFKA_BYTES[("write-request", 0)][1]
