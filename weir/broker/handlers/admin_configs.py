"""DescribeConfigs v1–v4, AlterConfigs v0–v2, IncrementalAlterConfigs v0–v1.

Topic configs are the overrides the controller stores per topic, on top of the
catalog defaults (`weir.log.config.TOPIC_CONFIGS`). Broker configs are static
(`weir.broker.handlers.broker_configs`): described, never altered. Group configs (the GROUP
resource: KIP-848's `consumer.*`, KIP-932's `share.*`, KIP-1191's
`errors.deadletterqueue.*`; `weir.groupcoord.group_configs`) are overrides the
controller stores per group id, on top of the broker's group settings, typed (INT,
BOOLEAN, STRING) and described with the broker setting each overrides as its
synonym; a group need not exist to be configured, and the KIP-848 coordinator and
the share-group code use them from the change on.

Kafka's rules, resource by resource (one bad resource never fails the others;
one bad config fails its whole resource):

- a resource named twice in one request: INVALID_REQUEST for each;
- a config name twice in one resource: INVALID_REQUEST;
- a null value (except for IncrementalAlterConfigs DELETE): INVALID_REQUEST;
- an unknown topic config or a bad value: INVALID_CONFIG, with the reason;
- a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION;
- a broker resource must be named by this node's id (or empty); changing any
  broker config is INVALID_REQUEST (they are static);
- an internal topic (`__consumer_offsets`, ...): INVALID_REQUEST, also with
  `validate_only`; its configs are the broker's (Kafka has no such rule; a
  client's retention on the offsets topic lost committed offsets);
- a group resource needs a name (INVALID_REQUEST); an unknown group config, a
  value of the wrong type or outside the broker's bounds, APPEND or SUBTRACT (no
  group config is a list): INVALID_CONFIG, with Kafka's reason;
- `validate_only` checks everything and changes nothing.
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Callable, Collection, Container, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from weir.broker.broker import Broker
from weir.broker.coordinators.group_service import GroupService
from weir.broker.handlers.broker_configs import (
    CONFIG_TYPE_CODES,
    ConfigSource,
    KafkaConfigType,
    broker_config_entries,
    broker_synonym_of,
)
from weir.broker.handlers.context import Deferred, ItemAnswer, RequestContext, answer_in_order
from weir.controller.controller import ControllerError, is_internal_topic, validate_topic_name
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.groupcoord.group_configs import (
    GROUP_CONFIGS,
    GroupConfigDef,
    InvalidGroupConfig,
    unknown_group_config_message,
    validate_group_configs,
)
from weir.groupcoord.settings import GroupSettings
from weir.log.config import (
    TOPIC_CONFIGS,
    ConfigType,
    InvalidConfig,
    LogConfig,
    unknown_topic_config_message,
)
from weir.wire.messages.configs import (
    AlterConfigsRequest,
    AlterConfigsRequestResource,
    AlterConfigsResponse,
    AlterConfigsResponseResponse,
    DescribeConfigsRequest,
    DescribeConfigsRequestResource,
    DescribeConfigsResponse,
    DescribeConfigsResponseConfig,
    DescribeConfigsResponseResult,
    DescribeConfigsResponseSynonym,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsRequestResource,
    IncrementalAlterConfigsResponse,
    IncrementalAlterConfigsResponseResponse,
)

AlterResource = AlterConfigsRequestResource | IncrementalAlterConfigsRequestResource
ResourceT = TypeVar(
    "ResourceT", AlterConfigsRequestResource, IncrementalAlterConfigsRequestResource
)


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigOperation(enum.IntEnum):
    """IncrementalAlterConfigs `config_operation`."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


BROKER_CONFIGS_ARE_STATIC = (
    "Weir's broker configs are static: set them with `weir serve` flags, "
    "WEIR_* environment variables or the --config file, and restart"
)

_INTEGER = re.compile(r"-?[0-9]+")


class ResourceError(Exception):
    """Fails one resource of a config request with an error code and message."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class ConfigChange:
    name: str
    value: str | None
    operation: ConfigOperation = ConfigOperation.SET


# -- describing ------------------------------------------------------------------------


def topic_config_entries(
    record: TopicRecord,
    *,
    keys: Collection[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[DescribeConfigsResponseConfig]:
    """Every catalog topic config (or those in `keys`) with its effective value.

    The source is DYNAMIC_TOPIC_CONFIG for the topic's overrides, DEFAULT_CONFIG
    otherwise; synonyms list the override first, then the broker-level default."""
    config = Broker.log_config(record)
    entries = []
    for name, definition in TOPIC_CONFIGS.items():
        if keys and name not in keys:
            continue
        value = definition.format(config.value(name))
        synonyms: list[DescribeConfigsResponseSynonym] = []
        if name in record.configs:
            synonyms.append(_synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker_default = broker_synonym_of(name)
        if broker_default is not None:
            synonyms.append(
                _synonym(broker_default.name, broker_default.value, broker_default.source)
            )
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            DescribeConfigsResponseConfig(
                name=name,
                value=value,
                read_only=False,
                is_default=source == ConfigSource.DEFAULT_CONFIG,
                config_source=source,
                is_sensitive=False,
                synonyms=synonyms if include_synonyms else [],
                config_type=CONFIG_TYPE_CODES[definition.type],
                documentation=definition.doc if include_documentation else None,
            )
        )
    return entries


def broker_entries(
    broker: Broker,
    *,
    keys: Collection[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[DescribeConfigsResponseConfig]:
    entries = []
    for entry in broker_config_entries(broker.config):
        if keys and entry.name not in keys:
            continue
        entries.append(
            DescribeConfigsResponseConfig(
                name=entry.name,
                value=None if entry.is_sensitive else entry.value,
                read_only=entry.read_only,
                is_default=entry.source == ConfigSource.DEFAULT_CONFIG,
                config_source=entry.source,
                is_sensitive=entry.is_sensitive,
                synonyms=(
                    [_synonym(*synonym) for synonym in entry.synonyms()] if include_synonyms else []
                ),
                config_type=entry.config_type,
                documentation=entry.doc if include_documentation else None,
            )
        )
    return entries


def group_config_entries(
    broker: Broker,
    group_id: str,
    *,
    keys: Collection[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[DescribeConfigsResponseConfig]:
    """Every group config (or those in `keys`) with its effective value and type.

    As Kafka lists them, the synonyms are the group's override
    (DYNAMIC_GROUP_CONFIG), then the broker's setting when it is not Weir's
    default (STATIC_BROKER_CONFIG), then the default (DEFAULT_CONFIG), each under
    the name Kafka gives it (`group.share.record.lock.duration.ms`, or the config's
    own name where Kafka has no broker setting); the source is the first of them.
    A stored override that no longer parses is left out (the default shows)."""
    overrides = broker.controller.group_configs(group_id)
    settings = broker.config.group_settings()
    entries = []
    for name, definition in GROUP_CONFIGS.items():
        if keys and name not in keys:
            continue
        synonyms = _group_config_synonyms(definition, overrides.get(name), settings)
        value, source = synonyms[0].value, ConfigSource(synonyms[0].source)
        entries.append(
            DescribeConfigsResponseConfig(
                name=name,
                value=value,
                read_only=False,
                is_default=source == ConfigSource.DEFAULT_CONFIG,
                config_source=source,
                is_sensitive=False,
                synonyms=synonyms if include_synonyms else [],
                config_type=KafkaConfigType[definition.type.value],
                documentation=definition.doc if include_documentation else None,
            )
        )
    return entries


_GROUP_DEFAULTS = GroupSettings()


def _group_config_synonyms(
    definition: GroupConfigDef, override: str | None, settings: GroupSettings
) -> list[DescribeConfigsResponseSynonym]:
    synonyms = []
    if override is not None:
        try:
            value = definition.parse(override)
        except InvalidGroupConfig:
            pass
        else:
            synonyms.append(
                _synonym(
                    definition.name, definition.format(value), ConfigSource.DYNAMIC_GROUP_CONFIG
                )
            )
    broker_value = definition.format(definition.default(settings))
    default = definition.format(definition.default(_GROUP_DEFAULTS))
    if broker_value != default:
        synonyms.append(
            _synonym(definition.default_name, broker_value, ConfigSource.STATIC_BROKER_CONFIG)
        )
    synonyms.append(_synonym(definition.default_name, default, ConfigSource.DEFAULT_CONFIG))
    return synonyms


def _synonym(name: str, value: str | None, source: ConfigSource) -> DescribeConfigsResponseSynonym:
    return DescribeConfigsResponseSynonym(name=name, value=value, source=source)


def handle_describe_configs(
    ctx: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    include_synonyms = request.include_synonyms  # False in versions without it
    include_documentation = request.include_documentation
    results = []
    for resource in request.resources:
        keys = resource.configuration_keys
        try:
            configs = _describe(ctx.broker, resource, keys, include_synonyms, include_documentation)
        except ResourceError as exc:
            results.append(_describe_result(resource, exc.error_code, exc.message, []))
        else:
            results.append(_describe_result(resource, ErrorCode.NONE, None, configs))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _describe(
    broker: Broker,
    resource: DescribeConfigsRequestResource,
    keys: Collection[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[DescribeConfigsResponseConfig]:
    resource_type = resource.resource_type
    name = resource.resource_name
    if resource_type == ResourceType.TOPIC:
        record = _existing_topic(broker, name)
        return topic_config_entries(
            record,
            keys=keys,
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )
    if resource_type == ResourceType.GROUP:
        _check_group_name(name)
        return group_config_entries(
            broker,
            name,
            keys=keys,
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )
    if resource_type == ResourceType.BROKER:
        if not name:
            # The cluster-wide dynamic broker defaults: Weir has none.
            return []
        _check_this_node(broker, name)
        return broker_entries(
            broker,
            keys=keys,
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )
    raise ResourceError(ErrorCode.INVALID_REQUEST, _unsupported_type_message(resource_type))


def _describe_result(
    resource: DescribeConfigsRequestResource,
    error: ErrorCode,
    message: str | None,
    configs: list[DescribeConfigsResponseConfig],
) -> DescribeConfigsResponseResult:
    return DescribeConfigsResponseResult(
        error_code=error,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )


# -- altering --------------------------------------------------------------------------


def handle_alter_configs(
    ctx: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse | Deferred[AlterConfigsResponse]:
    """Legacy AlterConfigs: the given configs replace the resource's whole override set."""

    def changes_of(resource: AlterConfigsRequestResource) -> list[ConfigChange]:
        return [ConfigChange(c.name, c.value) for c in resource.configs]

    outcomes = _alter_all(
        ctx.broker, request.resources, changes_of, request.validate_only, replace=True
    )

    def response(done: list[ConfigOutcome]) -> AlterConfigsResponse:
        return AlterConfigsResponse(
            throttle_time_ms=0, responses=_outcome_items(done, AlterConfigsResponseResponse)
        )

    return answer_in_order(outcomes, ConfigOutcome, response)


def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse | Deferred[IncrementalAlterConfigsResponse]:
    """SET, DELETE, APPEND and SUBTRACT (the last two for list configs) per config."""

    def changes_of(resource: IncrementalAlterConfigsRequestResource) -> list[ConfigChange]:
        changes = []
        for config in resource.configs:
            try:
                operation = ConfigOperation(config.config_operation)
            except ValueError:
                raise ResourceError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unknown config operation type {config.config_operation} for {config.name}",
                ) from None
            changes.append(ConfigChange(config.name, config.value, operation))
        return changes

    outcomes = _alter_all(
        ctx.broker, request.resources, changes_of, request.validate_only, replace=False
    )

    def response(done: list[ConfigOutcome]) -> IncrementalAlterConfigsResponse:
        return IncrementalAlterConfigsResponse(
            throttle_time_ms=0,
            responses=_outcome_items(done, IncrementalAlterConfigsResponseResponse),
        )

    return answer_in_order(outcomes, ConfigOutcome, response)


OutcomeItemT = TypeVar(
    "OutcomeItemT", AlterConfigsResponseResponse, IncrementalAlterConfigsResponseResponse
)


def _outcome_items(done: list[ConfigOutcome], item_type: type[OutcomeItemT]) -> list[OutcomeItemT]:
    """Both AlterConfigs responses list the same four fields per resource."""
    return [
        item_type(
            error_code=outcome.error,
            error_message=outcome.message,
            resource_type=outcome.resource_type,
            resource_name=outcome.resource_name,
        )
        for outcome in done
    ]


@dataclass(frozen=True)
class ConfigOutcome:
    """One resource's answer in (Incremental)AlterConfigs."""

    resource_type: int
    resource_name: str
    error: ErrorCode
    message: str | None

    @classmethod
    def of(cls, resource: AlterResource, error: ErrorCode, message: str | None) -> ConfigOutcome:
        return cls(resource.resource_type, resource.resource_name, error, message)


def _alter_all(
    broker: Broker,
    resources: Iterable[ResourceT],
    changes_of: Callable[[ResourceT], list[ConfigChange]],
    validate_only: bool,
    *,
    replace: bool,
) -> list[ItemAnswer[ConfigOutcome]]:
    """Each resource's outcome, known now or awaited (a metadata save)."""
    resources = list(resources)
    named = Counter((r.resource_type, r.resource_name) for r in resources)
    responses: list[ItemAnswer[ConfigOutcome]] = []
    for resource in resources:
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise ResourceError(
                    ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."
                )
            changes = changes_of(resource)
            overrides_now = _alter(broker, resource, changes, validate_only, replace=replace)
        except ResourceError as exc:
            responses.append(ConfigOutcome.of(resource, exc.error_code, exc.message))
        else:
            if overrides_now is None:
                responses.append(ConfigOutcome.of(resource, ErrorCode.NONE, None))
            else:
                responses.append(partial(_store, broker, resource, overrides_now))
    return responses


async def _store(
    broker: Broker, resource: AlterResource, overrides_now: Callable[[], dict[str, str]]
) -> ConfigOutcome:
    """The metadata save on the disk executor; the overrides are computed again
    from the topic's (or group's) configs when the change's turn comes."""
    try:
        if resource.resource_type == ResourceType.GROUP:
            await _store_group_configs(broker, resource.resource_name, overrides_now)
        else:
            await broker.topic_changes.set_topic_configs(resource.resource_name, overrides_now)
    except ResourceError as exc:
        return ConfigOutcome.of(resource, exc.error_code, exc.message)
    except ControllerError as exc:
        return ConfigOutcome.of(resource, exc.error_code, exc.message)
    except OSError as exc:
        return ConfigOutcome.of(
            resource, ErrorCode.KAFKA_STORAGE_ERROR, f"storing the configs failed: {exc}"
        )
    return ConfigOutcome.of(resource, ErrorCode.NONE, None)


async def _store_group_configs(
    broker: Broker, group_id: str, overrides_now: Callable[[], dict[str, str]]
) -> None:
    await broker.topic_changes.commit_metadata(
        lambda: broker.controller.stage_set_group_configs(group_id, overrides_now())
    )
    if isinstance(broker.groups, GroupService):
        broker.groups.refresh_group_config(group_id)


def _alter(
    broker: Broker,
    resource: AlterResource,
    changes: list[ConfigChange],
    validate_only: bool,
    *,
    replace: bool,
) -> Callable[[], dict[str, str]] | None:
    """Checks the change; returns what computes the overrides to store (None:
    nothing to store)."""
    names = Counter(change.name for change in changes)
    if any(count > 1 for count in names.values()):
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    null_values = [
        c.name for c in changes if c.value is None and c.operation != ConfigOperation.DELETE
    ]
    if null_values:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(null_values)}"
        )
    resource_type = resource.resource_type
    name = resource.resource_name
    if resource_type == ResourceType.BROKER:
        if name:
            _check_this_node(broker, name)
        if changes:
            changed = ", ".join(sorted(names))
            raise ResourceError(
                ErrorCode.INVALID_REQUEST,
                f"Cannot update these configs dynamically: {changed}. {BROKER_CONFIGS_ARE_STATIC}",
            )
        return None
    if resource_type == ResourceType.GROUP:
        return _alter_group(broker, name, changes, validate_only, replace=replace)
    if resource_type != ResourceType.TOPIC:
        raise ResourceError(ErrorCode.INVALID_REQUEST, _unsupported_type_message(resource_type))
    if is_internal_topic(name):
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Topic {name} is an internal topic: its configs are the broker's and cannot "
            "be altered.",
        )

    def overrides_now() -> dict[str, str]:
        record = _existing_topic(broker, name)
        base: Mapping[str, str] = {} if replace else record.configs
        overrides = apply_config_changes(
            base,
            changes,
            known=TOPIC_CONFIGS,
            unknown_message=unknown_topic_config_message,
            list_default=_topic_list_default,
        )
        try:
            LogConfig.from_overrides(overrides)
        except InvalidConfig as exc:
            raise ResourceError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return overrides

    overrides_now()
    return None if validate_only else overrides_now


def _alter_group(
    broker: Broker,
    group_id: str,
    changes: list[ConfigChange],
    validate_only: bool,
    *,
    replace: bool,
) -> Callable[[], dict[str, str]] | None:
    _check_group_name(group_id)
    settings = broker.config.group_settings()

    def overrides_now() -> dict[str, str]:
        base = {} if replace else broker.controller.group_configs(group_id)
        overrides = apply_config_changes(
            base,
            changes,
            known=GROUP_CONFIGS,
            unknown_message=unknown_group_config_message,
            list_default=_no_lists,
            not_a_list_message=_group_not_a_list_message,
        )
        try:
            validate_group_configs(overrides, settings)
        except InvalidGroupConfig as exc:
            raise ResourceError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return overrides

    overrides_now()
    return None if validate_only else overrides_now


def apply_config_changes(
    overrides: Mapping[str, str],
    changes: Iterable[ConfigChange],
    *,
    known: Container[str],
    unknown_message: Callable[[str], str],
    list_default: Callable[[str], str | None],
    not_a_list_message: Callable[[str, ConfigOperation], str] | None = None,
) -> dict[str, str]:
    """A topic's or group's overrides after `changes`, in order (not yet validated
    as values). `known` holds the resource's config names, `unknown_message` the
    error for any other (the wording CreateTopics uses too); `list_default`
    gives a list config's default text, None for a config that is not a list.

    APPEND and SUBTRACT, allowed for list configs only, start from the override,
    or the default when there is none, and leave an override behind (even an
    empty list); `not_a_list_message` words the refusal for a config that is not
    a list (by default, the topics' wording)."""
    result = dict(overrides)
    for change in changes:
        if change.name not in known:
            raise ResourceError(ErrorCode.INVALID_CONFIG, unknown_message(change.name))
        if change.operation == ConfigOperation.SET:
            assert change.value is not None
            result[change.name] = change.value
        elif change.operation == ConfigOperation.DELETE:
            result.pop(change.name, None)
        else:
            default = list_default(change.name)
            if default is None:
                if not_a_list_message is not None:
                    message = not_a_list_message(change.name, change.operation)
                else:
                    verb = "append" if change.operation == ConfigOperation.APPEND else "subtract"
                    message = f"Config value {verb} is not allowed for config key: {change.name}"
                raise ResourceError(ErrorCode.INVALID_CONFIG, message)
            current = result.get(change.name)
            items = _list_items(current if current is not None else default)
            assert change.value is not None
            given = _list_items(change.value)
            if change.operation == ConfigOperation.APPEND:
                items.extend(item for item in given if item not in items)
            else:
                items = [item for item in items if item not in given]
            result[change.name] = ",".join(items)
    return result


def _topic_list_default(name: str) -> str | None:
    definition = TOPIC_CONFIGS[name]
    if definition.type is not ConfigType.LIST:
        return None
    return definition.format(definition.default)


def _no_lists(name: str) -> None:
    """Group configs: none is a list."""
    return None


def _group_not_a_list_message(name: str, operation: ConfigOperation) -> str:
    """Kafka 4.4's wording for APPEND or SUBTRACT on a group config."""
    return f"Can't {operation.name} to key {name} because its type is not LIST."


def _list_items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


# -- resources -------------------------------------------------------------------------


def _existing_topic(broker: Broker, name: str) -> TopicRecord:
    if not name:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    try:
        validate_topic_name(name)
    except ControllerError as exc:
        raise ResourceError(exc.error_code, exc.message) from None
    record = broker.controller.topic(name)
    if record is None:
        raise ResourceError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        )
    return record


def _check_group_name(name: str) -> None:
    if not name:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")


def _check_this_node(broker: Broker, name: str) -> None:
    node_id = broker.config.node_id
    if not _INTEGER.fullmatch(name):
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        )
    if int(name) != node_id:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {node_id} or empty string, but received {name}",
        )


def _unsupported_type_message(resource_type: int) -> str:
    try:
        label = ResourceType(resource_type).name
    except ValueError:
        label = "UNKNOWN"
    return (
        f"Unsupported resource type {resource_type} ({label}): Weir serves TOPIC, BROKER and GROUP"
    )
