"""ListOffsets v1–v11: earliest, latest, max timestamp, offset-by-timestamp and
the tiered-storage specs a broker without remote storage answers (KIP-405's
earliest local, KIP-1005's latest tiered, KIP-1023's earliest pending upload).

Weir has no remote storage, so it answers those as Kafka does when the topic
has none: the local log starts at the log start offset, so EARLIEST_LOCAL is
EARLIEST; nothing is tiered or awaiting upload, so LATEST_TIERED and
EARLIEST_PENDING_UPLOAD find no offset (-1, no timestamp, no leader epoch).
v10 adds `timeout_ms`, which bounds remote-storage lookups; Weir has none to wait
for and ignores it.

Under isolation_level read_committed (v2+) the last fetchable offset is the
partition's last stable offset, not its high watermark, as Kafka's: LATEST
answers the LSO, and a timestamp lookup (MAX_TIMESTAMP included) finds no
offset at or past it."""

from __future__ import annotations

from weir.broker.handlers.context import RequestContext
from weir.broker.partition_replica import PartitionReplica
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
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
NO_TIMESTAMP = -1
READ_COMMITTED = 1  # isolation_level
# The first version whose requests may carry each special timestamp.
SPECIAL_TIMESTAMP_VERSION_MIN = {
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}


def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        partitions = [
            _list_partition(
                broker.lookup(topic.name, p.partition_index),
                p,
                ctx.api_version,
                request.isolation_level == READ_COMMITTED,
            )  # fmt: skip
            for p in topic.partitions
        ]
        topics.append(ListOffsetsResponseTopic(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _list_partition(
    replica: PartitionReplica | ErrorCode,
    request_part: ListOffsetsRequestPartition,
    version: int,
    read_committed: bool = False,
) -> ListOffsetsResponsePartition:
    index = request_part.partition_index
    if isinstance(replica, ErrorCode):
        return _result(index, replica)
    epoch_error = replica.check_leader_epoch(request_part.current_leader_epoch)
    if epoch_error != ErrorCode.NONE:
        return _result(index, epoch_error)
    timestamp = request_part.timestamp
    if version < SPECIAL_TIMESTAMP_VERSION_MIN.get(timestamp, 0):
        return _result(index, ErrorCode.UNSUPPORTED_VERSION)
    epoch = replica.leader_epoch
    fetchable_end = replica.last_stable_offset if read_committed else replica.high_watermark
    if timestamp == LATEST_TIMESTAMP:
        return _result(index, ErrorCode.NONE, NO_TIMESTAMP, fetchable_end, epoch)
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return _result(index, ErrorCode.NONE, NO_TIMESTAMP, replica.log.log_start_offset, epoch)
    if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        return _result(index, ErrorCode.NONE, NO_TIMESTAMP, -1, -1)
    if timestamp == MAX_TIMESTAMP:
        found = replica.log.max_timestamp()
    elif timestamp >= 0:
        found = replica.log.offset_for_timestamp(timestamp)
    else:
        return _result(index, ErrorCode.UNSUPPORTED_VERSION)
    if found is None or found[0] >= fetchable_end:
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
