"""The security state in the metadata store: ACL bindings, SCRAM credentials and client
quotas survive a reload, older documents without them still load, the controller's
staging follows Kafka's rules, and the ACL listeners hear every change, local or
taken from another broker's document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weir.controller.client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    QuotaAlteration,
    QuotaFilterComponent,
    QuotaFilterError,
    describe_quotas,
    quota_entity,
)
from weir.controller.controller import Controller, TopicDefaults
from weir.controller.metadata import (
    ClusterMetadata,
    EmbeddedMetadataStore,
    metadata_from_json,
    metadata_to_json,
)
from weir.controller.security_state import ScramDeletion, ScramUpsertion
from weir.format.errors import ErrorCode
from weir.log.config import LogConfig
from weir.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from weir.security.acl_filters import AclBindingFilter
from weir.security.scram import ScramMechanism, credential_from_password, salted_password

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
READ_ORDERS = AclBinding(
    ResourceType.TOPIC,
    "orders",
    PatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)
WRITE_PREFIX = AclBinding(
    ResourceType.TOPIC,
    "ord",
    PatternType.PREFIXED,
    "User:bob",
    "*",
    AclOperation.WRITE,
    AclPermissionType.DENY,
)


def make_controller(data_dir: Path) -> Controller:
    return Controller(
        EmbeddedMetadataStore(data_dir),
        node_id=1,
        defaults=TopicDefaults(),
        check_topic_configs=LogConfig.from_overrides,
    )


def upsertion(user: str, mechanism: int = 1, iterations: int = 4096) -> ScramUpsertion:
    hashed_as = ScramMechanism(mechanism) if mechanism in (1, 2) else SHA256
    salted = salted_password(hashed_as, "pw", b"s", iterations)
    return ScramUpsertion(user, mechanism, iterations, b"s", salted)


def commit_scram(
    controller: Controller, deletions: list[ScramDeletion], upsertions: list[ScramUpsertion]
) -> list[tuple[str, ErrorCode]]:
    change, outcomes = controller.stage_alter_scram_credentials(deletions, upsertions)
    if change is not None:
        controller.commit(change)
    return [(outcome.user, outcome.error_code) for outcome in outcomes]


def test_security_state_survives_a_reload(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    change = controller.stage_create_acls([READ_ORDERS, WRITE_PREFIX])
    assert change is not None
    controller.commit(change)
    commit_scram(controller, [], [upsertion("alice", 1, 8192), upsertion("bob", 2)])
    quota_change, _ = controller.stage_alter_client_quotas(
        [
            QuotaAlteration((("user", None),), (("producer_byte_rate", 1024.0),)),
            QuotaAlteration(
                (("user", "alice"), ("client-id", "app")), (("request_percentage", 12.5),)
            ),
        ]
    )
    assert quota_change is not None
    controller.commit(quota_change)

    reloaded = make_controller(tmp_path)
    assert reloaded.acl_bindings() == [READ_ORDERS, WRITE_PREFIX]
    expected = credential_from_password(SHA256, "pw", b"s", 8192)
    assert reloaded.scram_credential("alice", SHA256) == expected
    assert reloaded.scram_credential("alice", SHA512) is None
    assert reloaded.scram_credential("bob", SHA512) is not None
    assert reloaded.client_quotas() == {
        (("user", None),): {"producer_byte_rate": 1024.0},
        (("client-id", "app"), ("user", "alice")): {"request_percentage": 12.5},
    }


def test_a_document_written_before_the_security_state_still_loads(tmp_path: Path) -> None:
    old = {
        "format_version": 1,
        "cluster_id": "abc",
        "topics": [],
        "next_producer_id": 0,
        "deleting_topic_ids": [],
        "group_configs": {},
    }
    metadata = metadata_from_json(json.dumps(old).encode())
    assert (metadata.acls, metadata.scram_credentials, metadata.client_quotas) == ([], {}, {})


def test_the_document_never_holds_a_password_or_salted_password() -> None:
    metadata = ClusterMetadata(cluster_id="c")
    metadata.scram_credentials = {
        "alice": {SHA256: credential_from_password(SHA256, "pw", b"s", 4096)}
    }
    text = metadata_to_json(metadata)
    assert b"pw" not in text
    assert salted_password(SHA256, "pw", b"s", 4096).hex().encode() not in text
    assert metadata_from_json(text).scram_credentials == metadata.scram_credentials


def test_creating_an_existing_binding_changes_nothing(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    change = controller.stage_create_acls([READ_ORDERS, READ_ORDERS])
    assert change is not None
    controller.commit(change)
    assert controller.acl_bindings() == [READ_ORDERS]
    assert controller.stage_create_acls([READ_ORDERS]) is None


def test_delete_acls_returns_what_each_filter_matched(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    change = controller.stage_create_acls([READ_ORDERS, WRITE_PREFIX])
    assert change is not None
    controller.commit(change)
    by_alice = AclBindingFilter(principal="User:alice")
    matching_orders = AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.MATCH)
    nobody = AclBindingFilter(principal="User:nobody")
    deletion, matched = controller.stage_delete_acls([by_alice, matching_orders, nobody])
    assert matched == [[READ_ORDERS], [READ_ORDERS, WRITE_PREFIX], []]
    assert deletion is not None
    controller.commit(deletion)
    assert controller.acl_bindings() == []
    assert controller.stage_delete_acls([by_alice]) == (None, [[]])


def test_acl_listeners_hear_local_changes_and_other_brokers_documents(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    heard: list[tuple[AclBinding, ...]] = []
    controller.acl_listeners.append(lambda bindings: heard.append(tuple(bindings)))
    change = controller.stage_create_acls([READ_ORDERS])
    assert change is not None
    controller.commit(change)
    assert heard == [(READ_ORDERS,)]

    other = metadata_from_json(metadata_to_json(controller.metadata))
    other.acls = [READ_ORDERS, WRITE_PREFIX]
    controller.replace_metadata(other)
    assert heard[-1] == (READ_ORDERS, WRITE_PREFIX)
    controller.replace_metadata(metadata_from_json(metadata_to_json(other)))
    assert len(heard) == 2  # the same bindings: no call


def test_scram_alteration_follows_kafkas_checks(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    assert commit_scram(controller, [], [upsertion("alice")]) == [("alice", ErrorCode.NONE)]
    results = commit_scram(
        controller,
        [
            ScramDeletion("alice", 2),  # no SHA-512 credential
            ScramDeletion("carol", 1),
            ScramDeletion("carol", 1),  # twice
        ],
        [
            upsertion("dave", 1, 4095),
            upsertion("erin", 1, 16385),
            upsertion("frank", 3),
            upsertion(""),
            upsertion("carol"),
            upsertion("grace", 2, 16384),
        ],
    )
    assert dict(results) == {
        "alice": ErrorCode.RESOURCE_NOT_FOUND,
        "carol": ErrorCode.RESOURCE_NOT_FOUND,
        "dave": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "erin": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "frank": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "grace": ErrorCode.NONE,
    }
    assert controller.scram_credential("grace", SHA512) is not None


def test_a_user_altered_twice_in_one_request_is_refused_entirely(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    commit_scram(controller, [], [upsertion("alice")])
    results = commit_scram(
        controller, [ScramDeletion("alice", 1)], [upsertion("alice", 2), upsertion("bob")]
    )
    assert dict(results) == {"alice": ErrorCode.DUPLICATE_RESOURCE, "bob": ErrorCode.NONE}
    assert controller.scram_credential("alice", SHA256) is not None  # not deleted
    assert controller.scram_credential("alice", SHA512) is None


def test_deleting_the_last_mechanism_forgets_the_user(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    commit_scram(controller, [], [upsertion("alice")])
    assert commit_scram(controller, [ScramDeletion("alice", 1)], []) == [("alice", ErrorCode.NONE)]
    assert controller.scram_credentials() == {}


def alter(
    controller: Controller, *alterations: QuotaAlteration
) -> list[tuple[ErrorCode, str | None]]:
    change, outcomes = controller.stage_alter_client_quotas(list(alterations))
    if change is not None:
        controller.commit(change)
    return [(outcome.error_code, outcome.error_message) for outcome in outcomes]


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ((), (("producer_byte_rate", 1.0),), "Invalid empty client quota entity"),
        (
            (("group", "g"),),
            (("producer_byte_rate", 1.0),),
            "Unhandled client quota entity type: group",
        ),
        ((("user", ""),), (("producer_byte_rate", 1.0),), "Empty user not supported"),
        (
            (("user", "a"), ("user", "b")),
            (),
            "Invalid client quota entity, duplicate entity entry user",
        ),
        (
            (("user", "a"), ("ip", "1.2.3.4")),
            (),
            "Invalid quota entity combination, IP entity should not be combined with "
            "User or ClientId",
        ),
        ((("ip", "not-an-ip"),), (), "not-an-ip is not a valid IP or resolvable host."),
        (
            (("user", "a"),),
            (("connection_creation_rate", 1.0),),
            "Invalid configuration key connection_creation_rate",
        ),
        (
            (("ip", "1.2.3.4"),),
            (("producer_byte_rate", 1.0),),
            "Invalid configuration key producer_byte_rate",
        ),
        (
            (("user", "a"),),
            (("producer_byte_rate", 0.0),),
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            (("user", "a"),),
            (("producer_byte_rate", 1.5),),
            "producer_byte_rate cannot be a fractional value.",
        ),
        (
            (("ip", None),),
            (("connection_creation_rate", 2.0**31),),
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
        (
            (("user", "a"),),
            (("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)),
            "Duplicate quota key producer_byte_rate not updating quota for this entity user=a",
        ),
    ],
)
def test_invalid_quota_alterations_are_refused_with_kafkas_messages(
    tmp_path: Path,
    entity: tuple[tuple[str, str | None], ...],
    ops: tuple[tuple[str, float | None], ...],
    message: str,
) -> None:
    controller = make_controller(tmp_path)
    assert alter(controller, QuotaAlteration(entity, ops)) == [(ErrorCode.INVALID_REQUEST, message)]
    assert controller.client_quotas() == {}


def test_quota_alterations_set_and_remove_keys_and_drop_empty_entities(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    alice = (("user", "alice"),)
    assert alter(
        controller,
        QuotaAlteration(alice, (("consumer_byte_rate", 2048.0), ("request_percentage", 0.5))),
        QuotaAlteration((("ip", "10.0.0.1"),), (("connection_creation_rate", 10.0),)),
        QuotaAlteration(alice, (("producer_byte_rate", 1.0),)),  # the same entity again
    ) == [
        (ErrorCode.NONE, None),
        (ErrorCode.NONE, None),
        (ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity user=alice"),
    ]
    assert alter(controller, QuotaAlteration(alice, (("consumer_byte_rate", None),))) == [
        (ErrorCode.NONE, None)
    ]
    assert controller.client_quotas()[quota_entity(dict(alice))] == {"request_percentage": 0.5}
    alter(controller, QuotaAlteration(alice, (("request_percentage", None),)))
    assert list(controller.client_quotas()) == [(("ip", "10.0.0.1"),)]


QUOTAS = {
    quota_entity({"user": "alice"}): {"producer_byte_rate": 1.0},
    quota_entity({"user": None}): {"producer_byte_rate": 2.0},
    quota_entity({"user": "alice", "client-id": "app"}): {"producer_byte_rate": 3.0},
    quota_entity({"client-id": None}): {"producer_byte_rate": 4.0},
    quota_entity({"ip": "10.0.0.1"}): {"connection_creation_rate": 5.0},
}


def described(components: list[QuotaFilterComponent], strict: bool) -> list[float]:
    return sorted(
        next(iter(quotas.values())) for _, quotas in describe_quotas(QUOTAS, components, strict)
    )


def test_describe_quota_filters_match_exact_default_and_any() -> None:
    alice = QuotaFilterComponent("user", MATCH_EXACT, "alice")
    default_user = QuotaFilterComponent("user", MATCH_DEFAULT, None)
    any_client = QuotaFilterComponent("client-id", MATCH_SPECIFIED, None)
    assert described([alice], strict=False) == [1.0, 3.0]
    assert described([alice], strict=True) == [1.0]
    assert described([default_user], strict=False) == [2.0]
    assert described([any_client], strict=False) == [3.0, 4.0]
    assert described([alice, any_client], strict=True) == [3.0]
    assert described([], strict=False) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert described([], strict=True) == []


@pytest.mark.parametrize(
    ("components", "code"),
    [
        ([QuotaFilterComponent("", MATCH_SPECIFIED, None)], ErrorCode.INVALID_REQUEST),
        ([QuotaFilterComponent("group", MATCH_SPECIFIED, None)], ErrorCode.UNSUPPORTED_VERSION),
        ([QuotaFilterComponent("user", MATCH_EXACT, None)], ErrorCode.INVALID_REQUEST),
        ([QuotaFilterComponent("user", MATCH_DEFAULT, "a")], ErrorCode.INVALID_REQUEST),
        ([QuotaFilterComponent("user", MATCH_SPECIFIED, "a")], ErrorCode.INVALID_REQUEST),
        ([QuotaFilterComponent("user", 7, None)], ErrorCode.INVALID_REQUEST),
        (
            [
                QuotaFilterComponent("user", MATCH_SPECIFIED, None),
                QuotaFilterComponent("user", MATCH_DEFAULT, None),
            ],
            ErrorCode.INVALID_REQUEST,
        ),
        (
            [
                QuotaFilterComponent("ip", MATCH_SPECIFIED, None),
                QuotaFilterComponent("user", MATCH_DEFAULT, None),
            ],
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
def test_invalid_describe_quota_filters_are_refused(
    components: list[QuotaFilterComponent], code: ErrorCode
) -> None:
    with pytest.raises(QuotaFilterError) as raised:
        describe_quotas(QUOTAS, components, strict=False)
    assert raised.value.error_code == code
