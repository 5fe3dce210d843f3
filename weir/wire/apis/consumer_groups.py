"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68) v0-1, ConsumerGroupDescribe (69) v0.

Transcribed from Kafka's message specs. In the heartbeat request a null field means
"unchanged since the last heartbeat"; in the response a null assignment means
"unchanged".
"""

from __future__ import annotations

from weir.format.schema import BOOL, INT16, INT32, STRING, UUID, Api, Array, Field, Message, Struct
from weir.wire.api_keys import ApiKey

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)


def _topic_partitions(*, named: bool) -> Struct:
    fields = [Field("topic_id", UUID)]
    if named:
        fields.append(Field("topic_name", STRING))
    fields.append(Field("partitions", Array(INT32)))
    return Struct(*fields)


CONSUMER_GROUP_HEARTBEAT_REQUEST = Message(
    "ConsumerGroupHeartbeatRequest",
    valid="0-1",
    flexible="0+",
    fields=[
        Field("group_id", STRING),
        Field("member_id", STRING),
        Field("member_epoch", INT32),
        Field("instance_id", STRING, nullable="0+", default=None),
        Field("rack_id", STRING, nullable="0+", default=None),
        Field("rebalance_timeout_ms", INT32, default=-1),
        Field("subscribed_topic_names", Array(STRING), nullable="0+", default=None),
        Field("subscribed_topic_regex", STRING, "1+", nullable="1+", default=None),
        Field("server_assignor", STRING, nullable="0+", default=None),
        Field(
            "topic_partitions",
            Array(_topic_partitions(named=False)),
            nullable="0+",
            default=None,
        ),
    ],
)

CONSUMER_GROUP_HEARTBEAT_RESPONSE = Message(
    "ConsumerGroupHeartbeatResponse",
    valid="0-1",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("member_id", STRING, nullable="0+", default=None),
        Field("member_epoch", INT32),
        Field("heartbeat_interval_ms", INT32),
        Field(
            "assignment",
            Struct(Field("topic_partitions", Array(_topic_partitions(named=False)))),
            nullable="0+",
            default=None,
        ),
    ],
)

CONSUMER_GROUP_DESCRIBE_REQUEST = Message(
    "ConsumerGroupDescribeRequest",
    valid="0",
    flexible="0+",
    fields=[
        Field("group_ids", Array(STRING)),
        Field("include_authorized_operations", BOOL),
    ],
)

_ASSIGNMENT = Struct(Field("topic_partitions", Array(_topic_partitions(named=True))))

CONSUMER_GROUP_DESCRIBE_RESPONSE = Message(
    "ConsumerGroupDescribeResponse",
    valid="0",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field(
            "groups",
            Array(
                Struct(
                    Field("error_code", INT16),
                    Field("error_message", STRING, nullable="0+", default=None),
                    Field("group_id", STRING),
                    Field("group_state", STRING),
                    Field("group_epoch", INT32),
                    Field("assignment_epoch", INT32),
                    Field("assignor_name", STRING),
                    Field(
                        "members",
                        Array(
                            Struct(
                                Field("member_id", STRING),
                                Field("instance_id", STRING, nullable="0+", default=None),
                                Field("rack_id", STRING, nullable="0+", default=None),
                                Field("member_epoch", INT32),
                                Field("client_id", STRING),
                                Field("client_host", STRING),
                                Field("subscribed_topic_names", Array(STRING)),
                                Field(
                                    "subscribed_topic_regex", STRING, nullable="0+", default=None
                                ),
                                Field("assignment", _ASSIGNMENT),
                                Field("target_assignment", _ASSIGNMENT),
                            )
                        ),
                    ),
                    Field("authorized_operations", INT32, default=AUTHORIZED_OPERATIONS_UNKNOWN),
                )
            ),
        ),
    ],
)

CONSUMER_GROUP_HEARTBEAT = Api(
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    CONSUMER_GROUP_HEARTBEAT_REQUEST,
    CONSUMER_GROUP_HEARTBEAT_RESPONSE,
    (0, 1),
)
CONSUMER_GROUP_DESCRIBE = Api(
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_DESCRIBE_REQUEST,
    CONSUMER_GROUP_DESCRIBE_RESPONSE,
    (0, 0),
)
