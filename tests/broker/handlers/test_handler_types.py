"""Every registered handler takes its API's generated request class and answers
with its response class (or a Deferred of it): no Any at the handler boundary."""

from __future__ import annotations

import types
import typing

import pytest

from weir.broker.handlers.apis import HANDLERS
from weir.broker.handlers.context import Deferred
from weir.wire.protocol import APIS


def _answer_types(annotation: object) -> set[object]:
    """The classes a handler's return annotation allows, Deferred unwrapped."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return {t for arg in typing.get_args(annotation) for t in _answer_types(arg)}
    if origin is Deferred:
        return {Deferred, *(t for arg in typing.get_args(annotation) for t in _answer_types(arg))}
    return {annotation}


@pytest.mark.parametrize("api_key", sorted(HANDLERS), ids=lambda key: APIS[key].request.name)
def test_handler_takes_and_returns_the_generated_classes(api_key: int) -> None:
    hints = typing.get_type_hints(HANDLERS[api_key])
    api = APIS[api_key]
    assert hints["request"] is api.request.value_type
    allowed = {api.response.value_type, Deferred}
    assert _answer_types(hints["return"]) <= allowed
    assert api.response.value_type in _answer_types(hints["return"])
