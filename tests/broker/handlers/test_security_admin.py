"""CreateAcls, DescribeAcls, DeleteAcls, Describe/AlterUserScramCredentials and
Describe/AlterClientQuotas against a real Broker (its metadata store on disk)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.handlers import security_admin
from weir.format.errors import ErrorCode
from weir.security.acl import AclOperation, Resource, ResourceType
from weir.security.authorizer import AclAuthorizer, AuthorizerSettings
from weir.security.principal import parse_principal
from weir.security.scram import ScramMechanism, credential_from_password, salted_password
from weir.wire.protocol import ApiKey

from ..handler_calls import call

TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
READ, WRITE, ALTER, DESCRIBE = 3, 4, 7, 8
DENY, ALLOW = 2, 3
SHA256, SHA512 = 1, 2
MISSING = "Attempt to delete a user credential that does not exist"


def creation(
    name: str = "orders",
    principal: str = "User:alice",
    operation: int = READ,
    resource_type: int = TOPIC,
    pattern: int = LITERAL,
    permission: int = ALLOW,
) -> dict[str, Any]:
    return {
        "resource_type": resource_type,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": "*",
        "operation": operation,
        "permission_type": permission,
    }


def acl_filter(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "resource_type_filter": ANY,
        "resource_name_filter": None,
        "pattern_type_filter": ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
    }
    return {**base, **fields}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.authorizer = AclAuthorizer(AuthorizerSettings())
    yield broker
    broker.close()


@pytest.fixture
def open_broker(tmp_path: Path) -> Iterator[Broker]:
    """No authorizer: the ACL APIs are SECURITY_DISABLED, the others work."""
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    yield broker
    broker.close()


async def create_acls(broker: Broker, *creations: dict[str, Any], version: int = 3) -> Any:
    body = {"creations": list(creations)}
    return await call(broker, security_admin.handle_create_acls, ApiKey.CREATE_ACLS, version, body)


async def describe_acls(broker: Broker, version: int = 3, **fields: Any) -> Any:
    return await call(
        broker,
        security_admin.handle_describe_acls,
        ApiKey.DESCRIBE_ACLS,
        version,
        acl_filter(**fields),
    )


async def delete_acls(broker: Broker, *filters: dict[str, Any], version: int = 3) -> Any:
    return await call(
        broker,
        security_admin.handle_delete_acls,
        ApiKey.DELETE_ACLS,
        version,
        {"filters": list(filters)},
    )


def acl_text(acl: Any) -> tuple[str, int, int]:
    return (acl.principal, acl.operation, acl.permission_type)


# -- ACLs -----------------------------------------------------------------------------


async def test_acl_apis_without_an_authorizer_are_security_disabled(open_broker: Broker) -> None:
    created = await create_acls(open_broker, creation())
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    ]
    described = await describe_acls(open_broker)
    assert (described.error_code, described.error_message) == (
        ErrorCode.SECURITY_DISABLED,
        "No Authorizer is configured on the broker",
    )
    deleted = await delete_acls(open_broker, acl_filter(), acl_filter())
    assert [r.error_code for r in deleted.filter_results] == [ErrorCode.SECURITY_DISABLED] * 2
    assert open_broker.controller.acl_bindings() == []


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_created_acls_are_described_grouped_by_resource(broker: Broker, version: int) -> None:
    created = await create_acls(
        broker,
        creation("orders", "User:alice", READ),
        creation("orders", "User:bob", WRITE, permission=DENY),
        creation("ord", "User:carol", DESCRIBE, pattern=PREFIXED),
        version=version,
    )
    assert [r.error_code for r in created.results] == [ErrorCode.NONE] * 3
    described = await describe_acls(broker, version=version)
    assert described.error_code == ErrorCode.NONE
    assert [
        (r.resource_type, r.resource_name, r.pattern_type, [acl_text(a) for a in r.acls])
        for r in described.resources
    ] == [
        (TOPIC, "orders", LITERAL, [("User:alice", READ, ALLOW), ("User:bob", WRITE, DENY)]),
        (TOPIC, "ord", PREFIXED, [("User:carol", DESCRIBE, ALLOW)]),
    ]
    matching = await describe_acls(
        broker,
        resource_type_filter=TOPIC,
        resource_name_filter="orders-eu",
        pattern_type_filter=MATCH,
    )
    assert [r.resource_name for r in matching.resources] == ["ord"]


async def test_invalid_bindings_are_refused_one_by_one(broker: Broker) -> None:
    created = await create_acls(
        broker,
        creation("orders"),
        creation("other-cluster", resource_type=CLUSTER, operation=ALTER),
        creation(""),
        creation(principal="alice"),
        creation(operation=99),
        creation(resource_type=GROUP, operation=WRITE),
    )
    results = [(r.error_code, r.error_message) for r in created.results]
    assert results[0] == (ErrorCode.NONE, None)
    assert [code for code, _ in results[1:]] == [ErrorCode.INVALID_REQUEST] * 5
    assert results[1][1] == "The only valid name for the CLUSTER resource is kafka-cluster"
    assert results[2][1] == "Invalid empty resource name"
    assert [b.resource_name for b in broker.controller.acl_bindings()] == ["orders"]


async def test_an_invalid_describe_filter_is_invalid_request(broker: Broker) -> None:
    described = await describe_acls(broker, operation=0)
    assert described.error_code == ErrorCode.INVALID_REQUEST


async def test_delete_acls_returns_the_bindings_each_filter_deleted(broker: Broker) -> None:
    await create_acls(
        broker,
        creation("orders", "User:alice"),
        creation("orders", "User:bob"),
        creation("payments", "User:alice", WRITE),
    )
    deleted = await delete_acls(
        broker,
        acl_filter(principal_filter="User:alice", resource_name_filter="orders"),
        acl_filter(operation=0),  # UNKNOWN: refused alone
        acl_filter(principal_filter="User:nobody"),
    )
    results = deleted.filter_results
    assert [r.error_code for r in results] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NONE,
    ]
    assert [(a.resource_name, a.principal, a.operation) for a in results[0].matching_acls] == [
        ("orders", "User:alice", READ)
    ]
    assert results[2].matching_acls == []
    assert [(b.resource_name, b.principal) for b in broker.controller.acl_bindings()] == [
        ("orders", "User:bob"),
        ("payments", "User:alice"),
    ]


async def test_the_authorizer_follows_created_and_deleted_acls(broker: Broker) -> None:
    alice = parse_principal("User:alice")
    orders = Resource(ResourceType.TOPIC, "orders")
    assert broker.authorizer is not None
    assert not broker.authorizer.authorize(alice, "10.0.0.1", AclOperation.READ, orders)
    await create_acls(broker, creation("orders", "User:alice", READ))
    assert broker.authorizer.authorize(alice, "10.0.0.1", AclOperation.READ, orders)
    await delete_acls(broker, acl_filter(principal_filter="User:alice"))
    assert not broker.authorizer.authorize(alice, "10.0.0.1", AclOperation.READ, orders)


async def test_every_created_acl_is_one_audit_line(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="weir.audit"):
        await create_acls(broker, creation("orders"), creation(""))
    lines = [r.getMessage() for r in caplog.records if r.name == "weir.audit"]
    assert len(lines) == 1
    assert "api=CreateAcls" in lines[0] and "principal=User:alice" in lines[0]


# -- SCRAM credentials ----------------------------------------------------------------


def upsertion(name: str, mechanism: int = SHA256, iterations: int = 8192) -> dict[str, Any]:
    salt = b"salt-" + name.encode()
    hashed = ScramMechanism(mechanism) if mechanism in (1, 2) else ScramMechanism(1)
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted_password(hashed, name + "-secret", salt, iterations),
    }


async def alter_scram(
    broker: Broker, deletions: list[dict[str, Any]], upsertions: list[dict[str, Any]]
) -> dict[str, tuple[int, str | None]]:
    response = await call(
        broker,
        security_admin.handle_alter_user_scram_credentials,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        {"deletions": deletions, "upsertions": upsertions},
    )
    return {r.user: (r.error_code, r.error_message) for r in response.results}


async def describe_scram(broker: Broker, users: list[str] | None) -> Any:
    body = {"users": None if users is None else [{"name": u} for u in users]}
    return await call(
        broker,
        security_admin.handle_describe_user_scram_credentials,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        body,
    )


async def test_a_stored_credential_is_the_one_the_password_derives(open_broker: Broker) -> None:
    results = await alter_scram(open_broker, [], [upsertion("alice")])
    assert results == {"alice": (ErrorCode.NONE, None)}
    stored = open_broker.controller.scram_credential("alice", ScramMechanism.SCRAM_SHA_256)
    expected = credential_from_password(
        ScramMechanism.SCRAM_SHA_256, "alice-secret", b"salt-alice", 8192
    )
    assert stored == expected


async def test_alter_scram_credentials_refusals(open_broker: Broker) -> None:
    await alter_scram(open_broker, [], [upsertion("alice")])
    results = await alter_scram(
        open_broker,
        [{"name": "alice", "mechanism": SHA512}, {"name": "bob", "mechanism": SHA256}],
        [
            upsertion("carol", iterations=1000),
            upsertion("dave", mechanism=7),
            upsertion("erin", iterations=20000),
            upsertion("bob", SHA512),  # bob's deletion too: twice
            upsertion("frank", SHA512),
        ],
    )
    assert results == {
        "alice": (ErrorCode.RESOURCE_NOT_FOUND, MISSING),
        "bob": (ErrorCode.RESOURCE_NOT_FOUND, MISSING),
        "carol": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "dave": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "erin": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "frank": (ErrorCode.NONE, None),
    }


async def test_describe_scram_credentials_lists_mechanisms_and_iterations(
    open_broker: Broker,
) -> None:
    await alter_scram(open_broker, [], [upsertion("alice"), upsertion("bob", SHA512, 4096)])
    await alter_scram(open_broker, [], [upsertion("alice", SHA512, 16384)])
    everyone = await describe_scram(open_broker, None)
    assert [
        (r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in everyone.results
    ] == [
        ("alice", ErrorCode.NONE, [(SHA256, 8192), (SHA512, 16384)]),
        ("bob", ErrorCode.NONE, [(SHA512, 4096)]),
    ]
    named = await describe_scram(open_broker, ["bob", "nobody", "alice", "alice"])
    assert [(r.user, r.error_code, r.error_message) for r in named.results] == [
        ("bob", ErrorCode.NONE, None),
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND, security_admin.DESCRIBE_MISSING_USER + "nobody"),
        ("alice", ErrorCode.DUPLICATE_RESOURCE, security_admin.DESCRIBE_DUPLICATE_USER + "alice"),
    ]


async def test_a_scram_change_is_audited_without_secrets(
    open_broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="weir.audit"):
        await alter_scram(open_broker, [], [upsertion("alice")])
    [line] = [r.getMessage() for r in caplog.records if r.name == "weir.audit"]
    assert "user=alice set SCRAM-SHA-256 (iterations=8192)" in line
    assert "salt" not in line


# -- client quotas --------------------------------------------------------------------


async def alter_quotas(
    broker: Broker, entries: list[dict[str, Any]], validate_only: bool = False, version: int = 1
) -> Any:
    return await call(
        broker,
        security_admin.handle_alter_client_quotas,
        ApiKey.ALTER_CLIENT_QUOTAS,
        version,
        {"entries": entries, "validate_only": validate_only},
    )


async def describe_quotas(
    broker: Broker, components: list[dict[str, Any]], strict: bool = False, version: int = 1
) -> Any:
    return await call(
        broker,
        security_admin.handle_describe_client_quotas,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        version,
        {"components": components, "strict": strict},
    )


def entry(entity: dict[str, str | None], **ops: float | None) -> dict[str, Any]:
    return {
        "entity": [{"entity_type": k, "entity_name": v} for k, v in entity.items()],
        "ops": [
            {"key": key, "value": 0.0 if value is None else value, "remove": value is None}
            for key, value in ops.items()
        ],
    }


def entity_pairs(entity: Any) -> list[tuple[str, str | None]]:
    return [(e.entity_type, e.entity_name) for e in entity]


@pytest.mark.parametrize("version", [0, 1])
async def test_client_quotas_are_altered_and_described(open_broker: Broker, version: int) -> None:
    altered = await alter_quotas(
        open_broker,
        [
            entry({"user": "alice"}, producer_byte_rate=1048576.0, request_percentage=50.0),
            entry({"user": None}, consumer_byte_rate=2048.0),
            entry({"client-id": "app"}, producer_byte_rate=1.5),  # fractional: refused
        ],
        version=version,
    )
    assert [(r.error_code, entity_pairs(r.entity)) for r in altered.entries] == [
        (ErrorCode.NONE, [("user", "alice")]),
        (ErrorCode.NONE, [("user", None)]),
        (ErrorCode.INVALID_REQUEST, [("client-id", "app")]),
    ]
    described = await describe_quotas(
        open_broker, [{"entity_type": "user", "match_type": 0, "match": "alice"}], version=version
    )
    assert described.error_code == ErrorCode.NONE
    [alice] = described.entries
    assert [(v.key, v.value) for v in alice.values] == [
        ("producer_byte_rate", 1048576.0),
        ("request_percentage", 50.0),
    ]
    defaults = await describe_quotas(
        open_broker, [{"entity_type": "user", "match_type": 1, "match": None}], version=version
    )
    assert [[(e.entity_type, e.entity_name) for e in x.entity] for x in defaults.entries] == [
        [("user", None)]
    ]
    await alter_quotas(
        open_broker, [entry({"user": "alice"}, producer_byte_rate=None)], version=version
    )
    assert open_broker.controller.client_quotas()[(("user", "alice"),)] == {
        "request_percentage": 50.0
    }


async def test_validate_only_changes_nothing(open_broker: Broker) -> None:
    altered = await alter_quotas(
        open_broker,
        [entry({"user": "alice"}, producer_byte_rate=1024.0), entry({"ip": "x"}, a=1.0)],
        validate_only=True,
    )
    assert [r.error_code for r in altered.entries] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    assert open_broker.controller.client_quotas() == {}


async def test_an_invalid_quota_filter_is_an_error_with_no_entries(open_broker: Broker) -> None:
    described = await describe_quotas(
        open_broker, [{"entity_type": "user", "match_type": 0, "match": None}]
    )
    assert described.error_code == ErrorCode.INVALID_REQUEST
    assert described.entries is None
