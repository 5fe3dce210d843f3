"""Share groups' offsets (KIP-932), as Kafka 4.4 serves them: DescribeShareGroupOffsets
(90) v0-1, AlterShareGroupOffsets (91) v0, DeleteShareGroupOffsets (92) v0.

On the group's coordinator. A share group's "offsets" are its share partitions'
durable states in the share coordinator (`share_state_service`): the start offset
Kafka reports is the state's, and v1's lag is Kafka's `high watermark - start offset
- delivery-complete count` (the records at or above the start already acknowledged
or archived). What Kafka answers, observed on Kafka 4.4 and kept here:

- Describe: a partition with no state (or of a topic that does not exist) is start
  offset -1, lag -1, with no error; `topics` null lists every partition the group has
  state for; an empty group id or an unknown group is an empty list, not an error.
- Alter: only an empty group (NON_EMPTY_GROUP otherwise, with no per-topic entries);
  an unknown group id is created as an empty share group; another type's group is
  GROUP_ID_NOT_FOUND; an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION in
  its own entry (unknown topics first); a new start offset replaces the whole state
  (nothing in flight, the state epoch moved). Weir's one difference: a negative start
  offset (Kafka stores it as given; -1 is Kafka's "uninitialized") deletes the state,
  so the partition starts where `share.auto.offset.reset` says on its next use.
- Delete: an unknown group is GROUP_ID_NOT_FOUND, a non-empty one NON_EMPTY_GROUP; each
  topic's state goes; a topic without any is UNKNOWN_TOPIC_OR_PARTITION ("There is no
  offset information to delete."), entries deleted come first.

An altered or deleted state replaces what the partition's leader holds in memory: the
share partitions of the group led here are forgotten and load the new state on their
next use (the group is empty, so none is in use). A key whose `__share_group_state`
partition this broker does not serve answers its error (COORDINATOR_NOT_AVAILABLE) in
its own entry.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from weir.broker.coordinators.group_service import GroupService
from weir.broker.coordinators.share_state_service import (
    ShareKey,
    ShareStateService,
    ShareStateUnavailableError,
)
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.groups import group_service
from weir.broker.handlers.share_fetch import share_service
from weir.format.errors import ErrorCode
from weir.log.errors import LogError
from weir.sharecoord.share_state import ShareState
from weir.wire.messages.share_groups import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
# Kafka's PartitionFactory: a partition with no state.
UNINITIALIZED_START_OFFSET = -1
UNINITIALIZED_LAG = -1
DEFAULT_LEADER_EPOCH = 0
# Kafka's messages for these answers (Errors' defaults and the coordinator's own).
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."
NO_OFFSETS_MESSAGE = "There is no offset information to delete."
INVALID_GROUP_ID_MESSAGE = "The group id is invalid."
NON_EMPTY_GROUP_MESSAGE = "The group is not empty."


@dataclass(frozen=True)
class _Topic:
    name: str
    topic_id: uuid.UUID
    partition_count: int


def _topic(ctx: RequestContext, name: str) -> _Topic | None:
    record = ctx.broker.controller.topic(name)
    if record is None or record.is_internal:
        return None
    return _Topic(name, record.topic_id, record.partition_count)


def _group_refusal(service: GroupService, group_id: str) -> tuple[ErrorCode, str] | None:
    """Why Alter and Delete may not change the group's share state, or None: the
    group id is empty, not served here, another type's, or the group has members."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, INVALID_GROUP_ID_MESSAGE
    if not service.available(group_id):
        return service.unavailable_error(group_id), service.unavailable_reason(group_id)
    if service.consumer_groups.has_group(group_id) or service.classic.has_group(group_id):
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    if service.share_groups.members_of(group_id):
        return ErrorCode.NON_EMPTY_GROUP, NON_EMPTY_GROUP_MESSAGE
    return None


def _forget_cached(ctx: RequestContext, group_id: str) -> None:
    """The states just changed replace what the group's share partitions led here
    hold: they load them again on their next use."""
    share_service(ctx).partitions.forget_group(group_id)


# -- DescribeShareGroupOffsets ----------------------------------------------------------


# A cluster's partitions past which DescribeShareGroupOffsets with no topics lists only
# the states this broker's share coordinator holds (each candidate costs a state read,
# maybe on another broker).
SCAN_PARTITIONS_MAX = 1000


def handle_describe_share_group_offsets(
    ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse | Deferred[DescribeShareGroupOffsetsResponse]:
    service = group_service(ctx)
    service.ensure_ready(ctx.now_ms())
    store = share_service(ctx).store
    with_lag = ctx.api_version >= 1

    async def finish() -> DescribeShareGroupOffsetsResponse:
        groups = []
        for group in request.groups:
            if not service.available(group.group_id):
                groups.append(
                    DescribeShareGroupOffsetsResponseGroup(
                        group_id=group.group_id,
                        error_code=service.unavailable_error(group.group_id),
                        error_message=service.unavailable_reason(group.group_id),
                    )
                )
                continue
            if group.topics is None or group.topics:
                await store.ready()
            groups.append(await _described_group(ctx, store, group, with_lag))
        return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)

    return Deferred(finish)


async def _described_group(
    ctx: RequestContext,
    store: ShareStateService,
    group: DescribeShareGroupOffsetsRequestGroup,
    with_lag: bool,
) -> DescribeShareGroupOffsetsResponseGroup:
    group_id = group.group_id
    every = group.topics is None
    if group.topics is None:
        wanted = _partitions_with_state(ctx, store, group_id)
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in group.topics]
    known = []
    unknown = []
    for name, partitions in wanted:
        topic = _topic(ctx, name)
        if topic is None:
            unknown.append(
                DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name,
                    topic_id=ZERO_UUID,
                    partitions=[_no_state(p) for p in partitions],
                )
            )
            continue
        described = [
            await _described_partition(ctx, store, ShareKey(group_id, topic.topic_id, p), name)
            for p in partitions
        ]
        if every:  # a candidate of another broker's coordinator without state: not the group's
            described = [d for d in described if not _stateless(d)]
            if not described:
                continue
        known.append(
            DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic.topic_id, partitions=described
            )
        )
    # Kafka answers the topics it knows first, then the others (start offset -1).
    return DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=known + unknown)


def _partitions_with_state(
    ctx: RequestContext, store: ShareStateService, group_id: str
) -> list[tuple[str, list[int]]]:
    """Every partition of an existing topic the group may have state for, by topic
    name: those whose state this broker's share coordinator holds; in a cluster, the
    others' coordinators hold the rest, so every partition of every topic is a
    candidate too while the cluster has at most SCAN_PARTITIONS_MAX (each is read,
    and those without state are left out); past that, only this broker's."""
    by_topic: dict[str, set[int]] = {}
    for key in store.keys_of_group(group_id):
        record = ctx.broker.controller.topic_by_id(key.topic_id)
        if record is not None:
            by_topic.setdefault(record.name, set()).add(key.partition)
    if ctx.broker.cluster is not None:
        topics = [t for t in ctx.broker.controller.topics() if not t.is_internal]
        if sum(t.partition_count for t in topics) <= SCAN_PARTITIONS_MAX:
            for topic in topics:
                by_topic.setdefault(topic.name, set()).update(range(topic.partition_count))
    return [(name, sorted(partitions)) for name, partitions in sorted(by_topic.items())]


def _stateless(entry: DescribeShareGroupOffsetsResponsePartition) -> bool:
    return entry.error_code == ErrorCode.NONE and entry.start_offset == UNINITIALIZED_START_OFFSET


def _no_state(partition: int) -> DescribeShareGroupOffsetsResponsePartition:
    return DescribeShareGroupOffsetsResponsePartition(
        partition_index=partition,
        start_offset=UNINITIALIZED_START_OFFSET,
        leader_epoch=DEFAULT_LEADER_EPOCH,
        lag=UNINITIALIZED_LAG,
    )


async def _described_partition(
    ctx: RequestContext, store: ShareStateService, key: ShareKey, topic_name: str
) -> DescribeShareGroupOffsetsResponsePartition:
    try:
        state = await store.read_summary(key)
    except ShareStateUnavailableError as exc:
        entry = _no_state(key.partition)
        entry.error_code, entry.error_message = exc.error_code, str(exc)
        return entry
    if state is None:
        return _no_state(key.partition)
    return DescribeShareGroupOffsetsResponsePartition(
        partition_index=key.partition,
        start_offset=state.start_offset,
        leader_epoch=state.leader_epoch,
        lag=_lag(ctx, topic_name, key.partition, state),
    )


def _lag(ctx: RequestContext, topic_name: str, partition: int, state: ShareState) -> int:
    """Kafka's share-partition lag: the partition's end (its high watermark) less the
    start offset and the records above it whose delivery is complete. -1 when this
    broker holds no replica of the partition (a cluster), as Kafka's unknown lag."""
    replica = ctx.broker.partition(topic_name, partition)
    if replica is None:
        return UNINITIALIZED_LAG
    return replica.high_watermark - state.start_offset - state.delivery_complete_count


# -- AlterShareGroupOffsets -------------------------------------------------------------


def handle_alter_share_group_offsets(
    ctx: RequestContext, request: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse | Deferred[AlterShareGroupOffsetsResponse]:
    service = group_service(ctx)
    service.ensure_ready(ctx.now_ms())
    group_id = request.group_id
    refusal = _group_refusal(service, group_id)
    if refusal is not None:
        return AlterShareGroupOffsetsResponse(error_code=refusal[0], error_message=refusal[1])
    plan = _AlterPlan.of(ctx, group_id, request.topics)
    records = service.share_records(service.share_groups.create_empty_group(group_id))
    try:
        pending = service.append(records, group_id) if records else None
    except LogError as exc:
        return AlterShareGroupOffsetsResponse(error_code=exc.error_code, error_message=str(exc))
    store = share_service(ctx).store

    async def finish() -> AlterShareGroupOffsetsResponse:
        if pending is not None:
            error = await pending.durable()
            if error != ErrorCode.NONE:
                return AlterShareGroupOffsetsResponse(
                    error_code=error, error_message="the group's state could not be stored"
                )
        if plan.offsets:
            await store.ready()
        for key, start_offset in plan.offsets.items():
            try:
                await _reset(store, key, start_offset)
            except ShareStateUnavailableError as exc:
                log.warning("share group %s: %s not altered: %s", group_id, key, exc)
                plan.errors[key] = (exc.error_code, str(exc))
        _forget_cached(ctx, group_id)
        return AlterShareGroupOffsetsResponse(throttle_time_ms=0, responses=plan.responses())

    return Deferred(finish)


@dataclass
class _AlterPlan:
    """An Alter request checked against the topics: the start offsets to store, and
    the answers of the partitions not stored (unknown partitions, failed writes)."""

    group_id: str
    topics: list[tuple[AlterShareGroupOffsetsRequestTopic, _Topic | None]]
    offsets: dict[ShareKey, int]
    errors: dict[ShareKey, tuple[ErrorCode, str]]

    @classmethod
    def of(
        cls,
        ctx: RequestContext,
        group_id: str,
        topics: Sequence[AlterShareGroupOffsetsRequestTopic],
    ) -> _AlterPlan:
        plan = cls(group_id, [(t, _topic(ctx, t.topic_name)) for t in topics], {}, {})
        for request, topic in plan.topics:
            if topic is None:
                continue
            for p in request.partitions:
                key = ShareKey(group_id, topic.topic_id, p.partition_index)
                if 0 <= p.partition_index < topic.partition_count:
                    plan.offsets[key] = p.start_offset
                else:
                    plan.errors[key] = (
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        UNKNOWN_PARTITION_MESSAGE,
                    )
        return plan

    def responses(self) -> list[AlterShareGroupOffsetsResponseResponse]:
        """Kafka's order: the unknown topics' entries, then the others'."""
        unknown = [
            AlterShareGroupOffsetsResponseResponse(
                topic_name=request.topic_name,
                topic_id=ZERO_UUID,
                partitions=[
                    AlterShareGroupOffsetsResponsePartition(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=UNKNOWN_PARTITION_MESSAGE,
                    )
                    for p in request.partitions
                ],
            )
            for request, topic in self.topics
            if topic is None
        ]
        known = [
            AlterShareGroupOffsetsResponseResponse(
                topic_name=request.topic_name,
                topic_id=topic.topic_id,
                partitions=[
                    self._answer(ShareKey(self.group_id, topic.topic_id, p.partition_index))
                    for p in request.partitions
                ],
            )
            for request, topic in self.topics
            if topic is not None
        ]
        return unknown + known

    def _answer(self, key: ShareKey) -> AlterShareGroupOffsetsResponsePartition:
        error, message = self.errors.get(key, (ErrorCode.NONE, None))
        return AlterShareGroupOffsetsResponsePartition(
            partition_index=key.partition, error_code=error, error_message=message
        )


async def _reset(store: ShareStateService, key: ShareKey, start_offset: int) -> None:
    """The partition's state becomes `start_offset` with nothing in flight, at the next
    state epoch (a negative offset: no state). Raises ShareStateUnavailableError."""
    current = await store.read_summary(key)
    if start_offset < 0:
        if current is not None:
            await store.write(key, None)
        return
    state_epoch = 0 if current is None else current.state_epoch + 1
    leader_epoch = DEFAULT_LEADER_EPOCH if current is None else current.leader_epoch
    await store.write(key, ShareState(start_offset, state_epoch, leader_epoch))


# -- DeleteShareGroupOffsets ------------------------------------------------------------


def handle_delete_share_group_offsets(
    ctx: RequestContext, request: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse | Deferred[DeleteShareGroupOffsetsResponse]:
    service = group_service(ctx)
    service.ensure_ready(ctx.now_ms())
    group_id = request.group_id
    refusal = _group_refusal(service, group_id)
    if refusal is None and not service.share_groups.has_group(group_id):
        refusal = ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
    if refusal is not None:
        return DeleteShareGroupOffsetsResponse(error_code=refusal[0], error_message=refusal[1])
    store = share_service(ctx).store
    names = list(dict.fromkeys(t.topic_name for t in request.topics))

    async def finish() -> DeleteShareGroupOffsetsResponse:
        if names:
            await store.ready()
        deleted: list[DeleteShareGroupOffsetsResponseResponse] = []
        failed: list[DeleteShareGroupOffsetsResponseResponse] = []
        for name in names:
            entry = await _delete_topic_state(ctx, store, group_id, name)
            (failed if entry.error_code else deleted).append(entry)
        _forget_cached(ctx, group_id)
        # Kafka's order: the topics whose state went, then the others.
        return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, responses=deleted + failed)

    return Deferred(finish)


async def _delete_topic_state(
    ctx: RequestContext, store: ShareStateService, group_id: str, name: str
) -> DeleteShareGroupOffsetsResponseResponse:
    topic = _topic(ctx, name)
    if topic is None:
        return _delete_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_PARTITION_MESSAGE)
    keys = [k for k in store.keys_of_group(group_id) if k.topic_id == topic.topic_id]
    if not keys:
        return _delete_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_OFFSETS_MESSAGE)
    try:
        await _delete_states(store, keys)
    except ShareStateUnavailableError as exc:
        log.warning("share group %s: the state of %s not deleted: %s", group_id, name, exc)
        entry = _delete_error(name, exc.error_code, str(exc))
        entry.topic_id = topic.topic_id
        return entry
    return DeleteShareGroupOffsetsResponseResponse(topic_name=name, topic_id=topic.topic_id)


def _delete_error(
    name: str, error: ErrorCode, message: str
) -> DeleteShareGroupOffsetsResponseResponse:
    return DeleteShareGroupOffsetsResponseResponse(
        topic_name=name, topic_id=ZERO_UUID, error_code=error, error_message=message
    )


async def _delete_states(store: ShareStateService, keys: Iterable[ShareKey]) -> None:
    """Tombstone each key's state. Raises ShareStateUnavailableError."""
    for key in keys:
        await store.write(key, None)


async def delete_group_states(ctx: RequestContext, group_id: str) -> ErrorCode:
    """DeleteGroups of an empty share group: every state it has goes (tombstones in
    `__share_group_state`) and its share partitions led here are forgotten. The
    error (NONE when all went) decides whether the group itself is deleted."""
    store = share_service(ctx).store
    await store.ready()
    try:
        await _delete_states(store, store.keys_of_group(group_id))
    except ShareStateUnavailableError as exc:
        log.warning("share group %s: its share state not deleted: %s", group_id, exc)
        return exc.error_code
    finally:
        _forget_cached(ctx, group_id)
    return ErrorCode.NONE
