"""Leadership and replica placement of a cluster's partitions: ElectLeaders (key 43,
v0-v2), AlterPartitionReassignments (key 45, v0) and ListPartitionReassignments
(key 46, v0), as in Kafka's message specs."""

from __future__ import annotations

from weir.format.schema import INT8, INT16, INT32, STRING, Api, Array, Field, Message, Struct
from weir.wire.api_keys import ApiKey

ELECTION_TYPE_PREFERRED = 0
ELECTION_TYPE_UNCLEAN = 1
REASSIGNMENT_TIMEOUT_MS_DEFAULT = 60_000

ELECT_LEADERS_REQUEST = Message(
    "ElectLeadersRequest",
    valid="0-2",
    flexible="2+",
    fields=[
        Field("election_type", INT8, "1+", default=ELECTION_TYPE_PREFERRED),
        Field(
            "topic_partitions",
            Array(Struct(Field("topic", STRING), Field("partitions", Array(INT32)))),
            nullable="0+",
            default=None,
        ),
        Field("timeout_ms", INT32, default=60_000),
    ],
)

ELECT_LEADERS_RESPONSE = Message(
    "ElectLeadersResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "1+"),
        Field(
            "replica_election_results",
            Array(
                Struct(
                    Field("topic", STRING),
                    Field(
                        "partition_result",
                        Array(
                            Struct(
                                Field("partition_id", INT32),
                                Field("error_code", INT16),
                                Field("error_message", STRING, nullable="0+", default=None),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

ALTER_PARTITION_REASSIGNMENTS_REQUEST = Message(
    "AlterPartitionReassignmentsRequest",
    valid="0",
    flexible="0+",
    fields=[
        Field("timeout_ms", INT32, default=REASSIGNMENT_TIMEOUT_MS_DEFAULT),
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
                                Field("replicas", Array(INT32), nullable="0+", default=None),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

ALTER_PARTITION_REASSIGNMENTS_RESPONSE = Message(
    "AlterPartitionReassignmentsResponse",
    valid="0",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field(
            "responses",
            Array(
                Struct(
                    Field("name", STRING),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                Field("partition_index", INT32),
                                Field("error_code", INT16),
                                Field("error_message", STRING, nullable="0+", default=None),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

LIST_PARTITION_REASSIGNMENTS_REQUEST = Message(
    "ListPartitionReassignmentsRequest",
    valid="0",
    flexible="0+",
    fields=[
        Field("timeout_ms", INT32, default=REASSIGNMENT_TIMEOUT_MS_DEFAULT),
        Field(
            "topics",
            Array(Struct(Field("name", STRING), Field("partition_indexes", Array(INT32)))),
            nullable="0+",
            default=None,
        ),
    ],
)

LIST_PARTITION_REASSIGNMENTS_RESPONSE = Message(
    "ListPartitionReassignmentsResponse",
    valid="0",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
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
                                Field("replicas", Array(INT32)),
                                Field("adding_replicas", Array(INT32)),
                                Field("removing_replicas", Array(INT32)),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

ELECT_LEADERS = Api(ApiKey.ELECT_LEADERS, ELECT_LEADERS_REQUEST, ELECT_LEADERS_RESPONSE, (0, 2))
ALTER_PARTITION_REASSIGNMENTS = Api(
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ALTER_PARTITION_REASSIGNMENTS_REQUEST,
    ALTER_PARTITION_REASSIGNMENTS_RESPONSE,
    (0, 0),
)
LIST_PARTITION_REASSIGNMENTS = Api(
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS_REQUEST,
    LIST_PARTITION_REASSIGNMENTS_RESPONSE,
    (0, 0),
)
