"""The audit line of every administrative request that passed authorization:
who (principal and address), from which listener, which API, on what. ACL, user
and quota changes are audited by their handlers with what they stored
(`audit_change`); the APIs here are audited once, in the dispatcher, as asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weir.broker.handlers.request_authorization import Session, audit_change
from weir.wire.api_keys import ApiKey


def _names(items: Any, attribute: str = "name") -> str:
    return ",".join(str(getattr(item, attribute)) for item in items or ())


def _config_resources(request: Any) -> str:
    return ",".join(
        f"{resource.resource_type}:{resource.resource_name}" for resource in request.resources
    )


def _deleted_topics(request: Any) -> str:
    names = [topic.name or str(topic.topic_id) for topic in request.topics or ()]
    return ",".join(names + list(request.topic_names or ()))


def _offsets_deleted(request: Any) -> str:
    return f"{request.group_id} topics={_names(request.topics)}" if request.topics else ""


def _elected(request: Any) -> str:
    return "all" if request.topic_partitions is None else _names(request.topic_partitions, "topic")


# What each administrative API acts on, as one audit field.
_TARGETS: dict[int, tuple[str, Callable[[Any], str]]] = {
    ApiKey.CREATE_TOPICS: ("topics", lambda r: _names(r.topics)),
    ApiKey.DELETE_TOPICS: ("topics", _deleted_topics),
    ApiKey.CREATE_PARTITIONS: ("topics", lambda r: _names(r.topics)),
    ApiKey.ALTER_CONFIGS: ("resources", _config_resources),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ("resources", _config_resources),
    ApiKey.DELETE_RECORDS: ("topics", lambda r: _names(r.topics)),
    ApiKey.DELETE_GROUPS: ("groups", lambda r: ",".join(r.groups_names)),
    ApiKey.OFFSET_DELETE: (
        "group",
        lambda r: r.topics and f"{r.group_id} topics={_names(r.topics)}",
    ),
    ApiKey.ELECT_LEADERS: ("topics", _elected),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ("topics", lambda r: _names(r.topics)),
}


ADMIN_API_KEYS = frozenset(_TARGETS)


def audit_admin_request(
    api_key: int, api_name: str, session: Session | None, request: object
) -> None:
    """One audit line when `api_key` is an administrative API (else nothing)."""
    target = _TARGETS.get(api_key)
    if target is None:
        return
    field, describe = target
    what = describe(request)
    if not what:
        return  # authorization took out everything the request named
    validate_only = getattr(request, "validate_only", False)
    suffix = " validate_only" if validate_only else ""
    audit_change(session, api_name, f"{field}={what}{suffix}")
