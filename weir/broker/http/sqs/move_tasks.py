"""StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask: messages moved
from a dead-letter queue back to the queues they came from (or to a destination
queue), as `weir queue redrive` moves dead letters.

A task runs on the broker that started it, as the caller who started it, in the
share service's task nursery: it receives from the dead-letter queue (its share group,
as any consumer), sends each message to its destination (the queue its dead letter's
`__dlq.errors.topic` names, unless a DestinationArn was given), then deletes it from
the dead-letter queue. A crash between the send and the delete sends that message
again (at least once, as SQS's own redrive). The tasks' state is this broker's memory:
ListMessageMoveTasks on another broker, or after a restart, does not show them.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import uuid
from typing import Any

import trio

from weir.broker.broker import wall_clock_ms
from weir.broker.coordinators.share_service import ShareService
from weir.broker.http.kafka_gateway import HttpCaller
from weir.broker.http.share_direct import DirectRecord
from weir.broker.http.sqs.backend import Backend, sqs_error_of
from weir.broker.http.sqs.errors import (
    SqsError,
    invalid_parameter,
    resource_not_found,
    service_unavailable,
)
from weir.broker.http.sqs.messaging import DEAD_LETTER_TOPIC_HEADER, MESSAGE_ID_HEADER
from weir.broker.http.sqs.move_task_state import (
    CANCELLED,
    COMPLETED,
    FAILED,
    RUNNING,
    TASKS_KEPT_PER_SOURCE,
    MoveTask,
)
from weir.broker.http.sqs.names import queue_arn, queue_from_arn
from weir.broker.http.sqs.params import Params, optional_int, optional_str, required_str
from weir.broker.http.sqs.queues import Call, Queue, find_queue, queue_depth, topic_queue_state
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.sharecoord.share_partition import AcknowledgeType

log = logging.getLogger(__name__)

RATE_MAX = 500  # MaxNumberOfMessagesPerSecond's bound (SQS's)
MOVE_BATCH = 10
MOVE_LOCK_MS = 60_000


def _is_dead_letter_queue(backend: Backend, name: str) -> bool:
    for topic in backend.broker.controller.topics():
        state = topic_queue_state(topic)
        redrive = None if state is None else state.redrive
        if redrive is not None and redrive.dead_letter_queue == name:
            return True
    return False


async def start_message_move_task(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    tasks = backend.move_tasks
    source = find_queue(backend, queue_from_arn(required_str(params, "SourceArn")))
    destination_arn = optional_str(params, "DestinationArn")
    destination = None
    if destination_arn is not None:
        destination = find_queue(backend, queue_from_arn(destination_arn)).name
    rate = optional_int(params, "MaxNumberOfMessagesPerSecond", 1, RATE_MAX)
    if not _is_dead_letter_queue(backend, source.name):
        raise invalid_parameter("Source queue must be configured as a Dead Letter Queue.")
    if tasks.running(source.name) is not None:
        raise invalid_parameter("There is already a task running. Only one active task is "
                                "allowed for a source queue arn at a given time.")  # fmt: skip
    service = backend.broker.shares
    nursery = service.store.background if isinstance(service, ShareService) else None
    if nursery is None:
        raise service_unavailable("Try again: the broker's share service is starting")
    depth = await queue_depth(backend, call, source)
    handle = base64.urlsafe_b64encode(
        json.dumps({"taskId": str(uuid.uuid4()), "sourceArn": queue_arn(source.name)}).encode()
    ).decode()
    to_move = sum(int(depth[n]) for n in ("ApproximateNumberOfMessages",
                                          "ApproximateNumberOfMessagesNotVisible"))  # fmt: skip
    task = MoveTask(handle, source.name, destination, rate, wall_clock_ms(), to_move)
    tasks.add(task)
    nursery.start_soon(_run, backend, call.caller, source, task)
    return {"TaskHandle": handle}


async def list_message_move_tasks(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    tasks = backend.move_tasks
    source = find_queue(backend, queue_from_arn(required_str(params, "SourceArn")))
    results_max = optional_int(params, "MaxResults", 1, TASKS_KEPT_PER_SOURCE) or 1
    found = tasks.by_source.get(source.name, [])[:results_max]
    return {"Results": [task.to_json() for task in found]}


async def cancel_message_move_task(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    tasks = backend.move_tasks
    handle = required_str(params, "TaskHandle")
    try:
        json.loads(base64.urlsafe_b64decode(handle.encode()))
    except (binascii.Error, ValueError):
        raise invalid_parameter("Value for parameter TaskHandle is invalid.") from None
    task = tasks.find(handle)
    if task is None or task.status != RUNNING:
        raise resource_not_found("Task does not exist or is not running.")
    task.status = CANCELLED
    task.cancel_scope.cancel()
    return {"ApproximateNumberOfMessagesMoved": task.moved}


async def _run(backend: Backend, caller: HttpCaller, source: Queue, task: MoveTask) -> None:
    with task.cancel_scope:
        try:
            while await _move_batch(backend, caller, source, task):
                pass
        except SqsError as exc:
            task.status, task.failure = FAILED, f"{exc.query_code}: {exc.message}"
            log.warning("SQS message move task from %s failed: %s", source.name, task.failure)
            return
        except Exception as exc:  # noqa: BLE001 (the share service's nursery must live on)
            task.status, task.failure = FAILED, f"InternalError: {type(exc).__name__}"
            log.exception("SQS message move task from %s failed", source.name)
            return
        task.status = COMPLETED


async def _move_batch(backend: Backend, caller: HttpCaller, source: Queue, task: MoveTask) -> bool:
    """Move up to a batch; False once the source has nothing to give now."""
    member_id = "sqs-move-" + uuid.uuid4().hex[:16]
    moved_any = False
    for partition in range(source.topic.partition_count):
        acquired = await backend.share.acquire(
            caller, source.group, source.name, partition, member_id,
            records_max=MOVE_BATCH, lock_ms=MOVE_LOCK_MS,
        )  # fmt: skip
        if acquired.error != ErrorCode.NONE:
            raise sqs_error_of(acquired.error, f"receiving from {source.name}", acquired.message)
        for record in acquired.records:
            started = trio.current_time()
            await _send_back(backend, caller, task, record)
            results = await backend.share.acknowledge(
                caller, source.group, source.name, partition, member_id, [record.offset],
                AcknowledgeType.ACCEPT,
            )  # fmt: skip
            error = results.get(record.offset, ErrorCode.NONE)
            if error != ErrorCode.NONE:
                raise sqs_error_of(error, f"deleting from {source.name}")
            task.moved += 1
            moved_any = True
            if task.rate is not None:
                await trio.sleep_until(started + 1 / task.rate)
    return moved_any


async def _send_back(
    backend: Backend, caller: HttpCaller, task: MoveTask, record: DirectRecord
) -> None:
    destination = task.destination
    if destination is None:
        for key, value in record.headers:
            if key == DEAD_LETTER_TOPIC_HEADER and value is not None:
                destination = value.decode("utf-8", errors="replace")
    if destination is None:
        raise invalid_parameter(f"message at offset {record.offset} names no source queue")
    queue = find_queue(backend, destination)
    headers: list[tuple[str, bytes | None]] = [(MESSAGE_ID_HEADER, str(uuid.uuid4()).encode())]
    headers += [(k, v) for k, v in record.headers if not k.startswith("__dlq.")]
    batch = build_batch([(record.key, record.value, headers)])
    await backend.produce(caller, queue.name, 0, batch)
