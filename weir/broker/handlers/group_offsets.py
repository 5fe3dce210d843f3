"""OffsetCommit v2–v9, TxnOffsetCommit v0–v5 and OffsetFetch v1–v9: a group's
committed offsets.

Commits go to the group's coordinator (KIP-848 for consumer groups, classic for
every other group), are appended to `__consumer_offsets` on the connection's
reader, and are answered once durable (weir.broker.coordinators.group_service).
A TxnOffsetCommit's offsets wait for their transaction's marker
(weir.broker.coordinators.group_transactions); OffsetFetch with require_stable
answers UNSTABLE_OFFSET_COMMIT (retriable) for a partition whose offset a
transaction still holds.
"""

from __future__ import annotations

from collections.abc import Callable

from weir.broker.coordinators.group_service import GroupService
from weir.broker.coordinators.group_transactions import TxnOffsetsCheck
from weir.broker.coordinators.offsets_topic import TxnProducer
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.groups import group_service
from weir.format.errors import ErrorCode
from weir.groupcoord.classic_messages import OffsetCommitRequest as ClassicCommit
from weir.groupcoord.classic_messages import (
    OffsetToCommit,
    PartitionError,
)
from weir.groupcoord.committed_offsets import (
    CommittedOffset,
    offsets_by_topic,
)
from weir.log.errors import LogError
from weir.wire.messages.committed_offsets import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponseGroupTopic,
    OffsetFetchResponseGroupTopicPartition,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from weir.wire.messages.transactions import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

NO_OFFSET = -1


def handle_offset_commit(
    ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse | Deferred[OffsetCommitResponse]:
    """Partitions of unknown topics are refused here; the rest go to the group's
    coordinator: KIP-848 for consumer groups, classic for every other group."""
    service = group_service(ctx)
    group_id = request.group_id
    if not group_id:
        return _commit_response(request, lambda topic, partition: ErrorCode.INVALID_GROUP_ID)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)
    if not service.available(group_id):
        return _commit_response(request, lambda topic, partition: ErrorCode.NOT_COORDINATOR)
    errors: dict[tuple[str, int], ErrorCode] = {}
    valid: list[tuple[str, OffsetCommitRequestPartition]] = []
    for topic in request.topics:
        for part in topic.partitions:
            error = _check_partition(ctx, topic.name, part)
            errors[(topic.name, part.partition_index)] = error
            if error == ErrorCode.NONE:
                valid.append((topic.name, part))
    if service.consumer_groups.has_group(group_id):
        return _commit_consumer_group(service, request, valid, errors, now_ms)
    return _commit_classic(service, request, valid, errors, now_ms)


def _commit_consumer_group(
    service: GroupService,
    request: OffsetCommitRequest,
    valid: list[tuple[str, OffsetCommitRequestPartition]],
    errors: dict[tuple[str, int], ErrorCode],
    now_ms: int,
) -> OffsetCommitResponse | Deferred[OffsetCommitResponse]:
    group_id = request.group_id
    group_error = service.consumer_groups.validate_offset_commit(
        group_id, request.member_id, request.generation_id_or_member_epoch
    )
    if group_error != ErrorCode.NONE:
        return _commit_response(request, lambda topic, partition: group_error)
    accepted = [
        (
            name,
            part.partition_index,
            CommittedOffset(
                part.committed_offset,
                part.committed_leader_epoch,
                part.committed_metadata or "",
                now_ms,
            ),
        )
        for name, part in valid
    ]
    if not accepted:
        return _commit_response(request, lambda topic, partition: errors[(topic, partition)])
    try:
        pending = service.append(service.offsets.commit(group_id, accepted), group_id)
    except LogError as exc:
        append_error = exc.error_code
        return _commit_response(request, lambda topic, partition: append_error)

    async def finish() -> OffsetCommitResponse:
        durable_error = await pending.durable()
        return _commit_response(
            request, lambda topic, partition: errors[(topic, partition)] or durable_error
        )

    return Deferred(finish)


def _commit_classic(
    service: GroupService,
    request: OffsetCommitRequest,
    valid: list[tuple[str, OffsetCommitRequestPartition]],
    errors: dict[tuple[str, int], ErrorCode],
    now_ms: int,
) -> Deferred[OffsetCommitResponse]:
    commit = ClassicCommit(
        group_id=request.group_id,
        offsets=[
            OffsetToCommit(
                name,
                part.partition_index,
                part.committed_offset,
                part.committed_leader_epoch,
                part.committed_metadata,
            )
            for name, part in valid
        ],
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
    )
    reply = service.classic.commit_offsets(commit, now_ms)

    async def finish() -> OffsetCommitResponse:
        durable_error = await service.settle(reply.records, reply.completed, request.group_id)
        await service.wait_for(reply.pending)
        for failed in reply.pending.result:
            errors[(failed.topic, failed.partition)] = failed.error
        return _commit_response(
            request, lambda topic, partition: errors[(topic, partition)] or durable_error
        )

    return Deferred(finish)


def _check_partition(
    ctx: RequestContext,
    topic: str,
    part: OffsetCommitRequestPartition | TxnOffsetCommitRequestPartition,
) -> ErrorCode:
    record = ctx.broker.controller.topic(topic)
    if record is None or not 0 <= part.partition_index < record.partition_count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    metadata = part.committed_metadata
    if metadata is not None and len(metadata) > ctx.broker.config.offset_metadata_max_bytes:
        return ErrorCode.OFFSET_METADATA_TOO_LARGE
    return ErrorCode.NONE


def _commit_response(
    request: OffsetCommitRequest, error_of: Callable[[str, int], ErrorCode]
) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=part.partition_index,
                        error_code=error_of(topic.name, part.partition_index),
                    )
                    for part in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


# -- TxnOffsetCommit ------------------------------------------------------------------

# TxnOffsetCommit v5 (transaction version 2) adds the offsets partition to the
# transaction itself (KIP-890); older versions need an AddOffsetsToTxn before.
TXN_OFFSET_COMMIT_ADDS_PARTITION_VERSION = 5


def handle_txn_offset_commit(
    ctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse | Deferred[TxnOffsetCommitResponse]:
    """Partitions of unknown topics and oversized metadata are refused here; then
    the transaction coordinator's check (`GroupService.txn_offsets_verifier`, when
    wired: the offsets partition is in the producer's transaction, or v5 adds it),
    then the group's validation, then the records are appended as a transactional
    batch of the producer and the answer waits until they are durable."""
    service = group_service(ctx)
    group_id = request.group_id
    if not group_id:
        return _txn_commit_response(request, lambda topic, partition: ErrorCode.INVALID_GROUP_ID)
    if request.producer_id < 0 or request.producer_epoch < 0:
        return _txn_commit_response(
            request, lambda topic, partition: ErrorCode.INVALID_PRODUCER_ID_MAPPING
        )
    service.ensure_ready(ctx.now_ms())
    if not service.available(group_id):
        unavailable = service.unavailable_error(group_id)
        return _txn_commit_response(request, lambda topic, partition: unavailable)
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: list[OffsetToCommit] = []
    for topic in request.topics:
        for part in topic.partitions:
            error = _check_partition(ctx, topic.name, part)
            errors[(topic.name, part.partition_index)] = error
            if error == ErrorCode.NONE:
                offsets.append(
                    OffsetToCommit(
                        topic.name,
                        part.partition_index,
                        part.committed_offset,
                        part.committed_leader_epoch,
                        part.committed_metadata,
                    )
                )
    if not offsets:
        return _txn_commit_response(request, lambda topic, partition: errors[(topic, partition)])
    commit = ClassicCommit(
        group_id=group_id,
        offsets=offsets,
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
    )
    producer = TxnProducer(request.producer_id, request.producer_epoch)
    check = TxnOffsetsCheck(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        group_id,
        service.partition_for(group_id),
        add_partition=ctx.api_version >= TXN_OFFSET_COMMIT_ADDS_PARTITION_VERSION,
    )

    async def finish() -> TxnOffsetCommitResponse:
        verifier = service.txn_offsets_verifier
        if verifier is not None:
            verified = await verifier(check)
            if verified != ErrorCode.NONE:
                _fail_accepted(errors, verified)
                return _txn_commit_response(request, lambda t, p: errors[(t, p)])
        if not service.available(group_id):  # it moved while the check ran
            _fail_accepted(errors, service.unavailable_error(group_id))
            return _txn_commit_response(request, lambda t, p: errors[(t, p)])
        results, pending = service.commit_transactional_offsets(commit, producer, ctx.now_ms())
        durable_error = ErrorCode.NONE if pending is None else await pending.durable()
        _merge_results(errors, results, durable_error)
        return _txn_commit_response(request, lambda t, p: errors[(t, p)])

    return Deferred(finish)


def _fail_accepted(errors: dict[tuple[str, int], ErrorCode], error: ErrorCode) -> None:
    for key, current in errors.items():
        if current == ErrorCode.NONE:
            errors[key] = error


def _merge_results(
    errors: dict[tuple[str, int], ErrorCode],
    results: list[PartitionError],
    durable_error: ErrorCode,
) -> None:
    for result in results:
        errors[(result.topic, result.partition)] = result.error or durable_error


def _txn_commit_response(
    request: TxnOffsetCommitRequest, error_of: Callable[[str, int], ErrorCode]
) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(
                        partition_index=part.partition_index,
                        error_code=error_of(topic.name, part.partition_index),
                    )
                    for part in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


# -- OffsetFetch ---------------------------------------------------------------------


def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    service = group_service(ctx)
    service.ensure_ready(ctx.now_ms())
    stable = request.require_stable
    if ctx.api_version >= 8:
        return OffsetFetchResponse(
            throttle_time_ms=0,
            groups=[_fetch_group(service, group, stable) for group in request.groups],
        )
    error, topics = _fetch_offsets(service, request, stable)
    return OffsetFetchResponse(
        throttle_time_ms=0,
        topics=[
            OffsetFetchResponseTopic(
                name=name,
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=partition,
                        committed_offset=committed.offset if committed else NO_OFFSET,
                        committed_leader_epoch=committed.leader_epoch if committed else -1,
                        metadata=committed.metadata if committed else "",
                        error_code=partition_error,
                    )
                    for partition, committed, partition_error in partitions
                ],
            )
            for name, partitions in topics
        ],
        error_code=error,
    )


def _fetch_group(
    service: GroupService, group: OffsetFetchRequestGroup, require_stable: bool
) -> OffsetFetchResponseGroup:
    error, topics = _fetch_offsets(service, group, require_stable)
    return OffsetFetchResponseGroup(
        group_id=group.group_id,
        topics=[
            OffsetFetchResponseGroupTopic(
                name=name,
                partitions=[
                    OffsetFetchResponseGroupTopicPartition(
                        partition_index=partition,
                        committed_offset=committed.offset if committed else NO_OFFSET,
                        committed_leader_epoch=committed.leader_epoch if committed else -1,
                        metadata=committed.metadata if committed else "",
                        error_code=partition_error,
                    )
                    for partition, committed, partition_error in partitions
                ],
            )
            for name, partitions in topics
        ],
        error_code=error,
    )


# Per topic: (partition, its committed offset or None, the partition's error).
FetchedTopics = list[tuple[str, list[tuple[int, CommittedOffset | None, ErrorCode]]]]


def _fetch_offsets(
    service: GroupService,
    group: OffsetFetchRequest | OffsetFetchRequestGroup,
    require_stable: bool = False,
) -> tuple[ErrorCode, FetchedTopics]:
    """One group's committed offsets by topic (None: nothing committed), or an error.
    Before v8 the request itself names the one group (without member fields).
    `require_stable` (v7+): a partition whose offset a transaction holds (pending,
    or committed by a marker not committed yet) is UNSTABLE_OFFSET_COMMIT, as in
    Kafka; the client retries."""
    group_id = group.group_id
    member_id = group.member_id if isinstance(group, OffsetFetchRequestGroup) else None
    error = ErrorCode.NONE
    if not group_id:
        error = ErrorCode.INVALID_GROUP_ID
    elif not service.available(group_id):
        error = ErrorCode.NOT_COORDINATOR
    elif service.consumer_groups.has_group(group_id) and member_id is not None:
        assert isinstance(group, OffsetFetchRequestGroup)
        error = service.consumer_groups.validate_offset_fetch(
            group_id, member_id, group.member_epoch
        )
    if error != ErrorCode.NONE:
        return error, []
    stored = service.committed_offsets(group_id)

    def answer(topic: str, partition: int) -> tuple[int, CommittedOffset | None, ErrorCode]:
        if require_stable and service.offsets.is_unstable(group_id, topic, partition):
            return partition, None, ErrorCode.UNSTABLE_OFFSET_COMMIT
        return partition, stored.get((topic, partition)), ErrorCode.NONE

    if group.topics is None:  # every committed offset of the group
        return ErrorCode.NONE, [
            (name, [answer(name, p) for p, _ in partitions])
            for name, partitions in offsets_by_topic(stored)
        ]
    return ErrorCode.NONE, [
        (topic.name, [answer(topic.name, index) for index in topic.partition_indexes])
        for topic in group.topics
    ]
