"""Producer ids and transactions, transcribed from Kafka 4.4's message specs.

InitProducerId (22) v0-4; the client's transaction calls AddPartitionsToTxn (24)
v0-5 (v4+ is KIP-890's batched broker-to-broker form: `transactions[]` with
`verify_only`), AddOffsetsToTxn (25) v0-4, EndTxn (26) v0-5 (v5 returns the bumped
producer id and epoch) and TxnOffsetCommit (28) v0-5; the coordinator's
WriteTxnMarkers (27) v0-2 (Kafka 4 serves v1+; v2 adds KIP-1228's transaction
version per marker); and the admin calls DescribeProducers (61) v0,
DescribeTransactions (65) v0 and ListTransactions (66) v0-2 (v1: KIP-994's duration
filter; v2: KIP-1152's transactional id pattern).

Only InitProducerId is served yet: the others are in `protocol.DECLARED_NOT_SERVED`
(encode and decode work, ApiVersions does not advertise them) until their handlers
exist.
"""

from __future__ import annotations

from weir.format.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    Api,
    Array,
    Field,
    Message,
    Struct,
)
from weir.wire.api_keys import ApiKey

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

# InitProducerId (22) -------------------------------------------------------------------

INIT_PRODUCER_ID_REQUEST = Message(
    "InitProducerIdRequest",
    valid="0-4",
    flexible="2+",
    fields=[
        Field("transactional_id", STRING, nullable="0+"),
        Field("transaction_timeout_ms", INT32),
        Field("producer_id", INT64, "3+", default=NO_PRODUCER_ID),
        Field("producer_epoch", INT16, "3+", default=NO_PRODUCER_EPOCH),
    ],
)

INIT_PRODUCER_ID_RESPONSE = Message(
    "InitProducerIdResponse",
    valid="0-4",
    flexible="2+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id", INT64, default=NO_PRODUCER_ID),
        Field("producer_epoch", INT16, default=NO_PRODUCER_EPOCH),
    ],
)

# AddPartitionsToTxn (24) ---------------------------------------------------------------

_ADD_PARTITIONS_TOPIC = Struct(
    Field("name", STRING),
    Field("partitions", Array(INT32)),
)

ADD_PARTITIONS_TO_TXN_REQUEST = Message(
    "AddPartitionsToTxnRequest",
    valid="0-5",
    flexible="3+",
    fields=[
        Field(
            "transactions",
            Array(
                Struct(
                    Field("transactional_id", STRING, "4+"),
                    Field("producer_id", INT64, "4+"),
                    Field("producer_epoch", INT16, "4+"),
                    Field("verify_only", BOOL, "4+", default=False),
                    Field("topics", Array(_ADD_PARTITIONS_TOPIC), "4+"),
                )
            ),
            "4+",
        ),
        Field("v3_and_below_transactional_id", STRING, "0-3"),
        Field("v3_and_below_producer_id", INT64, "0-3"),
        Field("v3_and_below_producer_epoch", INT16, "0-3"),
        Field("v3_and_below_topics", Array(_ADD_PARTITIONS_TOPIC), "0-3"),
    ],
)

_ADD_PARTITIONS_TOPIC_RESULT = Struct(
    Field("name", STRING),
    Field(
        "results_by_partition",
        Array(Struct(Field("partition_index", INT32), Field("partition_error_code", INT16))),
    ),
)

ADD_PARTITIONS_TO_TXN_RESPONSE = Message(
    "AddPartitionsToTxnResponse",
    valid="0-5",
    flexible="3+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "4+"),
        Field(
            "results_by_transaction",
            Array(
                Struct(
                    Field("transactional_id", STRING, "4+"),
                    Field("topic_results", Array(_ADD_PARTITIONS_TOPIC_RESULT), "4+"),
                )
            ),
            "4+",
        ),
        Field("results_by_topic_v3_and_below", Array(_ADD_PARTITIONS_TOPIC_RESULT), "0-3"),
    ],
)

# AddOffsetsToTxn (25) ------------------------------------------------------------------

ADD_OFFSETS_TO_TXN_REQUEST = Message(
    "AddOffsetsToTxnRequest",
    valid="0-4",
    flexible="3+",
    fields=[
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("group_id", STRING),
    ],
)

ADD_OFFSETS_TO_TXN_RESPONSE = Message(
    "AddOffsetsToTxnResponse",
    valid="0-4",
    flexible="3+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
    ],
)

# EndTxn (26) ---------------------------------------------------------------------------

END_TXN_REQUEST = Message(
    "EndTxnRequest",
    valid="0-5",
    flexible="3+",
    fields=[
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("committed", BOOL),
    ],
)

END_TXN_RESPONSE = Message(
    "EndTxnResponse",
    valid="0-5",
    flexible="3+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id", INT64, "5+", default=NO_PRODUCER_ID),
        Field("producer_epoch", INT16, "5+", default=NO_PRODUCER_EPOCH),
    ],
)

# WriteTxnMarkers (27) ------------------------------------------------------------------

TRANSACTION_VERSION_LEGACY = 0  # WriteTxnMarkers v2's default: a marker of version 0 or 1

WRITE_TXN_MARKERS_REQUEST = Message(
    "WriteTxnMarkersRequest",
    valid="0-2",
    flexible="1+",
    fields=[
        Field(
            "markers",
            Array(
                Struct(
                    Field("producer_id", INT64),
                    Field("producer_epoch", INT16),
                    Field("transaction_result", BOOL),  # false = ABORT, true = COMMIT
                    Field(
                        "topics",
                        Array(
                            Struct(Field("name", STRING), Field("partition_indexes", Array(INT32)))
                        ),
                    ),
                    Field("coordinator_epoch", INT32),
                    Field("transaction_version", INT8, "2+", default=TRANSACTION_VERSION_LEGACY),
                )
            ),
        ),
    ],
)

WRITE_TXN_MARKERS_RESPONSE = Message(
    "WriteTxnMarkersResponse",
    valid="0-2",
    flexible="1+",
    fields=[
        Field(
            "markers",
            Array(
                Struct(
                    Field("producer_id", INT64),
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
                                            Field("error_code", INT16),
                                        )
                                    ),
                                ),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

# TxnOffsetCommit (28) ------------------------------------------------------------------

TXN_OFFSET_COMMIT_REQUEST = Message(
    "TxnOffsetCommitRequest",
    valid="0-5",
    flexible="3+",
    fields=[
        Field("transactional_id", STRING),
        Field("group_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("generation_id_or_member_epoch", INT32, "3+", default=-1),
        Field("member_id", STRING, "3+", default=""),
        Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
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
                                Field("committed_leader_epoch", INT32, "2+", default=-1),
                                Field("committed_metadata", STRING, nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

TXN_OFFSET_COMMIT_RESPONSE = Message(
    "TxnOffsetCommitResponse",
    valid="0-5",
    flexible="3+",
    fields=[
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

# DescribeProducers (61) ----------------------------------------------------------------

DESCRIBE_PRODUCERS_REQUEST = Message(
    "DescribeProducersRequest",
    valid="0",
    flexible="0+",
    fields=[
        Field(
            "topics",
            Array(Struct(Field("name", STRING), Field("partition_indexes", Array(INT32)))),
        ),
    ],
)

DESCRIBE_PRODUCERS_RESPONSE = Message(
    "DescribeProducersResponse",
    valid="0",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
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
                                Field("error_code", INT16),
                                Field("error_message", STRING, nullable="0+", default=None),
                                Field(
                                    "active_producers",
                                    Array(
                                        Struct(
                                            Field("producer_id", INT64),
                                            Field("producer_epoch", INT32),
                                            Field("last_sequence", INT32, default=-1),
                                            Field("last_timestamp", INT64, default=-1),
                                            Field("coordinator_epoch", INT32),
                                            Field("current_txn_start_offset", INT64, default=-1),
                                        )
                                    ),
                                ),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

# DescribeTransactions (65) -------------------------------------------------------------

DESCRIBE_TRANSACTIONS_REQUEST = Message(
    "DescribeTransactionsRequest",
    valid="0",
    flexible="0+",
    fields=[Field("transactional_ids", Array(STRING))],
)

DESCRIBE_TRANSACTIONS_RESPONSE = Message(
    "DescribeTransactionsResponse",
    valid="0",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field(
            "transaction_states",
            Array(
                Struct(
                    Field("error_code", INT16),
                    Field("transactional_id", STRING),
                    Field("transaction_state", STRING),
                    Field("transaction_timeout_ms", INT32),
                    Field("transaction_start_time_ms", INT64),
                    Field("producer_id", INT64),
                    Field("producer_epoch", INT16),
                    Field(
                        "topics",
                        Array(Struct(Field("topic", STRING), Field("partitions", Array(INT32)))),
                    ),
                )
            ),
        ),
    ],
)

# ListTransactions (66) -----------------------------------------------------------------

NO_DURATION_FILTER = -1

LIST_TRANSACTIONS_REQUEST = Message(
    "ListTransactionsRequest",
    valid="0-2",
    flexible="0+",
    fields=[
        Field("state_filters", Array(STRING)),
        Field("producer_id_filters", Array(INT64)),
        Field("duration_filter", INT64, "1+", default=NO_DURATION_FILTER),
        Field("transactional_id_pattern", STRING, "2+", nullable="2+", default=None),
    ],
)

LIST_TRANSACTIONS_RESPONSE = Message(
    "ListTransactionsResponse",
    valid="0-2",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("unknown_state_filters", Array(STRING)),
        Field(
            "transaction_states",
            Array(
                Struct(
                    Field("transactional_id", STRING),
                    Field("producer_id", INT64),
                    Field("transaction_state", STRING),
                )
            ),
        ),
    ],
)

# The APIs, with the versions implemented ------------------------------------------------

INIT_PRODUCER_ID = Api(
    ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE, (0, 4)
)
ADD_PARTITIONS_TO_TXN = Api(
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ADD_PARTITIONS_TO_TXN_REQUEST,
    ADD_PARTITIONS_TO_TXN_RESPONSE,
    (0, 5),
)
ADD_OFFSETS_TO_TXN = Api(
    ApiKey.ADD_OFFSETS_TO_TXN, ADD_OFFSETS_TO_TXN_REQUEST, ADD_OFFSETS_TO_TXN_RESPONSE, (0, 4)
)
END_TXN = Api(ApiKey.END_TXN, END_TXN_REQUEST, END_TXN_RESPONSE, (0, 5))
WRITE_TXN_MARKERS = Api(
    ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_REQUEST, WRITE_TXN_MARKERS_RESPONSE, (1, 2)
)
TXN_OFFSET_COMMIT = Api(
    ApiKey.TXN_OFFSET_COMMIT, TXN_OFFSET_COMMIT_REQUEST, TXN_OFFSET_COMMIT_RESPONSE, (0, 5)
)
DESCRIBE_PRODUCERS = Api(
    ApiKey.DESCRIBE_PRODUCERS, DESCRIBE_PRODUCERS_REQUEST, DESCRIBE_PRODUCERS_RESPONSE, (0, 0)
)
DESCRIBE_TRANSACTIONS = Api(
    ApiKey.DESCRIBE_TRANSACTIONS,
    DESCRIBE_TRANSACTIONS_REQUEST,
    DESCRIBE_TRANSACTIONS_RESPONSE,
    (0, 0),
)
LIST_TRANSACTIONS = Api(
    ApiKey.LIST_TRANSACTIONS, LIST_TRANSACTIONS_REQUEST, LIST_TRANSACTIONS_RESPONSE, (0, 2)
)
