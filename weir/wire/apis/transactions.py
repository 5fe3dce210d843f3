"""Producer ids and transactions. InitProducerId (key 22), v0-v4."""

from __future__ import annotations

from weir.format.schema import INT16, INT32, INT64, STRING, Api, Field, Message
from weir.wire.api_keys import ApiKey

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

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

INIT_PRODUCER_ID = Api(
    ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE, (0, 4)
)
