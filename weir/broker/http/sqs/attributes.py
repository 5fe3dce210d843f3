"""Queue attributes: SQS's names, bounds and defaults, kept as the queue's state (the
topic config `weir.sqs.queue`, JSON), and the Weir topic and share-group configs they
set (docs/http-sqs.md has the table):

| attribute | Weir |
|---|---|
| VisibilityTimeout | each ReceiveMessage's lock (ShareDirect `lock_ms`); the group's
  `share.record.lock.duration.ms` within the broker's bounds (Kafka share consumers) |
| DelaySeconds | a `weir.delay.ms` header on each message sent without its own |
| MessageRetentionPeriod | topic `retention.ms` and `weir.share.record.ttl.ms` |
| ReceiveMessageWaitTimeSeconds | the wait of a ReceiveMessage that names none |
| MaximumMessageSize | checked at SendMessage |
| RedrivePolicy | group `errors.deadletterqueue.topic.name` (records copied) and
  `share.delivery.count.limit` = maxReceiveCount |

Pure: the broker's bounds come in as `Bounds`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from weir.broker.http.sqs.errors import (
    SqsError,
    invalid_attribute_name,
    invalid_attribute_value,
    invalid_parameter,
)
from weir.broker.http.sqs.names import queue_arn, queue_from_arn

QUEUE_CONFIG = "weir.sqs.queue"

# Settable attributes: (default, low, high) for the numeric ones.
NUMERIC = {
    "DelaySeconds": (0, 0, 900),
    "MaximumMessageSize": (262_144, 1_024, 262_144),
    "MessageRetentionPeriod": (345_600, 60, 1_209_600),
    "ReceiveMessageWaitTimeSeconds": (0, 0, 20),
    "VisibilityTimeout": (30, 0, 43_200),
}
FREE_TEXT = (
    "Policy",
    "RedriveAllowPolicy",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "SqsManagedSseEnabled",
)
FIFO_ONLY = ("ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit")
SETTABLE = (*NUMERIC, "RedrivePolicy", *FREE_TEXT, *FIFO_ONLY)
COMPUTED = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "QueueArn",
)
ALL_NAMES = (*SETTABLE, *COMPUTED, "FifoQueue")
MAX_RECEIVE_COUNT_RANGE = (1, 1000)
ATTRIBUTE_VALUE_CHARS_MAX = 20_480


@dataclass(frozen=True)
class Bounds:
    """The broker's share-group bounds the mapping must stay within."""

    lock_duration_min_ms: int
    lock_duration_max_ms: int
    delivery_count_limit_min: int
    delivery_count_limit_max: int


@dataclass(frozen=True)
class RedrivePolicy:
    dead_letter_queue: str
    max_receive_count: int


@dataclass(frozen=True)
class QueueState:
    """What the topic config `weir.sqs.queue` holds: the attributes set (text, as
    SQS returns them), whether the queue is FIFO, and its timestamps (seconds)."""

    attributes: Mapping[str, str]
    fifo: bool
    created_s: int
    modified_s: int

    def number(self, name: str) -> int:
        return int(self.attributes.get(name, NUMERIC[name][0]))

    @property
    def redrive(self) -> RedrivePolicy | None:
        text = self.attributes.get("RedrivePolicy")
        return parse_redrive_policy(text) if text else None

    def to_config(self) -> str:
        return json.dumps(
            {
                "attributes": dict(sorted(self.attributes.items())),
                "fifo": self.fifo,
                "created": self.created_s,
                "modified": self.modified_s,
            },
            separators=(",", ":"),
        )

    def visible(self, queue: str) -> dict[str, str]:
        """The stored attributes as GetQueueAttributes shows them (defaults filled)."""
        shown = {name: str(default) for name, (default, _, _) in NUMERIC.items()}
        shown.update(self.attributes)
        shown["CreatedTimestamp"] = str(self.created_s)
        shown["LastModifiedTimestamp"] = str(self.modified_s)
        shown["QueueArn"] = queue_arn(queue)
        shown.setdefault("SqsManagedSseEnabled", "false")
        if self.fifo:
            shown["FifoQueue"] = "true"
            shown.setdefault("ContentBasedDeduplication", "false")
            shown.setdefault("DeduplicationScope", "queue")
            shown.setdefault("FifoThroughputLimit", "perQueue")
        return shown


def queue_state_of(config_text: str | None) -> QueueState | None:
    """The queue state a topic's `weir.sqs.queue` holds; None: not a queue."""
    if not config_text:
        return None
    try:
        document = json.loads(config_text)
        attributes = {str(k): str(v) for k, v in dict(document["attributes"]).items()}
        return QueueState(
            attributes, bool(document["fifo"]), int(document["created"]), int(document["modified"])
        )
    except (ValueError, KeyError, TypeError):
        return None


def check_attributes(raw: object, *, fifo: bool, creating: bool) -> dict[str, str]:
    """The attributes of a CreateQueue or SetQueueAttributes, checked; returns their
    normalized text."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise invalid_parameter("Attributes must be a map.")
    checked: dict[str, str] = {}
    for name, value in raw.items():
        if name == "FifoQueue":
            if not creating:
                raise invalid_attribute_name(name)
            if str(value).lower() != ("true" if fifo else "false"):
                raise invalid_attribute_value(
                    "Invalid value for the parameter FifoQueue. "
                    "Reason: Modifying queue type is not supported."
                )
            continue
        if name not in SETTABLE:
            raise invalid_attribute_name(str(name)[:200])
        if not isinstance(value, str) or len(value) > ATTRIBUTE_VALUE_CHARS_MAX:
            raise invalid_attribute_value(f"Invalid value for the parameter {name}.")
        if name in FIFO_ONLY and not fifo:
            raise invalid_attribute_name(name)
        checked[name] = _checked_value(name, value)
    return checked


def _checked_value(name: str, value: str) -> str:
    if name in NUMERIC:
        _, low, high = NUMERIC[name]
        try:
            number = int(value.strip())
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            raise invalid_attribute_value(f"Invalid value for the parameter {name}.")
        return str(number)
    if name == "RedrivePolicy":
        if value == "":
            return ""
        parse_redrive_policy(value)
        return value
    if name == "ContentBasedDeduplication":
        if value.lower() not in ("true", "false"):
            raise invalid_attribute_value(f"Invalid value for the parameter {name}.")
        return value.lower()
    return value


def parse_redrive_policy(text: str) -> RedrivePolicy:
    try:
        document = json.loads(text)
    except ValueError:
        raise invalid_attribute_value(
            "Invalid value for the parameter RedrivePolicy. "
            "Reason: Redrive policy is not a valid JSON map."
        ) from None
    if not isinstance(document, dict):
        raise invalid_attribute_value("Invalid value for the parameter RedrivePolicy.")
    target, count = document.get("deadLetterTargetArn"), document.get("maxReceiveCount")
    if target is None or count is None:
        missing = "deadLetterTargetArn" if target is None else "maxReceiveCount"
        raise invalid_attribute_value(
            "Value for parameter RedrivePolicy is invalid. Reason: "
            "Redrive policy does not contain mandatory attribute: "
            f"{missing}."
        )
    try:
        receive_count = int(str(count))
    except ValueError:
        receive_count = 0
    low, high = MAX_RECEIVE_COUNT_RANGE
    if not low <= receive_count <= high:
        raise invalid_attribute_value(
            "Value for parameter RedrivePolicy is invalid. Reason: "
            "Invalid value for maxReceiveCount."
        )
    try:
        queue = queue_from_arn(target)
    except SqsError:
        raise invalid_attribute_value(
            "Value for parameter RedrivePolicy is invalid. Reason: "
            "Invalid value for deadLetterTargetArn."
        ) from None
    return RedrivePolicy(queue, receive_count)


def topic_configs(state: QueueState) -> dict[str, str]:
    """The queue's topic configs (the queue marker included)."""
    retention_ms = state.number("MessageRetentionPeriod") * 1000
    return {
        QUEUE_CONFIG: state.to_config(),
        "retention.ms": str(retention_ms),
        "weir.share.record.ttl.ms": str(retention_ms),
    }


def group_configs(state: QueueState, bounds: Bounds) -> dict[str, str | None]:
    """The share group's configs (None: removed, the broker's default)."""
    lock_ms = state.number("VisibilityTimeout") * 1000
    lock_ms = min(max(lock_ms, bounds.lock_duration_min_ms), bounds.lock_duration_max_ms)
    configs: dict[str, str | None] = {
        "share.auto.offset.reset": "earliest",
        "weir.share.record.headers.enable": "true",
        "share.record.lock.duration.ms": str(lock_ms),
        # A FIFO queue: a message group (the record key) is delivered in order, one
        # receive at a time (docs/queues.md, "Per-key ordering").
        "weir.share.key.ordering.enable": "true" if state.fifo else None,
    }
    redrive = state.redrive
    if redrive is None:
        # SQS redelivers without end; a share group at most its limit, the broker's highest.
        configs["share.delivery.count.limit"] = str(bounds.delivery_count_limit_max)
        configs["errors.deadletterqueue.topic.name"] = None
        configs["errors.deadletterqueue.copy.record.enable"] = None
        return configs
    if (
        not bounds.delivery_count_limit_min
        <= redrive.max_receive_count
        <= bounds.delivery_count_limit_max
    ):
        raise invalid_attribute_value(
            f"Value for parameter RedrivePolicy is invalid. Reason: maxReceiveCount "
            f"{redrive.max_receive_count} is outside this broker's share delivery count limits "
            f"[{bounds.delivery_count_limit_min}, {bounds.delivery_count_limit_max}] "
            "(group_share_min_delivery_count_limit, group_share_max_delivery_count_limit)."
        )
    configs["share.delivery.count.limit"] = str(redrive.max_receive_count)
    configs["errors.deadletterqueue.topic.name"] = redrive.dead_letter_queue
    configs["errors.deadletterqueue.copy.record.enable"] = "true"
    return configs


def requested_names(raw: object) -> list[str]:
    """GetQueueAttributes' AttributeNames, checked (`All` expands later)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        raise invalid_parameter("AttributeNames must be a list of strings.")
    for name in raw:
        if name != "All" and name not in ALL_NAMES:
            raise invalid_attribute_name(name[:200])
    return raw
