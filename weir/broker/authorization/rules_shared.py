"""What the per-API rules share: asking about many topics (or groups) at once,
splitting a request's list into what the session may touch and what it may not,
and putting the refused entries back into the handler's response.

Each distinct name is asked about once per request (Kafka's `filterByAuthorized`),
so a request naming a topic in many entries costs one decision and, when denied,
one audit line."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from weir.broker.authorization.gate import Gate
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.format.errors import ErrorCode
from weir.security.acl import CLUSTER, AclOperation, Resource, ResourceType

ItemT = TypeVar("ItemT")
RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")

# Kafka's messages for its authorization errors (`Errors`), where a response
# carries the error's message.
ERROR_MESSAGES: dict[int, str] = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}

TOPIC_AUTHORIZATION_FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_AUTHORIZATION_FAILED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_AUTHORIZATION_FAILED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def allowed_names(
    authorization: RequestAuthorization,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    *,
    audit_denial: bool = True,
) -> set[str]:
    """The distinct names among `names` the session may do `operation` on."""
    return {
        name
        for name in dict.fromkeys(names)
        if authorization.allows(operation, Resource(resource_type, name), audit_denial=audit_denial)
    }


def allows_quietly(
    authorization: RequestAuthorization, operation: AclOperation, resource: Resource = CLUSTER
) -> bool:
    """A question whose denial Kafka does not log (another question decides): the
    cluster-wide permission tried before the per-resource one, a listing's filter."""
    return authorization.allows(operation, resource, audit_denial=False)


def split(
    authorization: RequestAuthorization,
    operation: AclOperation,
    items: list[ItemT],
    name_of: Callable[[ItemT], str],
    resource_type: ResourceType = ResourceType.TOPIC,
    *,
    audit_denial: bool = True,
) -> tuple[list[ItemT], list[ItemT]]:
    """`items` split into those whose resource the session may do `operation` on
    and those it may not, each in request order."""
    names = [name_of(item) for item in items]
    allowed = allowed_names(
        authorization, operation, resource_type, names, audit_denial=audit_denial
    )
    if len(allowed) == len(set(names)):  # the common case: nothing refused
        return items, []
    kept = [item for item, name in zip(items, names, strict=True) if name in allowed]
    refused = [item for item, name in zip(items, names, strict=True) if name not in allowed]
    return kept, refused


def appending(field: str, entries: list[Any]) -> Callable[[ResponseT], ResponseT]:
    """A `complete` that adds `entries` after the handler's in the response's `field`."""

    def complete(response: ResponseT) -> ResponseT:
        getattr(response, field).extend(entries)
        return response

    return complete


def prepending(field: str, entries: list[Any]) -> Callable[[ResponseT], ResponseT]:
    """A `complete` that puts `entries` before the handler's in the response's `field`."""

    def complete(response: ResponseT) -> ResponseT:
        setattr(response, field, [*entries, *getattr(response, field)])
        return response

    return complete


def filtering(field: str, keep: Callable[[Any], bool]) -> Callable[[ResponseT], ResponseT]:
    """A `complete` that leaves out of the response's `field` what `keep` refuses."""

    def complete(response: ResponseT) -> ResponseT:
        setattr(response, field, [entry for entry in getattr(response, field) if keep(entry)])
        return response

    return complete


def served_with(
    request: RequestT,
    complete: Callable[[Any], Any] | None,
) -> Gate[RequestT, Any]:
    """The handler serves `request` (what is left of it); `complete` adds the rest."""
    return Gate(request, complete=complete)
