"""`weir acl create|list|delete`: ACL bindings, as Kafka's `kafka-acls.sh --add|--list|--remove`.

A binding names a principal (`User:alice`, `User:*`), a host (`*` by default), an
operation, ALLOW or DENY, and a resource: `--topic`, `--group`, `--transactional-id`
or `--cluster`, its name LITERAL or PREFIXED (`--resource-pattern-type`). `create`
sends one binding per principal, operation and resource (CreateAcls); `list` and
`delete` send one filter (DescribeAcls, DeleteAcls) in which anything left out
matches anything, and `--resource-pattern-type match` selects every binding that
applies to the named resource (the literal name, `*`, and prefixes of it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weir.cli.cluster import Cluster
from weir.cli.errors import CliError, failed_to
from weir.cli.formatting import render_table
from weir.format.errors import ErrorCode
from weir.security.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from weir.wire.protocol import ApiKey

# Operations as kafka-acls spells them (Read, IdempotentWrite...), any case, or ours.
OPERATION_NAMES = tuple(
    op.name for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
)
PATTERN_TYPES_FOR_CREATE = ("literal", "prefixed")
PATTERN_TYPES_FOR_FILTER = ("any", "match", "literal", "prefixed")


def operation_of(text: str) -> AclOperation:
    """`Read`, `read`, `READ`, `IdempotentWrite`, `idempotent_write` -> the operation."""
    wanted = text.replace("-", "").replace("_", "").upper()
    for operation in AclOperation:
        if operation.name.replace("_", "") == wanted and operation not in (
            AclOperation.UNKNOWN,
            AclOperation.ANY,
        ):
            return operation
    raise CliError(f"unknown operation {text!r} (one of {', '.join(OPERATION_NAMES)})")


@dataclass(frozen=True)
class ResourceSelection:
    """The resources named on the command line: (type, name) pairs; none: any."""

    resources: tuple[tuple[ResourceType, str], ...]
    pattern_type: str  # one of PATTERN_TYPES_FOR_FILTER


def resource_selection(
    topics: Sequence[str],
    groups: Sequence[str],
    transactional_ids: Sequence[str],
    cluster: bool,
    pattern_type: str,
) -> ResourceSelection:
    resources = (
        [(ResourceType.TOPIC, name) for name in topics]
        + [(ResourceType.GROUP, name) for name in groups]
        + [(ResourceType.TRANSACTIONAL_ID, name) for name in transactional_ids]
        + ([(ResourceType.CLUSTER, CLUSTER_NAME)] if cluster else [])
    )
    return ResourceSelection(tuple(resources), pattern_type)


def _binding_document(binding: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "resource_type": ResourceType(binding["resource_type"]).name,
        "resource_name": binding["resource_name"],
        "pattern_type": PatternType(binding["pattern_type"]).name,
        "principal": binding["principal"],
        "host": binding["host"],
        "operation": AclOperation(binding["operation"]).name,
        "permission": AclPermissionType(binding["permission_type"]).name,
    }


def create_acls(
    cluster: Cluster,
    allow_principals: Sequence[str],
    deny_principals: Sequence[str],
    hosts: Sequence[str],
    operations: Sequence[str],
    selection: ResourceSelection,
) -> dict[str, Any]:
    if not selection.resources:
        raise CliError("name a resource: --topic, --group, --transactional-id or --cluster")
    if not allow_principals and not deny_principals:
        raise CliError("name a principal: --allow-principal or --deny-principal")
    if not operations:
        raise CliError("name an operation: --operation (Read, Write, Describe, All...)")
    pattern = PatternType[selection.pattern_type.upper()]
    creations = [
        {
            "resource_type": int(resource_type),
            "resource_name": name,
            "resource_pattern_type": int(pattern),
            "principal": principal,
            "host": host,
            "operation": int(operation_of(operation)),
            "permission_type": int(permission),
        }
        for resource_type, name in selection.resources
        for permission, principals in (
            (AclPermissionType.ALLOW, allow_principals),
            (AclPermissionType.DENY, deny_principals),
        )
        for principal in principals
        for host in (hosts or [WILDCARD_HOST])
        for operation in operations
    ]
    response = cluster.request_any(ApiKey.CREATE_ACLS, {"creations": creations})
    for creation, result in zip(creations, response["results"], strict=True):
        code = int(result["error_code"])
        if code != ErrorCode.NONE:
            described = _binding_text(_creation_as_binding(creation))
            raise failed_to(f"create the ACL {described}", code, result["error_message"])
    return {"created": [_binding_document(_creation_as_binding(c)) for c in creations]}


def _creation_as_binding(creation: Mapping[str, Any]) -> dict[str, Any]:
    return {**creation, "pattern_type": creation["resource_pattern_type"]}


def _binding_text(binding: Mapping[str, Any]) -> str:
    document = _binding_document(binding)
    return (
        f"{document['permission']} {document['principal']} {document['operation']} on "
        f"{document['resource_type']}:{document['pattern_type']}:{document['resource_name']}"
    )


def acl_filters(
    selection: ResourceSelection,
    principals: Sequence[str],
    host: str | None,
    operation: str | None,
    permission: str | None,
) -> list[dict[str, Any]]:
    """One filter per named resource (one matching any resource when none is named)."""
    resources: Sequence[tuple[ResourceType, str | None]] = selection.resources or [
        (ResourceType.ANY, None)
    ]
    pattern = PatternType[selection.pattern_type.upper()]
    return [
        {
            "resource_type_filter": int(resource_type),
            "resource_name_filter": name,
            "pattern_type_filter": int(pattern),
            "principal_filter": principal,
            "host_filter": host,
            "operation": int(operation_of(operation) if operation else AclOperation.ANY),
            "permission_type": int(
                AclPermissionType[permission.upper()] if permission else AclPermissionType.ANY
            ),
        }
        for resource_type, name in resources
        for principal in _or_any(principals)
    ]


def _or_any(values: Sequence[str]) -> Sequence[str | None]:
    """The values to filter on; none given: one filter matching any (None)."""
    return list(values) if values else [None]


def list_acls(cluster: Cluster, filters: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for acl_filter in filters:
        response = cluster.request_any(ApiKey.DESCRIBE_ACLS, acl_filter)
        code = int(response["error_code"])
        if code != ErrorCode.NONE:
            raise failed_to("list ACLs", code, response["error_message"])
        for resource in response["resources"]:
            for acl in resource["acls"]:
                document = _binding_document({**resource, **acl})
                found[tuple(document.values())] = document
    return {"acls": sorted(found.values(), key=lambda d: tuple(d.values()))}


def delete_acls(cluster: Cluster, filters: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    response = cluster.request_any(ApiKey.DELETE_ACLS, {"filters": list(filters)})
    deleted: dict[tuple[Any, ...], dict[str, Any]] = {}
    for result in response["filter_results"]:
        code = int(result["error_code"])
        if code != ErrorCode.NONE:
            raise failed_to("delete ACLs", code, result["error_message"])
        for acl in result["matching_acls"]:
            document = _binding_document(acl)
            deleted[tuple(document.values())] = document
    return {"deleted": sorted(deleted.values(), key=lambda d: tuple(d.values()))}


_COLUMNS = (
    "resource_type",
    "resource_name",
    "pattern_type",
    "principal",
    "host",
    "operation",
    "permission",
)
_HEADERS = (
    "RESOURCE-TYPE",
    "RESOURCE-NAME",
    "PATTERN",
    "PRINCIPAL",
    "HOST",
    "OPERATION",
    "PERMISSION",
)


def _render(bindings: Sequence[Mapping[str, Any]], empty: str) -> str:
    if not bindings:
        return empty
    return render_table(_HEADERS, [tuple(b[c] for c in _COLUMNS) for b in bindings])


def render_listed(document: Mapping[str, Any]) -> str:
    return _render(document["acls"], "no ACLs\n")


def render_created(document: Mapping[str, Any]) -> str:
    return _render(document["created"], "no ACLs created\n")


def render_deleted(document: Mapping[str, Any]) -> str:
    return _render(document["deleted"], "no ACLs matched\n")
