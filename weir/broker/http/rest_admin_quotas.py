"""Client quotas in Weir's own shape under /v3 (Confluent defines none), as
`kafka-configs.sh --entity-type users|clients|ips` manages them:

- `GET .../client-quotas[?user=U][&client_id=C][&ip=A]`: every entity with a quota
  (DescribeClientQuotas; with a parameter, only the entities naming it);
- `POST .../client-quotas`: set and remove one entity's quota keys
  (AlterClientQuotas), answering the entity's quotas after the change.

An entity is a JSON object of its parts, `{"user": "alice", "client-id": null}`,
a null name being the type's default entity (`--entity-default`). Kafka's rules
decide which keys and values are valid (weir/controller/client_quotas.py). As on
the Kafka API, describing needs DESCRIBE_CONFIGS on the cluster and changing
ALTER_CONFIGS.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.responses import Response

from weir.broker.http.rest_admin_base import (
    AdminCall,
    Endpoint,
    Param,
    bad_request,
    check_kafka,
    collection,
    json_response,
    resource,
    resource_name,
)
from weir.controller.client_quotas import (
    CLIENT_ID,
    ENTITY_TYPES,
    IP,
    IP_KEYS,
    MATCH_DEFAULT,
    MATCH_EXACT,
    USER,
    USER_AND_CLIENT_KEYS,
)
from weir.wire.protocol import ApiKey

QUOTAS_VERSION = 1
# A quota key is one of a handful of names; a request changes a few at a time.
KEY_CHARS_MAX = 64
OPS_MAX = 16
NAME_CHARS_MAX = 1024
# Query parameter -> entity type.
FILTER_PARAMS = {"user": USER, "client_id": CLIENT_ID, "ip": IP}


def quota_resource(
    call: AdminCall, entity: list[tuple[str, str | None]], values: dict[str, float]
) -> dict[str, Any]:
    return resource(
        "WeirClientQuota",
        call.url("client-quotas"),
        cluster_id=call.cluster_id,
        entity=dict(sorted(entity)),
        values=dict(sorted(values.items())),
    )


async def _describe(
    call: AdminCall, components: list[dict[str, Any]], strict: bool
) -> list[dict[str, Any]]:
    response = await call.send(
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        QUOTAS_VERSION,
        {"components": components, "strict": strict},
    )
    check_kafka(response.error_code, response.error_message, "describe the client quotas")
    rows = [
        quota_resource(
            call,
            [(e.entity_type, e.entity_name) for e in entry.entity],
            {v.key: v.value for v in entry.values},
        )
        for entry in response.entries or []
    ]
    rows.sort(key=lambda r: sorted((k, v or "") for k, v in r["entity"].items()))
    return rows


async def list_quotas(call: AdminCall) -> Response:
    components = []
    for param, entity_type in FILTER_PARAMS.items():
        name = call.query(param)
        if name is not None:
            components.append(
                {
                    "entity_type": entity_type,
                    "match_type": MATCH_EXACT,
                    "match": _name(name, param),
                }
            )
    rows = await _describe(call, components, strict=False)
    return json_response(collection("WeirClientQuotaList", call.url("client-quotas"), rows))


def _name(value: object, where: str) -> str:
    name = resource_name(value, where)
    if len(name) > NAME_CHARS_MAX:
        raise bad_request(f"{where} must be at most {NAME_CHARS_MAX} characters")
    return name


def _entity(value: object) -> list[tuple[str, str | None]]:
    if not isinstance(value, dict) or not 0 < len(value) <= len(ENTITY_TYPES):
        raise bad_request(
            f"entity must be an object of {', '.join(ENTITY_TYPES)} to a name (null: the default)"
        )
    entity = []
    for kind, name in value.items():
        if kind not in ENTITY_TYPES:
            raise bad_request(f"entity types are {', '.join(ENTITY_TYPES)}")
        entity.append((kind, None if name is None else _name(name, f"entity.{kind}")))
    return entity


def _key(value: object, where: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= KEY_CHARS_MAX:
        known = ", ".join([*USER_AND_CLIENT_KEYS, *IP_KEYS])
        raise bad_request(f"{where} must name a quota key ({known})")
    return value


def _ops(document: dict[str, Any]) -> list[dict[str, Any]]:
    to_set = document.get("set", {})
    to_remove = document.get("remove", [])
    if not isinstance(to_set, dict) or not isinstance(to_remove, list):
        raise bad_request("set must be an object of key to value, remove a list of keys")
    if not 0 < len(to_set) + len(to_remove) <= OPS_MAX:
        raise bad_request(f"set and remove must name 1 to {OPS_MAX} keys in all")
    ops = []
    for key, value in to_set.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise bad_request(f"set.{_key(key, 'set')} must be a finite number")
        ops.append({"key": _key(key, "set"), "value": float(value), "remove": False})
    ops += [{"key": _key(key, "remove"), "value": 0.0, "remove": True} for key in to_remove]
    if len({op["key"] for op in ops}) != len(ops):
        raise bad_request("a key is named more than once")
    return ops


async def alter_quotas(call: AdminCall) -> Response:
    document = await call.json_body()
    entity = _entity(document.get("entity"))
    ops = _ops(document)
    validate_only = document.get("validate_only", False)
    if not isinstance(validate_only, bool):
        raise bad_request("validate_only must be true or false")
    entry = {
        "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
        "ops": ops,
    }
    response = await call.send(
        ApiKey.ALTER_CLIENT_QUOTAS,
        QUOTAS_VERSION,
        {"entries": [entry], "validate_only": validate_only},
    )
    for answered in response.entries:
        check_kafka(answered.error_code, answered.error_message, "alter the client quotas")
    components = [
        {"entity_type": kind, "match_type": MATCH_DEFAULT, "match": None}
        if name is None
        else {"entity_type": kind, "match_type": MATCH_EXACT, "match": name}
        for kind, name in entity
    ]
    found = await _describe(call, components, strict=True)
    return json_response(found[0] if found else quota_resource(call, entity, {}))


QUOTAS = "/v3/clusters/{cluster_id}/client-quotas"
QUOTA_BODY = {
    "type": "object",
    "required": ["entity"],
    "properties": {
        "entity": {
            "type": "object",
            "description": "user, client-id (together or alone) or ip, each a name or null "
            "(the default entity)",
            "properties": {kind: {"type": ["string", "null"]} for kind in ENTITY_TYPES},
        },
        "set": {
            "type": "object",
            "additionalProperties": {"type": "number"},
            "description": "Quota keys to set: producer_byte_rate, consumer_byte_rate, "
            "request_percentage, controller_mutation_rate, connection_creation_rate (ip)",
        },
        "remove": {"type": "array", "items": {"type": "string"}},
        "validate_only": {"type": "boolean"},
    },
}
ENDPOINTS = [
    Endpoint(
        "GET",
        QUOTAS,
        list_quotas,
        "The client quotas (every entity with one, or those naming a user, client id or ip)",
        query=(
            Param("user", "Only entities of this user"),
            Param("client_id", "Only entities of this client id"),
            Param("ip", "Only this IP address's entity"),
        ),
        tag="quotas",
    ),
    Endpoint(
        "POST",
        QUOTAS,
        alter_quotas,
        "Set and remove one entity's quota keys; answers its quotas after",
        body=QUOTA_BODY,
        tag="quotas",
    ),
]
