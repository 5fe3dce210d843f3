"""Metadata (key 3), v0-v12."""

from __future__ import annotations

from weir.format.schema import BOOL, INT16, INT32, STRING, UUID, Api, Array, Field, Message, Struct
from weir.wire.api_keys import ApiKey

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)

METADATA_REQUEST = Message(
    "MetadataRequest",
    valid="0-12",
    flexible="9+",
    fields=[
        Field(
            "topics",
            Array(
                Struct(
                    Field("topic_id", UUID, "10+"),
                    Field("name", STRING, nullable="10+"),
                )
            ),
            nullable="1+",
        ),
        Field("allow_auto_topic_creation", BOOL, "4+", default=True),
        Field("include_cluster_authorized_operations", BOOL, "8-10"),
        Field("include_topic_authorized_operations", BOOL, "8+"),
    ],
)

_BROKER = Struct(
    Field("node_id", INT32),
    Field("host", STRING),
    Field("port", INT32),
    Field("rack", STRING, "1+", nullable="1+", default=None),
)

_PARTITION = Struct(
    Field("error_code", INT16),
    Field("partition_index", INT32),
    Field("leader_id", INT32),
    Field("leader_epoch", INT32, "7+", default=-1),
    Field("replica_nodes", Array(INT32)),
    Field("isr_nodes", Array(INT32)),
    Field("offline_replicas", Array(INT32), "5+"),
)

_TOPIC = Struct(
    Field("error_code", INT16),
    Field("name", STRING, nullable="12+"),
    Field("topic_id", UUID, "10+"),
    Field("is_internal", BOOL, "1+", default=False),
    Field("partitions", Array(_PARTITION)),
    Field("topic_authorized_operations", INT32, "8+", default=AUTHORIZED_OPERATIONS_UNKNOWN),
)

METADATA_RESPONSE = Message(
    "MetadataResponse",
    valid="0-12",
    flexible="9+",
    fields=[
        Field("throttle_time_ms", INT32, "3+"),
        Field("brokers", Array(_BROKER)),
        Field("cluster_id", STRING, "2+", nullable="2+", default=None),
        Field("controller_id", INT32, "1+", default=-1),
        Field("topics", Array(_TOPIC)),
        Field(
            "cluster_authorized_operations",
            INT32,
            "8-10",
            default=AUTHORIZED_OPERATIONS_UNKNOWN,
        ),
    ],
)

METADATA = Api(ApiKey.METADATA, METADATA_REQUEST, METADATA_RESPONSE, (0, 12))
