"""DescribeCluster (key 60), v0-v1 (flexible in every version)."""

from __future__ import annotations

from weir.format.schema import BOOL, INT8, INT16, INT32, STRING, Api, Array, Field, Message, Struct
from weir.wire.api_keys import ApiKey

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)
ENDPOINT_TYPE_BROKER = 1

DESCRIBE_CLUSTER_REQUEST = Message(
    "DescribeClusterRequest",
    valid="0-1",
    flexible="0+",
    fields=[
        Field("include_cluster_authorized_operations", BOOL),
        Field("endpoint_type", INT8, "1+", default=ENDPOINT_TYPE_BROKER),
    ],
)

DESCRIBE_CLUSTER_RESPONSE = Message(
    "DescribeClusterResponse",
    valid="0-1",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("endpoint_type", INT8, "1+", default=ENDPOINT_TYPE_BROKER),
        Field("cluster_id", STRING),
        Field("controller_id", INT32, default=-1),
        Field(
            "brokers",
            Array(
                Struct(
                    Field("broker_id", INT32),
                    Field("host", STRING),
                    Field("port", INT32),
                    Field("rack", STRING, nullable="0+", default=None),
                )
            ),
        ),
        Field("cluster_authorized_operations", INT32, default=AUTHORIZED_OPERATIONS_UNKNOWN),
    ],
)

DESCRIBE_CLUSTER = Api(
    ApiKey.DESCRIBE_CLUSTER, DESCRIBE_CLUSTER_REQUEST, DESCRIBE_CLUSTER_RESPONSE, (0, 1)
)
