"""Produce (key 0), v3-v12 (v10: KIP-951's leader hints; v11: only a new error code, for
transactions; v12: the same fields, meaning KIP-890's transaction version 2: a
transactional batch adds its partition to the transaction implicitly). Records are
zero-copy slices of the request frame."""

from __future__ import annotations

from weir.format.schema import (
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    Api,
    Array,
    Field,
    Message,
    Struct,
)
from weir.wire.api_keys import ApiKey

PRODUCE_REQUEST = Message(
    "ProduceRequest",
    valid="3-12",
    flexible="9+",
    fields=[
        Field("transactional_id", STRING, "3+", nullable="3+", default=None),
        Field("acks", INT16),
        Field("timeout_ms", INT32),
        Field(
            "topic_data",
            Array(
                Struct(
                    Field("name", STRING),
                    Field(
                        "partition_data",
                        Array(
                            Struct(
                                Field("index", INT32),
                                Field("records", RECORDS, nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

_LEADER_ID_AND_EPOCH = Struct(
    Field("leader_id", INT32, "10+", default=-1),
    Field("leader_epoch", INT32, "10+", default=-1),
)

_PARTITION_RESPONSE = Struct(
    Field("index", INT32),
    Field("error_code", INT16),
    Field("base_offset", INT64),
    Field("log_append_time_ms", INT64, "2+", default=-1),
    Field("log_start_offset", INT64, "5+", default=-1),
    Field(
        "record_errors",
        Array(
            Struct(
                Field("batch_index", INT32, "8+"),
                Field("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
            )
        ),
        "8+",
    ),
    Field("error_message", STRING, "8+", nullable="8+", default=None),
    Field("current_leader", _LEADER_ID_AND_EPOCH, "10+", tag=0),
)

_NODE_ENDPOINT = Struct(
    Field("node_id", INT32, "10+"),
    Field("host", STRING, "10+"),
    Field("port", INT32, "10+"),
    Field("rack", STRING, "10+", nullable="10+", default=None),
)

PRODUCE_RESPONSE = Message(
    "ProduceResponse",
    valid="3-12",
    flexible="9+",
    fields=[
        Field(
            "responses",
            Array(
                Struct(
                    Field("name", STRING),
                    Field("partition_responses", Array(_PARTITION_RESPONSE)),
                )
            ),
        ),
        Field("throttle_time_ms", INT32, "1+", default=0),
        Field("node_endpoints", Array(_NODE_ENDPOINT), "10+", tag=0),
    ],
)

PRODUCE = Api(ApiKey.PRODUCE, PRODUCE_REQUEST, PRODUCE_RESPONSE, (3, 12))
