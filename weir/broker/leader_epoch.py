"""OffsetForLeaderEpoch v2–v4: where a leader epoch ends in this log (KIP-101/279)."""

from __future__ import annotations

from typing import Any

from weir.broker.broker import PartitionReplica
from weir.broker.context import RequestContext
from weir.format.errors import ErrorCode

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


async def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        partitions = [
            _end_offset(broker.lookup(topic.topic, p.partition), p) for p in topic.partitions
        ]
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def _end_offset(replica: PartitionReplica | ErrorCode, request_part: Any) -> dict[str, Any]:
    result = {
        "error_code": ErrorCode.NONE,
        "partition": request_part.partition,
        "leader_epoch": UNDEFINED_EPOCH,
        "end_offset": UNDEFINED_OFFSET,
    }
    if isinstance(replica, ErrorCode):
        result["error_code"] = replica
        return result
    epoch_error = replica.check_leader_epoch(request_part.current_leader_epoch)
    if epoch_error != ErrorCode.NONE:
        result["error_code"] = epoch_error
        return result
    epoch, end_offset = replica.log.end_offset_for_epoch(request_part.leader_epoch)
    result["leader_epoch"] = epoch
    result["end_offset"] = end_offset
    return result
