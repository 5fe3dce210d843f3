"""Kafka's ACL vocabulary: resource types, pattern types, operations and
permissions with Kafka's wire codes (`org.apache.kafka.common.acl`,
`org.apache.kafka.common.resource`), and one ACL binding."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from weir.security.principal import KafkaPrincipal


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The one CLUSTER resource's name, and the wildcard resource name and host.
CLUSTER_NAME = "kafka-cluster"
WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"


@dataclass(frozen=True, slots=True)
class Resource:
    """A concrete resource a request acts on (a LITERAL name, never a pattern)."""

    resource_type: ResourceType
    name: str


CLUSTER = Resource(ResourceType.CLUSTER, CLUSTER_NAME)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: `principal` (`User:alice`, `User:*`) from `host` (an address or `*`)
    is allowed or denied `operation` on resources matching
    (`resource_type`, `pattern_type`, `resource_name`)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


class Authorizer(Protocol):
    """What the broker asks of an authorizer (`weir.security.authorizer.AclAuthorizer`).
    `host` is the client's bare IP address."""

    def authorize(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource: Resource
    ) -> bool: ...

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool: ...

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, resource: Resource
    ) -> frozenset[AclOperation]: ...
