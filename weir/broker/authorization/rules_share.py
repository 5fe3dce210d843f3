"""Share groups' rules (Kafka 4.4's KafkaApis): ShareGroupHeartbeat, ShareGroupDescribe,
ShareFetch, ShareAcknowledge and the share-group offsets APIs.

- ShareGroupHeartbeat: READ on the group (else GROUP_AUTHORIZATION_FAILED), then
  DESCRIBE on every subscribed topic named (else TOPIC_AUTHORIZATION_FAILED, the
  whole heartbeat).
- ShareGroupDescribe: DESCRIBE on each group; refused groups come first.
- ShareFetch and ShareAcknowledge: READ on the group (else the whole request is
  answered GROUP_AUTHORIZATION_FAILED), READ on each topic: a refused topic's
  partitions are answered TOPIC_AUTHORIZATION_FAILED (fetch and acknowledgement)
  and never reach the share session.
- DescribeShareGroupOffsets: DESCRIBE on each group (else that group's entry is
  GROUP_AUTHORIZATION_FAILED, no message); the topics named need DESCRIBE (a refused
  one is answered after the others, each partition TOPIC_AUTHORIZATION_FAILED with
  start offset and lag -1); "every topic" (null) leaves out, silently, the topics the
  session may not describe.
- AlterShareGroupOffsets: READ on the group (else the whole request is refused
  GROUP_AUTHORIZATION_FAILED), READ on each topic (a refused one's partitions are
  TOPIC_AUTHORIZATION_FAILED, first in the answer).
- DeleteShareGroupOffsets: DELETE on the group (else GROUP_AUTHORIZATION_FAILED), READ
  on each topic (a refused one's entry is TOPIC_AUTHORIZATION_FAILED, first).
A group-level error from the handler answers no topic entries, refused ones included,
as Kafka's error response has none.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol, TypeVar

from weir.broker.authorization.gate import Gate, allowed, refused
from weir.broker.authorization.rules_shared import (
    ERROR_MESSAGES,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    allowed_names,
    appending,
    prepending,
    served_with,
    split,
)
from weir.broker.handlers.context import RequestContext
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.security.acl import AclOperation, ResourceType
from weir.wire.messages.share_groups import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeResponsePartition,
    ShareAcknowledgeResponseResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareFetchResponsePartition,
    ShareFetchResponseResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponseGroup,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

READ = AclOperation.READ
DESCRIBE = AclOperation.DESCRIBE
DELETE = AclOperation.DELETE
ZERO_UUID = uuid.UUID(int=0)


def share_group_heartbeat(
    authorization: RequestAuthorization, ctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> Gate[ShareGroupHeartbeatRequest, Any]:
    if not authorization.allows_group(READ, request.group_id):
        return refused(_heartbeat_refusal(GROUP_AUTHORIZATION_FAILED))
    subscribed = request.subscribed_topic_names
    if subscribed:
        permitted = allowed_names(authorization, DESCRIBE, ResourceType.TOPIC, subscribed)
        if len(permitted) < len(set(subscribed)):
            return refused(_heartbeat_refusal(TOPIC_AUTHORIZATION_FAILED))
    return allowed(request)


def _heartbeat_refusal(error: int) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(
        error_code=error, error_message=ERROR_MESSAGES[error], member_id=None, member_epoch=-1
    )


def share_group_describe(
    authorization: RequestAuthorization, ctx: RequestContext, request: ShareGroupDescribeRequest
) -> Gate[ShareGroupDescribeRequest, Any]:
    kept, denied = split(
        authorization, DESCRIBE, request.group_ids, lambda g: g, ResourceType.GROUP
    )
    request.group_ids = kept
    entries = [
        ShareGroupDescribeResponseGroup(
            error_code=GROUP_AUTHORIZATION_FAILED,
            error_message=ERROR_MESSAGES[GROUP_AUTHORIZATION_FAILED],
            group_id=group_id,
        )
        for group_id in denied
    ]
    return served_with(request, prepending("groups", entries))


def _topic_name(ctx: RequestContext, topic_id: uuid.UUID) -> str | None:
    record = ctx.broker.controller.topic_by_id(topic_id)
    return None if record is None else record.name


def _denied_topic_ids(
    authorization: RequestAuthorization, ctx: RequestContext, topic_ids: list[uuid.UUID]
) -> set[uuid.UUID]:
    """The known topics among `topic_ids` the session may not read (unknown ids are
    the handler's: UNKNOWN_TOPIC_ID)."""
    names = {topic_id: _topic_name(ctx, topic_id) for topic_id in topic_ids}
    permitted = allowed_names(
        authorization, READ, ResourceType.TOPIC, (n for n in names.values() if n is not None)
    )
    return {t for t, n in names.items() if n is not None and n not in permitted}


GROUP_REFUSED = ERROR_MESSAGES[GROUP_AUTHORIZATION_FAILED]


class _HasTopicId(Protocol):
    topic_id: uuid.UUID


TopicT = TypeVar("TopicT", bound=_HasTopicId)


def _split_topics(
    authorization: RequestAuthorization, ctx: RequestContext, topics: list[TopicT]
) -> tuple[list[TopicT], list[TopicT]]:
    """`topics` split into those the session may read and those it may not."""
    denied = _denied_topic_ids(authorization, ctx, [t.topic_id for t in topics])
    return [t for t in topics if t.topic_id not in denied], [
        t for t in topics if t.topic_id in denied
    ]


def share_fetch(
    authorization: RequestAuthorization, ctx: RequestContext, request: ShareFetchRequest
) -> Gate[ShareFetchRequest, Any]:
    if not authorization.allows_group(READ, request.group_id or ""):
        return refused(ShareFetchResponse(error_code=GROUP_AUTHORIZATION_FAILED,
                                          error_message=GROUP_REFUSED))  # fmt: skip
    request.topics, refused_topics = _split_topics(authorization, ctx, request.topics)
    if not refused_topics:
        return allowed(request)
    entries = [
        ShareFetchResponseResponse(
            topic_id=topic.topic_id,
            partitions=[
                ShareFetchResponsePartition(
                    partition_index=p.partition_index,
                    error_code=TOPIC_AUTHORIZATION_FAILED,
                    error_message=ERROR_MESSAGES[TOPIC_AUTHORIZATION_FAILED],
                    acknowledge_error_code=(
                        TOPIC_AUTHORIZATION_FAILED if p.acknowledgement_batches else 0
                    ),
                )
                for p in topic.partitions
            ],
        )
        for topic in refused_topics
    ]
    return served_with(request, appending("responses", entries))


def share_acknowledge(
    authorization: RequestAuthorization, ctx: RequestContext, request: ShareAcknowledgeRequest
) -> Gate[ShareAcknowledgeRequest, Any]:
    if not authorization.allows_group(READ, request.group_id or ""):
        return refused(ShareAcknowledgeResponse(error_code=GROUP_AUTHORIZATION_FAILED,
                                                error_message=GROUP_REFUSED))  # fmt: skip
    request.topics, refused_topics = _split_topics(authorization, ctx, request.topics)
    if not refused_topics:
        return allowed(request)
    entries = [
        ShareAcknowledgeResponseResponse(
            topic_id=topic.topic_id,
            partitions=[
                ShareAcknowledgeResponsePartition(
                    partition_index=p.partition_index,
                    error_code=TOPIC_AUTHORIZATION_FAILED,
                    error_message=ERROR_MESSAGES[TOPIC_AUTHORIZATION_FAILED],
                )
                for p in topic.partitions
            ],
        )
        for topic in refused_topics
    ]
    return served_with(request, appending("responses", entries))


# -- the share-group offsets APIs (90-92) ---------------------------------------------


def describe_share_group_offsets(
    authorization: RequestAuthorization,
    ctx: RequestContext,
    request: DescribeShareGroupOffsetsRequest,
) -> Gate[DescribeShareGroupOffsetsRequest, Any]:
    kept, denied = split(
        authorization, DESCRIBE, request.groups, lambda g: g.group_id, ResourceType.GROUP
    )
    request.groups = kept
    refused_topics: dict[int, list[DescribeShareGroupOffsetsResponseTopic]] = {}
    for index, group in enumerate(kept):
        if not group.topics:
            continue
        group.topics, denied_topics = split(
            authorization, DESCRIBE, group.topics, lambda t: t.topic_name
        )
        if denied_topics:
            refused_topics[index] = [
                DescribeShareGroupOffsetsResponseTopic(
                    topic_name=topic.topic_name,
                    partitions=[_describe_refusal(p) for p in topic.partitions],
                )
                for topic in denied_topics
            ]
    everything = [index for index, group in enumerate(kept) if group.topics is None]
    refused_groups = [
        DescribeShareGroupOffsetsResponseGroup(
            group_id=group.group_id, error_code=GROUP_AUTHORIZATION_FAILED
        )
        for group in denied
    ]

    def complete(response: DescribeShareGroupOffsetsResponse) -> DescribeShareGroupOffsetsResponse:
        for index, group in enumerate(response.groups):
            if group.error_code:
                continue
            if index in everything:
                describable = allowed_names(
                    authorization,
                    DESCRIBE,
                    ResourceType.TOPIC,
                    (t.topic_name for t in group.topics),
                    audit_denial=False,
                )
                group.topics = [t for t in group.topics if t.topic_name in describable]
            group.topics.extend(refused_topics.get(index, []))
        response.groups = [*refused_groups, *response.groups]
        return response

    return served_with(request, complete)


def _describe_refusal(partition: int) -> DescribeShareGroupOffsetsResponsePartition:
    return DescribeShareGroupOffsetsResponsePartition(
        partition_index=partition,
        start_offset=-1,
        lag=-1,
        error_code=TOPIC_AUTHORIZATION_FAILED,
        error_message=ERROR_MESSAGES[TOPIC_AUTHORIZATION_FAILED],
    )


def _topic_id(ctx: RequestContext, name: str) -> uuid.UUID:
    record = ctx.broker.controller.topic(name)
    return ZERO_UUID if record is None else record.topic_id


def alter_share_group_offsets(
    authorization: RequestAuthorization, ctx: RequestContext, request: AlterShareGroupOffsetsRequest
) -> Gate[AlterShareGroupOffsetsRequest, Any]:
    if not authorization.allows_group(READ, request.group_id):
        return refused(
            AlterShareGroupOffsetsResponse(
                error_code=GROUP_AUTHORIZATION_FAILED,
                error_message=ERROR_MESSAGES[GROUP_AUTHORIZATION_FAILED],
            )
        )
    request.topics, denied = split(authorization, READ, request.topics, lambda t: t.topic_name)
    entries = [
        AlterShareGroupOffsetsResponseResponse(
            topic_name=topic.topic_name,
            topic_id=_topic_id(ctx, topic.topic_name),
            partitions=[
                AlterShareGroupOffsetsResponsePartition(
                    partition_index=p.partition_index,
                    error_code=TOPIC_AUTHORIZATION_FAILED,
                    error_message=ERROR_MESSAGES[TOPIC_AUTHORIZATION_FAILED],
                )
                for p in topic.partitions
            ],
        )
        for topic in denied
    ]
    return served_with(request, _prepending_unless_failed(entries) if entries else None)


def delete_share_group_offsets(
    authorization: RequestAuthorization,
    ctx: RequestContext,
    request: DeleteShareGroupOffsetsRequest,
) -> Gate[DeleteShareGroupOffsetsRequest, Any]:
    if not authorization.allows_group(DELETE, request.group_id):
        return refused(
            DeleteShareGroupOffsetsResponse(
                error_code=GROUP_AUTHORIZATION_FAILED,
                error_message=ERROR_MESSAGES[GROUP_AUTHORIZATION_FAILED],
            )
        )
    request.topics, denied = split(authorization, READ, request.topics, lambda t: t.topic_name)
    entries = [
        DeleteShareGroupOffsetsResponseResponse(
            topic_name=topic.topic_name,
            error_code=TOPIC_AUTHORIZATION_FAILED,
            error_message=ERROR_MESSAGES[TOPIC_AUTHORIZATION_FAILED],
        )
        for topic in denied
    ]
    return served_with(request, _prepending_unless_failed(entries) if entries else None)


def _prepending_unless_failed(entries: list[Any]) -> Any:
    """Put the refused topics' `entries` first in `responses`, unless the handler
    answered a group-level error (Kafka's error response lists no topic)."""

    def complete(response: Any) -> Any:
        if response.error_code == 0:
            response.responses = [*entries, *response.responses]
        return response

    return complete
