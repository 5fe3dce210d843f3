"""Topics, configurations, partitions and the cluster's administration under ACLs."""

from __future__ import annotations

from typing import Any

import pytest

from weir.broker.authorization.rules import RULES, missing_rules
from weir.broker.broker import Broker
from weir.broker.handlers.apis import HANDLERS
from weir.format.errors import ErrorCode
from weir.security.acl import AclOperation as Op
from weir.security.acl import ResourceType
from weir.wire.protocol import SUPPORTED_VERSIONS, ApiKey

from .authorized_calls import allow, secure, send

TOPIC, CLUSTER, GROUP = ResourceType.TOPIC, ResourceType.CLUSTER, ResourceType.GROUP
TAF, CLUSTER_AF = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED
GAF = ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_every_served_api_and_every_declared_one_has_a_rule() -> None:
    assert missing_rules(set(HANDLERS)) == []
    assert missing_rules(set(SUPPORTED_VERSIONS)) == []
    assert set(RULES) >= set(HANDLERS)


def create_body(*names: str) -> Any:
    return {
        "topics": [{"name": n, "num_partitions": 1, "replication_factor": 1} for n in names],
        "timeout_ms": 5000,
    }


async def test_create_topics_needs_create_on_the_topic_and_hides_configs_without_describe_configs(
    broker: Broker,
) -> None:
    secure(broker, [allow("alice", Op.CREATE, TOPIC, "a"), allow("alice", Op.CREATE, TOPIC, "b"),
                    allow("alice", Op.DESCRIBE_CONFIGS, TOPIC, "a")])  # fmt: skip
    response = await send(broker, "alice", ApiKey.CREATE_TOPICS, 7, create_body("a", "b", "c"))
    answered = {
        t.name: (t.error_code, t.topic_config_error_code, bool(t.configs)) for t in response.topics
    }
    assert answered == {
        "a": (ErrorCode.NONE, ErrorCode.NONE, True),
        "b": (ErrorCode.NONE, TAF, False),
        "c": (TAF, ErrorCode.NONE, False),
    }
    assert broker.controller.topic("c") is None


async def test_create_topics_with_create_on_the_cluster(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.CREATE, CLUSTER, "kafka-cluster")])
    response = await send(broker, "alice", ApiKey.CREATE_TOPICS, 7, create_body("z"))
    assert [t.error_code for t in response.topics] == [ErrorCode.NONE]


async def test_delete_topics_refuses_before_telling_whether_a_topic_exists(broker: Broker) -> None:
    secure(
        broker,
        [
            allow("alice", Op.DELETE, TOPIC, "orders"),
            allow("alice", Op.DESCRIBE, TOPIC, "secret"),
        ],
    )
    body = {"topic_names": ["orders", "secret", "missing"], "timeout_ms": 5000}
    response = await send(broker, "alice", ApiKey.DELETE_TOPICS, 5, body)
    assert {r.name: r.error_code for r in response.responses} == {
        "orders": ErrorCode.NONE,
        "secret": TAF,  # describable, not deletable
        "missing": TAF,  # not describable: whether it exists is not said
    }
    assert broker.controller.topic("secret") is not None


async def test_delete_topics_by_id_names_the_topic_only_to_who_may_describe_it(
    broker: Broker,
) -> None:
    secure(broker)
    record = broker.controller.topic("secret")
    assert record is not None
    body = {"topics": [{"name": None, "topic_id": record.topic_id}], "timeout_ms": 5000}
    response = await send(broker, "bob", ApiKey.DELETE_TOPICS, 6, body)
    assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [
        (None, record.topic_id, TAF)
    ]


async def test_create_partitions_needs_alter_on_each_topic(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.ALTER, TOPIC, "orders")])
    body = {
        "topics": [{"name": n, "count": 3, "assignments": None} for n in ("orders", "secret")],
        "timeout_ms": 5000,
    }
    response = await send(broker, "alice", ApiKey.CREATE_PARTITIONS, 3, body)
    assert {r.name: r.error_code for r in response.results} == {
        "orders": ErrorCode.NONE,
        "secret": TAF,
    }
    secret = broker.controller.topic("secret")
    assert secret is not None and secret.partition_count == 1


async def test_describe_configs_per_resource_type(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.DESCRIBE_CONFIGS, TOPIC, "orders")])
    body = {
        "resources": [
            {"resource_type": 2, "resource_name": "orders", "configuration_keys": None},
            {"resource_type": 2, "resource_name": "secret", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "0", "configuration_keys": None},
            {"resource_type": 32, "resource_name": "g", "configuration_keys": None},
        ]
    }
    response = await send(broker, "alice", ApiKey.DESCRIBE_CONFIGS, 4, body)
    assert {(r.resource_type, r.resource_name): r.error_code for r in response.results} == {
        (2, "orders"): ErrorCode.NONE,
        (2, "secret"): TAF,
        (4, "0"): CLUSTER_AF,
        (32, "g"): GAF,
    }


@pytest.mark.parametrize("api_key", [ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS])
async def test_altering_configs_needs_alter_configs_on_the_resource(
    broker: Broker, api_key: ApiKey
) -> None:
    secure(broker, [allow("alice", Op.ALTER_CONFIGS, TOPIC, "orders")])
    config = {"name": "retention.ms", "value": "1000"}
    if api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS:
        config["config_operation"] = 0  # type: ignore[assignment]
    body = {
        "resources": [
            {"resource_type": 2, "resource_name": name, "configs": [config]}
            for name in ("orders", "secret")
        ],
        "validate_only": False,
    }
    response = await send(broker, "alice", api_key, 1, body)
    assert {r.resource_name: r.error_code for r in response.responses} == {
        "orders": ErrorCode.NONE,
        "secret": TAF,
    }
    secret = broker.controller.topic("secret")
    assert secret is not None and "retention.ms" not in secret.configs


async def test_describe_cluster_reports_cluster_operations_from_the_acls(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.DESCRIBE, CLUSTER, "kafka-cluster")])
    body = {"include_cluster_authorized_operations": True}
    alice = await send(broker, "alice", ApiKey.DESCRIBE_CLUSTER, 1, body)
    bob = await send(broker, "bob", ApiKey.DESCRIBE_CLUSTER, 1, body)
    assert alice.cluster_authorized_operations == 1 << Op.DESCRIBE
    assert (bob.error_code, bob.cluster_authorized_operations) == (ErrorCode.NONE, 0)


async def test_elect_leaders_and_reassignments_need_the_cluster(broker: Broker) -> None:
    secure(broker)
    elect = await send(
        broker, "bob", ApiKey.ELECT_LEADERS, 2,
        {"election_type": 0, "topic_partitions": [{"topic": "orders", "partitions": [0]}]},
    )  # fmt: skip
    assert elect.error_code == CLUSTER_AF
    assert [p.error_code for r in elect.replica_election_results for p in r.partition_result] == [
        CLUSTER_AF
    ]
    alter = await send(
        broker, "bob", ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0,
        {"topics": [{"name": "orders", "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
    )  # fmt: skip
    assert alter.error_code == CLUSTER_AF
    listed = await send(broker, "bob", ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"topics": None})
    assert listed.error_code == CLUSTER_AF


async def test_api_versions_needs_no_permission(broker: Broker) -> None:
    secure(broker)
    response = await send(broker, "bob", ApiKey.API_VERSIONS, 3, {})
    assert response.error_code == ErrorCode.NONE
