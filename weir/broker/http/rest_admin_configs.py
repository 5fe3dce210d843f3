"""A topic's configs in Confluent REST Proxy v3's shape (`KafkaTopicConfig`): every
config with its value and where it comes from (`source`: DYNAMIC_TOPIC_CONFIG for
an override, DEFAULT_CONFIG or STATIC_BROKER_CONFIG for a default; `is_default`),
read with DescribeConfigs and changed with IncrementalAlterConfigs, as the caller."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from weir.broker.http.rest_admin_base import (
    AdminCall,
    Endpoint,
    bad_request,
    check_kafka,
    collection,
    json_response,
    no_content,
    not_found,
    require,
    resource,
    resource_name,
    topic_name,
)
from weir.broker.http.rest_admin_topics import TOPIC
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

DESCRIBE_CONFIGS_VERSION = 4
INCREMENTAL_ALTER_CONFIGS_VERSION = 1
RESOURCE_TYPE_TOPIC = 2
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}
DEFAULT_SOURCES = frozenset({"DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"})
OPERATIONS = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}
ALTER_BATCH_MAX = 1_000


async def describe_configs(call: AdminCall, topic: str, names: list[str] | None) -> list[Any]:
    response = await call.send(
        ApiKey.DESCRIBE_CONFIGS,
        DESCRIBE_CONFIGS_VERSION,
        {
            "resources": [
                {
                    "resource_type": RESOURCE_TYPE_TOPIC,
                    "resource_name": topic,
                    "configuration_keys": names,
                }
            ],
            "include_synonyms": True,
            "include_documentation": False,
        },
    )
    result = response.results[0]
    if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise not_found(f"no topic {topic!r}")
    check_kafka(result.error_code, result.error_message, f"describe the configs of {topic!r}")
    return sorted(result.configs, key=lambda c: c.name)


def config_resource(call: AdminCall, topic: str, config: Any) -> dict[str, Any]:
    source = CONFIG_SOURCES.get(config.config_source, "UNKNOWN")
    return resource(
        "KafkaTopicConfig",
        call.url("topics", topic, "configs", config.name),
        cluster_id=call.cluster_id,
        topic_name=topic,
        name=config.name,
        value=None if config.is_sensitive else config.value,
        is_default=source in DEFAULT_SOURCES,
        is_read_only=bool(config.read_only),
        is_sensitive=bool(config.is_sensitive),
        source=source,
        synonyms=[
            {
                "name": s.name,
                "value": None if config.is_sensitive else s.value,
                "source": CONFIG_SOURCES.get(s.source, "UNKNOWN"),
            }
            for s in config.synonyms
        ],
    )


async def list_configs(call: AdminCall) -> Response:
    topic = topic_name(call.path("topic_name"))
    configs = await describe_configs(call, topic, None)
    return json_response(
        collection(
            "KafkaTopicConfigList",
            call.url("topics", topic, "configs"),
            [config_resource(call, topic, c) for c in configs],
        )
    )


async def get_config(call: AdminCall) -> Response:
    topic = topic_name(call.path("topic_name"))
    name = resource_name(call.path("name"), "name")
    for config in await describe_configs(call, topic, [name]):
        if config.name == name:
            return json_response(config_resource(call, topic, config))
    raise not_found(f"topic {topic!r} has no config {name!r}")


async def alter_configs(
    call: AdminCall, topic: str, changes: list[dict[str, Any]], validate_only: bool
) -> None:
    response = await call.send(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        INCREMENTAL_ALTER_CONFIGS_VERSION,
        {
            "resources": [
                {"resource_type": RESOURCE_TYPE_TOPIC, "resource_name": topic, "configs": changes}
            ],
            "validate_only": validate_only,
        },
    )
    result = response.responses[0]
    if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise not_found(f"no topic {topic!r}")
    check_kafka(result.error_code, result.error_message, f"alter the configs of {topic!r}")


def _value(document: dict[str, Any], operation: str) -> str | None:
    value = document.get("value")
    if operation == "DELETE":
        return None
    if not isinstance(value, str):
        raise bad_request(f"a {operation} needs a string value")
    return value


async def update_config(call: AdminCall) -> Response:
    topic = topic_name(call.path("topic_name"))
    name = resource_name(call.path("name"), "name")
    document = await call.json_body()
    require(document, "value")
    change = {"name": name, "config_operation": OPERATIONS["SET"], "value": _value(document, "SET")}
    await alter_configs(call, topic, [change], validate_only=False)
    return no_content()


async def reset_config(call: AdminCall) -> Response:
    topic = topic_name(call.path("topic_name"))
    name = resource_name(call.path("name"), "name")
    change = {"name": name, "config_operation": OPERATIONS["DELETE"], "value": None}
    await alter_configs(call, topic, [change], validate_only=False)
    return no_content()


async def batch_alter_configs(call: AdminCall) -> Response:
    topic = topic_name(call.path("topic_name"))
    document = await call.json_body()
    entries = require(document, "data")
    if not isinstance(entries, list) or not 0 < len(entries) <= ALTER_BATCH_MAX:
        raise bad_request(f"data must be a list of 1 to {ALTER_BATCH_MAX} changes")
    validate_only = document.get("validate_only", False)
    if not isinstance(validate_only, bool):
        raise bad_request("validate_only must be true or false")
    changes = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise bad_request("each change must be an object with name (value, operation)")
        operation = entry.get("operation", "SET")
        if not isinstance(operation, str) or operation.upper() not in OPERATIONS:
            raise bad_request(f"operation must be one of {', '.join(OPERATIONS)}")
        operation = operation.upper()
        changes.append(
            {
                "name": resource_name(entry.get("name"), "a change's name"),
                "config_operation": OPERATIONS[operation],
                "value": _value(entry, operation),
            }
        )
    await alter_configs(call, topic, changes, validate_only)
    return no_content()


CONFIGS = f"{TOPIC}/configs"
ALTER_BODY = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "value": {"type": ["string", "null"]},
                    "operation": {"enum": list(OPERATIONS)},
                },
            },
        },
        "validate_only": {"type": "boolean"},
    },
}
ENDPOINTS = [
    Endpoint(
        "GET", CONFIGS, list_configs, "A topic's configs, defaults and overrides", tag="topics"
    ),
    Endpoint(
        "POST",
        f"{CONFIGS}:alter",
        batch_alter_configs,
        "Set or reset several configs of a topic at once",
        body=ALTER_BODY,
        responses={204: "Altered"},
        tag="topics",
    ),
    Endpoint("GET", f"{CONFIGS}/{{name}}", get_config, "One config of a topic", tag="topics"),
    Endpoint(
        "PUT",
        f"{CONFIGS}/{{name}}",
        update_config,
        "Set a config of a topic (an override)",
        body={
            "type": "object",
            "required": ["value"],
            "properties": {"value": {"type": "string"}},
        },
        responses={204: "Set"},
        tag="topics",
    ),
    Endpoint(
        "DELETE",
        f"{CONFIGS}/{{name}}",
        reset_config,
        "Reset a config of a topic to its default",
        responses={204: "Reset"},
        tag="topics",
    ),
]
