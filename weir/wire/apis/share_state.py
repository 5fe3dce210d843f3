"""KIP-932's internal share-state APIs, spoken by a share partition's leader to the
share coordinator of its key (brokers only), at the versions Kafka 4.4 serves:
InitializeShareGroupState (83) v0, ReadShareGroupState (84) v0,
WriteShareGroupState (85) v0-1, DeleteShareGroupState (86) v0 and
ReadShareGroupStateSummary (87) v0-1.

Transcribed from the message specs inside the kafka-clients 4.4.0 jar
(`common/message/*ShareGroupState*.json`) and checked byte for byte against its
generated Java classes (`tests/wire/test_share_state_wire.py`). Every version of
every message is flexible; none has a tagged field of Kafka's, and Weir adds two of its own
(the dead-letter mark, a batch's visible time) that only Weir brokers read.

A state batch's `delivery_state` is Kafka's DeliveryState byte (0 AVAILABLE,
2 ACKNOWLEDGED, 4 ARCHIVED); a start offset of -1 is "not initialized" in a read's
answer and "not written" in a write; a leader or state epoch of -1 is "not checked".
"""

from __future__ import annotations

from weir.format.schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    Api,
    Array,
    Field,
    Message,
    Struct,
)
from weir.wire.api_keys import ApiKey

# A start offset the share coordinator has never been given (Kafka's
# PartitionFactory.UNINITIALIZED_START_OFFSET), and its default state epoch.
UNINITIALIZED_START_OFFSET = -1
DEFAULT_STATE_EPOCH = 0
# A leader or state epoch the coordinator does not check (and keeps as stored).
EPOCH_NOT_CHECKED = -1


# Weir's own tagged fields between Weir brokers ("WE", "WF": far from Kafka's tags): the
# parts of a share partition's state Kafka's share state has no field for.
WEIR_DEAD_LETTER_MARK_TAG = 0x5745
WEIR_VISIBLE_TIMESTAMP_TAG = 0x5746


def _dead_letter_mark() -> Field:
    return Field("dead_letter_mark", INT64, tag=WEIR_DEAD_LETTER_MARK_TAG, default=-1)


def _state_batches() -> Field:
    return Field(
        "state_batches",
        Array(
            Struct(
                Field("first_offset", INT64),
                Field("last_offset", INT64),
                Field("delivery_state", INT8),
                Field("delivery_count", INT16),
                # Weir's tagged field (Kafka skips it): a release backoff's end, epoch ms.
                Field("visible_timestamp", INT64, tag=WEIR_VISIBLE_TIMESTAMP_TAG, default=0),
            )
        ),
    )


def _request(name: str, valid: str, partition_fields: list[Field]) -> Message:
    """GroupId, then Topics [TopicId, Partitions [Partition, ...]]."""
    return Message(
        name,
        valid=valid,
        flexible="0+",
        fields=[
            Field("group_id", STRING),
            Field(
                "topics",
                Array(
                    Struct(
                        Field("topic_id", UUID),
                        Field(
                            "partitions",
                            Array(Struct(Field("partition", INT32), *partition_fields)),
                        ),
                    )
                ),
            ),
        ],
    )


def _response(name: str, valid: str, partition_fields: list[Field]) -> Message:
    """Results [TopicId, Partitions [Partition, ErrorCode, ErrorMessage, ...]]."""
    return Message(
        name,
        valid=valid,
        flexible="0+",
        fields=[
            Field(
                "results",
                Array(
                    Struct(
                        Field("topic_id", UUID),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    Field("partition", INT32),
                                    Field("error_code", INT16),
                                    Field("error_message", STRING, nullable="0+", default=None),
                                    *partition_fields,
                                )
                            ),
                        ),
                    )
                ),
            )
        ],
    )


# -- InitializeShareGroupState (83) ---------------------------------------------------

INITIALIZE_SHARE_GROUP_STATE_REQUEST = _request(
    "InitializeShareGroupStateRequest",
    "0",
    [Field("state_epoch", INT32), Field("start_offset", INT64)],
)
INITIALIZE_SHARE_GROUP_STATE_RESPONSE = _response("InitializeShareGroupStateResponse", "0", [])

# -- ReadShareGroupState (84) ---------------------------------------------------------

READ_SHARE_GROUP_STATE_REQUEST = _request(
    "ReadShareGroupStateRequest", "0", [Field("leader_epoch", INT32)]
)
READ_SHARE_GROUP_STATE_RESPONSE = _response(
    "ReadShareGroupStateResponse",
    "0",
    [
        Field("state_epoch", INT32),
        Field("start_offset", INT64),
        _state_batches(),
        _dead_letter_mark(),
    ],
)

# -- WriteShareGroupState (85) --------------------------------------------------------

WRITE_SHARE_GROUP_STATE_REQUEST = _request(
    "WriteShareGroupStateRequest",
    "0-1",
    [
        Field("state_epoch", INT32),
        Field("leader_epoch", INT32),
        Field("start_offset", INT64),
        # "ignorable": a v0 request drops it (KIP-1226).
        Field("delivery_complete_count", INT32, "1+", default=-1),
        _dead_letter_mark(),
        _state_batches(),
    ],
)
WRITE_SHARE_GROUP_STATE_RESPONSE = _response("WriteShareGroupStateResponse", "0-1", [])

# -- DeleteShareGroupState (86) -------------------------------------------------------

DELETE_SHARE_GROUP_STATE_REQUEST = _request("DeleteShareGroupStateRequest", "0", [])
DELETE_SHARE_GROUP_STATE_RESPONSE = _response("DeleteShareGroupStateResponse", "0", [])

# -- ReadShareGroupStateSummary (87) --------------------------------------------------

READ_SHARE_GROUP_STATE_SUMMARY_REQUEST = _request(
    "ReadShareGroupStateSummaryRequest", "0-1", [Field("leader_epoch", INT32)]
)
READ_SHARE_GROUP_STATE_SUMMARY_RESPONSE = _response(
    "ReadShareGroupStateSummaryResponse",
    "0-1",
    [
        Field("state_epoch", INT32),
        Field("leader_epoch", INT32),
        Field("start_offset", INT64),
        Field("delivery_complete_count", INT32, "1+", default=-1),
    ],
)

INITIALIZE_SHARE_GROUP_STATE = Api(
    ApiKey.INITIALIZE_SHARE_GROUP_STATE,
    INITIALIZE_SHARE_GROUP_STATE_REQUEST,
    INITIALIZE_SHARE_GROUP_STATE_RESPONSE,
    (0, 0),
)
READ_SHARE_GROUP_STATE = Api(
    ApiKey.READ_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE_REQUEST,
    READ_SHARE_GROUP_STATE_RESPONSE,
    (0, 0),
)
WRITE_SHARE_GROUP_STATE = Api(
    ApiKey.WRITE_SHARE_GROUP_STATE,
    WRITE_SHARE_GROUP_STATE_REQUEST,
    WRITE_SHARE_GROUP_STATE_RESPONSE,
    (0, 1),
)
DELETE_SHARE_GROUP_STATE = Api(
    ApiKey.DELETE_SHARE_GROUP_STATE,
    DELETE_SHARE_GROUP_STATE_REQUEST,
    DELETE_SHARE_GROUP_STATE_RESPONSE,
    (0, 0),
)
READ_SHARE_GROUP_STATE_SUMMARY = Api(
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    READ_SHARE_GROUP_STATE_SUMMARY_REQUEST,
    READ_SHARE_GROUP_STATE_SUMMARY_RESPONSE,
    (0, 1),
)

# The share-state APIs Weir serves (InitializeShareGroupState is declared only: Weir's
# share partition leaders initialize a state by writing it).
SHARE_STATE_SERVED_APIS = (
    READ_SHARE_GROUP_STATE,
    WRITE_SHARE_GROUP_STATE,
    DELETE_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE_SUMMARY,
)
