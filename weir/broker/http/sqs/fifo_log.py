"""A FIFO queue's deduplication memory kept up with its log, so that a deduplication
id sent in the last 5 minutes is known to every broker and across restarts.

Every FIFO message is appended with its deduplication id and message id as headers
(`fifo.DEDUPLICATION_ID_HEADER`, `messaging.MESSAGE_ID_HEADER`). Before a broker
decides whether a FIFO send is a duplicate (under its per-queue lock), it reads the
queue's partition from where it last read up to the end: the first time, from the
first record of the last 5 minutes (ListOffsets by timestamp). Each record read is
remembered as a send answered with its message id and its offset (the sequence
number), its 5 minutes counted from its timestamp. A send made through this broker is
remembered at once as well, and read again later (the same answer).

What is left: two sends of one deduplication id through two brokers at the same
moment, each read before the other's append, are both appended.
"""

from __future__ import annotations

from weir.broker.http.kafka_gateway import BROKER
from weir.broker.http.sqs.backend import Backend, sqs_error_of
from weir.broker.http.sqs.fifo import (
    DEDUPLICATION_ID_HEADER,
    DEDUPLICATION_WINDOW_MS,
    Deduplications,
    FifoIds,
    sequence_number,
)
from weir.format.errors import ErrorCode
from weir.format.record_batch import InvalidBatch, decode_records
from weir.wire.api_keys import ApiKey
from weir.wire.consumer_fetch import consumer_fetch_body

FIFO_PARTITION = 0
READ_BYTES_MAX = 1024 * 1024
DECODED_BYTES_MAX = 64 * 1024 * 1024
# Reads per catch-up: at 1 MiB each, far more than 5 minutes of a FIFO queue's sends.
READS_MAX = 64
FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 7


async def catch_up(
    backend: Backend,
    queue: str,
    per_group: bool,
    message_id_header: str,
    now_ms: int,
) -> None:
    """Remember the deduplication ids appended to `queue` since this broker last read
    it (the broker's own read: the sender may WRITE without READ)."""
    position = backend.fifo_read_offsets.get(queue)
    if position is None:
        position = await _offset_at(backend, queue, now_ms - DEDUPLICATION_WINDOW_MS)
    leader = backend.leader(queue, FIFO_PARTITION)
    for _ in range(READS_MAX):
        body = consumer_fetch_body(queue, {FIFO_PARTITION: position}, bytes_max=READ_BYTES_MAX)
        response = await backend.send(
            BROKER, ApiKey.FETCH, FETCH_VERSION, body, f"reading {queue}", node_id=leader
        )
        answer = response.responses[0].partitions[0]
        if answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            position = await _offset_at(backend, queue, now_ms - DEDUPLICATION_WINDOW_MS)
            continue
        if answer.error_code != ErrorCode.NONE:
            raise sqs_error_of(answer.error_code, f"reading {queue}")
        position = _remember(
            backend.deduplications, queue, per_group, message_id_header, answer.records, position
        )
        if position >= answer.high_watermark:
            break
    backend.fifo_read_offsets[queue] = position


def _remember(
    deduplications: Deduplications,
    queue: str,
    per_group: bool,
    message_id_header: str,
    records: bytes | None,
    position: int,
) -> int:
    """Remember the read's FIFO sends at or after `position`; the next position."""
    if not records:
        return position
    try:
        for record in decode_records(records, uncompressed_bytes_max=DECODED_BYTES_MAX):
            if record.offset < position:
                continue
            position = record.offset + 1
            headers = dict(record.headers)
            deduplication_id = headers.get(DEDUPLICATION_ID_HEADER)
            message_id = headers.get(message_id_header)
            if deduplication_id is None or message_id is None or record.key is None:
                continue
            ids = FifoIds(record.key.decode(errors="replace"), deduplication_id.decode())
            answer = {
                "MessageId": message_id.decode(),
                "SequenceNumber": sequence_number(record.offset),
            }
            deduplications.remember(
                Deduplications.key(queue, ids, per_group), answer, record.timestamp_ms
            )
    except InvalidBatch as exc:
        raise sqs_error_of(ErrorCode.CORRUPT_MESSAGE, f"reading {queue}", str(exc)) from exc
    return position


async def _offset_at(backend: Backend, queue: str, timestamp_ms: int) -> int:
    """The first offset at or after `timestamp_ms` (the end when there is none)."""
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": queue,
                "partitions": [
                    {
                        "partition_index": FIFO_PARTITION,
                        "current_leader_epoch": -1,
                        "timestamp": timestamp_ms,
                    }
                ],
            }
        ],
    }
    response = await backend.send(
        BROKER,
        ApiKey.LIST_OFFSETS,
        LIST_OFFSETS_VERSION,
        body,
        f"offsets of {queue}",
        node_id=backend.leader(queue, FIFO_PARTITION),
    )
    found = response.topics[0].partitions[0]
    if found.error_code != ErrorCode.NONE:
        raise sqs_error_of(found.error_code, f"offsets of {queue}")
    if found.offset >= 0:
        return int(found.offset)
    ends = await backend.end_offsets(BROKER, queue, [FIFO_PARTITION])
    return ends[FIFO_PARTITION]
