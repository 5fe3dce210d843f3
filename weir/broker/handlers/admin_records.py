"""DeleteRecords v0–v2: move a partition's log start offset up.

Per partition: offset -1 means the high watermark; an offset below -1 or above
the high watermark is OFFSET_OUT_OF_RANGE; an offset at or below the current log
start changes nothing. The answer's `low_watermark` is the log start offset
after the deletion (-1 on error). Segments wholly below it are deleted; the
records below it in the first remaining segment are no longer served. Topics
whose cleanup.policy lacks `delete` (compact-only) refuse with POLICY_VIOLATION,
and internal topics (by name, whatever their configs) with INVALID_TOPIC_EXCEPTION,
as Kafka does.
"""

from __future__ import annotations

from weir.broker.broker import Broker
from weir.broker.handlers.context import RequestContext
from weir.controller.controller import is_internal_topic
from weir.format.errors import ErrorCode
from weir.log.errors import LogError
from weir.wire.messages.records import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsResponsePartition,
    DeleteRecordsResponseTopic,
)

HIGH_WATERMARK_OFFSET = -1
INVALID_LOW_WATERMARK = -1


def handle_delete_records(
    ctx: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        partitions = [
            _delete_before(broker, topic.name, p.partition_index, p.offset)
            for p in topic.partitions
        ]
        topics.append(DeleteRecordsResponseTopic(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _delete_before(
    broker: Broker, topic: str, index: int, offset: int
) -> DeleteRecordsResponsePartition:
    if is_internal_topic(topic):
        return _result(index, ErrorCode.INVALID_TOPIC_EXCEPTION)
    replica = broker.lookup(topic, index)
    if isinstance(replica, ErrorCode):
        return _result(index, replica)
    if not replica.log.config.deletes_by_retention:
        return _result(index, ErrorCode.POLICY_VIOLATION)
    if offset == HIGH_WATERMARK_OFFSET:
        offset = replica.high_watermark
    if offset < 0 or offset > replica.high_watermark:
        return _result(index, ErrorCode.OFFSET_OUT_OF_RANGE)
    try:
        low_watermark = replica.log.delete_records_before(offset)
    except LogError as exc:
        return _result(index, exc.error_code)
    except OSError:
        return _result(index, ErrorCode.KAFKA_STORAGE_ERROR)
    return _result(index, ErrorCode.NONE, low_watermark)


def _result(
    index: int, error: ErrorCode, low_watermark: int = INVALID_LOW_WATERMARK
) -> DeleteRecordsResponsePartition:
    return DeleteRecordsResponsePartition(
        partition_index=index, low_watermark=low_watermark, error_code=error
    )
