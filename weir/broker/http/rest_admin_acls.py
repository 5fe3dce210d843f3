"""ACLs in Confluent REST Proxy v3's shape (`KafkaAcl`): listed with a filter in the
query (DescribeAcls), created from a body (CreateAcls), deleted by a filter in the
query (DeleteAcls, answering the ACLs it deleted), as the caller: it needs what
the Kafka API asks (DESCRIBE, or ALTER, on the cluster)."""

from __future__ import annotations

import enum
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
    require,
    resource,
    resource_name,
)
from weir.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from weir.wire.protocol import ApiKey

ACLS_VERSION = 3


def _enum_value(kind: type[enum.IntEnum], text: object, where: str, *, filter_: bool) -> int:
    names = [m.name for m in kind if m.name != "UNKNOWN"] if filter_ else _names(kind)
    if not isinstance(text, str) or text.upper() not in names:
        raise bad_request(f"{where} must be one of {', '.join(names)}")
    return int(kind[text.upper()])


def _filter(call: AdminCall, *, resource_type_required: bool) -> dict[str, Any]:
    """A DescribeAcls / DeleteAcls filter from the query (absent: ANY, or null)."""

    def enum_param(name: str, kind: type[enum.IntEnum]) -> int:
        text = call.query(name)
        if text is None:
            return int(kind["ANY"])
        return _enum_value(kind, text, name, filter_=True)

    def text_param(name: str) -> str | None:
        text = call.query(name)
        return None if text is None else resource_name(text, name)

    if resource_type_required and call.query("resource_type") is None:
        raise bad_request("the query needs resource_type (ANY for every type)")
    return {
        "resource_type_filter": enum_param("resource_type", ResourceType),
        "resource_name_filter": text_param("resource_name"),
        "pattern_type_filter": enum_param("pattern_type", PatternType),
        "principal_filter": text_param("principal"),
        "host_filter": text_param("host"),
        "operation": enum_param("operation", AclOperation),
        "permission_type": enum_param("permission", AclPermissionType),
    }


def acl_resource(
    call: AdminCall,
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> dict[str, Any]:
    return resource(
        "KafkaAcl",
        call.url("acls"),
        cluster_id=call.cluster_id,
        resource_type=ResourceType(resource_type).name,
        resource_name=name,
        pattern_type=PatternType(pattern_type).name,
        principal=principal,
        host=host,
        operation=AclOperation(operation).name,
        permission=AclPermissionType(permission).name,
    )


async def list_acls(call: AdminCall) -> Response:
    response = await call.send(
        ApiKey.DESCRIBE_ACLS, ACLS_VERSION, _filter(call, resource_type_required=False)
    )
    check_kafka(response.error_code, response.error_message, "describe the ACLs")
    data = [
        acl_resource(
            call,
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in response.resources
        for a in r.acls
    ]
    return json_response(collection("KafkaAclList", call.url("acls"), data))


async def create_acl(call: AdminCall) -> Response:
    document = await call.json_body()

    def value(name: str, kind: type[enum.IntEnum]) -> int:
        return _enum_value(kind, require(document, name), name, filter_=False)

    creation: dict[str, Any] = {
        "resource_type": value("resource_type", ResourceType),
        "resource_name": resource_name(require(document, "resource_name"), "resource_name"),
        "resource_pattern_type": value("pattern_type", PatternType),
        "principal": resource_name(require(document, "principal"), "principal"),
        "host": resource_name(require(document, "host"), "host"),
        "operation": value("operation", AclOperation),
        "permission_type": value("permission", AclPermissionType),
    }
    response = await call.send(ApiKey.CREATE_ACLS, ACLS_VERSION, {"creations": [creation]})
    result = response.results[0]
    check_kafka(result.error_code, result.error_message, "create the ACL")
    created = acl_resource(
        call,
        creation["resource_type"],
        creation["resource_name"],
        creation["resource_pattern_type"],
        creation["principal"],
        creation["host"],
        creation["operation"],
        creation["permission_type"],
    )
    return json_response(created, status=201)


async def delete_acls(call: AdminCall) -> Response:
    response = await call.send(
        ApiKey.DELETE_ACLS, ACLS_VERSION, {"filters": [_filter(call, resource_type_required=True)]}
    )
    result = response.filter_results[0]
    check_kafka(result.error_code, result.error_message, "delete the ACLs")
    data = [
        acl_resource(
            call,
            m.resource_type,
            m.resource_name,
            m.pattern_type,
            m.principal,
            m.host,
            m.operation,
            m.permission_type,
        )
        for m in result.matching_acls
        if m.error_code == 0
    ]
    return json_response(collection("KafkaAclList", call.url("acls"), data))


def _filter_params(*, resource_type_required: bool) -> tuple[Param, ...]:
    return (
        Param(
            "resource_type",
            "TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ... or ANY",
            resource_type_required,
        ),
        Param("resource_name", "The resource's name (absent: any)"),
        Param("pattern_type", "LITERAL, PREFIXED, MATCH or ANY"),
        Param("principal", "User:NAME (absent: any)"),
        Param("host", "The host, * for every host (absent: any)"),
        Param("operation", "READ, WRITE, DESCRIBE, ... or ANY"),
        Param("permission", "ALLOW, DENY or ANY"),
    )


def _names(kind: type[enum.IntEnum]) -> list[str]:
    """What a created ACL may name (a filter may also say ANY or MATCH)."""
    return [m.name for m in kind if m.name not in ("UNKNOWN", "ANY", "MATCH")]


ACL_BODY = {
    "type": "object",
    "required": [
        "resource_type",
        "resource_name",
        "pattern_type",
        "principal",
        "host",
        "operation",
        "permission",
    ],
    "properties": {
        "resource_type": {"enum": _names(ResourceType)},
        "resource_name": {"type": "string"},
        "pattern_type": {"enum": ["LITERAL", "PREFIXED"]},
        "principal": {"type": "string"},
        "host": {"type": "string"},
        "operation": {"enum": _names(AclOperation)},
        "permission": {"enum": ["ALLOW", "DENY"]},
    },
}
ACLS = "/v3/clusters/{cluster_id}/acls"
ENDPOINTS = [
    Endpoint(
        "GET",
        ACLS,
        list_acls,
        "The ACLs that match a filter",
        query=_filter_params(resource_type_required=False),
        tag="acls",
    ),
    Endpoint(
        "POST",
        ACLS,
        create_acl,
        "Create an ACL",
        body=ACL_BODY,
        responses={201: "Created (the KafkaAcl)"},
        tag="acls",
    ),
    Endpoint(
        "DELETE",
        ACLS,
        delete_acls,
        "Delete the ACLs that match a filter; answers those deleted",
        query=_filter_params(resource_type_required=True),
        tag="acls",
    ),
]
