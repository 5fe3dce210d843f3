"""The ACL authorizer decides as Kafka's StandardAuthorizer does."""

from __future__ import annotations

import pytest

from weir.security.acl import (
    CLUSTER,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    Resource,
    ResourceType,
)
from weir.security.acl_filters import supported_operations
from weir.security.authorizer import AclAuthorizer, AuthorizerSettings
from weir.security.principal import KafkaPrincipal, user

R = ResourceType
P = PatternType
O = AclOperation  # noqa: E741
A = AclPermissionType

ALICE = user("alice")
BOB = user("bob")
HOST = "10.0.0.1"
ORDERS = Resource(R.TOPIC, "orders")


def acl(
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


def authorizer(
    *bindings: AclBinding, super_users: tuple[str, ...] = (), allow_everyone: bool = False
) -> AclAuthorizer:
    return AclAuthorizer(AuthorizerSettings(frozenset(super_users), allow_everyone), bindings)


def allowed(
    auth: AclAuthorizer,
    operation: AclOperation = O.READ,
    resource: Resource = ORDERS,
    principal: KafkaPrincipal = ALICE,
    host: str = HOST,
) -> bool:
    return auth.authorize(principal, host, operation, resource)


def test_without_bindings_everything_is_denied_by_default() -> None:
    assert not allowed(authorizer())


def test_allow_everyone_if_no_acl_found_allows_a_resource_without_bindings() -> None:
    assert allowed(authorizer(acl("payments"), allow_everyone=True))
    assert allowed(authorizer(acl("orders", resource_type=R.GROUP), allow_everyone=True))


def test_allow_everyone_does_not_apply_once_any_binding_matches_the_resource() -> None:
    for_bob = acl(principal="User:bob")
    assert not allowed(authorizer(for_bob, allow_everyone=True))
    other_host = acl(host="10.9.9.9")
    assert not allowed(authorizer(other_host, allow_everyone=True))
    other_operation = acl(operation=O.WRITE)
    assert not allowed(authorizer(other_operation, allow_everyone=True), O.READ)


def test_allow_everyone_counts_wildcard_and_prefixed_bindings_as_matching_the_resource() -> None:
    assert not allowed(authorizer(acl("*", principal="User:bob"), allow_everyone=True))
    assert not allowed(
        authorizer(acl("ord", P.PREFIXED, principal="User:bob"), allow_everyone=True)
    )
    assert allowed(
        authorizer(acl("orders-eu", P.PREFIXED, principal="User:bob"), allow_everyone=True)
    )


def test_super_users_are_allowed_everything_even_against_a_deny() -> None:
    auth = authorizer(acl(operation=O.ALL, permission=A.DENY), super_users=("User:alice",))
    for operation in supported_operations(R.TOPIC):
        assert allowed(auth, operation)
    assert allowed(auth, O.CLUSTER_ACTION, CLUSTER)
    assert not allowed(auth, principal=BOB)


def test_a_super_user_is_named_by_type_and_name() -> None:
    auth = authorizer(super_users=("alice", "Group:alice"))
    assert not allowed(auth)


def test_an_allow_binding_allows_its_principal_its_operation_on_its_resource_only() -> None:
    auth = authorizer(acl())
    assert allowed(auth)
    assert not allowed(auth, principal=BOB)
    assert not allowed(auth, O.WRITE)
    assert not allowed(auth, resource=Resource(R.TOPIC, "payments"))
    assert not allowed(auth, resource=Resource(R.GROUP, "orders"))


def test_deny_wins_over_allow() -> None:
    assert not allowed(authorizer(acl(), acl(permission=A.DENY)))
    assert not allowed(authorizer(acl(), acl("*", principal="User:*", permission=A.DENY)))
    assert not allowed(authorizer(acl(), acl("ord", P.PREFIXED, permission=A.DENY)))
    assert not allowed(authorizer(acl("*"), acl(host=HOST, permission=A.DENY)))


def test_a_deny_for_another_principal_host_or_operation_leaves_the_allow_alone() -> None:
    assert allowed(authorizer(acl(), acl(principal="User:bob", permission=A.DENY)))
    assert allowed(authorizer(acl(), acl(host="10.9.9.9", permission=A.DENY)))
    assert allowed(authorizer(acl(), acl(operation=O.WRITE, permission=A.DENY)))


def test_all_matches_every_operation_allow_and_deny() -> None:
    auth = authorizer(acl(operation=O.ALL))
    assert all(allowed(auth, operation) for operation in supported_operations(R.TOPIC))
    denied = authorizer(
        acl(operation=O.ALL), acl(operation=O.ALL, permission=A.DENY, principal="User:bob")
    )
    assert not any(
        allowed(denied, operation, principal=BOB) for operation in supported_operations(R.TOPIC)
    )


@pytest.mark.parametrize("granted", [O.READ, O.WRITE, O.DELETE, O.ALTER, O.DESCRIBE])
def test_describe_is_implied_by_read_write_delete_alter(granted: AclOperation) -> None:
    assert allowed(authorizer(acl(operation=granted)), O.DESCRIBE)


@pytest.mark.parametrize("granted", [O.CREATE, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS])
def test_describe_is_not_implied_by_other_operations(granted: AclOperation) -> None:
    assert not allowed(authorizer(acl(operation=granted)), O.DESCRIBE)


def test_describe_configs_is_implied_by_alter_configs_only() -> None:
    assert allowed(authorizer(acl(operation=O.ALTER_CONFIGS)), O.DESCRIBE_CONFIGS)
    assert not allowed(authorizer(acl(operation=O.ALTER)), O.DESCRIBE_CONFIGS)


def test_implication_does_not_run_backwards() -> None:
    assert not allowed(authorizer(acl(operation=O.DESCRIBE)), O.READ)
    assert not allowed(authorizer(acl(operation=O.DESCRIBE_CONFIGS)), O.ALTER_CONFIGS)


def test_a_deny_of_read_does_not_deny_the_describe_it_would_imply() -> None:
    auth = authorizer(acl(operation=O.ALL), acl(operation=O.READ, permission=A.DENY))
    assert not allowed(auth, O.READ)
    assert allowed(auth, O.DESCRIBE)
    only_denied = authorizer(acl(operation=O.DESCRIBE), acl(operation=O.READ, permission=A.DENY))
    assert allowed(only_denied, O.DESCRIBE)


def test_the_user_wildcard_principal_matches_every_principal_even_of_another_type() -> None:
    auth = authorizer(acl(principal="User:*"))
    assert allowed(auth, principal=BOB)
    assert allowed(auth, principal=KafkaPrincipal("Group", "ops"))


def test_a_principal_of_another_type_with_the_same_name_does_not_match() -> None:
    assert not allowed(authorizer(acl()), principal=KafkaPrincipal("Group", "alice"))


def test_a_binding_with_an_unparseable_principal_never_applies_but_marks_the_resource() -> None:
    auth = authorizer(acl(principal="alice"), allow_everyone=True)
    assert not allowed(auth)


def test_hosts_match_exactly_or_by_wildcard() -> None:
    assert allowed(authorizer(acl(host=HOST)))
    assert not allowed(authorizer(acl(host="10.0.0.2")))
    assert allowed(authorizer(acl(host="*")), host="192.168.1.1")


def test_ipv6_hosts_compare_as_addresses() -> None:
    assert allowed(authorizer(acl(host="0:0:0:0:0:0:0:1")), host="::1")
    assert allowed(authorizer(acl(host="::1")), host="0:0:0:0:0:0:0:1")


def test_a_literal_binding_matches_only_its_exact_name() -> None:
    auth = authorizer(acl("orders"))
    assert not allowed(auth, resource=Resource(R.TOPIC, "orders-eu"))
    assert not allowed(auth, resource=Resource(R.TOPIC, "order"))


def test_the_literal_wildcard_name_matches_every_resource_of_its_type() -> None:
    auth = authorizer(acl("*"))
    assert allowed(auth, resource=Resource(R.TOPIC, "anything"))
    assert allowed(auth, resource=Resource(R.TOPIC, "*"))
    assert not allowed(auth, resource=Resource(R.GROUP, "anything"))


def test_a_prefixed_binding_matches_names_that_start_with_it() -> None:
    auth = authorizer(acl("orders-", P.PREFIXED))
    assert allowed(auth, resource=Resource(R.TOPIC, "orders-eu"))
    assert allowed(auth, resource=Resource(R.TOPIC, "orders-"))
    assert not allowed(auth, resource=Resource(R.TOPIC, "orders"))
    assert not allowed(auth, resource=Resource(R.TOPIC, "my-orders-eu"))


def test_a_prefixed_star_is_a_prefix_not_a_wildcard() -> None:
    auth = authorizer(acl("*", P.PREFIXED))
    assert not allowed(auth)
    assert allowed(auth, resource=Resource(R.TOPIC, "*x"))


def test_prefixes_of_every_length_are_found() -> None:
    auth = authorizer(
        acl("o", P.PREFIXED, operation=O.READ), acl("orders-e", P.PREFIXED, operation=O.WRITE)
    )
    eu = Resource(R.TOPIC, "orders-eu")
    assert allowed(auth, O.READ, eu) and allowed(auth, O.WRITE, eu)
    assert not allowed(auth, O.WRITE, Resource(R.TOPIC, "orders-us"))


def test_decide_names_the_rule_and_the_deciding_binding() -> None:
    deny = acl(permission=A.DENY)
    auth = authorizer(acl(), deny, super_users=("User:root",))
    assert auth.decide(ALICE, HOST, O.READ, ORDERS).binding == deny
    assert auth.decide(user("root"), HOST, O.READ, ORDERS).rule == "SuperUser"
    assert auth.decide(BOB, HOST, O.READ, ORDERS).rule == "NoMatchingAllow"
    assert auth.decide(BOB, HOST, O.READ, Resource(R.TOPIC, "x")).rule == "DefaultDeny"


def test_replace_bindings_puts_the_new_set_in_force() -> None:
    auth = authorizer(acl())
    auth.replace_bindings([acl(principal="User:bob")])
    assert not allowed(auth)
    assert allowed(auth, principal=BOB)
    assert auth.bindings() == (acl(principal="User:bob"),)


def test_bindings_are_kept_once_in_their_order() -> None:
    auth = authorizer(acl(), acl("b"), acl())
    assert auth.bindings() == (acl(), acl("b"))


def test_authorized_operations_are_the_allowed_ones_valid_for_the_resource_type() -> None:
    auth = authorizer(acl(operation=O.READ), acl(operation=O.ALTER_CONFIGS))
    assert auth.authorized_operations(ALICE, HOST, ORDERS) == {
        O.READ,
        O.DESCRIBE,
        O.ALTER_CONFIGS,
        O.DESCRIBE_CONFIGS,
    }
    assert auth.authorized_operations(BOB, HOST, ORDERS) == frozenset()


def test_a_super_users_authorized_operations_are_all_the_types_operations() -> None:
    auth = authorizer(super_users=("User:alice",))
    assert auth.authorized_operations(ALICE, HOST, CLUSTER) == supported_operations(R.CLUSTER)
    group = Resource(R.GROUP, "g")
    assert auth.authorized_operations(ALICE, HOST, group) == supported_operations(R.GROUP)


def by_type(
    auth: AclAuthorizer, operation: AclOperation = O.WRITE, principal: KafkaPrincipal = ALICE
) -> bool:
    return auth.authorize_by_resource_type(principal, HOST, operation, R.TOPIC)


def test_by_resource_type_allows_when_some_resource_of_the_type_is_allowed() -> None:
    assert by_type(authorizer(acl("t1", operation=O.WRITE)))
    assert by_type(authorizer(acl("t", P.PREFIXED, operation=O.ALL)))
    assert not by_type(authorizer(acl("t1", operation=O.WRITE)), principal=BOB)
    assert not by_type(authorizer(acl("t1", operation=O.WRITE, host="10.9.9.9")))
    assert not by_type(authorizer(acl("t1", operation=O.WRITE, resource_type=R.GROUP)))


def test_by_resource_type_counts_exact_operations_and_all_not_implied_ones() -> None:
    assert not by_type(authorizer(acl("t1", operation=O.READ)), O.DESCRIBE)
    assert by_type(authorizer(acl("t1", operation=O.DESCRIBE)), O.DESCRIBE)


def test_by_resource_type_an_allow_covered_by_a_deny_does_not_count() -> None:
    write = O.WRITE
    deny = A.DENY
    assert not by_type(
        authorizer(acl("t1", operation=write), acl("t1", operation=write, permission=deny))
    )
    covered = authorizer(
        acl("t1", operation=write), acl("t", P.PREFIXED, operation=write, permission=deny)
    )
    assert not by_type(covered)
    prefix_covered = authorizer(
        acl("t1", P.PREFIXED, operation=write),
        acl("t", P.PREFIXED, operation=write, permission=deny),
    )
    assert not by_type(prefix_covered)
    wildcard_denied = authorizer(
        acl("t1", operation=write), acl("*", operation=O.ALL, permission=deny)
    )
    assert not by_type(wildcard_denied)


def test_by_resource_type_an_allow_not_covered_by_its_deny_counts() -> None:
    write = O.WRITE
    deny = A.DENY
    # A longer deny prefix covers only part of a shorter allowed prefix.
    assert by_type(
        authorizer(
            acl("t", P.PREFIXED, operation=write),
            acl("t1", P.PREFIXED, operation=write, permission=deny),
        )
    )
    # A literal deny does not cover a prefixed allow of the same name.
    assert by_type(
        authorizer(
            acl("t", P.PREFIXED, operation=write), acl("t", operation=write, permission=deny)
        )
    )
    assert by_type(
        authorizer(
            acl("t1", operation=write),
            acl("t2", operation=write, permission=deny),
            acl("t2", operation=write),
        )
    )


def test_by_resource_type_a_wildcard_allow_counts_unless_a_wildcard_deny_applies() -> None:
    assert by_type(
        authorizer(
            acl("*", operation=O.WRITE), acl("t", P.PREFIXED, operation=O.WRITE, permission=A.DENY)
        )
    )


def test_by_resource_type_super_users_and_allow_everyone_pass_through_the_probe() -> None:
    assert by_type(authorizer(super_users=("User:alice",)))
    assert by_type(authorizer(allow_everyone=True))
    # Kafka's probe asks about a made-up name, which a literal ACL elsewhere does not match.
    assert by_type(authorizer(acl("t1", principal="User:bob"), allow_everyone=True))
    assert not by_type(authorizer())


def test_by_resource_type_refuses_filter_values() -> None:
    with pytest.raises(ValueError, match="resource type"):
        authorizer().authorize_by_resource_type(ALICE, HOST, O.WRITE, R.ANY)
    with pytest.raises(ValueError, match="operation"):
        authorizer().authorize_by_resource_type(ALICE, HOST, O.ANY, R.TOPIC)
