"""The body of a consumer's Fetch without a fetch session, of some partitions of one
topic from given offsets: what the CLI's consumer, the REST records API and dead-letter
redrive send (a follower's fetch, `weir.broker.cluster.replication`, is another)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
# A Fetch outside any fetch session (KIP-227): session 0, epoch -1.
SESSIONLESS_ID, SESSIONLESS_EPOCH = 0, -1
UNKNOWN_EPOCH = -1


def consumer_fetch_body(
    topic: str,
    offsets: Mapping[int, int],
    *,
    bytes_max: int,
    partition_bytes_max: int | None = None,
    isolation_level: int = READ_UNCOMMITTED,
    wait_ms: int = 0,
) -> dict[str, Any]:
    """Fetch `offsets` ({partition: fetch offset}) of `topic` (by name: no topic id)."""
    return {
        "replica_id": CONSUMER_REPLICA_ID,
        "max_wait_ms": wait_ms,
        "min_bytes": 1,
        "max_bytes": bytes_max,
        "isolation_level": isolation_level,
        "session_id": SESSIONLESS_ID,
        "session_epoch": SESSIONLESS_EPOCH,
        "topics": [
            {
                "topic": topic,
                "topic_id": uuid.UUID(int=0),
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": UNKNOWN_EPOCH,
                        "fetch_offset": offset,
                        "last_fetched_epoch": UNKNOWN_EPOCH,
                        "log_start_offset": -1,
                        "partition_max_bytes": partition_bytes_max or bytes_max,
                    }
                    for partition, offset in offsets.items()
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
