"""What the caller may do on the cluster (KIP-430's authorized operations, Weir's own
shape under /v3): DescribeCluster with `include_cluster_authorized_operations`, as
the caller, so the answer is the ACLs' (everything when no authorizer is on; nothing
when the caller may not DESCRIBE the cluster, as Kafka answers). The console reads
it to hide the actions the logged-in user may not take (creating users, ACLs and
quotas, aborting transactions); the API still checks every call."""

from __future__ import annotations

from starlette.responses import Response

from weir.broker.http.rest_admin_base import (
    AdminCall,
    Endpoint,
    check_kafka,
    json_response,
    resource,
)
from weir.security.acl import AclOperation
from weir.wire.protocol import ApiKey

DESCRIBE_CLUSTER_VERSION = 1
BROKER_ENDPOINT_TYPE = 1
_NOT_OPERATIONS = (AclOperation.UNKNOWN, AclOperation.ANY, AclOperation.ALL)


def operation_names(field: int) -> list[str]:
    """The operations a KIP-430 bit field holds (bit n: AclOperation n), by name."""
    if field < 0:  # not computed (Kafka's INT32_MIN)
        return []
    concrete = (op for op in AclOperation if op not in _NOT_OPERATIONS)
    return [op.name for op in concrete if field & (1 << op.value)]


async def cluster_authorized_operations(call: AdminCall) -> Response:
    response = await call.send(
        ApiKey.DESCRIBE_CLUSTER,
        DESCRIBE_CLUSTER_VERSION,
        {"include_cluster_authorized_operations": True, "endpoint_type": BROKER_ENDPOINT_TYPE},
    )
    check_kafka(response.error_code, response.error_message, "describe the cluster")
    return json_response(
        resource(
            "WeirAuthorizedOperations",
            call.url("authorized-operations"),
            cluster_id=call.cluster_id,
            cluster=operation_names(response.cluster_authorized_operations),
        )
    )


ENDPOINTS = [
    Endpoint(
        "GET",
        "/v3/clusters/{cluster_id}/authorized-operations",
        cluster_authorized_operations,
        "The operations the caller's ACLs allow on the cluster (KIP-430)",
        tag="acls",
    ),
]
