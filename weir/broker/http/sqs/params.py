"""Reading an action's parameters from the request's JSON object, SQS's way: a
missing required one is MissingParameter, a wrong type or a value out of bounds
InvalidParameterValue."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weir.broker.http.sqs.errors import (
    SqsError,
    batch_ids_not_distinct,
    empty_batch,
    invalid_batch_entry_id,
    invalid_parameter,
    missing_parameter,
    too_many_entries,
)

Params = Mapping[str, Any]


def required_str(params: Params, name: str) -> str:
    value = params.get(name)
    if value is None or value == "":
        raise missing_parameter(name)
    if not isinstance(value, str):
        raise invalid_parameter(f"Value for parameter {name} is invalid. Reason: not a string.")
    return value


def optional_str(params: Params, name: str) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_parameter(f"Value for parameter {name} is invalid. Reason: not a string.")
    return value


def optional_int(params: Params, name: str, low: int, high: int) -> int | None:
    """An integer parameter within [low, high] (the SDKs send JSON numbers)."""
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid_parameter(
            f"Value {str(value)[:40]} for parameter {name} is invalid. "
            f"Reason: Must be between {low} and {high}, if provided."
        )
    return value


def required_int(params: Params, name: str, low: int, high: int) -> int:
    value = optional_int(params, name, low, high)
    if value is None:
        raise missing_parameter(name)
    return value


def string_list(params: Params, name: str, items_max: int = 100) -> list[str]:
    value = params.get(name)
    if value is None:
        return []
    if (
        not isinstance(value, list)
        or len(value) > items_max
        or not all(isinstance(item, str) for item in value)
    ):
        raise invalid_parameter(
            f"Value for parameter {name} is invalid. Reason: not a list "
            f"of at most {items_max} strings."
        )
    return value


def string_map(params: Params, name: str, items_max: int = 50) -> dict[str, str]:
    value = params.get(name)
    if value is None:
        return {}
    if (
        not isinstance(value, Mapping)
        or len(value) > items_max
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    ):
        raise invalid_parameter(
            f"Value for parameter {name} is invalid. Reason: not a map "
            f"of at most {items_max} strings."
        )
    return dict(value)


def entries(params: Params, name: str, entries_max: int = 10) -> list[Mapping[str, Any]]:
    """A batch request's entries, checked as SQS does (count, ids)."""
    value = params.get(name)
    if value is None:
        raise missing_parameter(name)
    if not isinstance(value, list) or not all(isinstance(e, Mapping) for e in value):
        raise invalid_parameter(f"Value for parameter {name} is invalid. Reason: not a list.")
    if not value:
        raise empty_batch()
    if len(value) > entries_max:
        raise too_many_entries(len(value))
    seen: set[str] = set()
    for entry in value:
        entry_id = entry.get("Id")
        if not isinstance(entry_id, str) or not _is_entry_id(entry_id):
            raise invalid_batch_entry_id(str(entry_id))
        if entry_id in seen:
            raise batch_ids_not_distinct(entry_id)
        seen.add(entry_id)
    return value


def _is_entry_id(entry_id: str) -> bool:
    return 1 <= len(entry_id) <= 80 and all(
        c.isascii() and (c.isalnum() or c in "-_") for c in entry_id
    )


def entry_failure(entry_id: str, error: SqsError) -> dict[str, Any]:
    return {
        "Id": entry_id,
        "SenderFault": error.status < 500,
        "Code": error.query_code,
        "Message": error.message,
    }
