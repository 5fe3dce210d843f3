"""Kafka's rules for a classic group's committed offsets, as pure functions.

Who may commit (`validate_offset_commit`), which offsets of a commit are stored
(`accepted_offsets`), how OffsetFetch and OffsetDelete are answered
(`fetched_offsets`, `offset_deletions`) and which offsets retention expires
(`expired_offsets`). The offsets themselves live in the `OffsetStore` shared with
the KIP-848 groups; `classic_coordinator` applies these answers to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from weir.format.errors import ErrorCode
from weir.groupcoord.classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState
from weir.groupcoord.classic_messages import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionError,
)
from weir.groupcoord.committed_offsets import CommittedOffset, OffsetStore, TopicPartition

AcceptedOffset = tuple[str, int, CommittedOffset]


def validate_offset_commit(
    group: ClassicGroup, req: OffsetCommitRequest, transactional: bool = False
) -> ErrorCode:
    """Generation -1 with no member commits into an Empty group; otherwise member,
    instance id and generation must match, and CompletingRebalance refuses.

    A TxnOffsetCommit (`transactional`; its old versions carry no member fields)
    with generation -1, no member and no instance id commits into any group, and
    the group's state never refuses it (Kafka's rules)."""
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if req.generation_id < 0 and group.state is GroupState.EMPTY:
        return ErrorCode.NONE  # a standalone commit: Kafka stores offsets only
    if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
    elif not transactional and group.state is not GroupState.EMPTY:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if not transactional and group.state is GroupState.COMPLETING_REBALANCE:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def all_failed(req: OffsetCommitRequest, error: ErrorCode) -> list[PartitionError]:
    return [PartitionError(o.topic, o.partition, error) for o in req.offsets]


def accepted_offsets(
    req: OffsetCommitRequest, now_ms: int, metadata_max_bytes: int
) -> tuple[list[PartitionError], list[AcceptedOffset]]:
    """Each partition's answer, and the offsets to store (metadata within its bound)."""
    results = []
    accepted = []
    for o in req.offsets:
        metadata = o.metadata or ""
        error = ErrorCode.NONE
        if len(metadata.encode()) > metadata_max_bytes:
            error = ErrorCode.OFFSET_METADATA_TOO_LARGE
        else:
            committed = CommittedOffset(o.offset, o.leader_epoch, metadata, now_ms)
            accepted.append((o.topic, o.partition, committed))
        results.append(PartitionError(o.topic, o.partition, error))
    return results, accepted


def fetched_offsets(
    offsets: OffsetStore, group_id: str, partitions: Sequence[tuple[str, int]] | None
) -> OffsetFetchResult:
    """The group's latest offsets, as OffsetFetch shapes them; `partitions=None`
    asks for every one. (The broker answers OffsetFetch from the offsets
    committed to the log instead: `OffsetStore.committed_group_offsets`.)"""
    if partitions is None:
        stored = sorted(offsets.group_offsets(group_id).items())
        return OffsetFetchResult(
            ErrorCode.NONE,
            [FetchedOffset(t, p, c.offset, c.leader_epoch, c.metadata) for (t, p), c in stored],
        )
    out = []
    for topic, partition in partitions:
        committed = offsets.fetch(group_id, topic, partition)
        if committed is None:
            out.append(FetchedOffset(topic, partition, -1, -1, ""))
        else:
            out.append(
                FetchedOffset(
                    topic,
                    partition,
                    committed.offset,
                    committed.leader_epoch,
                    committed.metadata,
                )
            )
    return OffsetFetchResult(ErrorCode.NONE, out)


def offset_deletions(
    group: ClassicGroup | None, partitions: Sequence[tuple[str, int]]
) -> tuple[OffsetDeleteResult, list[TopicPartition]]:
    """OffsetDelete's answer and the partitions whose offsets go: a group that is not
    Empty keeps the offsets of topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC)."""
    if group is None or group.state is GroupState.DEAD:
        return OffsetDeleteResult(ErrorCode.GROUP_ID_NOT_FOUND), []
    uses_consumer_protocol = group.protocol_type in (None, "", CONSUMER_PROTOCOL_TYPE)
    if group.state is not GroupState.EMPTY and not uses_consumer_protocol:
        return OffsetDeleteResult(ErrorCode.NON_EMPTY_GROUP), []
    subscribed = group.subscribed_topics or frozenset()
    results = []
    deleted = []
    for topic, partition in partitions:
        if group.state is not GroupState.EMPTY and topic in subscribed:
            results.append(PartitionError(topic, partition, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
            continue
        deleted.append((topic, partition))
        results.append(PartitionError(topic, partition, ErrorCode.NONE))
    return OffsetDeleteResult(ErrorCode.NONE, results), deleted


def expired_offsets(
    group: ClassicGroup,
    stored: Mapping[TopicPartition, CommittedOffset],
    now_ms: int,
    retention_ms: int,
) -> list[TopicPartition]:
    """Kafka's rule: an Empty group's offsets expire counted from when it emptied; a
    group that only stores offsets (no protocol), from each commit; a Stable
    consumer group's offsets of topics it no longer subscribes to, from each commit."""
    if group.protocol_type and group.state is GroupState.EMPTY:
        empty_since_ms = group.state_timestamp_ms
        return _expired(
            stored,
            now_ms,
            retention_ms,
            lambda c: empty_since_ms if empty_since_ms >= 0 else c.commit_timestamp_ms,
        )
    if not group.protocol_type:
        return _expired(stored, now_ms, retention_ms, lambda c: c.commit_timestamp_ms)
    if (
        group.protocol_type == CONSUMER_PROTOCOL_TYPE
        and group.state is GroupState.STABLE
        and group.subscribed_topics is not None
    ):
        return _expired(
            stored,
            now_ms,
            retention_ms,
            lambda c: c.commit_timestamp_ms,
            group.subscribed_topics,
        )
    return []


def _expired(
    stored: Mapping[TopicPartition, CommittedOffset],
    now_ms: int,
    retention_ms: int,
    base_ms: Callable[[CommittedOffset], int],
    kept_topics: frozenset[str] = frozenset(),
) -> list[TopicPartition]:
    return sorted(
        tp
        for tp, committed in stored.items()
        if tp[0] not in kept_topics and now_ms - base_ms(committed) >= retention_ms
    )
