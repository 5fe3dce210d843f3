"""ConsumerGroupHeartbeat's checks, before anything changes: the request's fields
(`validate_request`), then the member it names (`find_member`, `leaving_member`:
epoch fencing and static membership). A failed check raises `RequestError` with
Kafka's error code and message, which the coordinator answers with; Kafka's checks
and messages are kept in Kafka's order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from weir.format.errors import ErrorCode
from weir.groupcoord.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    Member,
    OwnedPartitions,
    Partitions,
)
from weir.groupcoord.topic_regex import TopicRegexError, compile_topic_regex

SUBSCRIBED_TOPICS_PER_MEMBER_MAX = 10_000


class RequestError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _is_subset(owned: OwnedPartitions | None, assigned: Partitions) -> bool:
    if owned is None:
        return False
    return all(set(ps) <= assigned.get(t, frozenset()) for t, ps in owned)


def validate_request(
    group_id: str,
    member_id: str,
    member_epoch: int,
    instance_id: str | None,
    rack_id: str | None,
    rebalance_timeout_ms: int,
    subscribed_topic_names: Sequence[str] | None,
    subscribed_topic_regex: str | None,
    server_assignor: str | None,
    topic_partitions: OwnedPartitions | None,
    api_version: int,
    assignor_names: Collection[str],
) -> None:
    """Kafka's checks of the request's own fields (`assignor_names`: the supported ones)."""

    def invalid(message: str) -> RequestError:
        return RequestError(ErrorCode.INVALID_REQUEST, message)

    if not group_id:
        raise invalid("GroupId can't be empty.")
    if instance_id == "":
        raise invalid("InstanceId can't be empty.")
    if rack_id == "":
        raise invalid("RackId can't be empty.")
    if not member_id and (api_version >= 1 or member_epoch != JOIN_GROUP_MEMBER_EPOCH):
        # From v1 the client generates its member id (KIP-1082); v0 gets one on join.
        raise invalid("MemberId can't be empty.")
    if member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if topic_partitions is None or len(topic_partitions) > 0:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if subscribed_topic_names is None and not subscribed_topic_regex:
            raise invalid(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if rebalance_timeout_ms < -1:
        raise invalid("RebalanceTimeoutMs is invalid.")
    if subscribed_topic_names is not None and (
        len(subscribed_topic_names) > SUBSCRIBED_TOPICS_PER_MEMBER_MAX
    ):
        raise invalid("Too many subscribed topics.")
    if subscribed_topic_regex:
        # An empty regex (what librdkafka sends with name-only subscriptions)
        # means none.
        try:
            compile_topic_regex(subscribed_topic_regex)
        except TopicRegexError as exc:
            raise RequestError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(exc)) from None
    if server_assignor is not None and server_assignor not in assignor_names:
        raise RequestError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {server_assignor} is not supported. Supported assignors: "
            + ", ".join(sorted(assignor_names))
            + ".",
        )


def existing_group(groups: Mapping[str, ConsumerGroup], group_id: str) -> ConsumerGroup:
    group = groups.get(group_id)
    if group is None:
        # Kafka answers GROUP_ID_NOT_FOUND; UNKNOWN_MEMBER_ID makes every client
        # rejoin, which is also right after a restart that lost the group.
        raise RequestError(ErrorCode.UNKNOWN_MEMBER_ID, f"Consumer group {group_id} not found.")
    return group


def _check_epoch(member: Member, received: int, owned: OwnedPartitions | None) -> None:
    if received == JOIN_GROUP_MEMBER_EPOCH:
        return  # a (fenced) member may always rejoin with epoch 0 (KAFKA-19233)
    if received > member.member_epoch:
        raise RequestError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The member epoch {received} is ahead of the coordinator's "
            f"{member.member_epoch}. The member must abandon its partitions and rejoin.",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not _is_subset(owned, member.assigned)
    ):
        raise RequestError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The member epoch {received} is behind the coordinator's "
            f"{member.member_epoch}. The member must abandon its partitions and rejoin.",
        )


def find_member(
    group: ConsumerGroup | None,
    member_id: str,
    member_epoch: int,
    instance_id: str | None,
    owned: OwnedPartitions | None,
) -> tuple[Member | None, Member | None]:
    """(existing member or None for a new one, static member it replaces or None)."""
    joining = member_epoch == JOIN_GROUP_MEMBER_EPOCH
    if group is None:
        return None, None
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise RequestError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            return None, None
        _check_epoch(member, member_epoch, owned)
        return member, None
    existing_id = group.static_members.get(instance_id)
    existing = group.members.get(existing_id) if existing_id is not None else None
    if joining:
        if existing is None:
            member = group.members.get(member_id)
            return member, None
        if existing.member_id == member_id:
            return existing, None
        if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise RequestError(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} cannot join "
                f"the group because the instance id is owned by member {existing.member_id}.",
            )
        return None, existing
    if existing is None:
        raise RequestError(
            ErrorCode.UNKNOWN_MEMBER_ID,
            f"Instance id {instance_id} is unknown in group {group.group_id}.",
        )
    if existing.member_id != member_id:
        raise RequestError(
            ErrorCode.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by "
            f"member {existing.member_id}.",
        )
    _check_epoch(existing, member_epoch, owned)
    return existing, None


def leaving_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> Member:
    """The member a leave heartbeat (epoch -1 or -2) names."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise RequestError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {group.group_id}.",
            )
        return member
    static_id = group.static_members.get(instance_id)
    member = group.members.get(static_id) if static_id is not None else None
    if member is None:
        raise RequestError(
            ErrorCode.UNKNOWN_MEMBER_ID,
            f"Instance id {instance_id} is unknown in group {group.group_id}.",
        )
    if member.member_id != member_id:
        raise RequestError(
            ErrorCode.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced "
            f"by member {member.member_id}.",
        )
    return member
