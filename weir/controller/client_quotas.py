"""Client quotas as the metadata store keeps them, and Kafka's rules for changing and
describing them (`ClientQuotaControlManager`, `ClientQuotasImage.describe`).

An entity is a set of (entity type, name) pairs: `user`, `client-id`, both, or `ip`;
a name of None is the type's default entity (`--entity-default`). Its quotas are
key -> value: producer_byte_rate, consumer_byte_rate (whole bytes per second),
request_percentage, controller_mutation_rate (for users and client ids), and
connection_creation_rate (whole connections per second, for IPs).

One difference from Kafka: an `ip` entity's name must be an IP address (Kafka also
accepts a name it can resolve; the controller does no name lookups).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from weir.format.errors import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

# DescribeClientQuotas' component match types.
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1

# Kafka's QuotaConfig: each key and the largest whole value it takes (None: a double).
USER_AND_CLIENT_KEYS: dict[str, int | None] = {
    "producer_byte_rate": _LONG_MAX,
    "consumer_byte_rate": _LONG_MAX,
    "request_percentage": None,
    "controller_mutation_rate": None,
}
IP_KEYS: dict[str, int | None] = {"connection_creation_rate": _INT_MAX}
_TOO_LARGE = {_LONG_MAX: "a LONG", _INT_MAX: "an INT"}

# An entity: its (type, name) pairs sorted by type; a name of None is the default.
QuotaEntity = tuple[tuple[str, str | None], ...]


def quota_entity(pairs: Mapping[str, str | None]) -> QuotaEntity:
    return tuple(sorted(pairs.items()))


def entity_text(entity: Sequence[tuple[str, str | None]]) -> str:
    """`user=alice,client-id=<default>`: for messages and the audit log."""
    return ",".join(f"{kind}={'<default>' if name is None else name}" for kind, name in entity)


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One AlterClientQuotas entry: the entity as sent (pairs, in order) and its
    operations, a value of None removing the key."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True, slots=True)
class QuotaOutcome:
    error_code: ErrorCode
    error_message: str | None


OK = QuotaOutcome(ErrorCode.NONE, None)


def _invalid(message: str) -> QuotaOutcome:
    return QuotaOutcome(ErrorCode.INVALID_REQUEST, message)


def _entity_refusal(entity: Sequence[tuple[str, str | None]]) -> str | None:
    if not entity:
        return "Invalid empty client quota entity"
    seen: set[str] = set()
    for kind, name in entity:
        if kind in seen:
            return f"Invalid client quota entity, duplicate entity entry {kind}"
        seen.add(kind)
        if kind not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {kind}"
        if name is not None and not name:
            return f"Empty {kind} not supported"
    return None


def _keys_for(entity: Mapping[str, str | None]) -> dict[str, int | None] | str:
    """The quota keys valid for this combination of types, or why it is invalid."""
    if IP in entity:
        if USER in entity or CLIENT_ID in entity:
            return (
                "Invalid quota entity combination, IP entity should not be combined with "
                "User or ClientId"
            )
        name = entity[IP]
        if name is not None and not _is_ip_address(name):
            return f"{name} is not a valid IP or resolvable host."
        return IP_KEYS
    return USER_AND_CLIENT_KEYS


def _is_ip_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _value_refusal(keys: Mapping[str, int | None], key: str, value: float) -> str | None:
    if key not in keys:
        return f"Invalid configuration key {key}"
    if not value > 0.0:
        return f"Quota {key} must be greater than 0"
    whole_max = keys[key]
    if whole_max is None:
        return None
    if value > whole_max:
        return f"Proposed value for {key} is too large for {_TOO_LARGE[whole_max]}."
    if math.isinf(value) or abs(math.fmod(value, 1.0)) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


def plan_alterations(
    current: Mapping[QuotaEntity, Mapping[str, float]],
    alterations: Sequence[QuotaAlteration],
) -> tuple[dict[QuotaEntity, dict[str, float]], list[QuotaOutcome]]:
    """The quotas after applying every valid alteration, and one outcome per
    alteration (in order). An invalid alteration changes nothing; the others apply."""
    updated = {entity: dict(quotas) for entity, quotas in current.items()}
    outcomes: list[QuotaOutcome] = []
    seen: set[QuotaEntity] = set()
    for alteration in alterations:
        entity = quota_entity(dict(alteration.entity))
        if entity in seen:
            outcomes.append(_invalid(f"Ignoring duplicate entity {entity_text(entity)}"))
            continue
        seen.add(entity)
        outcome, quotas = _altered(updated.get(entity, {}), alteration)
        outcomes.append(outcome)
        if outcome is OK:
            if quotas:
                updated[entity] = quotas
            else:
                updated.pop(entity, None)
    return updated, outcomes


def _altered(
    quotas: Mapping[str, float], alteration: QuotaAlteration
) -> tuple[QuotaOutcome, dict[str, float]]:
    refusal = _entity_refusal(alteration.entity)
    if refusal is not None:
        return _invalid(refusal), {}
    keys = _keys_for(dict(alteration.entity))
    if isinstance(keys, str):
        return _invalid(keys), {}
    ops: dict[str, float | None] = {}
    for key, value in alteration.ops:
        if key in ops:
            text = entity_text(alteration.entity)
            return _invalid(
                f"Duplicate quota key {key} not updating quota for this entity {text}"
            ), {}
        ops[key] = value
    changed = dict(quotas)
    for key, value in ops.items():
        if value is None:
            changed.pop(key, None)
            continue
        refusal = _value_refusal(keys, key, value)
        if refusal is not None:
            return _invalid(refusal), {}
        changed[key] = value
    return OK, changed


# -- DescribeClientQuotas -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuotaFilterComponent:
    entity_type: str
    match_type: int
    match: str | None


class QuotaFilterError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def describe_quotas(
    current: Mapping[QuotaEntity, Mapping[str, float]],
    components: Sequence[QuotaFilterComponent],
    strict: bool,
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities (and their quotas) matching the filter, as Kafka's
    `ClientQuotasImage.describe`; raises QuotaFilterError for an invalid filter."""
    exact, specified = _parse_filter(components)
    found = []
    for entity, quotas in sorted(current.items(), key=lambda item: _sort_key(item[0])):
        if _matches(dict(entity), exact, specified, strict):
            found.append((entity, dict(quotas)))
    return found


def _sort_key(entity: QuotaEntity) -> tuple[tuple[str, str], ...]:
    return tuple((kind, "" if name is None else "\x00" + name) for kind, name in entity)


def _parse_filter(
    components: Sequence[QuotaFilterComponent],
) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            raise QuotaFilterError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise QuotaFilterError(
                ErrorCode.INVALID_REQUEST,
                f"Entity type {kind} cannot appear more than once in the filter.",
            )
        if kind not in ENTITY_TYPES:
            raise QuotaFilterError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise QuotaFilterError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[kind] = component.match
        elif component.match_type == MATCH_DEFAULT:
            if component.match is not None:
                raise QuotaFilterError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[kind] = None
        elif component.match_type == MATCH_SPECIFIED:
            if component.match is not None:
                raise QuotaFilterError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            specified.add(kind)
        else:
            raise QuotaFilterError(
                ErrorCode.INVALID_REQUEST, f"Unknown match type {component.match_type}"
            )
    named = set(exact) | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise QuotaFilterError(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not "
            "be used with user or clientId filter component.",
        )
    return exact, specified


def _matches(
    entity: Mapping[str, str | None],
    exact: Mapping[str, str | None],
    specified: set[str],
    strict: bool,
) -> bool:
    if strict and len(entity) != len(exact) + len(specified):
        return False
    for kind, name in exact.items():
        if kind not in entity or entity[kind] != name:
            return False
    return all(kind in entity for kind in specified)


# -- The metadata document ------------------------------------------------------------


def quotas_to_json(quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> list[object]:
    return [
        {"entity": [[kind, name] for kind, name in entity], "quotas": dict(values)}
        for entity, values in sorted(quotas.items(), key=lambda item: _sort_key(item[0]))
    ]


def quotas_from_json(doc: object) -> dict[QuotaEntity, dict[str, float]]:
    """The inverse of `quotas_to_json`; ValueError for anything else."""
    if not isinstance(doc, list):
        raise ValueError("client_quotas must be a list")
    quotas: dict[QuotaEntity, dict[str, float]] = {}
    for item in doc:
        if not isinstance(item, dict):
            raise ValueError("a client quota entry must be an object")
        pairs = item.get("entity")
        values = item.get("quotas")
        if not isinstance(pairs, list) or not isinstance(values, dict):
            raise ValueError("a client quota entry has an entity list and a quotas object")
        entity: dict[str, str | None] = {}
        for pair in pairs:
            if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str):
                raise ValueError(f"bad client quota entity pair {pair!r}")
            if pair[1] is not None and not isinstance(pair[1], str):
                raise ValueError(f"bad client quota entity name {pair[1]!r}")
            entity[pair[0]] = pair[1]
        quotas[quota_entity(entity)] = {str(key): float(value) for key, value in values.items()}
    return quotas
