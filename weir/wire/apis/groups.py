"""Classic consumer-group membership: FindCoordinator (10) v0-4, JoinGroup (11) v0-9,
Heartbeat (12) v0-4, LeaveGroup (13) v0-5, SyncGroup (14) v0-5.

Transcribed from Kafka's message specs (clients/src/main/resources/common/message).
Protocol metadata and assignments stay opaque `bytes` here; the embedded consumer
protocol is decoded by whoever needs it.
"""

from __future__ import annotations

from weir.format.schema import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    STRING,
    Api,
    Array,
    Field,
    Message,
    Struct,
)
from weir.wire.api_keys import ApiKey

COORDINATOR_KEY_TYPE_GROUP = 0
COORDINATOR_KEY_TYPE_TRANSACTION = 1

FIND_COORDINATOR_REQUEST = Message(
    "FindCoordinatorRequest",
    valid="0-4",
    flexible="3+",
    fields=[
        Field("key", STRING, "0-3"),
        Field("key_type", INT8, "1+", default=COORDINATOR_KEY_TYPE_GROUP),
        Field("coordinator_keys", Array(STRING), "4+"),
    ],
)

FIND_COORDINATOR_RESPONSE = Message(
    "FindCoordinatorResponse",
    valid="0-4",
    flexible="3+",
    fields=[
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "0-3"),
        Field("error_message", STRING, "1-3", nullable="1-3", default=None),
        Field("node_id", INT32, "0-3"),
        Field("host", STRING, "0-3"),
        Field("port", INT32, "0-3"),
        Field(
            "coordinators",
            Array(
                Struct(
                    Field("key", STRING, "4+"),
                    Field("node_id", INT32, "4+"),
                    Field("host", STRING, "4+"),
                    Field("port", INT32, "4+"),
                    Field("error_code", INT16, "4+"),
                    Field("error_message", STRING, "4+", nullable="4+", default=None),
                )
            ),
            "4+",
        ),
    ],
)

JOIN_GROUP_REQUEST = Message(
    "JoinGroupRequest",
    valid="0-9",
    flexible="6+",
    fields=[
        Field("group_id", STRING),
        Field("session_timeout_ms", INT32),
        Field("rebalance_timeout_ms", INT32, "1+", default=-1),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "5+", nullable="5+", default=None),
        Field("protocol_type", STRING),
        Field("protocols", Array(Struct(Field("name", STRING), Field("metadata", BYTES)))),
        Field("reason", STRING, "8+", nullable="8+", default=None),
    ],
)

JOIN_GROUP_RESPONSE = Message(
    "JoinGroupResponse",
    valid="0-9",
    flexible="6+",
    fields=[
        Field("throttle_time_ms", INT32, "2+"),
        Field("error_code", INT16),
        Field("generation_id", INT32, default=-1),
        Field("protocol_type", STRING, "7+", nullable="7+", default=None),
        Field("protocol_name", STRING, nullable="7+"),
        Field("leader", STRING),
        Field("skip_assignment", BOOL, "9+", default=False),
        Field("member_id", STRING),
        Field(
            "members",
            Array(
                Struct(
                    Field("member_id", STRING),
                    Field("group_instance_id", STRING, "5+", nullable="5+", default=None),
                    Field("metadata", BYTES),
                )
            ),
        ),
    ],
)

HEARTBEAT_REQUEST = Message(
    "HeartbeatRequest",
    valid="0-4",
    flexible="4+",
    fields=[
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
    ],
)

HEARTBEAT_RESPONSE = Message(
    "HeartbeatResponse",
    valid="0-4",
    flexible="4+",
    fields=[Field("throttle_time_ms", INT32, "1+"), Field("error_code", INT16)],
)

LEAVE_GROUP_REQUEST = Message(
    "LeaveGroupRequest",
    valid="0-5",
    flexible="4+",
    fields=[
        Field("group_id", STRING),
        Field("member_id", STRING, "0-2"),
        Field(
            "members",
            Array(
                Struct(
                    Field("member_id", STRING, "3+"),
                    Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
                    Field("reason", STRING, "5+", nullable="5+", default=None),
                )
            ),
            "3+",
        ),
    ],
)

LEAVE_GROUP_RESPONSE = Message(
    "LeaveGroupResponse",
    valid="0-5",
    flexible="4+",
    fields=[
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16),
        Field(
            "members",
            Array(
                Struct(
                    Field("member_id", STRING, "3+"),
                    Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
                    Field("error_code", INT16, "3+"),
                )
            ),
            "3+",
        ),
    ],
)

SYNC_GROUP_REQUEST = Message(
    "SyncGroupRequest",
    valid="0-5",
    flexible="4+",
    fields=[
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
        Field("protocol_type", STRING, "5+", nullable="5+", default=None),
        Field("protocol_name", STRING, "5+", nullable="5+", default=None),
        Field("assignments", Array(Struct(Field("member_id", STRING), Field("assignment", BYTES)))),
    ],
)

SYNC_GROUP_RESPONSE = Message(
    "SyncGroupResponse",
    valid="0-5",
    flexible="4+",
    fields=[
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16),
        Field("protocol_type", STRING, "5+", nullable="5+", default=None),
        Field("protocol_name", STRING, "5+", nullable="5+", default=None),
        Field("assignment", BYTES),
    ],
)

FIND_COORDINATOR = Api(
    ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_REQUEST, FIND_COORDINATOR_RESPONSE, (0, 4)
)
JOIN_GROUP = Api(ApiKey.JOIN_GROUP, JOIN_GROUP_REQUEST, JOIN_GROUP_RESPONSE, (0, 9))
HEARTBEAT = Api(ApiKey.HEARTBEAT, HEARTBEAT_REQUEST, HEARTBEAT_RESPONSE, (0, 4))
LEAVE_GROUP = Api(ApiKey.LEAVE_GROUP, LEAVE_GROUP_REQUEST, LEAVE_GROUP_RESPONSE, (0, 5))
SYNC_GROUP = Api(ApiKey.SYNC_GROUP, SYNC_GROUP_REQUEST, SYNC_GROUP_RESPONSE, (0, 5))

# -- group administration -----------------------------------------------------------

LIST_GROUPS_REQUEST = Message(
    "ListGroupsRequest",
    valid="0-5",
    flexible="3+",
    fields=[
        Field("states_filter", Array(STRING), "4+"),
        Field("types_filter", Array(STRING), "5+"),
    ],
)

LIST_GROUPS_RESPONSE = Message(
    "ListGroupsResponse",
    valid="0-5",
    flexible="3+",
    fields=[
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16),
        Field(
            "groups",
            Array(
                Struct(
                    Field("group_id", STRING),
                    Field("protocol_type", STRING),
                    Field("group_state", STRING, "4+"),
                    Field("group_type", STRING, "5+"),
                )
            ),
        ),
    ],
)

# Declared to v6 (Kafka 4.4: GROUP_ID_NOT_FOUND for an unknown group, KIP-1043, and a
# per-group error message); served to the `DESCRIBE_GROUPS` Api's versions below.
DESCRIBE_GROUPS_REQUEST = Message(
    "DescribeGroupsRequest",
    valid="0-6",
    flexible="5+",
    fields=[
        Field("groups", Array(STRING)),
        Field("include_authorized_operations", BOOL, "3+"),
    ],
)

DESCRIBE_GROUPS_RESPONSE = Message(
    "DescribeGroupsResponse",
    valid="0-6",
    flexible="5+",
    fields=[
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "groups",
            Array(
                Struct(
                    Field("error_code", INT16),
                    Field("error_message", STRING, "6+", nullable="6+", default=None),
                    Field("group_id", STRING),
                    Field("group_state", STRING),
                    Field("protocol_type", STRING),
                    Field("protocol_data", STRING),
                    Field(
                        "members",
                        Array(
                            Struct(
                                Field("member_id", STRING),
                                Field(
                                    "group_instance_id", STRING, "4+", nullable="4+", default=None
                                ),
                                Field("client_id", STRING),
                                Field("client_host", STRING),
                                Field("member_metadata", BYTES),
                                Field("member_assignment", BYTES),
                            )
                        ),
                    ),
                    Field("authorized_operations", INT32, "3+", default=-(2**31)),
                )
            ),
        ),
    ],
)

DELETE_GROUPS_REQUEST = Message(
    "DeleteGroupsRequest",
    valid="0-2",
    flexible="2+",
    fields=[Field("groups_names", Array(STRING))],
)

DELETE_GROUPS_RESPONSE = Message(
    "DeleteGroupsResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(Field("group_id", STRING), Field("error_code", INT16)))),
    ],
)

OFFSET_DELETE_REQUEST = Message(
    "OffsetDeleteRequest",
    valid="0",
    flexible="none",
    fields=[
        Field("group_id", STRING),
        Field(
            "topics",
            Array(
                Struct(
                    Field("name", STRING),
                    Field("partitions", Array(Struct(Field("partition_index", INT32)))),
                )
            ),
        ),
    ],
)

OFFSET_DELETE_RESPONSE = Message(
    "OffsetDeleteResponse",
    valid="0",
    flexible="none",
    fields=[
        Field("error_code", INT16),
        Field("throttle_time_ms", INT32),
        Field(
            "topics",
            Array(
                Struct(
                    Field("name", STRING),
                    Field(
                        "partitions",
                        Array(Struct(Field("partition_index", INT32), Field("error_code", INT16))),
                    ),
                )
            ),
        ),
    ],
)

LIST_GROUPS = Api(ApiKey.LIST_GROUPS, LIST_GROUPS_REQUEST, LIST_GROUPS_RESPONSE, (0, 5))
DESCRIBE_GROUPS = Api(
    ApiKey.DESCRIBE_GROUPS, DESCRIBE_GROUPS_REQUEST, DESCRIBE_GROUPS_RESPONSE, (0, 5)
)
DELETE_GROUPS = Api(ApiKey.DELETE_GROUPS, DELETE_GROUPS_REQUEST, DELETE_GROUPS_RESPONSE, (0, 2))
OFFSET_DELETE = Api(ApiKey.OFFSET_DELETE, OFFSET_DELETE_REQUEST, OFFSET_DELETE_RESPONSE, (0, 0))
