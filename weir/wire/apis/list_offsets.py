"""ListOffsets (key 2), v1-v11."""

from __future__ import annotations

from weir.format.schema import INT8, INT16, INT32, INT64, STRING, Api, Array, Field, Message, Struct
from weir.wire.api_keys import ApiKey

LIST_OFFSETS_REQUEST = Message(
    "ListOffsetsRequest",
    valid="1-11",
    flexible="6+",
    fields=[
        Field("replica_id", INT32),
        Field("isolation_level", INT8, "2+"),
        Field(
            "topics",
            Array(
                Struct(
                    Field("name", STRING),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                Field("partition_index", INT32),
                                Field("current_leader_epoch", INT32, "4+", default=-1),
                                Field("timestamp", INT64),
                                Field("max_num_offsets", INT32, "0", default=1),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field("timeout_ms", INT32, "10+"),
    ],
)

LIST_OFFSETS_RESPONSE = Message(
    "ListOffsetsResponse",
    valid="1-11",
    flexible="6+",
    fields=[
        Field("throttle_time_ms", INT32, "2+"),
        Field(
            "topics",
            Array(
                Struct(
                    Field("name", STRING),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                Field("partition_index", INT32),
                                Field("error_code", INT16),
                                Field("old_style_offsets", Array(INT64), "0"),
                                Field("timestamp", INT64, "1+", default=-1),
                                Field("offset", INT64, "1+", default=-1),
                                Field("leader_epoch", INT32, "4+", default=-1),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

LIST_OFFSETS = Api(ApiKey.LIST_OFFSETS, LIST_OFFSETS_REQUEST, LIST_OFFSETS_RESPONSE, (1, 11))
