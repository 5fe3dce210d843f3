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
)
MESSAGE_ID_NAMESPACE = uuid.UUID("6f1b8a52-7f3c-4c1e-9d55-0e2f5c7a9b10")


# -- sending ---------------------------------------------------------------------------


def _prepared(queue: Queue, entry: Params) -> tuple[tuple[Any, ...], dict[str, Any], int]:
    """A message checked and made a record: (record, the answer's fields, its size)."""
    body = check_body(entry.get("MessageBody"))
    attributes = parse_message_attributes(entry.get("MessageAttributes"))
    size = len(body.encode()) + attributes_size_bytes(attributes)
    limit = queue.state.number("MaximumMessageSize")
    if size > limit:
        raise invalid_parameter(
            f"One or more parameters are invalid. Reason: Message must be "
            f"shorter than {limit} bytes."
        )
    delay_s = optional_int(entry, "DelaySeconds", 0, DELAY_SECONDS_MAX)
    if delay_s is None:
        delay_s = queue.state.number("DelaySeconds")
    message_id = str(uuid.uuid4())
    headers: list[tuple[str, bytes | None]] = [(MESSAGE_ID_HEADER, message_id.encode())]
    headers += attribute_headers(attributes)
    if delay_s:
        headers.append((DELAY_HEADER, str(delay_s * 1000).encode()))
    answer: dict[str, Any] = {"MessageId": message_id, "MD5OfMessageBody": md5_of_body(body)}
    digest = md5_of_attributes(attributes)
    if digest is not None:
        answer["MD5OfMessageAttributes"] = digest
    return (None, body.encode(), headers), answer, size


async def send_message(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    record, answer, _ = _prepared(queue, params)
    await backend.produce(call.caller, queue.name, _partition(queue), build_batch([record]))
    return answer


def _partition(queue: Queue) -> int:
    return secrets.randbelow(queue.topic.partition_count)


async def send_message_batch(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    batch = entries(params, "Entries")
    records, answers, failed = [], [], []
    total_bytes = 0
    for entry in batch:
        try:
            record, answer, size = _prepared(queue, entry)
        except SqsError as exc:
            failed.append(entry_failure(entry["Id"], exc))
            continue
        total_bytes += size
        records.append(record)
        answers.append({"Id": entry["Id"], **answer})
    if total_bytes > BATCH_BYTES_MAX:
        raise batch_request_too_long(total_bytes, BATCH_BYTES_MAX)
    if records:
        await backend.produce(call.caller, queue.name, _partition(queue), build_batch(records))
    return {"Successful": answers, "Failed": failed}


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


async def _delete(backend: Backend, call: Call, queue: Queue, handle: object) -> None:
    receipt = _receipt(backend, queue, handle)
    results = await backend.share.acknowledge(
        call.caller,
        queue.group,
        queue.name,
        receipt.partition,
        receipt.member_id,
        [receipt.offset],
        AcknowledgeType.ACCEPT,
    )
    error = results.get(receipt.offset, ErrorCode.NONE)
    # A delivery that is over (deleted already, or its lock ran out): SQS answers success.
    if error not in (ErrorCode.NONE, ErrorCode.INVALID_RECORD_STATE, ErrorCode.INVALID_REQUEST):
        raise sqs_error_of(error, f"deleting from {queue.name}")


async def delete_message(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    await _delete(backend, call, queue, required_str(params, "ReceiptHandle"))
    return {}


async def delete_message_batch(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    successful, failed = [], []
    for entry in entries(params, "Entries"):
        try:
            await _delete(backend, call, queue, required_str(entry, "ReceiptHandle"))
        except SqsError as exc:
            failed.append(entry_failure(entry["Id"], exc))
            continue
        successful.append({"Id": entry["Id"]})
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
