"""The group APIs' rules (KafkaApis' group handlers): a member's requests need
READ on its group, describing needs DESCRIBE, deleting DELETE; committed offsets
need READ (commit) or DESCRIBE (fetch) on each topic as well."""

from __future__ import annotations

from typing import Any

from weir.broker.authorization.gate import Gate, allowed, refused
from weir.broker.authorization.rules_shared import (
    ERROR_MESSAGES,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    allowed_names,
    allows_quietly,
    appending,
    filtering,
    prepending,
    served_with,
    split,
)
from weir.broker.handlers.context import RequestContext
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.security.acl import CLUSTER, AclOperation, Resource, ResourceType
from weir.wire.messages.committed_offsets import (
    OffsetCommitRequest,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponseGroupTopic,
    OffsetFetchResponseGroupTopicPartition,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from weir.wire.messages.consumer_groups import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeResponseGroup,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from weir.wire.messages.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponseResult,
    DescribeGroupsRequest,
    DescribeGroupsResponseGroup,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponseGroup,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
    SyncGroupRequest,
    SyncGroupResponse,
)

READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
GROUP = ResourceType.GROUP

# -- FindCoordinator -------------------------------------------------------------------

GROUP_KEY, TRANSACTION_KEY = 0, 1
FIRST_BATCHED_FIND_COORDINATOR_VERSION = 4


def find_coordinator(
    authorization: RequestAuthorization, ctx: RequestContext, request: FindCoordinatorRequest
) -> Gate[FindCoordinatorRequest, Any]:
    """DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the transactional id
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) each key names."""
    key_type = request.key_type
    if ctx.api_version < FIRST_BATCHED_FIND_COORDINATOR_VERSION:
        error = _coordinator_key_error(authorization, key_type, request.key)
        if error is None:
            return allowed(request)
        return refused(
            FindCoordinatorResponse(
                error_code=error, error_message=ERROR_MESSAGES[error], node_id=-1, host="", port=-1
            )
        )
    errors = {
        key: _coordinator_key_error(authorization, key_type, key)
        for key in request.coordinator_keys
    }
    denied = {key: error for key, error in errors.items() if error is not None}
    if not denied:
        return allowed(request)
    request.coordinator_keys = [key for key in request.coordinator_keys if key not in denied]
    entries = [
        FindCoordinatorResponseCoordinator(key=key, node_id=-1, host="", port=-1, error_code=error)
        for key, error in denied.items()
    ]
    return served_with(request, appending("coordinators", entries))


def _coordinator_key_error(
    authorization: RequestAuthorization, key_type: int, key: str
) -> int | None:
    if key_type == GROUP_KEY and not authorization.allows_group(DESCRIBE, key):
        return GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION_KEY and not authorization.allows_transactional_id(DESCRIBE, key):
        return TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None


# -- OffsetCommit, OffsetDelete --------------------------------------------------------


def offset_commit(
    authorization: RequestAuthorization, ctx: RequestContext, request: OffsetCommitRequest
) -> Gate[OffsetCommitRequest, Any]:
    """READ on the group (every partition GROUP_AUTHORIZATION_FAILED), then READ
    on each topic (its partitions TOPIC_AUTHORIZATION_FAILED)."""
    if not authorization.allows_group(READ, request.group_id):
        return refused(
            OffsetCommitResponse(topics=_commit_entries(request.topics, GROUP_AUTHORIZATION_FAILED))
        )
    kept, denied = split(authorization, READ, request.topics, lambda topic: topic.name)
    if not denied:
        return allowed(request)
    request.topics = kept
    entries = _commit_entries(denied, TOPIC_AUTHORIZATION_FAILED)
    return served_with(request, appending("topics", entries))


def _commit_entries(
    topics: list[OffsetCommitRequestTopic], error: int
) -> list[OffsetCommitResponseTopic]:
    return [
        OffsetCommitResponseTopic(
            name=topic.name,
            partitions=[
                OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=error)
                for p in topic.partitions
            ],
        )
        for topic in topics
    ]


def offset_delete(
    authorization: RequestAuthorization, ctx: RequestContext, request: OffsetDeleteRequest
) -> Gate[OffsetDeleteRequest, Any]:
    """DELETE on the group (the top-level error), then READ on each topic."""
    if not authorization.allows_group(DELETE, request.group_id):
        return refused(OffsetDeleteResponse(error_code=GROUP_AUTHORIZATION_FAILED))
    kept, denied = split(authorization, READ, request.topics, lambda topic: topic.name)
    if not denied:
        return allowed(request)
    request.topics = kept
    entries = [
        OffsetDeleteResponseTopic(
            name=topic.name,
            partitions=[
                OffsetDeleteResponsePartition(
                    partition_index=p.partition_index, error_code=TOPIC_AUTHORIZATION_FAILED
                )
                for p in topic.partitions
            ],
        )
        for topic in denied
    ]
    return served_with(request, appending("topics", entries))


# -- OffsetFetch -----------------------------------------------------------------------

FIRST_BATCHED_OFFSET_FETCH_VERSION = 8
FIRST_TOP_LEVEL_ERROR_OFFSET_FETCH_VERSION = 2
NO_OFFSET = -1


def offset_fetch(
    authorization: RequestAuthorization, ctx: RequestContext, request: OffsetFetchRequest
) -> Gate[OffsetFetchRequest, Any]:
    """DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for the group), then
    DESCRIBE on each topic: named topics the session may not describe are answered
    TOPIC_AUTHORIZATION_FAILED per partition; asked for all of a group's offsets,
    those topics are left out."""
    if ctx.api_version < FIRST_BATCHED_OFFSET_FETCH_VERSION:
        return _offset_fetch_one_group(authorization, ctx, request)
    groups = request.groups
    denied_groups = [
        g.group_id for g in groups if not authorization.allows_group(DESCRIBE, g.group_id)
    ]
    request.groups = [g for g in groups if g.group_id not in denied_groups]
    denied_topics: dict[str, list[OffsetFetchResponseGroupTopic]] = {}
    for group in request.groups:
        if group.topics is None:
            continue
        group.topics, denied = split(authorization, DESCRIBE, group.topics, lambda t: t.name)
        if denied:
            denied_topics[group.group_id] = [
                OffsetFetchResponseGroupTopic(
                    name=topic.name,
                    partitions=[
                        OffsetFetchResponseGroupTopicPartition(
                            partition_index=index,
                            committed_offset=NO_OFFSET,
                            error_code=TOPIC_AUTHORIZATION_FAILED,
                        )
                        for index in topic.partition_indexes
                    ],
                )
                for topic in denied
            ]
    all_topics = {g.group_id for g in request.groups if g.topics is None}
    if not denied_groups and not denied_topics and not all_topics:
        return allowed(request)
    describable = _topic_filter(authorization)

    def complete(response: OffsetFetchResponse) -> OffsetFetchResponse:
        for group in response.groups:
            if group.error_code != 0:
                continue
            if group.group_id in all_topics:
                group.topics = [t for t in group.topics if describable(t.name)]
            group.topics.extend(denied_topics.get(group.group_id, []))
        response.groups.extend(
            OffsetFetchResponseGroup(group_id=g, error_code=GROUP_AUTHORIZATION_FAILED)
            for g in denied_groups
        )
        return response

    return Gate(request, complete=complete)


def _offset_fetch_one_group(
    authorization: RequestAuthorization, ctx: RequestContext, request: OffsetFetchRequest
) -> Gate[OffsetFetchRequest, Any]:
    if not authorization.allows_group(DESCRIBE, request.group_id):
        if ctx.api_version >= FIRST_TOP_LEVEL_ERROR_OFFSET_FETCH_VERSION:
            return refused(OffsetFetchResponse(error_code=GROUP_AUTHORIZATION_FAILED))
        # v1 has no top-level error: each named partition carries it.
        return refused(
            OffsetFetchResponse(
                topics=_one_group_entries(request.topics or [], GROUP_AUTHORIZATION_FAILED)
            )
        )
    if request.topics is None:
        describable = _topic_filter(authorization)

        def hide(response: OffsetFetchResponse) -> OffsetFetchResponse:
            response.topics = [t for t in response.topics if describable(t.name)]
            return response

        return Gate(request, complete=hide)
    kept, denied = split(authorization, DESCRIBE, request.topics, lambda t: t.name)
    if not denied:
        return allowed(request)
    request.topics = kept
    entries = _one_group_entries(denied, TOPIC_AUTHORIZATION_FAILED)

    def complete(response: OffsetFetchResponse) -> OffsetFetchResponse:
        if response.error_code == 0:
            response.topics.extend(entries)
        return response

    return Gate(request, complete=complete)


def _one_group_entries(topics: list[Any], error: int) -> list[OffsetFetchResponseTopic]:
    return [
        OffsetFetchResponseTopic(
            name=topic.name,
            partitions=[
                OffsetFetchResponsePartition(
                    partition_index=index, committed_offset=NO_OFFSET, error_code=error
                )
                for index in topic.partition_indexes
            ],
        )
        for topic in topics
    ]


def _topic_filter(authorization: RequestAuthorization) -> Any:
    cache: dict[str, bool] = {}

    def describable(name: str) -> bool:
        if name not in cache:
            cache[name] = authorization.allows_topic(DESCRIBE, name)
        return cache[name]

    return describable


# -- The classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------


def join_group(
    authorization: RequestAuthorization, ctx: RequestContext, request: JoinGroupRequest
) -> Gate[JoinGroupRequest, Any]:
    if authorization.allows_group(READ, request.group_id):
        return allowed(request)
    return refused(
        JoinGroupResponse(
            error_code=GROUP_AUTHORIZATION_FAILED,
            generation_id=-1,
            protocol_name="",
            leader="",
            member_id="",
        )
    )


def sync_group(
    authorization: RequestAuthorization, ctx: RequestContext, request: SyncGroupRequest
) -> Gate[SyncGroupRequest, Any]:
    if authorization.allows_group(READ, request.group_id):
        return allowed(request)
    return refused(SyncGroupResponse(error_code=GROUP_AUTHORIZATION_FAILED, assignment=b""))


def heartbeat(
    authorization: RequestAuthorization, ctx: RequestContext, request: HeartbeatRequest
) -> Gate[HeartbeatRequest, Any]:
    if authorization.allows_group(READ, request.group_id):
        return allowed(request)
    return refused(HeartbeatResponse(error_code=GROUP_AUTHORIZATION_FAILED))


def leave_group(
    authorization: RequestAuthorization, ctx: RequestContext, request: LeaveGroupRequest
) -> Gate[LeaveGroupRequest, Any]:
    if authorization.allows_group(READ, request.group_id):
        return allowed(request)
    return refused(LeaveGroupResponse(error_code=GROUP_AUTHORIZATION_FAILED))


# -- KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe ----------------------------


def consumer_group_heartbeat(
    authorization: RequestAuthorization, ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> Gate[ConsumerGroupHeartbeatRequest, Any]:
    """READ on the group; then DESCRIBE on every subscribed topic named, or the
    heartbeat is refused as a whole (TOPIC_AUTHORIZATION_FAILED)."""
    if not authorization.allows_group(READ, request.group_id):
        return refused(_heartbeat_refusal(GROUP_AUTHORIZATION_FAILED))
    subscribed = request.subscribed_topic_names
    if subscribed:
        permitted = allowed_names(authorization, DESCRIBE, ResourceType.TOPIC, subscribed)
        if len(permitted) < len(set(subscribed)):
            return refused(_heartbeat_refusal(TOPIC_AUTHORIZATION_FAILED))
    return allowed(request)


def _heartbeat_refusal(error: int) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        error_code=error, error_message=ERROR_MESSAGES[error], member_id=None, member_epoch=-1
    )


def consumer_group_describe(
    authorization: RequestAuthorization, ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> Gate[ConsumerGroupDescribeRequest, Any]:
    """DESCRIBE on each group; refused groups come first, as in Kafka. A described
    group assigning a topic the session may not describe (a member's current or
    target assignment, KAFKA-18813) is answered TOPIC_AUTHORIZATION_FAILED
    instead, without its description."""
    kept, denied = split(authorization, DESCRIBE, request.group_ids, lambda g: g, GROUP)
    request.group_ids = kept
    entries = [
        ConsumerGroupDescribeResponseGroup(error_code=GROUP_AUTHORIZATION_FAILED, group_id=group_id)
        for group_id in denied
    ]
    describable = _topic_filter(authorization)

    def complete(response: ConsumerGroupDescribeResponse) -> ConsumerGroupDescribeResponse:
        described = [
            group
            if group.error_code != 0 or all(map(describable, _assigned_topics(group)))
            else ConsumerGroupDescribeResponseGroup(
                error_code=TOPIC_AUTHORIZATION_FAILED,
                error_message=HIDDEN_TOPICS_MESSAGE,
                group_id=group.group_id,
            )
            for group in response.groups
        ]
        response.groups = [*entries, *described]
        return response

    return Gate(request, complete=complete)


HIDDEN_TOPICS_MESSAGE = (
    "The group has described topic(s) that the client is not authorized to describe."
)


def _assigned_topics(group: ConsumerGroupDescribeResponseGroup) -> set[str]:
    topics: set[str] = set()
    for member in group.members:
        for assignment in (member.assignment, member.target_assignment):
            topics.update(tp.topic_name for tp in assignment.topic_partitions)
    return topics


# -- ListGroups, DescribeGroups, DeleteGroups ------------------------------------------


def list_groups(
    authorization: RequestAuthorization, ctx: RequestContext, request: ListGroupsRequest
) -> Gate[ListGroupsRequest, Any]:
    """DESCRIBE on the cluster lists every group; else only the groups the session
    may describe (neither denial is audited)."""
    if allows_quietly(authorization, DESCRIBE, CLUSTER):
        return allowed(request)

    def describable(group: ListGroupsResponseGroup) -> bool:
        return allows_quietly(authorization, DESCRIBE, Resource(GROUP, group.group_id))

    return served_with(request, filtering("groups", describable))


def describe_groups(
    authorization: RequestAuthorization, ctx: RequestContext, request: DescribeGroupsRequest
) -> Gate[DescribeGroupsRequest, Any]:
    """DESCRIBE on each group; the refused come first, as in Kafka."""
    kept, denied = split(authorization, DESCRIBE, request.groups, lambda g: g, GROUP)
    if not denied:
        return allowed(request)
    request.groups = kept
    entries = [
        DescribeGroupsResponseGroup(
            error_code=GROUP_AUTHORIZATION_FAILED,
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
        )
        for group_id in denied
    ]
    return served_with(request, prepending("groups", entries))


def delete_groups(
    authorization: RequestAuthorization, ctx: RequestContext, request: DeleteGroupsRequest
) -> Gate[DeleteGroupsRequest, Any]:
    """DELETE on each group."""
    names = list(dict.fromkeys(request.groups_names))
    kept, denied = split(authorization, DELETE, names, lambda g: g, GROUP)
    if not denied:
        return allowed(request)
    request.groups_names = kept
    entries = [
        DeleteGroupsResponseResult(group_id=group_id, error_code=GROUP_AUTHORIZATION_FAILED)
        for group_id in denied
    ]
    return served_with(request, appending("results", entries))
