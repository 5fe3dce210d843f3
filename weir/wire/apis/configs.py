"""Configuration APIs: DescribeConfigs (32) v1-v4, AlterConfigs (33) v0-v2,
IncrementalAlterConfigs (44) v0-v1."""

from __future__ import annotations

from weir.format.schema import BOOL, INT8, INT16, INT32, STRING, Api, Array, Field, Message, Struct
from weir.wire.api_keys import ApiKey

DESCRIBE_CONFIGS_REQUEST = Message(
    "DescribeConfigsRequest",
    valid="1-4",
    flexible="4+",
    fields=[
        Field(
            "resources",
            Array(
                Struct(
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                    # null: every key
                    Field("configuration_keys", Array(STRING), nullable="0+", default=None),
                )
            ),
        ),
        Field("include_synonyms", BOOL, "1+", default=False),
        Field("include_documentation", BOOL, "3+", default=False),
    ],
)

_CONFIG_RESULT = Struct(
    Field("name", STRING),
    Field("value", STRING, nullable="0+"),
    Field("read_only", BOOL),
    Field("is_default", BOOL, "0"),
    Field("config_source", INT8, "1+", default=-1),
    Field("is_sensitive", BOOL),
    Field(
        "synonyms",
        Array(
            Struct(
                Field("name", STRING, "1+"),
                Field("value", STRING, "1+", nullable="0+"),
                Field("source", INT8, "1+"),
            )
        ),
        "1+",
    ),
    Field("config_type", INT8, "3+", default=0),
    Field("documentation", STRING, "3+", nullable="0+"),
)

DESCRIBE_CONFIGS_RESPONSE = Message(
    "DescribeConfigsResponse",
    valid="1-4",
    flexible="4+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field(
            "results",
            Array(
                Struct(
                    Field("error_code", INT16),
                    Field("error_message", STRING, nullable="0+"),
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                    Field("configs", Array(_CONFIG_RESULT)),
                )
            ),
        ),
    ],
)

DESCRIBE_CONFIGS = Api(
    ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_REQUEST, DESCRIBE_CONFIGS_RESPONSE, (1, 4)
)

_ALTER_RESOURCE_RESPONSE = Struct(
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+"),
    Field("resource_type", INT8),
    Field("resource_name", STRING),
)

ALTER_CONFIGS_REQUEST = Message(
    "AlterConfigsRequest",
    valid="0-2",
    flexible="2+",
    fields=[
        Field(
            "resources",
            Array(
                Struct(
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
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
        Field("validate_only", BOOL),
    ],
)

ALTER_CONFIGS_RESPONSE = Message(
    "AlterConfigsResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("responses", Array(_ALTER_RESOURCE_RESPONSE)),
    ],
)

ALTER_CONFIGS = Api(ApiKey.ALTER_CONFIGS, ALTER_CONFIGS_REQUEST, ALTER_CONFIGS_RESPONSE, (0, 2))

# config_operation: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
INCREMENTAL_ALTER_CONFIGS_REQUEST = Message(
    "IncrementalAlterConfigsRequest",
    valid="0-1",
    flexible="1+",
    fields=[
        Field(
            "resources",
            Array(
                Struct(
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                    Field(
                        "configs",
                        Array(
                            Struct(
                                Field("name", STRING),
                                Field("config_operation", INT8),
                                Field("value", STRING, nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field("validate_only", BOOL),
    ],
)

INCREMENTAL_ALTER_CONFIGS_RESPONSE = Message(
    "IncrementalAlterConfigsResponse",
    valid="0-1",
    flexible="1+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("responses", Array(_ALTER_RESOURCE_RESPONSE)),
    ],
)

INCREMENTAL_ALTER_CONFIGS = Api(
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS_REQUEST,
    INCREMENTAL_ALTER_CONFIGS_RESPONSE,
    (0, 1),
)
