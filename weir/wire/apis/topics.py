"""Topic administration: CreateTopics (19) v2-v7, DeleteTopics (20) v1-v6,
CreatePartitions (37) v0-v3."""

from __future__ import annotations

from weir.format.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    UUID,
    Api,
    Array,
    Field,
    Message,
    Struct,
)
from weir.wire.api_keys import ApiKey

CREATE_TOPICS_REQUEST = Message(
    "CreateTopicsRequest",
    valid="2-7",
    flexible="5+",
    fields=[
        Field(
            "topics",
            Array(
                Struct(
                    Field("name", STRING),
                    Field("num_partitions", INT32),
                    Field("replication_factor", INT16),
                    Field(
                        "assignments",
                        Array(
                            Struct(
                                Field("partition_index", INT32),
                                Field("broker_ids", Array(INT32)),
                            )
                        ),
                    ),
                    Field(
                        "configs",
                        Array(
                            Struct(
                                Field("name", STRING),
                                Field("value", STRING, nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field("timeout_ms", INT32, default=60000),
        Field("validate_only", BOOL, "1+", default=False),
    ],
)

CREATE_TOPICS_RESPONSE = Message(
    "CreateTopicsResponse",
    valid="2-7",
    flexible="5+",
    fields=[
        Field("throttle_time_ms", INT32, "2+"),
        Field(
            "topics",
            Array(
                Struct(
                    Field("name", STRING),
                    Field("topic_id", UUID, "7+"),
                    Field("error_code", INT16),
                    Field("error_message", STRING, "1+", nullable="0+"),
                    Field("topic_config_error_code", INT16, "5+", tag=0),
                    Field("num_partitions", INT32, "5+", default=-1),
                    Field("replication_factor", INT16, "5+", default=-1),
                    Field(
                        "configs",
                        Array(
                            Struct(
                                Field("name", STRING, "5+"),
                                Field("value", STRING, "5+", nullable="5+"),
                                Field("read_only", BOOL, "5+"),
                                Field("config_source", INT8, "5+", default=-1),
                                Field("is_sensitive", BOOL, "5+"),
                            )
                        ),
                        "5+",
                        nullable="5+",
                    ),
                )
            ),
        ),
    ],
)

CREATE_TOPICS = Api(ApiKey.CREATE_TOPICS, CREATE_TOPICS_REQUEST, CREATE_TOPICS_RESPONSE, (2, 7))

DELETE_TOPICS_REQUEST = Message(
    "DeleteTopicsRequest",
    valid="1-6",
    flexible="4+",
    fields=[
        Field(
            "topics",
            Array(
                Struct(
                    Field("name", STRING, "6+", nullable="6+", default=None),
                    Field("topic_id", UUID, "6+"),
                )
            ),
            "6+",
        ),
        Field("topic_names", Array(STRING), "0-5"),
        Field("timeout_ms", INT32),
    ],
)

DELETE_TOPICS_RESPONSE = Message(
    "DeleteTopicsResponse",
    valid="1-6",
    flexible="4+",
    fields=[
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "responses",
            Array(
                Struct(
                    Field("name", STRING, nullable="6+"),
                    Field("topic_id", UUID, "6+"),
                    Field("error_code", INT16),
                    Field("error_message", STRING, "5+", nullable="5+", default=None),
                )
            ),
        ),
    ],
)

DELETE_TOPICS = Api(ApiKey.DELETE_TOPICS, DELETE_TOPICS_REQUEST, DELETE_TOPICS_RESPONSE, (1, 6))

CREATE_PARTITIONS_REQUEST = Message(
    "CreatePartitionsRequest",
    valid="0-3",
    flexible="2+",
    fields=[
        Field(
            "topics",
            Array(
                Struct(
                    Field("name", STRING),
                    Field("count", INT32),
                    # null: let the broker place the new partitions
                    Field(
                        "assignments",
                        Array(Struct(Field("broker_ids", Array(INT32)))),
                        nullable="0+",
                        default=None,
                    ),
                )
            ),
        ),
        Field("timeout_ms", INT32),
        Field("validate_only", BOOL),
    ],
)

CREATE_PARTITIONS_RESPONSE = Message(
    "CreatePartitionsResponse",
    valid="0-3",
    flexible="2+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field(
            "results",
            Array(
                Struct(
                    Field("name", STRING),
                    Field("error_code", INT16),
                    Field("error_message", STRING, nullable="0+", default=None),
                )
            ),
        ),
    ],
)

CREATE_PARTITIONS = Api(
    ApiKey.CREATE_PARTITIONS, CREATE_PARTITIONS_REQUEST, CREATE_PARTITIONS_RESPONSE, (0, 3)
)
