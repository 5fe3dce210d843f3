"""What the group handlers share: the broker's group service, and the KIP-430
operations of a described group.

The group APIs, one module per family: `find_coordinator` (FindCoordinator),
`group_offsets` (OffsetCommit, OffsetFetch), `classic_groups` (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup), `consumer_groups` (KIP-848's
ConsumerGroupHeartbeat and ConsumerGroupDescribe), `group_admin` (ListGroups,
DescribeGroups, DeleteGroups, OffsetDelete). Their handlers validate, change the
state machines and append their records on the connection's reader, then defer
the answer until the records are durable (weir.broker.coordinators.group_service).
"""

from __future__ import annotations

from collections.abc import Sequence

from weir.broker.coordinators.group_service import GroupService
from weir.broker.handlers.acl_operations import group_operations
from weir.broker.handlers.context import RequestContext
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.format.errors import ErrorCode
from weir.wire.messages.consumer_groups import ConsumerGroupDescribeResponseGroup
from weir.wire.messages.groups import DescribeGroupsResponseGroup
from weir.wire.messages.share_groups import ShareGroupDescribeResponseGroup


def group_service(ctx: RequestContext) -> GroupService:
    service = ctx.broker.groups
    assert isinstance(service, GroupService), "the broker's group service is attached at start"
    return service


def set_group_operations(
    described: Sequence[
        DescribeGroupsResponseGroup
        | ConsumerGroupDescribeResponseGroup
        | ShareGroupDescribeResponseGroup
    ],
    requested: bool,
    authorization: RequestAuthorization | None = None,
) -> None:
    """KIP-430: the groups described without error carry their operations when
    the client asked (every group operation without an authorizer, else the
    session's), as Kafka's KafkaApis sets them."""
    for group in described:
        if group.error_code == ErrorCode.NONE:
            group.authorized_operations = group_operations(requested, group.group_id, authorization)
