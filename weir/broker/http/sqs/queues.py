"""Queue actions: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue,
GetQueueAttributes, SetQueueAttributes, and the tag actions (kept with the queue's
attributes). A queue is its topic (the mapping: `names`, `attributes`)."""

from __future__ import annotations

import base64
import binascii
import functools
from dataclasses import dataclass, replace
from typing import Any

from weir.broker.broker import wall_clock_ms
from weir.broker.coordinators.share_configs import dead_letter_refusal
from weir.broker.coordinators.share_service import ShareService
from weir.broker.coordinators.share_state_service import ShareKey, ShareStateUnavailableError
from weir.broker.handlers.admin_configs import ResourceType
from weir.broker.http.kafka_gateway import HttpCaller
from weir.broker.http.sqs.attributes import (
    ALL_NAMES,
    QUEUE_CONFIG,
    Bounds,
    QueueState,
    check_attributes,
    group_configs,
    queue_state_of,
    requested_names,
    topic_configs,
)
from weir.broker.http.sqs.backend import Backend, sqs_error_of
from weir.broker.http.sqs.errors import (
    invalid_attribute_value,
    invalid_parameter,
    queue_does_not_exist,
    queue_name_exists,
)
from weir.broker.http.sqs.names import (
    check_queue_name,
    group_of,
    queue_from_url,
    queue_url,
)
from weir.broker.http.sqs.params import (
    Params,
    optional_int,
    optional_str,
    required_str,
    string_list,
    string_map,
)
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.log.config import InvalidConfig, LogConfig
from weir.security.acl import AclOperation
from weir.wire.protocol import ApiKey

TAG_PREFIX = "tag:"
LIST_RESULTS_MAX = 1000
TAGS_MAX = 50


@dataclass(frozen=True)
class Call:
    """Who calls (the principal's authorization; None: open) and the endpoint the
    queue URLs are made of (`scheme://host[:port]` as the client reached it)."""

    caller: HttpCaller
    endpoint: str
    principal: str = ""


@dataclass(frozen=True)
class Queue:
    name: str
    topic: TopicRecord
    state: QueueState

    @property
    def group(self) -> str:
        return group_of(self.name)


def topic_queue_state(topic: TopicRecord) -> QueueState | None:
    """The queue a topic is (its `weir.sqs.queue` config), or None: not a queue."""
    text = topic.configs.get(QUEUE_CONFIG)
    return None if not text else _queue_state(text)


@functools.lru_cache(maxsize=1024)
def _queue_state(text: str) -> QueueState | None:
    """Parsed once per value (every request names its queue)."""
    try:
        config = LogConfig.from_overrides({QUEUE_CONFIG: text})
    except InvalidConfig:
        return None
    return queue_state_of(config.weir_sqs_queue)


def find_queue(backend: Backend, name: str) -> Queue:
    topic = backend.broker.controller.topic(name)
    state = None if topic is None else topic_queue_state(topic)
    if topic is None or state is None:
        raise queue_does_not_exist()
    return Queue(name, topic, state)


def queue_of(backend: Backend, params: Params) -> Queue:
    return find_queue(backend, queue_from_url(params.get("QueueUrl")))


def bounds_of(backend: Backend) -> Bounds:
    settings = backend.broker.config.group_settings()
    return Bounds(
        settings.share_record_lock_duration_min_ms,
        settings.share_record_lock_duration_max_ms,
        settings.share_delivery_count_limit_min,
        settings.share_delivery_count_limit_max,
    )


def _check_dead_letter_target(backend: Backend, queue: str, state: QueueState) -> None:
    redrive = state.redrive
    if redrive is None:
        return
    target = redrive.dead_letter_queue
    if target == queue:
        raise invalid_attribute_value(
            "Value for parameter RedrivePolicy is invalid. Reason: "
            "a queue cannot be its own dead-letter queue."
        )
    found = find_queue(backend, target)  # QueueDoesNotExist when it is not a queue
    if found.state.fifo != state.fifo:
        raise invalid_attribute_value(
            "Value for parameter RedrivePolicy is invalid. Reason: "
            "the dead-letter queue must be of the same type."
        )
    refusal = dead_letter_refusal(backend.broker, group_of(queue), target)
    if refusal is not None:
        raise invalid_attribute_value(
            f"Value for parameter RedrivePolicy is invalid. Reason: {refusal} (set the broker's "
            'errors_deadletterqueue_topic_name_prefix to "" to let queues be dead-letter queues)'
        )


async def create_queue(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    name = required_str(params, "QueueName")
    raw_attributes = params.get("Attributes") or {}
    # A FIFO queue is asked for with FifoQueue=true, and its name ends with .fifo.
    fifo = (
        isinstance(raw_attributes, dict) and str(raw_attributes.get("FifoQueue")).lower() == "true"
    )
    check_queue_name(name, fifo=fifo)
    attributes = check_attributes(raw_attributes, fifo=fifo, creating=True)
    tags = string_map(params, "tags", TAGS_MAX)
    existing = backend.broker.controller.topic(name)
    if existing is not None:
        state = topic_queue_state(existing)
        if state is None or any(state.visible(name).get(k) != v for k, v in attributes.items()):
            raise queue_name_exists(name)
        return {"QueueUrl": queue_url(call.endpoint, name)}
    now_s = wall_clock_ms() // 1000
    state = QueueState(
        {**attributes, **{TAG_PREFIX + k: v for k, v in tags.items()}}, fifo, now_s, now_s
    )
    _check_dead_letter_target(backend, name, state)
    group = group_configs(state, bounds_of(backend))  # refuses a maxReceiveCount out of bounds
    configs = {**topic_configs(state), "errors.deadletterqueue.group.enable": "true"}
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": 1,
                "replication_factor": _replicas(backend),
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout_ms": 30_000,
        "validate_only": False,
    }
    response = await backend.send(
        call.caller,
        ApiKey.CREATE_TOPICS,
        7,
        body,
        f"creating topic {name}",
        node_id=backend.kafka.controller_id(),
    )
    result = response.topics[0]
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
        raise queue_name_exists(name)
    if result.error_code:
        raise sqs_error_of(result.error_code, f"creating topic {name}", result.error_message)
    await backend.alter_configs(call.caller, ResourceType.GROUP, group_of(name), group)
    return {"QueueUrl": queue_url(call.endpoint, name)}


# A queue's replicas in a cluster (a topic's default is 1: a queue should survive a broker).
QUEUE_REPLICAS_MAX = 3


def _replicas(backend: Backend) -> int:
    cluster = backend.broker.cluster
    if cluster is None:
        return -1
    return max(1, min(QUEUE_REPLICAS_MAX, len(cluster.live_brokers())))


async def get_queue_url(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    name = required_str(params, "QueueName")
    queue = find_queue(backend, name)
    _require_describe(backend, call, queue.name)
    return {"QueueUrl": queue_url(call.endpoint, queue.name)}


def _require_describe(backend: Backend, call: Call, topic: str) -> None:
    authorization = backend.authorization(call.caller, "SQS")
    if authorization is not None and not authorization.allows_topic(AclOperation.DESCRIBE, topic):
        raise queue_does_not_exist()


async def list_queues(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    prefix = optional_str(params, "QueueNamePrefix") or ""
    results_max = optional_int(params, "MaxResults", 1, LIST_RESULTS_MAX)
    after = _decode_token(optional_str(params, "NextToken"))
    authorization = backend.authorization(call.caller, "SQS ListQueues")
    names = sorted(
        topic.name
        for topic in backend.broker.controller.topics()
        if topic.name.startswith(prefix)
        and topic_queue_state(topic) is not None
        and (authorization is None or authorization.allows_topic(AclOperation.DESCRIBE, topic.name))
    )
    if after is not None:
        names = [n for n in names if n > after]
    limit = results_max if results_max is not None else LIST_RESULTS_MAX
    page = names[:limit]
    answer: dict[str, Any] = {}
    if page:
        answer["QueueUrls"] = [queue_url(call.endpoint, n) for n in page]
    if results_max is not None and len(names) > limit:
        answer["NextToken"] = base64.urlsafe_b64encode(page[-1].encode()).decode()
    return answer


def _decode_token(token: str | None) -> str | None:
    if token is None:
        return None
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid_parameter("Invalid NextToken value.") from None


async def delete_queue(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    body = {"topics": [{"name": queue.name}], "timeout_ms": 30_000}
    response = await backend.send(
        call.caller,
        ApiKey.DELETE_TOPICS,
        6,
        body,
        f"deleting topic {queue.name}",
        node_id=backend.kafka.controller_id(),
    )
    result = response.responses[0]
    if result.error_code:
        raise sqs_error_of(result.error_code, f"deleting topic {queue.name}", result.error_message)
    return {}


async def get_queue_attributes(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    _require_describe(backend, call, queue.name)
    names = requested_names(params.get("AttributeNames"))
    wanted = set(ALL_NAMES) if "All" in names else set(names)
    shown = {
        k: v for k, v in queue.state.visible(queue.name).items() if not k.startswith(TAG_PREFIX)
    }
    if wanted & {
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    }:
        shown.update(await queue_depth(backend, call, queue))
    return {"Attributes": {k: v for k, v in shown.items() if k in wanted}} if wanted else {}


async def queue_depth(backend: Backend, call: Call, queue: Queue) -> dict[str, str]:
    """The messages by state, from the share partitions led here; a partition led by
    another broker counts the records its group has not finished with (the share
    group's lag, DescribeShareGroupOffsets) as visible."""
    service = backend.broker.shares
    available = acquired = delayed = 0
    elsewhere = []
    for index in range(queue.topic.partition_count):
        replica = backend.broker.lookup(queue.name, index)
        if isinstance(replica, ErrorCode) or not isinstance(service, ShareService):
            elsewhere.append(index)
            continue
        key = ShareKey(queue.group, queue.topic.topic_id, index)
        try:
            leader = await service.partitions.leader(key, replica)
        except ShareStateUnavailableError:
            elsewhere.append(index)
            continue
        depth = leader.partition.depth(replica.high_watermark)
        available += depth.available
        acquired += depth.acquired
        delayed += depth.delayed
    if elsewhere:
        available += sum((await _lags(backend, call, queue, elsewhere)).values())
    return {
        "ApproximateNumberOfMessages": str(available),
        "ApproximateNumberOfMessagesNotVisible": str(acquired),
        "ApproximateNumberOfMessagesDelayed": str(delayed),
    }


async def _lags(
    backend: Backend, call: Call, queue: Queue, partitions: list[int]
) -> dict[int, int]:
    topics = [{"topic_name": queue.name, "partitions": partitions}]
    body = {"groups": [{"group_id": queue.group, "topics": topics}]}
    coordinator = await backend.coordinator(call.caller, queue.group)
    response = await backend.send(
        call.caller, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, body, f"depth of {queue.name}",
        node_id=coordinator,
    )  # fmt: skip
    lags = {}
    for group in response.groups:
        for topic in group.topics:
            for partition in topic.partitions:
                lags[int(partition.partition_index)] = max(int(partition.lag), 0)
    return lags


async def set_queue_attributes(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    if params.get("Attributes") is None:
        raise invalid_parameter("The request must contain the parameter Attributes.")
    changes = check_attributes(params.get("Attributes"), fifo=queue.state.fifo, creating=False)
    await _store(backend, call, queue, changes)
    return {}


async def _store(backend: Backend, call: Call, queue: Queue, changes: dict[str, str]) -> None:
    attributes = {**queue.state.attributes, **changes}
    for name in [k for k, v in changes.items() if v == "" and k == "RedrivePolicy"]:
        del attributes[name]
    state = replace(queue.state, attributes=attributes, modified_s=wall_clock_ms() // 1000)
    _check_dead_letter_target(backend, queue.name, state)
    group = group_configs(state, bounds_of(backend))
    await backend.alter_configs(call.caller, ResourceType.TOPIC, queue.name, topic_configs(state))
    await backend.alter_configs(call.caller, ResourceType.GROUP, queue.group, group)


async def tag_queue(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    tags = string_map(params, "Tags", TAGS_MAX)
    await _store(backend, call, queue, {TAG_PREFIX + k: v for k, v in tags.items()})
    return {}


async def untag_queue(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    keys = string_list(params, "TagKeys", TAGS_MAX)
    attributes = {
        k: v
        for k, v in queue.state.attributes.items()
        if k not in {TAG_PREFIX + key for key in keys}
    }
    state = replace(queue.state, attributes=attributes, modified_s=wall_clock_ms() // 1000)
    await backend.alter_configs(call.caller, ResourceType.TOPIC, queue.name, topic_configs(state))
    return {}


async def list_queue_tags(backend: Backend, call: Call, params: Params) -> dict[str, Any]:
    queue = queue_of(backend, params)
    _require_describe(backend, call, queue.name)
    tags = {
        k[len(TAG_PREFIX) :]: v
        for k, v in queue.state.attributes.items()
        if k.startswith(TAG_PREFIX)
    }
    return {"Tags": tags} if tags else {}


async def list_dead_letter_source_queues(
    backend: Backend, call: Call, params: Params
) -> dict[str, Any]:
    queue = queue_of(backend, params)
    sources = sorted(
        topic.name
        for topic in backend.broker.controller.topics()
        if (state := topic_queue_state(topic)) is not None
        and state.redrive is not None
        and state.redrive.dead_letter_queue == queue.name
    )
    return {"queueUrls": [queue_url(call.endpoint, n) for n in sources]}
