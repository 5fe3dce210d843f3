"""The SQS message move tasks this broker runs (`move_tasks`): their progress and
the latest few per source queue, as ListMessageMoveTasks shows them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import trio

from weir.broker.http.sqs.names import queue_arn

RUNNING, COMPLETED, CANCELLED, FAILED = "RUNNING", "COMPLETED", "CANCELLED", "FAILED"
TASKS_KEPT_PER_SOURCE = 10


@dataclass
class MoveTask:
    handle: str
    source: str
    destination: str | None
    rate: int | None
    started_ms: int
    to_move: int
    moved: int = 0
    status: str = RUNNING
    failure: str | None = None
    cancel_scope: trio.CancelScope = field(default_factory=trio.CancelScope)

    def to_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "Status": self.status,
            "SourceArn": queue_arn(self.source),
            "ApproximateNumberOfMessagesMoved": self.moved,
            "ApproximateNumberOfMessagesToMove": self.to_move,
            "StartedTimestamp": self.started_ms,
        }
        if self.status == RUNNING:
            shown["TaskHandle"] = self.handle
        if self.destination is not None:
            shown["DestinationArn"] = queue_arn(self.destination)
        if self.rate is not None:
            shown["MaxNumberOfMessagesPerSecond"] = self.rate
        if self.failure is not None:
            shown["FailureReason"] = self.failure
        return shown


@dataclass
class MoveTasks:
    """This broker's tasks, the latest few per source queue."""

    by_source: dict[str, list[MoveTask]] = field(default_factory=dict)

    def running(self, source: str) -> MoveTask | None:
        return next((t for t in self.by_source.get(source, []) if t.status == RUNNING), None)

    def add(self, task: MoveTask) -> None:
        tasks = self.by_source.setdefault(task.source, [])
        tasks.insert(0, task)
        del tasks[TASKS_KEPT_PER_SOURCE:]

    def find(self, handle: str) -> MoveTask | None:
        for tasks in self.by_source.values():
            for task in tasks:
                if task.handle == handle:
                    return task
        return None
