"""The data path's rules: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
Metadata and DeleteRecords (KafkaApis' handleProduceRequest, handleFetchRequest,
handleListOffsetRequest, handleOffsetForLeaderEpochRequest,
handleTopicMetadataRequest, handleDeleteRecordsRequest).

A topic the session may not touch is answered TOPIC_AUTHORIZATION_FAILED per
partition, before anything else is checked (so it never tells whether the topic
exists); the rest of the request is served as if the refused topics were never
asked for."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from weir.broker.authorization.gate import Gate, allowed, refused
from weir.broker.authorization.rules_shared import (
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    allowed_names,
    allows_quietly,
    appending,
    filtering,
    served_with,
    split,
)
from weir.broker.handlers.context import EncodedResponse, RequestContext
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.security.acl import AclOperation, Resource, ResourceType
from weir.wire.messages.fetch import (
    FetchRequest,
    FetchRequestTopic,
    FetchResponse,
    FetchResponsePartition,
    FetchResponseResponse,
)
from weir.wire.messages.leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponsePartition,
    OffsetForLeaderEpochResponseTopic,
)
from weir.wire.messages.list_offsets import (
    ListOffsetsRequest,
    ListOffsetsResponsePartition,
    ListOffsetsResponseTopic,
)
from weir.wire.messages.metadata import MetadataRequest, MetadataResponseTopic
from weir.wire.messages.produce import (
    ProduceRequest,
    ProduceRequestTopicData,
    ProduceResponse,
    ProduceResponsePartitionResponse,
    ProduceResponseResponse,
)
from weir.wire.messages.records import (
    DeleteRecordsRequest,
    DeleteRecordsResponsePartition,
    DeleteRecordsResponseTopic,
)
from weir.wire.protocol import ApiKey, decode_response, encode_response

READ, WRITE, DESCRIBE, DELETE = (
    AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DELETE,
)  # fmt: skip
ZERO_UUID = uuid.UUID(int=0)

# -- Produce ---------------------------------------------------------------------------

# A RecordBatch v2's magic byte, and its attributes' low byte with the transactional bit.
_MAGIC_AT, _ATTRIBUTES_LOW_AT, _TRANSACTIONAL_BIT = 16, 22, 0x10


def produce(
    authorization: RequestAuthorization, ctx: RequestContext, request: ProduceRequest
) -> Gate[ProduceRequest, Any]:
    """Transactional records need WRITE on the transactional id (a request without
    one is refused as a whole); then WRITE on each topic."""
    if _has_transactional_records(request):
        transactional_id = request.transactional_id
        if transactional_id is None or not authorization.allows_transactional_id(
            WRITE, transactional_id
        ):
            return refused(_produce_refusal(request, TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    kept, denied = split(authorization, WRITE, request.topic_data, _produce_topic_name)
    if not denied:
        return allowed(request)
    request.topic_data = kept
    entries = _produce_entries(denied, TOPIC_AUTHORIZATION_FAILED)
    version, correlation_id = ctx.api_version, ctx.header.correlation_id

    def complete(response: ProduceResponse | EncodedResponse) -> Any:
        # Produce encodes its own responses: the refused topics join the decoded one.
        if isinstance(response, EncodedResponse):
            _, decoded = decode_response(ApiKey.PRODUCE, version, memoryview(response.frame)[4:])
            decoded.responses.extend(entries)
            return EncodedResponse(
                encode_response(ApiKey.PRODUCE, version, correlation_id, decoded)
            )
        response.responses.extend(entries)
        return response

    return Gate(request, complete=complete)


def _produce_topic_name(topic: ProduceRequestTopicData) -> str:
    return topic.name


def _has_transactional_records(request: ProduceRequest) -> bool:
    """Kafka's test: some partition's first batch is transactional."""
    for topic in request.topic_data:
        for partition in topic.partition_data:
            records = partition.records
            if (
                records is not None
                and len(records) > _ATTRIBUTES_LOW_AT
                and records[_MAGIC_AT] >= 2
                and records[_ATTRIBUTES_LOW_AT] & _TRANSACTIONAL_BIT
            ):
                return True
    return False


def _produce_entries(
    topics: list[ProduceRequestTopicData], error: int
) -> list[ProduceResponseResponse]:
    return [
        ProduceResponseResponse(
            name=topic.name,
            partition_responses=[
                ProduceResponsePartitionResponse(
                    index=partition.index,
                    error_code=error,
                    base_offset=-1,
                    log_append_time_ms=-1,
                    log_start_offset=-1,
                )
                for partition in topic.partition_data
            ],
        )
        for topic in topics
    ]


def _produce_refusal(request: ProduceRequest, error: int) -> ProduceResponse | None:
    if request.acks == 0:
        return None  # acks=0 is never answered
    return ProduceResponse(responses=_produce_entries(request.topic_data, error))


# -- Fetch -----------------------------------------------------------------------------

FIRST_TOPIC_ID_FETCH_VERSION = 13
FIRST_REPLICA_STATE_FETCH_VERSION = 15


def fetch(
    authorization: RequestAuthorization, ctx: RequestContext, request: FetchRequest
) -> Gate[FetchRequest, Any]:
    """A follower's fetch (a replica id >= 0) needs CLUSTER_ACTION, else every
    partition is refused; a consumer's needs READ on each topic. Topics by an
    unknown id are left to the handler (UNKNOWN_TOPIC_ID)."""
    version = ctx.api_version
    replica_id = (
        request.replica_state.replica_id
        if version >= FIRST_REPLICA_STATE_FETCH_VERSION
        else request.replica_id
    )
    by_id = version >= FIRST_TOPIC_ID_FETCH_VERSION
    if replica_id >= 0:
        if authorization.allows_cluster(AclOperation.CLUSTER_ACTION):
            return allowed(request)
        return refused(
            FetchResponse(
                responses=[_fetch_entry(ctx, topic, by_id) for topic in request.topics],
            )
        )
    names = {id(topic): _fetch_topic_name(ctx, topic, by_id) for topic in request.topics}
    permitted = allowed_names(
        authorization, READ, ResourceType.TOPIC, (n for n in names.values() if n is not None)
    )
    denied = [
        topic
        for topic in request.topics
        if names[id(topic)] is not None and names[id(topic)] not in permitted
    ]
    if not denied:
        return allowed(request)
    refused_ids = {id(topic) for topic in denied}
    request.topics = [topic for topic in request.topics if id(topic) not in refused_ids]
    entries = [_fetch_entry(ctx, topic, by_id) for topic in denied]
    return served_with(request, appending("responses", entries))


def _fetch_topic_name(ctx: RequestContext, topic: FetchRequestTopic, by_id: bool) -> str | None:
    """The topic's name; None for an id no topic has."""
    if not by_id:
        return topic.topic
    record = ctx.broker.controller.topic_by_id(topic.topic_id)
    return None if record is None else record.name


def _fetch_entry(
    ctx: RequestContext, topic: FetchRequestTopic, by_id: bool
) -> FetchResponseResponse:
    name = _fetch_topic_name(ctx, topic, by_id) if by_id else topic.topic
    return FetchResponseResponse(
        topic=name or "",
        topic_id=topic.topic_id,
        partitions=[
            FetchResponsePartition(
                partition_index=partition.partition,
                error_code=TOPIC_AUTHORIZATION_FAILED,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
                records=b"",
            )
            for partition in topic.partitions
        ],
    )


# -- ListOffsets, OffsetForLeaderEpoch -------------------------------------------------


def list_offsets(
    authorization: RequestAuthorization, ctx: RequestContext, request: ListOffsetsRequest
) -> Gate[ListOffsetsRequest, Any]:
    """DESCRIBE on each topic."""
    kept, denied = split(authorization, DESCRIBE, request.topics, lambda topic: topic.name)
    if not denied:
        return allowed(request)
    request.topics = kept
    entries = [
        ListOffsetsResponseTopic(
            name=topic.name,
            partitions=[
                ListOffsetsResponsePartition(
                    partition_index=partition.partition_index,
                    error_code=TOPIC_AUTHORIZATION_FAILED,
                    timestamp=-1,
                    offset=-1,
                    leader_epoch=-1,
                )
                for partition in topic.partitions
            ],
        )
        for topic in denied
    ]
    return served_with(request, appending("topics", entries))


def offset_for_leader_epoch(
    authorization: RequestAuthorization, ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> Gate[OffsetForLeaderEpochRequest, Any]:
    """CLUSTER_ACTION (a follower's) covers every topic; else DESCRIBE on each
    (KIP-320: consumers ask too)."""
    if allows_quietly(authorization, AclOperation.CLUSTER_ACTION):
        return allowed(request)
    kept, denied = split(authorization, DESCRIBE, request.topics, lambda topic: topic.topic)
    if not denied:
        return allowed(request)
    request.topics = kept
    entries = [
        OffsetForLeaderEpochResponseTopic(
            topic=topic.topic,
            partitions=[
                OffsetForLeaderEpochResponsePartition(
                    error_code=TOPIC_AUTHORIZATION_FAILED,
                    partition=partition.partition,
                    leader_epoch=-1,
                    end_offset=-1,
                )
                for partition in topic.partitions
            ],
        )
        for topic in denied
    ]
    return served_with(request, appending("topics", entries))


# -- Metadata --------------------------------------------------------------------------


def metadata(
    authorization: RequestAuthorization, ctx: RequestContext, request: MetadataRequest
) -> Gate[MetadataRequest, Any]:
    """DESCRIBE on each topic. Asked for all topics, the ones the session may not
    describe are left out (their denials not audited); named (or by id), each is
    answered TOPIC_AUTHORIZATION_FAILED: by name with the zero id, by id without
    its name. Auto-creation's CREATE is the handler's to ask (it alone knows
    what is missing)."""
    requested = request.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        return served_with(request, filtering("topics", _describable(authorization)))
    controller = ctx.broker.controller
    kept, entries = [], []
    names: dict[str, bool] = {}
    for topic in requested:
        by_id = topic.topic_id != ZERO_UUID or topic.name is None
        if by_id:
            record = controller.topic_by_id(topic.topic_id) if topic.topic_id != ZERO_UUID else None
            if record is None:
                kept.append(topic)  # the handler answers UNKNOWN_TOPIC_ID
                continue
            name = record.name
        else:
            assert topic.name is not None
            name = topic.name
        if name not in names:
            names[name] = authorization.allows_topic(DESCRIBE, name)
        if names[name]:
            kept.append(topic)
        elif by_id:
            entries.append(_metadata_refusal(None, topic.topic_id))
        else:
            entries.append(_metadata_refusal(name, ZERO_UUID))
    if not entries:
        return allowed(request)
    request.topics = kept
    return served_with(request, appending("topics", entries))


def _describable(authorization: RequestAuthorization) -> Callable[[MetadataResponseTopic], bool]:
    def keep(topic: MetadataResponseTopic) -> bool:
        resource = Resource(ResourceType.TOPIC, topic.name or "")
        return allows_quietly(authorization, DESCRIBE, resource)

    return keep


def _metadata_refusal(name: str | None, topic_id: uuid.UUID) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=topic_id, is_internal=False
    )


# -- DeleteRecords ---------------------------------------------------------------------


def delete_records(
    authorization: RequestAuthorization, ctx: RequestContext, request: DeleteRecordsRequest
) -> Gate[DeleteRecordsRequest, Any]:
    """DELETE on each topic."""
    kept, denied = split(authorization, DELETE, request.topics, lambda topic: topic.name)
    if not denied:
        return allowed(request)
    request.topics = kept
    entries = [
        DeleteRecordsResponseTopic(
            name=topic.name,
            partitions=[
                DeleteRecordsResponsePartition(
                    partition_index=partition.partition_index,
                    low_watermark=-1,
                    error_code=TOPIC_AUTHORIZATION_FAILED,
                )
                for partition in topic.partitions
            ],
        )
        for topic in denied
    ]
    return served_with(request, appending("topics", entries))
