"""ACL filters (DescribeAcls, DeleteAcls), the validation of new bindings
(CreateAcls), and bindings as JSON (the metadata store keeps them so).

Kafka's rules, from `AclBindingFilter`/`ResourcePatternFilter`/
`AccessControlEntryFilter` (matching), `AclControlManager.validateNewAcl` and
`validateFilter`, `AclApis.handleCreateAcls` (the CLUSTER name, the empty name),
`CreateAclsRequest.validate` (UNKNOWN values) and `kafka-acls`' operation check
(`AclEntry.supportedOperations` plus ALL), which Kafka does in the tool and
Weir does on the broker so every client gets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from weir.security.acl import (
    CLUSTER_NAME,
    WILDCARD_RESOURCE,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from weir.security.principal import PrincipalFormatError, parse_principal

_O = AclOperation
# `AclEntry.supportedOperations`: the operations meaningful on each concrete
# resource type (KIP-430's authorized operations are drawn from these).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            _O.READ,
            _O.WRITE,
            _O.CREATE,
            _O.DESCRIBE,
            _O.DELETE,
            _O.ALTER,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
    ),
    ResourceType.CLUSTER: frozenset(
        {
            _O.CREATE,
            _O.CLUSTER_ACTION,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
            _O.IDEMPOTENT_WRITE,
            _O.ALTER,
            _O.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}


def supported_operations(resource_type: ResourceType) -> frozenset[AclOperation]:
    """The operations valid on a concrete resource type (empty for ANY/UNKNOWN)."""
    return SUPPORTED_OPERATIONS.get(resource_type, frozenset())


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings: None matches any name/principal/host, ANY any enum value;
    `pattern_type` MATCH selects the patterns that would apply to `resource_name`
    (the LITERAL name itself, the LITERAL `*`, PREFIXED prefixes of the name)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY


MATCH_ALL = AclBindingFilter()


def exact_filter(binding: AclBinding) -> AclBindingFilter:
    """The filter that matches `binding` and nothing else."""
    return AclBindingFilter(
        binding.resource_type,
        binding.resource_name,
        binding.pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )


def _pattern_matches(binding_filter: AclBindingFilter, binding: AclBinding) -> bool:
    wanted_type = binding_filter.resource_type
    if wanted_type is not ResourceType.ANY and wanted_type != binding.resource_type:
        return False
    wanted_pattern = binding_filter.pattern_type
    if (
        wanted_pattern not in (PatternType.ANY, PatternType.MATCH)
        and wanted_pattern != binding.pattern_type
    ):
        return False
    name = binding_filter.resource_name
    if name is None:
        return True
    if wanted_pattern is not PatternType.MATCH:
        return name == binding.resource_name
    if binding.pattern_type == PatternType.LITERAL:
        return name == binding.resource_name or binding.resource_name == WILDCARD_RESOURCE
    if binding.pattern_type == PatternType.PREFIXED:
        return name.startswith(binding.resource_name)
    return False


def _entry_matches(binding_filter: AclBindingFilter, binding: AclBinding) -> bool:
    if binding_filter.principal is not None and binding_filter.principal != binding.principal:
        return False
    if binding_filter.host is not None and binding_filter.host != binding.host:
        return False
    if (
        binding_filter.operation is not AclOperation.ANY
        and binding_filter.operation != binding.operation
    ):
        return False
    wanted_permission = binding_filter.permission_type
    return (
        wanted_permission is AclPermissionType.ANY or wanted_permission == binding.permission_type
    )


def binding_matches(binding_filter: AclBindingFilter, binding: AclBinding) -> bool:
    """Kafka's `AclBindingFilter.matches`: the pattern part and the entry part."""
    return _pattern_matches(binding_filter, binding) and _entry_matches(binding_filter, binding)


def filter_error(binding_filter: AclBindingFilter) -> str | None:
    """Why DescribeAcls/DeleteAcls must reject this filter (INVALID_REQUEST), or None:
    a filter may hold ANY and MATCH, never UNKNOWN."""
    if binding_filter.resource_type == ResourceType.UNKNOWN:
        return "Unknown patternFilter: resource type is UNKNOWN."
    if binding_filter.pattern_type == PatternType.UNKNOWN:
        return "Unknown patternFilter: pattern type is UNKNOWN."
    if binding_filter.operation == AclOperation.UNKNOWN:
        return "Unknown entryFilter: operation is UNKNOWN."
    if binding_filter.permission_type == AclPermissionType.UNKNOWN:
        return "Unknown entryFilter: permission type is UNKNOWN."
    return None


def binding_error(binding: AclBinding) -> str | None:
    """Why CreateAcls must refuse to create this binding (INVALID_REQUEST), or None."""
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {binding.permission_type.name}"
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not binding.resource_name:
        return "Invalid empty resource name"
    valid_operations = supported_operations(binding.resource_type) | {AclOperation.ALL}
    if binding.operation not in valid_operations:
        names = ", ".join(sorted(operation.name for operation in valid_operations))
        return f"ResourceType {binding.resource_type.name} only supports operations {names}"
    try:
        parse_principal(binding.principal)
    except PrincipalFormatError as error:
        return str(error)
    return None


class AclJsonError(ValueError):
    """A stored binding document is not one `binding_to_json` wrote."""


_E = TypeVar("_E", ResourceType, PatternType, AclOperation, AclPermissionType)

_JSON_KEYS = (
    "resource_type",
    "resource_name",
    "pattern_type",
    "principal",
    "host",
    "operation",
    "permission_type",
)


def binding_to_json(binding: AclBinding) -> dict[str, str]:
    """A binding as a JSON object, enums by name (`{"operation": "READ", ...}`)."""
    return {
        "resource_type": binding.resource_type.name,
        "resource_name": binding.resource_name,
        "pattern_type": binding.pattern_type.name,
        "principal": binding.principal,
        "host": binding.host,
        "operation": binding.operation.name,
        "permission_type": binding.permission_type.name,
    }


def _string_field(doc: dict[str, Any], key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str):
        raise AclJsonError(f"ACL binding field {key!r} must be a string, got {value!r}")
    return value


def _enum_field(doc: dict[str, Any], key: str, enum_type: type[_E]) -> _E:
    name = _string_field(doc, key)
    try:
        return enum_type[name]
    except KeyError:
        raise AclJsonError(f"ACL binding field {key!r} has unknown value {name!r}") from None


def binding_from_json(doc: object) -> AclBinding:
    """The inverse of `binding_to_json`; AclJsonError for anything else."""
    if not isinstance(doc, dict):
        raise AclJsonError(f"ACL binding must be a JSON object, got {type(doc).__name__}")
    unknown = sorted(set(doc) - set(_JSON_KEYS))
    if unknown:
        raise AclJsonError(f"ACL binding has unknown fields {unknown}")
    return AclBinding(
        resource_type=_enum_field(doc, "resource_type", ResourceType),
        resource_name=_string_field(doc, "resource_name"),
        pattern_type=_enum_field(doc, "pattern_type", PatternType),
        principal=_string_field(doc, "principal"),
        host=_string_field(doc, "host"),
        operation=_enum_field(doc, "operation", AclOperation),
        permission_type=_enum_field(doc, "permission_type", AclPermissionType),
    )
