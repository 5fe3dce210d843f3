"""ListOffsets v1–v7: earliest, latest, max timestamp and offset-by-timestamp."""

from __future__ import annotations

from weir.broker.broker import PartitionReplica
from weir.broker.context import RequestContext
from weir.format.errors import ErrorCode
from weir.wire.messages.list_offsets import (
    ListOffsetsRequest,
    ListOffsetsRequestPartition,
    ListOffsetsResponse,
    ListOffsetsResponsePartition,
    ListOffsetsResponseTopic,
)

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
MAX_TIMESTAMP_VERSION_MIN = 7
NO_TIMESTAMP = -1


def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        partitions = [
            _list_partition(broker.lookup(topic.name, p.partition_index), p, ctx.api_version)
            for p in topic.partitions
        ]
        topics.append(ListOffsetsResponseTopic(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _list_partition(
    replica: PartitionReplica | ErrorCode, request_part: ListOffsetsRequestPartition, version: int
) -> ListOffsetsResponsePartition:
    index = request_part.partition_index
    if isinstance(replica, ErrorCode):
        return _result(index, replica)
    epoch_error = replica.check_leader_epoch(request_part.current_leader_epoch)
    if epoch_error != ErrorCode.NONE:
        return _result(index, epoch_error)
    timestamp = request_part.timestamp
    epoch = replica.leader_epoch
    if timestamp == LATEST_TIMESTAMP:
        return _result(index, ErrorCode.NONE, NO_TIMESTAMP, replica.high_watermark, epoch)
    if timestamp == EARLIEST_TIMESTAMP:
        return _result(index, ErrorCode.NONE, NO_TIMESTAMP, replica.log.log_start_offset, epoch)
    if timestamp == MAX_TIMESTAMP and version >= MAX_TIMESTAMP_VERSION_MIN:
        found = replica.log.max_timestamp()
    elif timestamp >= 0:
        found = replica.log.offset_for_timestamp(timestamp)
    else:
        return _result(index, ErrorCode.UNSUPPORTED_VERSION)
    if found is None or found[0] >= replica.high_watermark:
        return _result(index, ErrorCode.NONE, NO_TIMESTAMP, -1, -1)
    offset, found_timestamp = found
    return _result(index, ErrorCode.NONE, found_timestamp, offset, epoch)


def _result(
    index: int, error: ErrorCode, timestamp: int = NO_TIMESTAMP, offset: int = -1, epoch: int = -1
) -> ListOffsetsResponsePartition:
    return ListOffsetsResponsePartition(
        partition_index=index,
        error_code=error,
        timestamp=timestamp,
        offset=offset,
        leader_epoch=epoch,
    )
