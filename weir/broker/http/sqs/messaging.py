"""Message actions: SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch),
ChangeMessageVisibility(Batch), PurgeQueue.

A message is a record of the queue's topic: the body its value (UTF-8), its
attributes `sqs.attr.*` headers (`message_attributes`), its id the `sqs.message.id`
header (a record a Kafka producer wrote has none: its id is derived from its topic,
partition and offset), its delay a `weir.delay.ms` header. Receiving acquires records
for a member id made for the call (ShareDirect), each record's lock the visibility
timeout; the receipt handle names the record and that member."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weir.broker.broker import wall_clock_ms
from weir.broker.http.share_direct import DirectRecord
from weir.broker.http.sqs.backend import Backend, sqs_error_of
from weir.broker.http.sqs.errors import (
    SqsError,
    batch_request_too_long,
    invalid_parameter,
    message_not_inflight,
    receipt_handle_invalid,
)
from weir.broker.http.sqs.fifo import (
    DEDUPLICATION_ID_HEADER,
    Deduplications,
    fifo_ids,
    sequence_number,
)
from weir.broker.http.sqs.fifo_log import catch_up
from weir.broker.http.sqs.message_attributes import (
    MessageAttribute,
    attribute_headers,
    attributes_from_headers,
    attributes_size_bytes,
    check_body,
    md5_of_attributes,
    md5_of_body,
    parse_message_attributes,
    select_attributes,
)
from weir.broker.http.sqs.names import queue_arn
from weir.broker.http.sqs.params import (
    Params,
    entries,
    entry_failure,
    optional_int,
    required_int,
    required_str,
    string_list,
)
from weir.broker.http.sqs.queues import Call, Queue, queue_of
from weir.broker.http.sqs.receipts import Receipt, decode_receipt, encode_receipt
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.sharecoord.share_partition import AcknowledgeType
from weir.wire.protocol import ApiKey

MESSAGE_ID_HEADER = "sqs.message.id"
DELAY_HEADER = "weir.delay.ms"
DEAD_LETTER_TOPIC_HEADER = "__dlq.errors.topic"
BATCH_BYTES_MAX = 262_144
DELAY_SECONDS_MAX = 900
VISIBILITY_TIMEOUT_MAX_S = 43_200
WAIT_TIME_MAX_S = 20
RECEIVE_MESSAGES_MAX = 10
SYSTEM_ATTRIBUTE_NAMES = (
    "SenderId",
    "SentTimestamp",
    "ApproximateReceiveCount",
    "ApproximateFirstReceiveTimestamp",
    "DeadLetterQueueSourceArn",
    "MessageGroupId",
    "MessageDeduplicationId",
    "SequenceNumber",
)
MESSAGE_ID_NAMESPACE = uuid.UUID("6f1b8a52-7f3c-4c1e-9d55-0e2f5c7a9b10")


# -- sending ---------------------------------------------------------------------------


@dataclass
class _Message:
    """A message checked and made a record, with its answer's fields."""

    record: tuple[bytes | None, bytes, list[tuple[str, bytes | None]]]
    answer: dict[str, Any]
    size: int
    # A FIFO queue's deduplication key (None: a standard queue).
    deduplication: tuple[str, str, str] | None = None


def _prepared(queue: Queue, entry: Params) -> _Message:
    body = check_body(entry.get("MessageBody"))
    attributes = parse_message_attributes(entry.get("MessageAttributes"))
    size = len(body.encode()) + attributes_size_bytes(attributes)
    limit = queue.state.number("MaximumMessageSize")
    if size > limit:
        raise invalid_parameter(
            f"One or more parameters are invalid. Reason: Message must be "
            f"shorter than {limit} bytes."
        )
    state = queue.state
    content_based = state.attributes.get("ContentBasedDeduplication") == "true"
    ids = fifo_ids(entry, body, fifo=state.fifo, content_based=content_based)
    delay_s = optional_int(entry, "DelaySeconds", 0, DELAY_SECONDS_MAX)
    if delay_s is None:
        delay_s = state.number("DelaySeconds")
    message_id = str(uuid.uuid4())
    headers: list[tuple[str, bytes | None]] = [(MESSAGE_ID_HEADER, message_id.encode())]
    headers += attribute_headers(attributes)
    if delay_s:
        headers.append((DELAY_HEADER, str(delay_s * 1000).encode()))
    answer: dict[str, Any] = {"MessageId": message_id, "MD5OfMessageBody": md5_of_body(body)}
    digest = md5_of_attributes(attributes)
    if digest is not None:
        answer["MD5OfMessageAttributes"] = digest
    if ids is None:
        return _Message((None, body.encode(), headers), answer, size)
    headers.append((DEDUPLICATION_ID_HEADER, ids.deduplication_id.encode()))
    per_group = state.attributes.get("DeduplicationScope") == "messageGroup"
    key = Deduplications.key(queue.name, ids, per_group)
    return _Message((ids.group_id.encode(), body.encode(), headers), answer, size, key)


async def send_message(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    (answer,) = await _send(backend, call, queue, [_prepared(queue, params)])
    return answer


def _partition(queue: Queue) -> int:
    return secrets.randbelow(queue.topic.partition_count)


async def send_message_batch(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    prepared: list[tuple[str, _Message]] = []
    failed = []
    for entry in entries(params, "Entries"):
        try:
            prepared.append((entry["Id"], _prepared(queue, entry)))
        except SqsError as exc:
            failed.append(entry_failure(entry["Id"], exc))
    total_bytes = sum(message.size for _, message in prepared)
    if total_bytes > BATCH_BYTES_MAX:
        raise batch_request_too_long(total_bytes, BATCH_BYTES_MAX)
    answers = await _send(backend, call, queue, [message for _, message in prepared])
    successful = [
        {"Id": entry_id, **answer} for (entry_id, _), answer in zip(prepared, answers, strict=True)
    ]
    return {"Successful": successful, "Failed": failed}


async def _send(
    backend: Backend, call: Call, queue: Queue, messages: list[_Message]
) -> list[dict[str, Any]]:
    """Append the messages as one batch; each one's answer. A FIFO queue's message
    whose deduplication id was sent in the last 5 minutes (through any broker, as the
    queue's log says: fifo_log.py) is not appended again: its answer is the first
    one's (MessageId, SequenceNumber)."""
    if not messages:
        return []
    if not queue.state.fifo:
        batch = build_batch([m.record for m in messages])
        await backend.produce(call.caller, queue.name, _partition(queue), batch)
        return [m.answer for m in messages]
    async with backend.fifo_lock(queue.name):
        now_ms = wall_clock_ms()
        per_group = queue.state.attributes.get("DeduplicationScope") == "messageGroup"
        await catch_up(backend, queue.name, per_group, MESSAGE_ID_HEADER, now_ms)
        first_of: dict[tuple[str, str, str], _Message] = {}
        fresh: list[_Message] = []
        for message in messages:
            assert message.deduplication is not None
            earlier = backend.deduplications.answered(message.deduplication, now_ms)
            if earlier is None and message.deduplication not in first_of:
                first_of[message.deduplication] = message
                fresh.append(message)
        if fresh:
            # One partition per FIFO queue: a message group's order is its offsets'.
            base_offset = await backend.produce(
                call.caller, queue.name, 0, build_batch([m.record for m in fresh])
            )
            for index, message in enumerate(fresh):
                message.answer["SequenceNumber"] = sequence_number(base_offset + index)
                assert message.deduplication is not None
                backend.deduplications.remember(message.deduplication, message.answer, now_ms)
        answers = []
        for message in messages:
            assert message.deduplication is not None
            original = (
                backend.deduplications.answered(message.deduplication, now_ms) or message.answer
            )
            first = {k: original[k] for k in ("MessageId", "SequenceNumber")}
            answers.append({**message.answer, **first})
        return answers


# -- receiving -------------------------------------------------------------------------


async def receive_message(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    count = optional_int(params, "MaxNumberOfMessages", 1, RECEIVE_MESSAGES_MAX) or 1
    visibility_s = optional_int(params, "VisibilityTimeout", 0, VISIBILITY_TIMEOUT_MAX_S)
    if visibility_s is None:
        visibility_s = queue.state.number("VisibilityTimeout")
    wait_s = optional_int(params, "WaitTimeSeconds", 0, WAIT_TIME_MAX_S)
    if wait_s is None:
        wait_s = queue.state.number("ReceiveMessageWaitTimeSeconds")
    system_names = {
        *string_list(params, "AttributeNames"),
        *string_list(params, "MessageSystemAttributeNames"),
    }
    attribute_names = string_list(params, "MessageAttributeNames")
    member_id = "sqs-" + secrets.token_hex(8)
    # A direct lock is at least 1 ms: a visibility timeout of 0 makes it visible at once.
    lock_ms = max(visibility_s * 1000, 1)
    records = await _acquire(backend, call, queue, member_id, count, lock_ms, wait_s * 1000)
    now_ms = wall_clock_ms()
    messages = [
        _message(
            backend,
            call,
            queue,
            partition,
            record,
            member_id,
            now_ms,
            system_names,
            attribute_names,
        )
        for partition, record in records
    ]
    return {"Messages": messages} if messages else {}


async def _acquire(
    backend: Backend,
    call: Call,
    queue: Queue,
    member_id: str,
    count: int,
    lock_ms: int,
    wait_ms: int,
) -> list[tuple[int, DirectRecord]]:
    """Up to `count` records from the queue's partitions (from a random one on, so
    receivers spread), waiting up to `wait_ms` for the first."""
    partitions = queue.topic.partition_count
    start = secrets.randbelow(partitions)
    order = [(start + i) % partitions for i in range(partitions)]
    found: list[tuple[int, DirectRecord]] = []
    deadline_ms = wall_clock_ms() + wait_ms
    while True:
        for index in order:
            remaining_ms = max(0, deadline_ms - wall_clock_ms())
            # One partition: wait on it; several: a short wait on each, turn by turn.
            wait = remaining_ms if partitions == 1 else min(remaining_ms, 100)
            acquired = await backend.share.acquire(
                call.caller,
                queue.group,
                queue.name,
                index,
                member_id,
                records_max=count - len(found),
                lock_ms=lock_ms,
                wait_ms=0 if found else wait,
            )
            if acquired.error != ErrorCode.NONE:
                raise sqs_error_of(acquired.error, f"receiving from {queue.name}")
            found.extend((index, record) for record in acquired.records)
            if len(found) >= count:
                return found
        if found or wall_clock_ms() >= deadline_ms:
            return found


def _message(
    backend: Backend,
    call: Call,
    queue: Queue,
    partition: int,
    record: DirectRecord,
    member_id: str,
    now_ms: int,
    system_names: set[str],
    attribute_names: Sequence[str],
) -> dict[str, Any]:
    body = (record.value or b"").decode("utf-8", errors="replace")
    receipt = Receipt(
        queue.name, partition, record.offset, member_id, record.delivery_count, now_ms
    )
    message: dict[str, Any] = {
        "MessageId": _message_id(queue.name, partition, record),
        "ReceiptHandle": encode_receipt(backend.receipt_key, receipt),
        "MD5OfBody": md5_of_body(body),
        "Body": body,
    }
    system = _system_attributes(backend, call, queue, partition, record, now_ms)
    wanted = set(SYSTEM_ATTRIBUTE_NAMES) if "All" in system_names else system_names
    shown = {k: v for k, v in system.items() if k in wanted}
    if shown:
        message["Attributes"] = shown
    attributes: Mapping[str, MessageAttribute] = select_attributes(
        attributes_from_headers(record.headers), attribute_names
    )
    if attributes:
        message["MessageAttributes"] = {k: a.to_json() for k, a in attributes.items()}
        message["MD5OfMessageAttributes"] = md5_of_attributes(attributes)
    return message


def _message_id(topic: str, partition: int, record: DirectRecord) -> str:
    for key, value in record.headers:
        if key == MESSAGE_ID_HEADER and value is not None:
            try:
                return str(uuid.UUID(value.decode()))
            except (ValueError, UnicodeDecodeError):
                break
    return str(uuid.uuid5(MESSAGE_ID_NAMESPACE, f"{topic}/{partition}/{record.offset}"))


def _system_attributes(
    backend: Backend, call: Call, queue: Queue, partition: int, record: DirectRecord, now_ms: int
) -> dict[str, str]:
    first_ms = backend.note_first_receive((queue.name, partition, record.offset), now_ms)
    system = {
        "SenderId": call.principal or "ANONYMOUS",
        "SentTimestamp": str(record.timestamp_ms),
        "ApproximateReceiveCount": str(record.delivery_count),
        "ApproximateFirstReceiveTimestamp": str(first_ms),
    }
    for key, value in record.headers:
        if key == DEAD_LETTER_TOPIC_HEADER and value is not None:
            system["DeadLetterQueueSourceArn"] = queue_arn(value.decode("utf-8", errors="replace"))
        elif key == DEDUPLICATION_ID_HEADER and value is not None and queue.state.fifo:
            system["MessageDeduplicationId"] = value.decode("utf-8", errors="replace")
    if queue.state.fifo:
        if record.key is not None:
            system["MessageGroupId"] = record.key.decode("utf-8", errors="replace")
        system["SequenceNumber"] = sequence_number(record.offset)
    return system


# -- deleting and visibility -----------------------------------------------------------


def _receipt(backend: Backend, queue: Queue, handle: object) -> Receipt:
    receipt = decode_receipt(backend.receipt_key, handle)
    if (
        receipt is None
        or receipt.topic != queue.name
        or receipt.partition >= queue.topic.partition_count
    ):
        raise receipt_handle_invalid(handle if isinstance(handle, str) else "")
    return receipt


async def _delete(
    backend: Backend, call: Call, queue: Queue, receipts: Sequence[Receipt]
) -> list[SqsError | None]:
    """ACCEPT each receipt's message, one acknowledgement per partition and receiver
    (a batch's deletes are one request, one state write); each receipt's outcome."""
    by_holder: dict[tuple[int, str], list[int]] = {}
    for receipt in receipts:
        by_holder.setdefault((receipt.partition, receipt.member_id), []).append(receipt.offset)
    results: dict[tuple[int, str, int], ErrorCode] = {}
    for (partition, member_id), offsets in by_holder.items():
        answered = await backend.share.acknowledge(
            call.caller,
            queue.group,
            queue.name,
            partition,
            member_id,
            offsets,
            AcknowledgeType.ACCEPT,
        )
        for offset, error in answered.items():
            results[(partition, member_id, offset)] = error
    outcomes: list[SqsError | None] = []
    for receipt in receipts:
        error = results.get((receipt.partition, receipt.member_id, receipt.offset), ErrorCode.NONE)
        # A delivery that is over (deleted already, or its lock ran out): SQS answers success.
        over = (ErrorCode.NONE, ErrorCode.INVALID_RECORD_STATE, ErrorCode.INVALID_REQUEST)
        outcomes.append(
            None if error in over else sqs_error_of(error, f"deleting from {queue.name}")
        )
    return outcomes


async def delete_message(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    receipt = _receipt(backend, queue, required_str(params, "ReceiptHandle"))
    [outcome] = await _delete(backend, call, queue, [receipt])
    if outcome is not None:
        raise outcome
    return {}


async def delete_message_batch(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    successful, failed = [], []
    ids, receipts = [], []
    for entry in entries(params, "Entries"):
        try:
            receipts.append(_receipt(backend, queue, required_str(entry, "ReceiptHandle")))
        except SqsError as exc:
            failed.append(entry_failure(entry["Id"], exc))
            continue
        ids.append(entry["Id"])
    for entry_id, outcome in zip(ids, await _delete(backend, call, queue, receipts), strict=True):
        if outcome is None:
            successful.append({"Id": entry_id})
        else:
            failed.append(entry_failure(entry_id, outcome))
    return {"Successful": successful, "Failed": failed}


async def _change_visibility(
    backend: Backend, call: Call, queue: Queue, handle: object, timeout_s: int
) -> None:
    receipt = _receipt(backend, queue, handle)
    results = await backend.share.change_lock(
        call.caller,
        queue.group,
        queue.name,
        receipt.partition,
        receipt.member_id,
        [receipt.offset],
        timeout_s * 1000,
    )
    error = results.get(receipt.offset, ErrorCode.NONE)
    if error in (ErrorCode.INVALID_RECORD_STATE, ErrorCode.INVALID_REQUEST):
        raise message_not_inflight()
    if error != ErrorCode.NONE:
        raise sqs_error_of(error, f"changing visibility in {queue.name}")


async def change_message_visibility(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    handle = required_str(params, "ReceiptHandle")
    timeout_s = required_int(params, "VisibilityTimeout", 0, VISIBILITY_TIMEOUT_MAX_S)
    await _change_visibility(backend, call, queue, handle, timeout_s)
    return {}


async def change_message_visibility_batch(
    backend: Backend, call: Call, params: Params
) -> dict[str, Any]:
    queue = queue_of(backend, params)
    successful, failed = [], []
    for entry in entries(params, "Entries"):
        try:
            handle = required_str(entry, "ReceiptHandle")
            timeout_s = required_int(entry, "VisibilityTimeout", 0, VISIBILITY_TIMEOUT_MAX_S)
            await _change_visibility(backend, call, queue, handle, timeout_s)
        except SqsError as exc:
            failed.append(entry_failure(entry["Id"], exc))
            continue
        successful.append({"Id": entry["Id"]})
    return {"Successful": successful, "Failed": failed}


# -- purging ---------------------------------------------------------------------------


async def purge_queue(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    """As `weir queue purge`: the group's start offsets moved to the partitions' ends."""
    queue = queue_of(backend, params)
    partitions = list(range(queue.topic.partition_count))
    ends = await backend.end_offsets(call.caller, queue.name, partitions)
    body = {
        "group_id": queue.group,
        "topics": [
            {
                "topic_name": queue.name,
                "partitions": [
                    {"partition_index": p, "start_offset": offset}
                    for p, offset in sorted(ends.items())
                ],
            }
        ],
    }
    coordinator = await backend.coordinator(call.caller, queue.group)
    response = await backend.send(
        call.caller, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body, f"purging {queue.name}",
        node_id=coordinator,
    )  # fmt: skip
    if response.error_code:
        raise sqs_error_of(response.error_code, f"purging {queue.name}", response.error_message)
    for topic in response.responses:
        for partition in topic.partitions:
            if partition.error_code:
                raise sqs_error_of(
                    partition.error_code, f"purging {queue.name}", partition.error_message
                )
    return {}
