"""KIP-430 authorized operations: the bit fields Metadata, DescribeCluster,
DescribeGroups and ConsumerGroupDescribe report when a client asks for them.

With an authorizer (`RequestContext.authorization` set) a resource's field is the
operations valid for its type that the session's ACLs allow (Kafka's
`AuthHelper.authorizedOperations`); the cluster's is 0 for a session that may not
DESCRIBE the cluster. Without one, as Kafka without one, every client may do
every operation valid for the resource type: the answer is that type's full set
of ACL operations (Kafka's `AclEntry.supportedOperations`), bit `code` set for
each operation's code. A client that did not ask gets `OPERATIONS_NOT_REQUESTED`
(Int32 min, "not provided")."""

from __future__ import annotations

from weir.broker.handlers.request_authorization import (
    OPERATIONS_NOT_REQUESTED,
    RequestAuthorization,
)
from weir.security.acl import CLUSTER, AclOperation, Resource, ResourceType

__all__ = [
    "OPERATIONS_NOT_REQUESTED",
    "cluster_operations",
    "group_operations",
    "topic_operations",
]


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


def topic_operations(
    requested: bool, name: str | None = None, authorization: RequestAuthorization | None = None
) -> int:
    if not requested:
        return OPERATIONS_NOT_REQUESTED
    if authorization is None:
        return TOPIC_OPERATIONS
    return authorization.operations_field(Resource(ResourceType.TOPIC, name or ""))


def group_operations(
    requested: bool, group_id: str = "", authorization: RequestAuthorization | None = None
) -> int:
    if not requested:
        return OPERATIONS_NOT_REQUESTED
    if authorization is None:
        return GROUP_OPERATIONS
    return authorization.operations_field(Resource(ResourceType.GROUP, group_id))


def cluster_operations(requested: bool, authorization: RequestAuthorization | None = None) -> int:
    if not requested:
        return OPERATIONS_NOT_REQUESTED
    if authorization is None:
        return CLUSTER_OPERATIONS
    if not authorization.allows(AclOperation.DESCRIBE, CLUSTER):
        return 0
    return authorization.operations_field(CLUSTER)
