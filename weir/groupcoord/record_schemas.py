"""The `__consumer_offsets` records, declared once in the schema DSL.

Transcribed from Kafka's group-coordinator message specs (the JSON files named
after each message). A stored key or value is an int16 version and then the body
(`weir.format.versioned_records`); for a key, that version is the record type:

| key version | key | value (versions read; the one written first) |
|---|---|---|
| 0, 1 | OffsetCommitKey | OffsetCommitValue (3; 0-4) |
| 2 | GroupMetadataKey | GroupMetadataValue (3; 0-4) |
| 3 | ConsumerGroupMetadataKey | ConsumerGroupMetadataValue (0) |
| 4 | ConsumerGroupPartitionMetadataKey | ConsumerGroupPartitionMetadataValue (0) |
| 5 | ConsumerGroupMemberMetadataKey | ConsumerGroupMemberMetadataValue (0) |
| 6 | ConsumerGroupTargetAssignmentMetadataKey | ...TargetAssignmentMetadataValue (0) |
| 7 | ConsumerGroupTargetAssignmentMemberKey | ...TargetAssignmentMemberValue (0) |
| 8 | ConsumerGroupCurrentMemberAssignmentKey | ...CurrentMemberAssignmentValue (0) |

Keys are never flexible; values are flexible from the version Kafka says (compact
strings and arrays, a tagged-field section after every struct; unknown tags are
skipped). The KIP-848 values are declared with the fields Weir writes: tagged fields
Kafka added later (e.g. ClassicMemberMetadata) are read past, not kept.

`GroupRecord` is what the coordinators hand to the broker to append: the key and
value bytes and the group they belong to, so that the broker places a record on the
group's partition without parsing its key.
"""

from __future__ import annotations

from weir.format.schema import (
    BYTES,
    INT8,
    INT32,
    INT64,
    STRING,
    UUID,
    Array,
    Field,
    Message,
    Struct,
)


class GroupRecord(tuple[bytes, bytes | None]):
    """One `__consumer_offsets` record: a `(key, value)` pair (a None value is a
    tombstone) that also carries `group_id`, the group it belongs to.

    A pair, so that code that stores or replays records unpacks `key, value` as it
    would any record read back from the log; the group id rides along for placement."""

    group_id: str

    def __new__(cls, group_id: str, key: bytes, value: bytes | None) -> GroupRecord:
        record = super().__new__(cls, (key, value))
        record.group_id = group_id
        return record

    @property
    def key(self) -> bytes:
        return self[0]

    @property
    def value(self) -> bytes | None:
        return self[1]

    def __repr__(self) -> str:
        return f"GroupRecord({self.group_id!r}, {self[0]!r}, {self[1]!r})"


# Offset commits ---------------------------------------------------------------------

OFFSET_COMMIT_KEY = Message(
    "OffsetCommitKey",
    valid="0-1",
    flexible="none",
    fields=[
        Field("group", STRING),
        Field("topic", STRING),
        Field("partition", INT32),
    ],
)

OFFSET_COMMIT_VALUE = Message(
    "OffsetCommitValue",
    valid="0-4",
    flexible="4+",
    fields=[
        Field("offset", INT64),
        Field("leader_epoch", INT32, "3+", default=-1),
        Field("metadata", STRING),
        Field("commit_timestamp", INT64),
        Field("expire_timestamp", INT64, "1", default=-1),
    ],
)

# Classic groups ---------------------------------------------------------------------

GROUP_METADATA_KEY = Message(
    "GroupMetadataKey", valid="2", flexible="none", fields=[Field("group", STRING)]
)

GROUP_METADATA_VALUE = Message(
    "GroupMetadataValue",
    valid="0-4",
    flexible="4+",
    fields=[
        Field("protocol_type", STRING),
        Field("generation", INT32),
        Field("protocol", STRING, nullable="0+"),
        Field("leader", STRING, nullable="0+"),
        Field("current_state_timestamp", INT64, "2+", default=-1),
        Field(
            "members",
            Array(
                Struct(
                    Field("member_id", STRING),
                    Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
                    Field("client_id", STRING),
                    Field("client_host", STRING),
                    Field("rebalance_timeout", INT32, "1+"),
                    Field("session_timeout", INT32),
                    Field("subscription", BYTES),
                    Field("assignment", BYTES),
                )
            ),
        ),
    ],
)

# KIP-848 consumer groups ------------------------------------------------------------


def _group_key(name: str, record_type: int) -> Message:
    return Message(
        name, valid=str(record_type), flexible="none", fields=[Field("group_id", STRING)]
    )


def _member_key(name: str, record_type: int) -> Message:
    return Message(
        name,
        valid=str(record_type),
        flexible="none",
        fields=[Field("group_id", STRING), Field("member_id", STRING)],
    )


CONSUMER_GROUP_METADATA_KEY = _group_key("ConsumerGroupMetadataKey", 3)
CONSUMER_GROUP_PARTITION_METADATA_KEY = _group_key("ConsumerGroupPartitionMetadataKey", 4)
CONSUMER_GROUP_MEMBER_METADATA_KEY = _member_key("ConsumerGroupMemberMetadataKey", 5)
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _group_key(
    "ConsumerGroupTargetAssignmentMetadataKey", 6
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _member_key(
    "ConsumerGroupTargetAssignmentMemberKey", 7
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _member_key(
    "ConsumerGroupCurrentMemberAssignmentKey", 8
)

CONSUMER_GROUP_METADATA_VALUE = Message(
    "ConsumerGroupMetadataValue", valid="0", flexible="0+", fields=[Field("epoch", INT32)]
)

CONSUMER_GROUP_PARTITION_METADATA_VALUE = Message(
    "ConsumerGroupPartitionMetadataValue",
    valid="0",
    flexible="0+",
    fields=[
        Field(
            "topics",
            Array(
                Struct(
                    Field("topic_id", UUID),
                    Field("topic_name", STRING),
                    Field("num_partitions", INT32),
                    Field(
                        "partition_racks",
                        Array(Struct(Field("partition", INT32), Field("racks", Array(STRING)))),
                    ),
                )
            ),
        )
    ],
)

CONSUMER_GROUP_MEMBER_METADATA_VALUE = Message(
    "ConsumerGroupMemberMetadataValue",
    valid="0",
    flexible="0+",
    fields=[
        Field("instance_id", STRING, nullable="0+"),
        Field("rack_id", STRING, nullable="0+"),
        Field("client_id", STRING),
        Field("client_host", STRING),
        Field("subscribed_topic_names", Array(STRING)),
        Field("subscribed_topic_regex", STRING, nullable="0+"),
        Field("rebalance_timeout_ms", INT32, default=-1),
        Field("server_assignor", STRING, nullable="0+"),
    ],
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message(
    "ConsumerGroupTargetAssignmentMetadataValue",
    valid="0",
    flexible="0+",
    fields=[Field("assignment_epoch", INT32)],
)

_TOPIC_PARTITIONS = Struct(Field("topic_id", UUID), Field("partitions", Array(INT32)))

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message(
    "ConsumerGroupTargetAssignmentMemberValue",
    valid="0",
    flexible="0+",
    fields=[Field("topic_partitions", Array(_TOPIC_PARTITIONS))],
)

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "ConsumerGroupCurrentMemberAssignmentValue",
    valid="0",
    flexible="0+",
    fields=[
        Field("member_epoch", INT32),
        Field("previous_member_epoch", INT32),
        Field("state", INT8),
        Field("assigned_partitions", Array(_TOPIC_PARTITIONS)),
        Field("partitions_pending_revocation", Array(_TOPIC_PARTITIONS)),
    ],
)

# Every declaration, for tests and documentation.
RECORD_MESSAGES = (
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    CONSUMER_GROUP_METADATA_KEY,
    CONSUMER_GROUP_METADATA_VALUE,
    CONSUMER_GROUP_PARTITION_METADATA_KEY,
    CONSUMER_GROUP_PARTITION_METADATA_VALUE,
    CONSUMER_GROUP_MEMBER_METADATA_KEY,
    CONSUMER_GROUP_MEMBER_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
)
