"""What an API's authorization rule decides about one request, and the registry of
rules.

A rule sees the decoded request and the session's `RequestAuthorization`, and
returns a `Gate`: the request the handler is to see (with the resources the session
may not touch taken out), or the whole answer when the request is refused as a
whole; and, when it took resources out, `complete`, which puts their error entries
back into the handler's response, where Kafka would have them. Handlers never
check ACLs themselves, except where the decision depends on their own state
(Metadata's auto-creation), through `RequestContext.authorization`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

from weir.broker.handlers.context import RequestContext
from weir.broker.handlers.request_authorization import RequestAuthorization

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


@dataclass
class Gate(Generic[RequestT, ResponseT]):
    """A rule's decision: `request` for the handler, or `answer` instead of calling
    it; `complete` adds the refused resources' entries to the handler's response."""

    request: RequestT | None
    answer: ResponseT | None = None
    complete: Callable[[ResponseT], ResponseT] | None = None


def allowed(request: RequestT) -> Gate[RequestT, Any]:
    return Gate(request)


def refused(answer: ResponseT) -> Gate[Any, ResponseT]:
    return Gate(None, answer)


Rule: TypeAlias = Callable[[RequestAuthorization, RequestContext, Any], Gate[Any, Any]]
