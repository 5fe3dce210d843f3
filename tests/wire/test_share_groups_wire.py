"""The KIP-932 share-group APIs (and ListGroups v5, DescribeGroups v5-6) byte for byte
with Kafka 4.4's own serialization.

`data/share_groups_kafka_4_4.txt` holds what kafka-clients 4.4.0's generated classes
write for the samples in `compat_tests/java/wire-check/.../ShareWireCheck.java`, one
line per case and version; `SAMPLES` below builds the same values with Weir's
generated classes. Rerun `compat_tests/java/wire-check/regenerate.sh` after changing a
sample there (and change it here too: the two must name the same cases).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from weir.format.primitives import FrameIO
from weir.format.schema import Api, Message
from weir.wire.apis.groups import (
    DESCRIBE_GROUPS_REQUEST,
    DESCRIBE_GROUPS_RESPONSE,
    LIST_GROUPS_REQUEST,
    LIST_GROUPS_RESPONSE,
)
from weir.wire.apis.share_groups import (
    ALTER_SHARE_GROUP_OFFSETS_REQUEST,
    ALTER_SHARE_GROUP_OFFSETS_RESPONSE,
    DELETE_SHARE_GROUP_OFFSETS_REQUEST,
    DELETE_SHARE_GROUP_OFFSETS_RESPONSE,
    DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST,
    DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE,
    SHARE_ACKNOWLEDGE_REQUEST,
    SHARE_ACKNOWLEDGE_RESPONSE,
    SHARE_FETCH_REQUEST,
    SHARE_FETCH_RESPONSE,
    SHARE_GROUP_APIS,
    SHARE_GROUP_DESCRIBE_REQUEST,
    SHARE_GROUP_DESCRIBE_RESPONSE,
    SHARE_GROUP_HEARTBEAT_REQUEST,
    SHARE_GROUP_HEARTBEAT_RESPONSE,
)
from weir.wire.messages.groups import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeGroupsResponseGroup,
    DescribeGroupsResponseMember,
    ListGroupsRequest,
    ListGroupsResponse,
    ListGroupsResponseGroup,
)
from weir.wire.messages.share_groups import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
    ShareAcknowledgeRequest,
    ShareAcknowledgeRequestAcknowledgementBatch,
    ShareAcknowledgeRequestPartition,
    ShareAcknowledgeRequestTopic,
    ShareAcknowledgeResponse,
    ShareAcknowledgeResponseCurrentLeader,
    ShareAcknowledgeResponseNodeEndpoint,
    ShareAcknowledgeResponsePartition,
    ShareAcknowledgeResponseResponse,
    ShareFetchRequest,
    ShareFetchRequestAcknowledgementBatch,
    ShareFetchRequestForgottenTopicsData,
    ShareFetchRequestPartition,
    ShareFetchRequestTopic,
    ShareFetchResponse,
    ShareFetchResponseAcquiredRecord,
    ShareFetchResponseCurrentLeader,
    ShareFetchResponseNodeEndpoint,
    ShareFetchResponsePartition,
    ShareFetchResponseResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupDescribeResponseAssignment,
    ShareGroupDescribeResponseGroup,
    ShareGroupDescribeResponseMember,
    ShareGroupDescribeResponseTopicPartition,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareGroupHeartbeatResponseAssignment,
    ShareGroupHeartbeatResponseTopicPartition,
)

from .sample_bodies import plain, sample_struct

FIXTURE = Path(__file__).parent / "data" / "share_groups_kafka_4_4.txt"

TOPIC_A = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TOPIC_B = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")
NOT_LEADER_OR_FOLLOWER = 6
NOT_COORDINATOR = 16
GROUP_ID_NOT_FOUND = 69
INVALID_RECORD_STATE = 121
SHARE_SESSION_NOT_FOUND = 122
UNKNOWN_TOPIC_OR_PARTITION = 3
AUTHORIZED_OPERATIONS = 0x0DA8


def _read_fixture() -> tuple[bytes, dict[tuple[str, int], tuple[str, bytes]]]:
    """The records batch, and each case's (message name, bytes) by (case, version)."""
    records = b""
    cases: dict[tuple[str, int], tuple[str, bytes]] = {}
    for line in FIXTURE.read_text().splitlines():
        name, message_name, version, data = line.split(" ")
        if name == "records-batch":
            records = bytes.fromhex(data)
        else:
            cases[(name, int(version))] = (message_name, bytes.fromhex(data))
    return records, cases


RECORDS, KAFKA_BYTES = _read_fixture()


# -- the samples, as ShareWireCheck.java builds them ----------------------------------


def _fetch_request_open(version: int) -> ShareFetchRequest:
    return ShareFetchRequest(
        group_id="queue-g",
        member_id="m-1",
        share_session_epoch=0,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52428800,
        max_records=500,
        batch_size=500,
        share_acquire_mode=1,  # v2+; Kafka drops it at v1 (ignorable), and so does Weir
        topics=[
            ShareFetchRequestTopic(
                topic_id=TOPIC_A,
                partitions=[
                    ShareFetchRequestPartition(partition_index=0),
                    ShareFetchRequestPartition(partition_index=3),
                ],
            )
        ],
    )


def _fetch_request_acks(version: int) -> ShareFetchRequest:
    renew = version >= 2
    batches = [
        ShareFetchRequestAcknowledgementBatch(
            first_offset=10, last_offset=13, acknowledge_types=[1, 2, 3, 0]
        ),
        ShareFetchRequestAcknowledgementBatch(
            first_offset=14, last_offset=20, acknowledge_types=[4 if renew else 1]
        ),
    ]
    return ShareFetchRequest(
        group_id="queue-g",
        member_id="m-1",
        share_session_epoch=2,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1048576,
        max_records=100,
        batch_size=50,
        is_renew_ack=renew,
        topics=[
            ShareFetchRequestTopic(
                topic_id=TOPIC_A,
                partitions=[ShareFetchRequestPartition(0, acknowledgement_batches=batches)],
            )
        ],
        forgotten_topics_data=[
            ShareFetchRequestForgottenTopicsData(topic_id=TOPIC_B, partitions=[1, 2])
        ],
    )


def _fetch_response(version: int) -> ShareFetchResponse:
    fetched = ShareFetchResponsePartition(
        partition_index=0,
        current_leader=ShareFetchResponseCurrentLeader(leader_id=1, leader_epoch=5),
        records=RECORDS,
        acquired_records=[
            ShareFetchResponseAcquiredRecord(first_offset=100, last_offset=100, delivery_count=1),
            ShareFetchResponseAcquiredRecord(first_offset=101, last_offset=101, delivery_count=3),
        ],
    )
    moved = ShareFetchResponsePartition(
        partition_index=3,
        error_code=NOT_LEADER_OR_FOLLOWER,
        error_message="not the leader",
        acknowledge_error_code=INVALID_RECORD_STATE,
        acknowledge_error_message="offset 7 is not acquired",
        current_leader=ShareFetchResponseCurrentLeader(leader_id=2, leader_epoch=7),
        # records left at the default: an empty record set, as Kafka's MemoryRecords.EMPTY
    )
    return ShareFetchResponse(
        throttle_time_ms=10,
        acquisition_lock_timeout_ms=30000,
        responses=[ShareFetchResponseResponse(topic_id=TOPIC_A, partitions=[fetched, moved])],
        node_endpoints=[
            ShareFetchResponseNodeEndpoint(node_id=2, host="broker-2", port=9092, rack="rack-b"),
            ShareFetchResponseNodeEndpoint(node_id=3, host="broker-3", port=9093),
        ],
    )


def _ack_request(version: int) -> ShareAcknowledgeRequest:
    renew = version >= 2
    return ShareAcknowledgeRequest(
        group_id="queue-g",
        member_id="m-1",
        share_session_epoch=3,
        is_renew_ack=renew,
        topics=[
            ShareAcknowledgeRequestTopic(
                topic_id=TOPIC_A,
                partitions=[
                    ShareAcknowledgeRequestPartition(
                        partition_index=0,
                        acknowledgement_batches=[
                            ShareAcknowledgeRequestAcknowledgementBatch(
                                10, 10, acknowledge_types=[4 if renew else 1]
                            ),
                            ShareAcknowledgeRequestAcknowledgementBatch(
                                11, 15, acknowledge_types=[2, 2, 3, 0, 1]
                            ),
                        ],
                    )
                ],
            ),
            ShareAcknowledgeRequestTopic(
                topic_id=TOPIC_B,
                partitions=[
                    ShareAcknowledgeRequestPartition(
                        partition_index=1,
                        acknowledgement_batches=[
                            ShareAcknowledgeRequestAcknowledgementBatch(0, 99, [3])
                        ],
                    )
                ],
            ),
        ],
    )


def _ack_response(version: int) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(
        acquisition_lock_timeout_ms=15000,  # v2+ (ignorable): not sent at v1
        responses=[
            ShareAcknowledgeResponseResponse(
                topic_id=TOPIC_A,
                partitions=[
                    ShareAcknowledgeResponsePartition(
                        partition_index=0,
                        current_leader=ShareAcknowledgeResponseCurrentLeader(1, 5),
                    ),
                    ShareAcknowledgeResponsePartition(
                        partition_index=1,
                        error_code=INVALID_RECORD_STATE,
                        error_message="bad state",
                        current_leader=ShareAcknowledgeResponseCurrentLeader(-1, -1),
                    ),
                ],
            )
        ],
        node_endpoints=[ShareAcknowledgeResponseNodeEndpoint(node_id=1, host="h", port=9092)],
    )


def _describe_response(version: int) -> ShareGroupDescribeResponse:
    member = ShareGroupDescribeResponseMember(
        member_id="m-1",
        member_epoch=4,
        client_id="c",
        client_host="/127.0.0.1",
        subscribed_topic_names=["orders"],
        assignment=ShareGroupDescribeResponseAssignment(
            topic_partitions=[
                ShareGroupDescribeResponseTopicPartition(
                    topic_id=TOPIC_A, topic_name="orders", partitions=[0, 1]
                )
            ]
        ),
    )
    return ShareGroupDescribeResponse(
        groups=[
            ShareGroupDescribeResponseGroup(
                group_id="g1",
                group_state="Stable",
                group_epoch=4,
                assignment_epoch=4,
                assignor_name="simple",
                members=[member],
                authorized_operations=AUTHORIZED_OPERATIONS,
            ),
            ShareGroupDescribeResponseGroup(
                error_code=GROUP_ID_NOT_FOUND,
                error_message="Group g2 not found.",
                group_id="g2",
                group_state="Dead",
            ),
        ]
    )


def _describe_offsets_response(version: int) -> DescribeShareGroupOffsetsResponse:
    partitions = [
        DescribeShareGroupOffsetsResponsePartition(
            partition_index=0, start_offset=42, leader_epoch=5, lag=7
        ),
        DescribeShareGroupOffsetsResponsePartition(
            partition_index=1,
            start_offset=-1,
            leader_epoch=-1,
            error_code=UNKNOWN_TOPIC_OR_PARTITION,
            error_message="unknown partition",
        ),
    ]
    return DescribeShareGroupOffsetsResponse(
        groups=[
            DescribeShareGroupOffsetsResponseGroup(
                group_id="g1",
                topics=[
                    DescribeShareGroupOffsetsResponseTopic(
                        topic_name="orders", topic_id=TOPIC_A, partitions=partitions
                    )
                ],
            ),
            DescribeShareGroupOffsetsResponseGroup(
                group_id="g2", error_code=GROUP_ID_NOT_FOUND, error_message="Group g2 not found."
            ),
        ]
    )


def _describe_groups_response(version: int) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(
        groups=[
            DescribeGroupsResponseGroup(
                group_id="g1",
                group_state="Stable",
                protocol_type="consumer",
                protocol_data="range",
                members=[
                    DescribeGroupsResponseMember(
                        member_id="m-1",
                        client_id="c",
                        client_host="/127.0.0.1",
                        member_metadata=b"\x01\x02",
                        member_assignment=b"\x03",
                    )
                ],
                authorized_operations=AUTHORIZED_OPERATIONS,
            ),
            DescribeGroupsResponseGroup(
                error_code=GROUP_ID_NOT_FOUND,
                error_message="Group missing not found." if version >= 6 else None,
                group_id="missing",
                group_state="Dead",
            ),
        ]
    )


Sample = Callable[[int], Any]

SAMPLES: dict[str, tuple[Message, Sample]] = {
    "heartbeat-join": (
        SHARE_GROUP_HEARTBEAT_REQUEST,
        lambda v: ShareGroupHeartbeatRequest(
            group_id="queue-g",
            member_id="m-1",
            member_epoch=0,
            rack_id="rack-a",
            subscribed_topic_names=["orders", "payments"],
        ),
    ),
    "heartbeat-steady": (
        SHARE_GROUP_HEARTBEAT_REQUEST,
        lambda v: ShareGroupHeartbeatRequest(group_id="queue-g", member_id="m-1", member_epoch=7),
    ),
    "heartbeat-response-assigned": (
        SHARE_GROUP_HEARTBEAT_RESPONSE,
        lambda v: ShareGroupHeartbeatResponse(
            member_id="m-1",
            member_epoch=3,
            heartbeat_interval_ms=5000,
            assignment=ShareGroupHeartbeatResponseAssignment(
                topic_partitions=[
                    ShareGroupHeartbeatResponseTopicPartition(topic_id=TOPIC_A, partitions=[0, 2]),
                    ShareGroupHeartbeatResponseTopicPartition(topic_id=TOPIC_B, partitions=[1]),
                ]
            ),
        ),
    ),
    "heartbeat-response-error": (
        SHARE_GROUP_HEARTBEAT_RESPONSE,
        lambda v: ShareGroupHeartbeatResponse(
            error_code=NOT_COORDINATOR, error_message="not the coordinator"
        ),
    ),
    "describe-request": (
        SHARE_GROUP_DESCRIBE_REQUEST,
        lambda v: ShareGroupDescribeRequest(
            group_ids=["g1", "g2"], include_authorized_operations=True
        ),
    ),
    "describe-response": (SHARE_GROUP_DESCRIBE_RESPONSE, _describe_response),
    "fetch-request-defaults": (SHARE_FETCH_REQUEST, lambda v: ShareFetchRequest()),
    "fetch-request-open": (SHARE_FETCH_REQUEST, _fetch_request_open),
    "fetch-request-acks": (SHARE_FETCH_REQUEST, _fetch_request_acks),
    "fetch-response-records": (SHARE_FETCH_RESPONSE, _fetch_response),
    "fetch-response-error": (
        SHARE_FETCH_RESPONSE,
        lambda v: ShareFetchResponse(
            error_code=SHARE_SESSION_NOT_FOUND, error_message="no share session"
        ),
    ),
    "ack-request": (SHARE_ACKNOWLEDGE_REQUEST, _ack_request),
    "ack-response": (SHARE_ACKNOWLEDGE_RESPONSE, _ack_response),
    "describe-offsets-request": (
        DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST,
        lambda v: DescribeShareGroupOffsetsRequest(
            groups=[
                DescribeShareGroupOffsetsRequestGroup(group_id="g1", topics=None),
                DescribeShareGroupOffsetsRequestGroup(
                    group_id="g2",
                    topics=[
                        DescribeShareGroupOffsetsRequestTopic(
                            topic_name="orders", partitions=[0, 1, 2]
                        )
                    ],
                ),
            ]
        ),
    ),
    "describe-offsets-response": (
        DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE,
        _describe_offsets_response,
    ),
    "alter-offsets-request": (
        ALTER_SHARE_GROUP_OFFSETS_REQUEST,
        lambda v: AlterShareGroupOffsetsRequest(
            group_id="g1",
            topics=[
                AlterShareGroupOffsetsRequestTopic(
                    topic_name="orders",
                    partitions=[
                        AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0),
                        AlterShareGroupOffsetsRequestPartition(1, start_offset=1234567890123),
                    ],
                )
            ],
        ),
    ),
    "alter-offsets-response": (
        ALTER_SHARE_GROUP_OFFSETS_RESPONSE,
        lambda v: AlterShareGroupOffsetsResponse(
            responses=[
                AlterShareGroupOffsetsResponseResponse(
                    topic_name="orders",
                    topic_id=TOPIC_A,
                    partitions=[
                        AlterShareGroupOffsetsResponsePartition(partition_index=0),
                        AlterShareGroupOffsetsResponsePartition(
                            partition_index=9,
                            error_code=UNKNOWN_TOPIC_OR_PARTITION,
                            error_message="no partition 9",
                        ),
                    ],
                )
            ]
        ),
    ),
    "delete-offsets-request": (
        DELETE_SHARE_GROUP_OFFSETS_REQUEST,
        lambda v: DeleteShareGroupOffsetsRequest(
            group_id="g1",
            topics=[
                DeleteShareGroupOffsetsRequestTopic(topic_name="orders"),
                DeleteShareGroupOffsetsRequestTopic(topic_name="gone"),
            ],
        ),
    ),
    "delete-offsets-response": (
        DELETE_SHARE_GROUP_OFFSETS_RESPONSE,
        lambda v: DeleteShareGroupOffsetsResponse(
            throttle_time_ms=1,
            responses=[
                DeleteShareGroupOffsetsResponseResponse(topic_name="orders", topic_id=TOPIC_A),
                DeleteShareGroupOffsetsResponseResponse(
                    topic_name="gone",
                    error_code=UNKNOWN_TOPIC_OR_PARTITION,
                    error_message="no such topic",
                ),
            ],
        ),
    ),
    "list-groups-request": (
        LIST_GROUPS_REQUEST,
        lambda v: ListGroupsRequest(states_filter=["Stable", "Empty"], types_filter=["share"]),
    ),
    "list-groups-response": (
        LIST_GROUPS_RESPONSE,
        lambda v: ListGroupsResponse(
            groups=[
                ListGroupsResponseGroup("g1", "consumer", "Stable", "consumer"),
                ListGroupsResponseGroup("q1", "share", "Empty", "share"),
            ]
        ),
    ),
    "describe-groups-request": (
        DESCRIBE_GROUPS_REQUEST,
        lambda v: DescribeGroupsRequest(
            groups=["g1", "missing"], include_authorized_operations=True
        ),
    ),
    "describe-groups-response": (DESCRIBE_GROUPS_RESPONSE, _describe_groups_response),
}

KAFKA_CASES = sorted(KAFKA_BYTES)


def _case_id(case: tuple[str, int]) -> str:
    return f"{case[0]}-v{case[1]}"


# -- byte for byte with Kafka ---------------------------------------------------------


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
        # Compared on the fields the version has: the sample may set a later version's.
        assert plain(message.as_container(decoded, version)) == plain(
            message.as_container(sample(version), version)
        )


def test_every_share_group_api_version_is_checked_against_kafka_both_ways() -> None:
    checked = {(message_name, version) for (_, version), (message_name, _) in KAFKA_BYTES.items()}
    for api in SHARE_GROUP_APIS:
        for version in range(api.versions[0], api.versions[1] + 1):
            assert (api.request.name, version) in checked
            assert (api.response.name, version) in checked


# -- what the fixtures show, spelled out ----------------------------------------------


def test_a_share_fetch_partition_without_records_sends_an_empty_record_set() -> None:
    """Records are non-nullable from ShareFetch v1 (Kafka's client refuses a null), so a
    partition that fetched nothing carries zero bytes of records, not null."""
    body = ShareFetchResponse(
        responses=[ShareFetchResponseResponse(TOPIC_A, [ShareFetchResponsePartition(0)])]
    )
    for version in (1, 2):
        encoded = SHARE_FETCH_RESPONSE.build(body, version)
        partition = SHARE_FETCH_RESPONSE.parse(FrameIO(encoded), version).responses[0].partitions[0]
        assert bytes(partition.records) == b""


def test_share_fetch_v2_adds_the_acquire_mode_and_renew_flag_after_batch_size() -> None:
    body = ShareFetchRequest(
        member_id="m", max_records=5, batch_size=5, share_acquire_mode=1, is_renew_ack=True
    )
    v1 = SHARE_FETCH_REQUEST.build(body, 1)
    v2 = SHARE_FETCH_REQUEST.build(body, 2)
    assert v2 == v1[: len(v1) - 3] + b"\x01\x01" + v1[-3:]  # then topics, forgotten, tags


def test_describe_share_group_offsets_v1_adds_the_lag_after_the_leader_epoch() -> None:
    body = _describe_offsets_response(1)
    v0 = DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE.build(body, 0)
    v1 = DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE.build(body, 1)
    assert len(v1) - len(v0) == 2 * 8  # one int64 per partition
    decoded = DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE.parse(FrameIO(v0), 0)
    assert [p.lag for p in decoded.groups[0].topics[0].partitions] == [-1, -1]


# -- round trips at every version -----------------------------------------------------

SHARE_VERSIONS = [
    (api, version)
    for api in SHARE_GROUP_APIS
    for version in range(api.versions[0], api.versions[1] + 1)
]


def _api_id(case: tuple[Api, int]) -> str:
    api, version = case
    return f"{api.request.name.removesuffix('Request')}-v{version}"


@pytest.mark.parametrize("case", SHARE_VERSIONS, ids=_api_id)
@pytest.mark.parametrize("seed", range(3))
def test_every_share_group_version_round_trips_random_values(
    case: tuple[Api, int], seed: int
) -> None:
    api, version = case
    for message in (api.request, api.response):
        body = sample_struct(message.construct_for(version), random.Random(f"{seed}{version}"))
        encoded = message.build(body, version)
        assert message.build(body, version, compiled=False) == encoded
        for compiled in (True, False):
            decoded = message.parse(FrameIO(encoded), version, compiled=compiled)
            assert plain(decoded) == plain(message.value_of(body))
