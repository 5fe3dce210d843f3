"""Committed offsets: OffsetCommit (8) v2-9 and OffsetFetch (9) v1-9.

Transcribed from Kafka's message specs. OffsetFetch v8+ batches groups (a different
top-level layout); v9 (KIP-848) adds the member id and epoch.
"""

from __future__ import annotations

from weir.format.schema import BOOL, INT16, INT32, INT64, STRING, Api, Array, Field, Message, Struct
from weir.wire.api_keys import ApiKey

OFFSET_COMMIT_REQUEST = Message(
    "OffsetCommitRequest",
    valid="2-9",
    flexible="8+",
    fields=[
        Field("group_id", STRING),
        Field("generation_id_or_member_epoch", INT32, default=-1),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "7+", nullable="7+", default=None),
        Field("retention_time_ms", INT64, "2-4", default=-1),
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
                                Field("committed_offset", INT64),
                                Field("committed_leader_epoch", INT32, "6+", default=-1),
                                Field("committed_metadata", STRING, nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

OFFSET_COMMIT_RESPONSE = Message(
    "OffsetCommitResponse",
    valid="2-9",
    flexible="8+",
    fields=[
        Field("throttle_time_ms", INT32, "3+"),
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

_FETCH_PARTITION_V0_7 = Struct(
    Field("partition_index", INT32, "0-7"),
    Field("committed_offset", INT64, "0-7"),
    Field("committed_leader_epoch", INT32, "5-7", default=-1),
    Field("metadata", STRING, "0-7", nullable="0-7"),
    Field("error_code", INT16, "0-7"),
)

_FETCH_PARTITION_V8 = Struct(
    Field("partition_index", INT32, "8+"),
    Field("committed_offset", INT64, "8+"),
    Field("committed_leader_epoch", INT32, "8+", default=-1),
    Field("metadata", STRING, "8+", nullable="8+"),
    Field("error_code", INT16, "8+"),
)

OFFSET_FETCH_REQUEST = Message(
    "OffsetFetchRequest",
    valid="1-9",
    flexible="6+",
    fields=[
        Field("group_id", STRING, "0-7"),
        Field(
            "topics",
            Array(
                Struct(
                    Field("name", STRING, "0-7"), Field("partition_indexes", Array(INT32), "0-7")
                )
            ),
            "0-7",
            nullable="2-7",
        ),
        Field(
            "groups",
            Array(
                Struct(
                    Field("group_id", STRING, "8+"),
                    Field("member_id", STRING, "9+", nullable="9+", default=None),
                    Field("member_epoch", INT32, "9+", default=-1),
                    Field(
                        "topics",
                        Array(
                            Struct(
                                Field("name", STRING, "8+"),
                                Field("partition_indexes", Array(INT32), "8+"),
                            )
                        ),
                        "8+",
                        nullable="8+",
                    ),
                )
            ),
            "8+",
        ),
        Field("require_stable", BOOL, "7+", default=False),
    ],
)

OFFSET_FETCH_RESPONSE = Message(
    "OffsetFetchResponse",
    valid="1-9",
    flexible="6+",
    fields=[
        Field("throttle_time_ms", INT32, "3+"),
        Field(
            "topics",
            Array(
                Struct(
                    Field("name", STRING, "0-7"),
                    Field("partitions", Array(_FETCH_PARTITION_V0_7), "0-7"),
                )
            ),
            "0-7",
        ),
        Field("error_code", INT16, "2-7", default=0),
        Field(
            "groups",
            Array(
                Struct(
                    Field("group_id", STRING, "8+"),
                    Field(
                        "topics",
                        Array(
                            Struct(
                                Field("name", STRING, "8+"),
                                Field("partitions", Array(_FETCH_PARTITION_V8), "8+"),
                            )
                        ),
                        "8+",
                    ),
                    Field("error_code", INT16, "8+", default=0),
                )
            ),
            "8+",
        ),
    ],
)

OFFSET_COMMIT = Api(ApiKey.OFFSET_COMMIT, OFFSET_COMMIT_REQUEST, OFFSET_COMMIT_RESPONSE, (2, 9))
OFFSET_FETCH = Api(ApiKey.OFFSET_FETCH, OFFSET_FETCH_REQUEST, OFFSET_FETCH_RESPONSE, (1, 9))
