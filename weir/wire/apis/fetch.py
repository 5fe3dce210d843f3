"""Fetch (key 1), v4-v16. Records are zero-copy slices (decode) or any buffer (encode)."""

from __future__ import annotations

from weir.format.schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    Api,
    Array,
    Field,
    Message,
    Struct,
)
from weir.wire.api_keys import ApiKey

_FETCH_PARTITION = Struct(
    Field("partition", INT32),
    Field("current_leader_epoch", INT32, "9+", default=-1),
    Field("fetch_offset", INT64),
    Field("last_fetched_epoch", INT32, "12+", default=-1),
    Field("log_start_offset", INT64, "5+", default=-1),
    Field("partition_max_bytes", INT32),
    Field("replica_directory_id", UUID, "17+", tag=0),
)

FETCH_REQUEST = Message(
    "FetchRequest",
    valid="4-16",
    flexible="12+",
    fields=[
        Field("cluster_id", STRING, "12+", nullable="12+", tag=0, default=None),
        Field("replica_id", INT32, "0-14", default=-1),
        Field(
            "replica_state",
            Struct(
                Field("replica_id", INT32, "15+", default=-1),
                Field("replica_epoch", INT64, "15+", default=-1),
            ),
            "15+",
            tag=1,
        ),
        Field("max_wait_ms", INT32),
        Field("min_bytes", INT32),
        Field("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        Field("isolation_level", INT8, "4+", default=0),
        Field("session_id", INT32, "7+", default=0),
        Field("session_epoch", INT32, "7+", default=-1),
        Field(
            "topics",
            Array(
                Struct(
                    Field("topic", STRING, "0-12"),
                    Field("topic_id", UUID, "13+"),
                    Field("partitions", Array(_FETCH_PARTITION)),
                )
            ),
        ),
        Field(
            "forgotten_topics_data",
            Array(
                Struct(
                    Field("topic", STRING, "7-12"),
                    Field("topic_id", UUID, "13+"),
                    Field("partitions", Array(INT32), "7+"),
                )
            ),
            "7+",
        ),
        Field("rack_id", STRING, "11+", default=""),
    ],
)

_PARTITION_DATA = Struct(
    Field("partition_index", INT32),
    Field("error_code", INT16),
    Field("high_watermark", INT64),
    Field("last_stable_offset", INT64, "4+", default=-1),
    Field("log_start_offset", INT64, "5+", default=-1),
    Field(
        "diverging_epoch",
        Struct(
            Field("epoch", INT32, "12+", default=-1),
            Field("end_offset", INT64, "12+", default=-1),
        ),
        "12+",
        tag=0,
    ),
    Field(
        "current_leader",
        Struct(
            Field("leader_id", INT32, "12+", default=-1),
            Field("leader_epoch", INT32, "12+", default=-1),
        ),
        "12+",
        tag=1,
    ),
    Field(
        "snapshot_id",
        Struct(
            Field("end_offset", INT64, default=-1),
            Field("epoch", INT32, default=-1),
        ),
        "12+",
        tag=2,
    ),
    Field(
        "aborted_transactions",
        Array(
            Struct(
                Field("producer_id", INT64, "4+"),
                Field("first_offset", INT64, "4+"),
            )
        ),
        "4+",
        nullable="4+",
    ),
    Field("preferred_read_replica", INT32, "11+", default=-1),
    Field("records", RECORDS, nullable="0+"),
)

FETCH_RESPONSE = Message(
    "FetchResponse",
    valid="4-16",
    flexible="12+",
    fields=[
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "7+"),
        Field("session_id", INT32, "7+", default=0),
        Field(
            "responses",
            Array(
                Struct(
                    Field("topic", STRING, "0-12"),
                    Field("topic_id", UUID, "13+"),
                    Field("partitions", Array(_PARTITION_DATA)),
                )
            ),
        ),
        Field(
            "node_endpoints",
            Array(
                Struct(
                    Field("node_id", INT32, "16+"),
                    Field("host", STRING, "16+"),
                    Field("port", INT32, "16+"),
                    Field("rack", STRING, "16+", nullable="16+", default=None),
                )
            ),
            "16+",
            tag=0,
        ),
    ],
)

FETCH = Api(ApiKey.FETCH, FETCH_REQUEST, FETCH_RESPONSE, (4, 16))
