"""ACL filters, CreateAcls validation and the stored JSON form follow Kafka's rules."""

from __future__ import annotations

import pytest

from weir.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from weir.security.acl_filters import (
    MATCH_ALL,
    AclBindingFilter,
    AclJsonError,
    binding_error,
    binding_from_json,
    binding_matches,
    binding_to_json,
    exact_filter,
    filter_error,
    supported_operations,
)

R = ResourceType
P = PatternType
O = AclOperation  # noqa: E741
A = AclPermissionType


def binding(
    name: str = "orders",
    pattern: PatternType = P.LITERAL,
    *,
    resource_type: ResourceType = R.TOPIC,
    principal: str = "User:alice",
    host: str = "*",
    operation: AclOperation = O.READ,
    permission: AclPermissionType = A.ALLOW,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def test_the_any_filter_matches_every_binding() -> None:
    assert binding_matches(MATCH_ALL, binding())
    assert binding_matches(
        MATCH_ALL, binding("pay", P.PREFIXED, resource_type=R.GROUP, permission=A.DENY)
    )


def test_an_exact_filter_matches_only_its_binding() -> None:
    target = binding()
    assert binding_matches(exact_filter(target), target)
    assert not binding_matches(exact_filter(target), binding(host="10.0.0.1"))
    assert not binding_matches(exact_filter(target), binding(operation=O.WRITE))
    assert not binding_matches(exact_filter(target), binding(permission=A.DENY))
    assert not binding_matches(exact_filter(target), binding(principal="User:bob"))
    assert not binding_matches(exact_filter(target), binding(pattern=P.PREFIXED))


def test_a_filter_with_a_resource_type_matches_only_that_type() -> None:
    topics = AclBindingFilter(resource_type=R.TOPIC)
    assert binding_matches(topics, binding())
    assert not binding_matches(topics, binding(resource_type=R.GROUP))


def test_a_named_filter_with_pattern_any_matches_that_exact_name_of_any_pattern_type() -> None:
    named = AclBindingFilter(resource_name="orders")
    assert binding_matches(named, binding("orders", P.LITERAL))
    assert binding_matches(named, binding("orders", P.PREFIXED))
    assert not binding_matches(named, binding("*", P.LITERAL))
    assert not binding_matches(named, binding("ord", P.PREFIXED))


def test_a_named_literal_filter_for_the_wildcard_matches_only_wildcard_bindings() -> None:
    wildcard = AclBindingFilter(resource_name="*", pattern_type=P.LITERAL)
    assert binding_matches(wildcard, binding("*"))
    assert not binding_matches(wildcard, binding("orders"))


def test_a_match_filter_selects_the_literal_name_the_wildcard_and_prefixes_of_the_name() -> None:
    match = AclBindingFilter(resource_name="orders-eu", pattern_type=P.MATCH)
    assert binding_matches(match, binding("orders-eu", P.LITERAL))
    assert binding_matches(match, binding("*", P.LITERAL))
    assert binding_matches(match, binding("orders", P.PREFIXED))
    assert binding_matches(match, binding("orders-eu", P.PREFIXED))
    assert not binding_matches(match, binding("orders", P.LITERAL))
    assert not binding_matches(match, binding("orders-eu-1", P.PREFIXED))
    assert not binding_matches(match, binding("*", P.PREFIXED))


def test_a_match_filter_without_a_name_matches_every_pattern_type() -> None:
    match = AclBindingFilter(pattern_type=P.MATCH)
    assert binding_matches(match, binding("x", P.LITERAL))
    assert binding_matches(match, binding("x", P.PREFIXED))


def test_entry_fields_filter_by_equality_and_none_or_any_means_any() -> None:
    assert binding_matches(AclBindingFilter(principal="User:alice"), binding())
    assert not binding_matches(AclBindingFilter(principal="User:*"), binding())
    assert binding_matches(AclBindingFilter(host="*"), binding())
    assert not binding_matches(AclBindingFilter(host="10.0.0.1"), binding())
    assert binding_matches(AclBindingFilter(operation=O.READ), binding())
    assert not binding_matches(AclBindingFilter(operation=O.ALL), binding())
    assert binding_matches(AclBindingFilter(permission_type=A.ALLOW), binding())
    assert not binding_matches(AclBindingFilter(permission_type=A.DENY), binding())


def test_filters_may_hold_any_and_match_but_never_unknown() -> None:
    assert filter_error(MATCH_ALL) is None
    assert filter_error(AclBindingFilter(pattern_type=P.MATCH)) is None
    assert filter_error(AclBindingFilter(resource_type=R.UNKNOWN)) is not None
    assert filter_error(AclBindingFilter(pattern_type=P.UNKNOWN)) is not None
    assert filter_error(AclBindingFilter(operation=O.UNKNOWN)) is not None
    assert filter_error(AclBindingFilter(permission_type=A.UNKNOWN)) is not None


def test_a_concrete_binding_is_valid() -> None:
    assert binding_error(binding()) is None
    assert binding_error(binding("orders-", P.PREFIXED, operation=O.ALL, permission=A.DENY)) is None
    assert (
        binding_error(
            binding("kafka-cluster", resource_type=R.CLUSTER, operation=O.IDEMPOTENT_WRITE)
        )
        is None
    )


@pytest.mark.parametrize(
    "bad",
    [
        binding(resource_type=R.ANY),
        binding(resource_type=R.UNKNOWN),
        binding(pattern=P.ANY),
        binding(pattern=P.MATCH),
        binding(pattern=P.UNKNOWN),
        binding(operation=O.ANY),
        binding(operation=O.UNKNOWN),
        binding(permission=A.ANY),
        binding(permission=A.UNKNOWN),
    ],
)
def test_a_binding_with_any_match_or_unknown_values_is_refused(bad: AclBinding) -> None:
    assert binding_error(bad) is not None


def test_a_cluster_binding_must_name_kafka_cluster() -> None:
    error = binding_error(binding("my-cluster", resource_type=R.CLUSTER, operation=O.ALTER))
    assert error == "The only valid name for the CLUSTER resource is kafka-cluster"


def test_an_empty_resource_name_is_refused() -> None:
    assert binding_error(binding("")) == "Invalid empty resource name"


@pytest.mark.parametrize("principal", ["alice", "User:", ":alice", ""])
def test_a_principal_that_is_not_type_colon_name_is_refused(principal: str) -> None:
    error = binding_error(binding(principal=principal))
    assert error is not None and "Type:name" in error


def test_an_operation_the_resource_type_does_not_support_is_refused() -> None:
    error = binding_error(binding(operation=O.IDEMPOTENT_WRITE))
    assert error is not None and error.startswith("ResourceType TOPIC only supports operations")
    assert binding_error(binding(resource_type=R.GROUP, operation=O.WRITE)) is not None
    assert binding_error(binding(resource_type=R.TRANSACTIONAL_ID, operation=O.WRITE)) is None


def test_supported_operations_are_kafkas_per_resource_type() -> None:
    assert supported_operations(R.TRANSACTIONAL_ID) == {O.DESCRIBE, O.WRITE}
    assert supported_operations(R.DELEGATION_TOKEN) == {O.DESCRIBE}
    assert supported_operations(R.USER) == {O.CREATE_TOKENS, O.DESCRIBE_TOKENS}
    assert O.IDEMPOTENT_WRITE in supported_operations(R.CLUSTER)
    assert supported_operations(R.ANY) == frozenset()


def test_a_binding_survives_the_json_round_trip() -> None:
    original = binding(
        "pay-", P.PREFIXED, principal="User:CN=a,O=b", host="10.1.2.3", permission=A.DENY
    )
    doc = binding_to_json(original)
    assert doc["operation"] == "READ" and doc["pattern_type"] == "PREFIXED"
    assert binding_from_json(doc) == original


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {},
        {**binding_to_json(binding()), "operation": "FLY"},
        {**binding_to_json(binding()), "host": 7},
        {**binding_to_json(binding()), "extra": "x"},
    ],
)
def test_a_malformed_stored_binding_is_an_acl_json_error(doc: object) -> None:
    with pytest.raises(AclJsonError):
        binding_from_json(doc)
