"""OffsetForLeaderEpoch (key 23), v2-v4: how followers find where to truncate."""

from __future__ import annotations

from weir.format.schema import INT16, INT32, INT64, STRING, Api, Array, Field, Message, Struct
from weir.wire.api_keys import ApiKey

# replica_id -2: a consumer (not a follower) is asking.
CONSUMER_REPLICA_ID = -2

OFFSET_FOR_LEADER_EPOCH_REQUEST = Message(
    "OffsetForLeaderEpochRequest",
    valid="2-4",
    flexible="4+",
    fields=[
        Field("replica_id", INT32, "3+", default=CONSUMER_REPLICA_ID),
        Field(
            "topics",
            Array(
                Struct(
                    Field("topic", STRING),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                Field("partition", INT32),
                                Field("current_leader_epoch", INT32, "2+", default=-1),
                                Field("leader_epoch", INT32),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

OFFSET_FOR_LEADER_EPOCH_RESPONSE = Message(
    "OffsetForLeaderEpochResponse",
    valid="2-4",
    flexible="4+",
    fields=[
        Field("throttle_time_ms", INT32, "2+"),
        Field(
            "topics",
            Array(
                Struct(
                    Field("topic", STRING),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                Field("error_code", INT16),
                                Field("partition", INT32),
                                Field("leader_epoch", INT32, "1+", default=-1),
                                Field("end_offset", INT64, default=-1),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

OFFSET_FOR_LEADER_EPOCH = Api(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    OFFSET_FOR_LEADER_EPOCH_REQUEST,
    OFFSET_FOR_LEADER_EPOCH_RESPONSE,
    (2, 4),
)
