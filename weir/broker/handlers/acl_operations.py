"""KIP-430 authorized operations: the bit fields Metadata, DescribeCluster,
DescribeGroups and ConsumerGroupDescribe report when a client asks for them.

Weir has no authorizer, so, as Kafka without one, every client may do every
operation valid for the resource type: the answer is that type's full set of
ACL operations (Kafka's `AclEntry.supportedOperations`), bit `code` set for
each operation's code. A client that did not ask gets `OPERATIONS_NOT_REQUESTED`
(Int32 min, "not provided")."""

from __future__ import annotations

import enum


class AclOperation(enum.IntEnum):
    """Kafka's ACL operation codes (`org.apache.kafka.common.acl.AclOperation`)."""

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


OPERATIONS_NOT_REQUESTED = -(2**31)


def _bits(*operations: AclOperation) -> int:
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


_O = AclOperation
TOPIC_OPERATIONS = _bits(
    _O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
    _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
)  # fmt: skip
GROUP_OPERATIONS = _bits(_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS)
CLUSTER_OPERATIONS = _bits(
    _O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
    _O.ALTER, _O.DESCRIBE,
)  # fmt: skip


def topic_operations(requested: bool) -> int:
    return TOPIC_OPERATIONS if requested else OPERATIONS_NOT_REQUESTED


def group_operations(requested: bool) -> int:
    return GROUP_OPERATIONS if requested else OPERATIONS_NOT_REQUESTED


def cluster_operations(requested: bool) -> int:
    return CLUSTER_OPERATIONS if requested else OPERATIONS_NOT_REQUESTED
