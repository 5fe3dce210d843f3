"""OffsetForLeaderEpoch v2–v4: where a leader epoch ends in this log (KIP-101/279)."""

from __future__ import annotations

from weir.broker.handlers.context import RequestContext
from weir.broker.partition_replica import PartitionReplica
from weir.format.errors import ErrorCode
from weir.wire.messages.leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochRequestPartition,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochResponsePartition,
    OffsetForLeaderEpochResponseTopic,
)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        partitions = [
            _end_offset(broker.lookup(topic.topic, p.partition), p) for p in topic.partitions
        ]
        topics.append(OffsetForLeaderEpochResponseTopic(topic=topic.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def _end_offset(
    replica: PartitionReplica | ErrorCode, request_part: OffsetForLeaderEpochRequestPartition
) -> OffsetForLeaderEpochResponsePartition:
    result = OffsetForLeaderEpochResponsePartition(
        error_code=ErrorCode.NONE,
        partition=request_part.partition,
        leader_epoch=UNDEFINED_EPOCH,
        end_offset=UNDEFINED_OFFSET,
    )
    if isinstance(replica, ErrorCode):
        result.error_code = replica
        return result
    epoch_error = replica.check_leader_epoch(request_part.current_leader_epoch)
    if epoch_error != ErrorCode.NONE:
        result.error_code = epoch_error
        return result
    result.leader_epoch, result.end_offset = replica.log.end_offset_for_epoch(
        request_part.leader_epoch
    )
    return result
