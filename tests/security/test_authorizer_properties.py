"""The indexed authorizer decides exactly as a naive scan of every binding with
Kafka's rules, for random bindings and requests."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    Resource,
    ResourceType,
)
from weir.security.acl_filters import supported_operations
from weir.security.authorizer import AclAuthorizer, AuthorizerSettings
from weir.security.principal import KafkaPrincipal

O = AclOperation  # noqa: E741
CONCRETE_OPERATIONS = [operation for operation in O if operation not in (O.ANY, O.UNKNOWN)]
RESOURCE_TYPES = [ResourceType.TOPIC, ResourceType.GROUP]
HOSTS = ["10.0.0.1", "10.0.0.2", "*"]

# Short names over a tiny alphabet, so literal names, prefixes and `*` collide often.
names = st.text(alphabet="ab*", min_size=1, max_size=3)
bindings = st.builds(
    AclBinding,
    resource_type=st.sampled_from(RESOURCE_TYPES),
    resource_name=names,
    pattern_type=st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    principal=st.sampled_from(["User:alice", "User:bob", "User:*", "Group:alice"]),
    host=st.sampled_from(HOSTS),
    operation=st.sampled_from(CONCRETE_OPERATIONS),
    permission_type=st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)
principals = st.sampled_from(
    [
        KafkaPrincipal("User", "alice"),
        KafkaPrincipal("User", "bob"),
        KafkaPrincipal("Group", "alice"),
    ]
)
resources = st.builds(
    Resource, st.sampled_from(RESOURCE_TYPES), st.text(alphabet="ab*", min_size=1, max_size=4)
)
authorizer_settings = st.builds(
    AuthorizerSettings,
    super_users=st.frozensets(st.sampled_from(["User:alice", "User:carol"]), max_size=1),
    allow_everyone_if_no_acl_found=st.booleans(),
)

IMPLIES_DESCRIBE = {O.DESCRIBE, O.READ, O.WRITE, O.DELETE, O.ALTER}
IMPLIES_DESCRIBE_CONFIGS = {O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS}


def pattern_matches(binding: AclBinding, resource: Resource) -> bool:
    if binding.resource_type != resource.resource_type:
        return False
    if binding.pattern_type == PatternType.PREFIXED:
        return resource.name.startswith(binding.resource_name)
    return binding.resource_name in (resource.name, "*")


def entry_applies(
    binding: AclBinding, principal: KafkaPrincipal, host: str, operation: AclOperation
) -> bool:
    if binding.principal not in (f"{principal.principal_type}:{principal.name}", "User:*"):
        return False
    if binding.host not in (host, "*"):
        return False
    if binding.operation in (O.ALL, operation):
        return True
    if binding.permission_type != AclPermissionType.ALLOW:
        return False
    if operation == O.DESCRIBE:
        return binding.operation in IMPLIES_DESCRIBE
    if operation == O.DESCRIBE_CONFIGS:
        return binding.operation in IMPLIES_DESCRIBE_CONFIGS
    return False


def naive_authorize(
    config: AuthorizerSettings,
    all_bindings: list[AclBinding],
    principal: KafkaPrincipal,
    host: str,
    operation: AclOperation,
    resource: Resource,
) -> bool:
    if f"{principal.principal_type}:{principal.name}" in config.super_users:
        return True
    on_resource = [binding for binding in all_bindings if pattern_matches(binding, resource)]
    if not on_resource:
        return config.allow_everyone_if_no_acl_found
    applying = [
        binding for binding in on_resource if entry_applies(binding, principal, host, operation)
    ]
    if any(binding.permission_type == AclPermissionType.DENY for binding in applying):
        return False
    return any(binding.permission_type == AclPermissionType.ALLOW for binding in applying)


@settings(max_examples=400, deadline=None)
@given(
    config=authorizer_settings,
    all_bindings=st.lists(bindings, max_size=12),
    principal=principals,
    host=st.sampled_from(HOSTS[:2]),
    resource=resources,
)
def test_the_indexed_authorizer_agrees_with_a_naive_scan_for_every_operation(
    config: AuthorizerSettings,
    all_bindings: list[AclBinding],
    principal: KafkaPrincipal,
    host: str,
    resource: Resource,
) -> None:
    authorizer = AclAuthorizer(config, all_bindings)
    for operation in CONCRETE_OPERATIONS:
        expected = naive_authorize(config, all_bindings, principal, host, operation, resource)
        assert authorizer.authorize(principal, host, operation, resource) == expected, operation
    expected_operations = {
        operation
        for operation in supported_operations(resource.resource_type)
        if naive_authorize(config, all_bindings, principal, host, operation, resource)
    }
    assert authorizer.authorized_operations(principal, host, resource) == expected_operations


@settings(max_examples=100, deadline=None)
@given(
    before=st.lists(bindings, max_size=8),
    after=st.lists(bindings, max_size=8),
    principal=principals,
    resource=resources,
)
def test_after_replace_bindings_the_authorizer_agrees_with_a_naive_scan_of_the_new_set(
    before: list[AclBinding], after: list[AclBinding], principal: KafkaPrincipal, resource: Resource
) -> None:
    config = AuthorizerSettings()
    authorizer = AclAuthorizer(config, before)
    authorizer.replace_bindings(after)
    for operation in CONCRETE_OPERATIONS:
        expected = naive_authorize(config, after, principal, "10.0.0.1", operation, resource)
        assert authorizer.authorize(principal, "10.0.0.1", operation, resource) == expected
