"""KIP-932 share groups, at the versions Kafka 4.4 serves: ShareGroupHeartbeat (76) v1,
ShareGroupDescribe (77) v1, ShareFetch (78) v1-2, ShareAcknowledge (79) v1-2,
DescribeShareGroupOffsets (90) v0-1, AlterShareGroupOffsets (91) v0 and
DeleteShareGroupOffsets (92) v0.

Transcribed from the message specs inside the kafka-clients 4.4.0 jar
(`common/message/*.json`) and checked byte for byte against its generated Java classes
(`tests/wire/test_share_groups_wire.py`, fixtures from `compat_tests/java/wire-check/`).
Every version of every message is flexible and none has a tagged field.

Version 0 of the first four APIs was KIP-932's early access in Kafka 4.0 and was
removed in 4.1; it is not declared. Their specs still say "0+" for most fields, which
here is every valid version; ShareFetch's `PartitionMaxBytes` existed only in v0 and is
left out. `mapKey` (Kafka's hashed collections) has no wire effect.

Defaults follow the generated Java classes where the spec leaves them implicit: a
nullable string without a "default" is "" (ShareFetch's and ShareAcknowledge's
`member_id`), and ShareFetch's `records`, non-nullable from v1, defaults to an empty
record set (Java's default is null, which it cannot serialize).
"""

from __future__ import annotations

from weir.format.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    Api,
    Array,
    Field,
    Message,
    Struct,
)
from weir.wire.api_keys import ApiKey

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)

# ShareFetch's acquire modes (`share_acquire_mode`, v2+; KIP-1206).
SHARE_ACQUIRE_MODE_BATCH_OPTIMIZED = 0
SHARE_ACQUIRE_MODE_RECORD_LIMIT = 1

# Acknowledge types, one per offset (or one for a whole batch) in `acknowledge_types`.
ACKNOWLEDGE_TYPE_GAP = 0
ACKNOWLEDGE_TYPE_ACCEPT = 1
ACKNOWLEDGE_TYPE_RELEASE = 2
ACKNOWLEDGE_TYPE_REJECT = 3
ACKNOWLEDGE_TYPE_RENEW = 4  # v2+ (KIP-1222), with `is_renew_ack`

# ShareSessionEpoch: 0 opens a share session, -1 closes it; otherwise it increments.
SHARE_SESSION_EPOCH_INITIAL = 0
SHARE_SESSION_EPOCH_FINAL = -1


def _error_fields() -> list[Field]:
    return [
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
    ]


# -- ShareGroupHeartbeat (76) ---------------------------------------------------------

SHARE_GROUP_HEARTBEAT_REQUEST = Message(
    "ShareGroupHeartbeatRequest",
    valid="1",
    flexible="0+",
    fields=[
        Field("group_id", STRING),
        Field("member_id", STRING),
        Field("member_epoch", INT32),
        Field("rack_id", STRING, nullable="0+", default=None),
        Field("subscribed_topic_names", Array(STRING), nullable="0+", default=None),
    ],
)

SHARE_GROUP_HEARTBEAT_RESPONSE = Message(
    "ShareGroupHeartbeatResponse",
    valid="1",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        *_error_fields(),
        Field("member_id", STRING, nullable="0+", default=None),
        Field("member_epoch", INT32),
        Field("heartbeat_interval_ms", INT32),
        Field(
            "assignment",
            Struct(
                Field(
                    "topic_partitions",
                    Array(Struct(Field("topic_id", UUID), Field("partitions", Array(INT32)))),
                )
            ),
            nullable="0+",
            default=None,
        ),
    ],
)

# -- ShareGroupDescribe (77) ----------------------------------------------------------

SHARE_GROUP_DESCRIBE_REQUEST = Message(
    "ShareGroupDescribeRequest",
    valid="1",
    flexible="0+",
    fields=[
        Field("group_ids", Array(STRING)),
        Field("include_authorized_operations", BOOL),
    ],
)

SHARE_GROUP_DESCRIBE_RESPONSE = Message(
    "ShareGroupDescribeResponse",
    valid="1",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field(
            "groups",
            Array(
                Struct(
                    *_error_fields(),
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
                                Field("rack_id", STRING, nullable="0+", default=None),
                                Field("member_epoch", INT32),
                                Field("client_id", STRING),
                                Field("client_host", STRING),
                                Field("subscribed_topic_names", Array(STRING)),
                                Field(
                                    "assignment",
                                    Struct(
                                        Field(
                                            "topic_partitions",
                                            Array(
                                                Struct(
                                                    Field("topic_id", UUID),
                                                    Field("topic_name", STRING),
                                                    Field("partitions", Array(INT32)),
                                                )
                                            ),
                                        )
                                    ),
                                ),
                            )
                        ),
                    ),
                    Field("authorized_operations", INT32, default=AUTHORIZED_OPERATIONS_UNKNOWN),
                )
            ),
        ),
    ],
)

# -- ShareFetch (78) and ShareAcknowledge (79) ----------------------------------------


def _acknowledgement_batches() -> Field:
    """Offsets [first_offset, last_offset] and their acknowledge types: one type for
    the whole range, or one per offset (ACKNOWLEDGE_TYPE_*)."""
    return Field(
        "acknowledgement_batches",
        Array(
            Struct(
                Field("first_offset", INT64),
                Field("last_offset", INT64),
                Field("acknowledge_types", Array(INT8)),
            )
        ),
    )


def _current_leader() -> Field:
    return Field(
        "current_leader",
        Struct(Field("leader_id", INT32), Field("leader_epoch", INT32)),
    )


def _node_endpoints() -> Field:
    """The leaders named by partitions that answered NOT_LEADER_OR_FOLLOWER."""
    return Field(
        "node_endpoints",
        Array(
            Struct(
                Field("node_id", INT32),
                Field("host", STRING),
                Field("port", INT32),
                Field("rack", STRING, nullable="0+", default=None),
            )
        ),
    )


# Weir's own tagged field ("WG", far from Kafka's tags), sent only by a Weir broker's
# HTTP queue APIs (weir/broker/http/share_direct.py): a request carrying it is
# session-less ("direct"): its partitions are the ones it names, it opens no share
# session and joins no group, and the locks it takes or renews run for this many
# milliseconds instead of the group's record lock duration. -1: an ordinary request.
WEIR_DIRECT_LOCK_MS_TAG = 0x5747
NOT_DIRECT = -1


def _weir_direct_lock_ms() -> Field:
    return Field("weir_direct_lock_ms", INT32, tag=WEIR_DIRECT_LOCK_MS_TAG, default=NOT_DIRECT)


SHARE_FETCH_REQUEST = Message(
    "ShareFetchRequest",
    valid="1-2",
    flexible="0+",
    fields=[
        Field("group_id", STRING, nullable="0+", default=None),
        Field("member_id", STRING, nullable="0+", default=""),
        Field("share_session_epoch", INT32),
        Field("max_wait_ms", INT32),
        Field("min_bytes", INT32),
        Field("max_bytes", INT32, default=0x7FFFFFFF),
        Field("max_records", INT32, "1+"),
        Field("batch_size", INT32, "1+"),
        Field("share_acquire_mode", INT8, "2+", default=SHARE_ACQUIRE_MODE_BATCH_OPTIMIZED),
        Field("is_renew_ack", BOOL, "2+", default=False),
        Field(
            "topics",
            Array(
                Struct(
                    Field("topic_id", UUID),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                Field("partition_index", INT32),
                                _acknowledgement_batches(),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field(
            "forgotten_topics_data",
            Array(Struct(Field("topic_id", UUID), Field("partitions", Array(INT32)))),
        ),
        _weir_direct_lock_ms(),
    ],
)

SHARE_FETCH_RESPONSE = Message(
    "ShareFetchResponse",
    valid="1-2",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        *_error_fields(),
        Field("acquisition_lock_timeout_ms", INT32, "1+"),
        Field(
            "responses",
            Array(
                Struct(
                    Field("topic_id", UUID),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                Field("partition_index", INT32),
                                *_error_fields(),
                                Field("acknowledge_error_code", INT16),
                                Field(
                                    "acknowledge_error_message",
                                    STRING,
                                    nullable="0+",
                                    default=None,
                                ),
                                _current_leader(),
                                # Non-nullable from v1 (Java refuses a null), so the
                                # default is an empty record set, not null.
                                Field("records", RECORDS, default=b""),
                                Field(
                                    "acquired_records",
                                    Array(
                                        Struct(
                                            Field("first_offset", INT64),
                                            Field("last_offset", INT64),
                                            Field("delivery_count", INT16),
                                        )
                                    ),
                                ),
                            )
                        ),
                    ),
                )
            ),
        ),
        _node_endpoints(),
    ],
)

SHARE_ACKNOWLEDGE_REQUEST = Message(
    "ShareAcknowledgeRequest",
    valid="1-2",
    flexible="0+",
    fields=[
        Field("group_id", STRING, nullable="0+", default=None),
        Field("member_id", STRING, nullable="0+", default=""),
        Field("share_session_epoch", INT32),
        Field("is_renew_ack", BOOL, "2+", default=False),
        Field(
            "topics",
            Array(
                Struct(
                    Field("topic_id", UUID),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                Field("partition_index", INT32),
                                _acknowledgement_batches(),
                            )
                        ),
                    ),
                )
            ),
        ),
        _weir_direct_lock_ms(),
    ],
)

SHARE_ACKNOWLEDGE_RESPONSE = Message(
    "ShareAcknowledgeResponse",
    valid="1-2",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        *_error_fields(),
        Field("acquisition_lock_timeout_ms", INT32, "2+"),
        Field(
            "responses",
            Array(
                Struct(
                    Field("topic_id", UUID),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                Field("partition_index", INT32),
                                *_error_fields(),
                                _current_leader(),
                            )
                        ),
                    ),
                )
            ),
        ),
        _node_endpoints(),
    ],
)

# -- Share group offsets (admin): 90, 91, 92 ------------------------------------------

DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST = Message(
    "DescribeShareGroupOffsetsRequest",
    valid="0-1",
    flexible="0+",
    fields=[
        Field(
            "groups",
            Array(
                Struct(
                    Field("group_id", STRING),
                    # null: every topic-partition the group has state for.
                    Field(
                        "topics",
                        Array(
                            Struct(
                                Field("topic_name", STRING),
                                Field("partitions", Array(INT32)),
                            )
                        ),
                        nullable="0+",
                    ),
                )
            ),
        ),
    ],
)

DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE = Message(
    "DescribeShareGroupOffsetsResponse",
    valid="0-1",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field(
            "groups",
            Array(
                Struct(
                    Field("group_id", STRING),
                    Field(
                        "topics",
                        Array(
                            Struct(
                                Field("topic_name", STRING),
                                Field("topic_id", UUID),
                                Field(
                                    "partitions",
                                    Array(
                                        Struct(
                                            Field("partition_index", INT32),
                                            Field("start_offset", INT64),
                                            Field("leader_epoch", INT32),
                                            Field("lag", INT64, "1+", default=-1),
                                            *_error_fields(),
                                        )
                                    ),
                                ),
                            )
                        ),
                    ),
                    *_error_fields(),
                )
            ),
        ),
    ],
)

ALTER_SHARE_GROUP_OFFSETS_REQUEST = Message(
    "AlterShareGroupOffsetsRequest",
    valid="0",
    flexible="0+",
    fields=[
        Field("group_id", STRING),
        Field(
            "topics",
            Array(
                Struct(
                    Field("topic_name", STRING),
                    Field(
                        "partitions",
                        Array(
                            Struct(Field("partition_index", INT32), Field("start_offset", INT64))
                        ),
                    ),
                )
            ),
        ),
    ],
)

ALTER_SHARE_GROUP_OFFSETS_RESPONSE = Message(
    "AlterShareGroupOffsetsResponse",
    valid="0",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        *_error_fields(),
        Field(
            "responses",
            Array(
                Struct(
                    Field("topic_name", STRING),
                    Field("topic_id", UUID),
                    Field(
                        "partitions",
                        Array(Struct(Field("partition_index", INT32), *_error_fields())),
                    ),
                )
            ),
        ),
    ],
)

DELETE_SHARE_GROUP_OFFSETS_REQUEST = Message(
    "DeleteShareGroupOffsetsRequest",
    valid="0",
    flexible="0+",
    fields=[
        Field("group_id", STRING),
        Field("topics", Array(Struct(Field("topic_name", STRING)))),
    ],
)

DELETE_SHARE_GROUP_OFFSETS_RESPONSE = Message(
    "DeleteShareGroupOffsetsResponse",
    valid="0",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        *_error_fields(),
        Field(
            "responses",
            Array(
                Struct(
                    Field("topic_name", STRING),
                    Field("topic_id", UUID),
                    *_error_fields(),
                )
            ),
        ),
    ],
)

SHARE_GROUP_HEARTBEAT = Api(
    ApiKey.SHARE_GROUP_HEARTBEAT,
    SHARE_GROUP_HEARTBEAT_REQUEST,
    SHARE_GROUP_HEARTBEAT_RESPONSE,
    (1, 1),
)
SHARE_GROUP_DESCRIBE = Api(
    ApiKey.SHARE_GROUP_DESCRIBE,
    SHARE_GROUP_DESCRIBE_REQUEST,
    SHARE_GROUP_DESCRIBE_RESPONSE,
    (1, 1),
)
SHARE_FETCH = Api(ApiKey.SHARE_FETCH, SHARE_FETCH_REQUEST, SHARE_FETCH_RESPONSE, (1, 2))
SHARE_ACKNOWLEDGE = Api(
    ApiKey.SHARE_ACKNOWLEDGE, SHARE_ACKNOWLEDGE_REQUEST, SHARE_ACKNOWLEDGE_RESPONSE, (1, 2)
)
DESCRIBE_SHARE_GROUP_OFFSETS = Api(
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST,
    DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE,
    (0, 1),
)
ALTER_SHARE_GROUP_OFFSETS = Api(
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    ALTER_SHARE_GROUP_OFFSETS_REQUEST,
    ALTER_SHARE_GROUP_OFFSETS_RESPONSE,
    (0, 0),
)
DELETE_SHARE_GROUP_OFFSETS = Api(
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    DELETE_SHARE_GROUP_OFFSETS_REQUEST,
    DELETE_SHARE_GROUP_OFFSETS_RESPONSE,
    (0, 0),
)

# Every share-group API, for the registry that serves them.
SHARE_GROUP_APIS = (
    SHARE_GROUP_HEARTBEAT,
    SHARE_GROUP_DESCRIBE,
    SHARE_FETCH,
    SHARE_ACKNOWLEDGE,
    DESCRIBE_SHARE_GROUP_OFFSETS,
    ALTER_SHARE_GROUP_OFFSETS,
    DELETE_SHARE_GROUP_OFFSETS,
)
