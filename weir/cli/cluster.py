"""Cluster metadata as the CLI sees it, and one connection per broker it must talk to.

Produce, Fetch and ListOffsets go to each partition's leader; topic admin
requests go to the controller. With a single broker every request shares the
bootstrap connection.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from weir.cli.client_security import PLAINTEXT, ClientSecurity
from weir.cli.errors import BrokerConnectionError, kafka_error
from weir.cli.kafka_client import Address, KafkaClient
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

LEADER_WAIT_MS_MAX = 3_000
COORDINATOR_KEY_TYPE_GROUP = 0
COORDINATOR_KEY_TYPE_TRANSACTION = 1
# A group's coordinator is not there yet (a cluster creates the offsets topic on the
# first group request), is loading, or has moved: ask again, after finding it again.
COORDINATOR_MOVING_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    }
)
# A partition's leader has moved or is being elected: fresh metadata names the next.
LEADER_MOVED_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
    }
)
LEADER_RETRY_INTERVAL_S = 0.1
NO_LEADER = -1


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: int


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: str | None
    is_internal: bool
    error_code: int
    partitions: tuple[PartitionMetadata, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    def has_all_leaders(self) -> bool:
        return all(p.leader != NO_LEADER for p in self.partitions)


def topic_id_text(value: Any) -> str | None:
    """A decoded topic id as text; the all-zero id (no id) as None."""
    if value is None:
        return None
    if isinstance(value, uuid.UUID):
        return None if value.int == 0 else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        return None if not any(raw) else str(uuid.UUID(bytes=raw))
    return str(value)


def parse_topic_metadata(topic: Any) -> TopicMetadata:
    partitions = tuple(
        sorted(
            (
                PartitionMetadata(
                    partition=int(p["partition_index"]),
                    leader=int(p["leader_id"]),
                    leader_epoch=int(p.get("leader_epoch", -1)),
                    replicas=tuple(int(n) for n in p["replica_nodes"]),
                    isr=tuple(int(n) for n in p["isr_nodes"]),
                    offline_replicas=tuple(int(n) for n in (p.get("offline_replicas") or [])),
                    error_code=int(p["error_code"]),
                )
                for p in topic["partitions"]
            ),
            key=lambda p: p.partition,
        )
    )
    return TopicMetadata(
        name=str(topic["name"]),
        topic_id=topic_id_text(topic.get("topic_id")),
        is_internal=bool(topic.get("is_internal", False)),
        error_code=int(topic["error_code"]),
        partitions=partitions,
    )


class Cluster:
    """Connections to the brokers of one cluster, opened lazily from bootstrap addresses.

    The bootstrap connection (metadata, admin requests) goes to the first bootstrap
    address that answers, then to any broker the last Metadata answer named: a
    cluster is still reachable when the broker it was first reached through is gone.
    """

    def __init__(
        self,
        bootstrap: Address | Sequence[Address],
        *,
        request_timeout_ms: int,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap_addresses = (
            [bootstrap] if isinstance(bootstrap, Address) else list(bootstrap)
        )
        if not self.bootstrap_addresses:
            raise ValueError("at least one bootstrap address is needed")
        self.request_timeout_ms = request_timeout_ms
        self.security = security
        self._bootstrap: KafkaClient | None = None
        self._nodes: dict[int, Address] = {}
        self._clients: dict[int, KafkaClient] = {}
        self.controller_id = NO_LEADER

    def __enter__(self) -> Cluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        if self._bootstrap is not None:
            self._bootstrap.close()
            self._bootstrap = None

    def any_broker(self) -> KafkaClient:
        """The bootstrap connection: to the first address (bootstrap ones, then the
        brokers metadata named) that answers; the first failure if none does."""
        if self._bootstrap is not None and self._bootstrap.is_open:
            return self._bootstrap
        first_error: BrokerConnectionError | None = None
        for address in self._candidate_addresses():
            try:
                self._bootstrap = KafkaClient.connect(
                    address, request_timeout_ms=self.request_timeout_ms, security=self.security
                )
                return self._bootstrap
            except BrokerConnectionError as exc:
                first_error = first_error or exc
        assert first_error is not None
        raise first_error

    def request_any(self, api_key: int, body: Mapping[str, Any]) -> Any:
        """A request any broker can answer; if the broker asked is lost, another is."""
        client = self.any_broker()  # no broker reachable at all: that error goes up
        try:
            return client.request(api_key, body)
        except BrokerConnectionError:
            return self.any_broker().request(api_key, body)

    def _candidate_addresses(self) -> list[Address]:
        known = [a for _, a in sorted(self._nodes.items()) if a not in self.bootstrap_addresses]
        return self.bootstrap_addresses + known

    def node_ids(self) -> list[int]:
        """The brokers the last Metadata answer named."""
        return sorted(self._nodes)

    def broker(self, node_id: int) -> KafkaClient:
        """The connection to broker `node_id` (known from the last Metadata answer)."""
        client = self._clients.get(node_id)
        if client is not None and client.is_open:
            return client
        address = self._nodes.get(node_id)
        if address is None:
            # Down, or left: as unreachable as a refused connection.
            raise BrokerConnectionError(f"broker {node_id} is not in the cluster metadata")
        if len(self._nodes) == 1:  # one broker: whatever address it was reached by
            return self.any_broker()
        bootstrap = self._bootstrap
        if bootstrap is not None and bootstrap.is_open and bootstrap.address == address:
            return bootstrap
        client = KafkaClient.connect(
            address, request_timeout_ms=self.request_timeout_ms, security=self.security
        )
        self._clients[node_id] = client
        return client

    def controller(self) -> KafkaClient:
        if self.controller_id == NO_LEADER or self.controller_id not in self._nodes:
            self.metadata([])
        if self.controller_id in self._nodes:
            return self.broker(self.controller_id)
        return self.any_broker()

    def metadata(
        self, topics: Sequence[str] | None, *, auto_create: bool = False
    ) -> list[TopicMetadata]:
        """Metadata for `topics` (None: every topic). `auto_create` lets the broker
        create a missing topic when its auto-create setting allows (as a producer does)."""
        body = {
            "topics": None if topics is None else [{"name": name} for name in topics],
            "allow_auto_topic_creation": auto_create,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        response = self.request_any(ApiKey.METADATA, body)
        self._nodes = {
            int(b["node_id"]): Address(str(b["host"]), int(b["port"])) for b in response["brokers"]
        }
        self.controller_id = int(response.get("controller_id", NO_LEADER))
        return [parse_topic_metadata(t) for t in response["topics"]]

    def topic(
        self, name: str, *, action: str | None = None, auto_create: bool = False
    ) -> TopicMetadata:
        """One existing topic whose partitions all have leaders (waits briefly for them).
        `auto_create`: a missing topic is created if the broker creates topics on use."""
        deadline = time.monotonic() + LEADER_WAIT_MS_MAX / 1000
        while True:
            found = [t for t in self.metadata([name], auto_create=auto_create) if t.name == name]
            if not found:
                raise kafka_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic=name)
            topic = found[0]
            retriable = topic.error_code == ErrorCode.LEADER_NOT_AVAILABLE or (
                topic.error_code == ErrorCode.NONE and not topic.has_all_leaders()
            )
            # Created on use: the next answer has its partitions.
            retriable |= auto_create and topic.error_code == ErrorCode.NONE and not topic.partitions
            if not retriable or time.monotonic() >= deadline:
                break
            time.sleep(LEADER_RETRY_INTERVAL_S)
        if topic.error_code != ErrorCode.NONE:
            raise kafka_error(topic.error_code, topic=name, action=action)
        return topic

    def group_coordinator(self, group_id: str, *, wait_ms: int) -> KafkaClient:
        """The connection to `group_id`'s coordinator, asking again for up to `wait_ms`
        while it is not available."""
        node_id = self.coordinator_id(
            group_id, COORDINATOR_KEY_TYPE_GROUP, f"group '{group_id}'", wait_ms=wait_ms
        )
        return self.broker(node_id)

    def coordinator_id(self, key: str, key_type: int, subject: str, *, wait_ms: int) -> int:
        """The node id of `key`'s coordinator (FindCoordinator with `key_type`), asking
        again for up to `wait_ms` while it is not available; its address is known after.
        `subject` names the key in error messages ("group 'g'")."""
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            response = self.request_any(
                ApiKey.FIND_COORDINATOR,
                {"key": key, "key_type": key_type, "coordinator_keys": [key]},
            )
            found = response["coordinators"][0] if "coordinators" in response else response
            error = int(found["error_code"])
            if error == ErrorCode.NONE:
                break
            if error not in COORDINATOR_MOVING_ERRORS or time.monotonic() >= deadline:
                raise kafka_error(error, action=f"find the coordinator of {subject}")
            time.sleep(LEADER_RETRY_INTERVAL_S)
        node_id = int(found["node_id"])
        if node_id not in self._nodes:
            self.metadata([])  # learn the brokers' addresses
        return node_id
