"""DeleteRecords (key 21), v0-v2."""

from __future__ import annotations

from weir.format.schema import INT16, INT32, INT64, STRING, Api, Array, Field, Message, Struct
from weir.wire.api_keys import ApiKey

DELETE_RECORDS_REQUEST = Message(
    "DeleteRecordsRequest",
    valid="0-2",
    flexible="2+",
    fields=[
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
                                Field("offset", INT64),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field("timeout_ms", INT32),
    ],
)

DELETE_RECORDS_RESPONSE = Message(
    "DeleteRecordsResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        Field("throttle_time_ms", INT32),
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
                                Field("low_watermark", INT64),
                                Field("error_code", INT16),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

DELETE_RECORDS = Api(ApiKey.DELETE_RECORDS, DELETE_RECORDS_REQUEST, DELETE_RECORDS_RESPONSE, (0, 2))
