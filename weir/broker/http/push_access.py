"""The share-group access push deliveries use (`weir.broker.push.share_access`):
`ShareDirect`, as the broker itself (`kafka_gateway.BROKER`: not checked against
ACLs, as the inter-broker user is not). A subscription's creator was checked for
READ on the topic and the group when it was created (weir/broker/push/routes.py)."""

from __future__ import annotations

from collections.abc import Sequence

from weir.broker.broker import Broker
from weir.broker.http.kafka_gateway import BROKER, HttpCaller
from weir.broker.http.share_direct import Acquired, share_direct_of
from weir.format.errors import ErrorCode
from weir.sharecoord.share_partition import AcknowledgeType


class BrokerShareAccess:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def _caller(self) -> HttpCaller:
        return BROKER

    async def acquire(
        self,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        *,
        records_max: int,
        lock_ms: int,
        wait_ms: int = 0,
    ) -> Acquired:
        return await share_direct_of(self.broker).acquire(
            self._caller(), group_id, topic, partition, member_id,
            records_max=records_max, lock_ms=lock_ms, wait_ms=wait_ms,
        )  # fmt: skip

    async def acknowledge(
        self,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: Sequence[int],
        kind: AcknowledgeType,
    ) -> dict[int, ErrorCode]:
        return await share_direct_of(self.broker).acknowledge(
            self._caller(), group_id, topic, partition, member_id, offsets, kind
        )

    async def change_lock(
        self,
        group_id: str,
        topic: str,
        partition: int,
        member_id: str,
        offsets: Sequence[int],
        lock_ms: int,
    ) -> dict[int, ErrorCode]:
        return await share_direct_of(self.broker).change_lock(
            self._caller(), group_id, topic, partition, member_id, offsets, lock_ms
        )


def push_share_access(broker: Broker) -> BrokerShareAccess:
    return BrokerShareAccess(broker)
