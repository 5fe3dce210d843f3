"""What Weir keeps in etcd and where, the metadata document's first load, and the
bound of one etcd request.

etcd holds (under `/weir/`):

- `metadata`: the cluster metadata document (topics, their configs and replica
  assignment, the next producer id, group configs), changed only by
  compare-and-swap on its mod revision (`ClusterMember.save_metadata`);
- `brokers/<node id>`: each live broker's registration, under its lease;
- `controller`: the active controller's node id, under its lease (the first broker
  to create it wins; the others watch for its deletion);
- `partitions/<topic id>/<index>`: a partition's leader, leader epoch, ISR,
  partition epoch and eligible leader replicas once it first changed (absent: its
  first replica leads, every replica in sync); changed only by compare-and-swap on
  its mod revision, by the leader (ISR, or handing leadership over while cut off
  from its followers; while its own registration exists) or the controller
  (leader, while it still holds the controller key);
- `offline_replicas/<node id>`: the replicas a live broker holds but cannot
  serve (a failed write or fsync, a damaged log), under its lease, written only
  while its registration exists. The controller counts them as dead for their
  partition (Kafka's brokers report failed log directories to the controller).
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass

from weir.broker.cluster.etcd_client import Compare, EtcdClient, Put
from weir.broker.config import BrokerConfig
from weir.controller.metadata import (
    ClusterMetadata,
    MetadataCorruptError,
    metadata_from_json,
    metadata_to_json,
    new_cluster_id,
)
from weir.controller.partition_state import NO_LEADER, PartitionState

log = logging.getLogger(__name__)

PREFIX = b"/weir/"
METADATA_KEY = PREFIX + b"metadata"
BROKERS_PREFIX = PREFIX + b"brokers/"
CONTROLLER_KEY = PREFIX + b"controller"
PARTITIONS_PREFIX = PREFIX + b"partitions/"
OFFLINE_REPLICAS_PREFIX = PREFIX + b"offline_replicas/"

# Bounds of one etcd request's wait on one member (see `etcd_request_timeout_s`).
ETCD_REQUEST_TIMEOUT_S_MIN = 1.5
ETCD_REQUEST_TIMEOUT_S_MAX = 5.0


def etcd_request_timeout_s(config: BrokerConfig) -> float:
    """A third of the session timeout, within bounds: a lease renewal sent to a
    member that stopped answering (paused, cut off) times out and is answered by
    another member before the lease (renewed every third of the session) runs out."""
    third_s = config.broker_session_timeout_ms / 3000
    return min(max(third_s, ETCD_REQUEST_TIMEOUT_S_MIN), ETCD_REQUEST_TIMEOUT_S_MAX)


def controller_node_id(value: bytes) -> int:
    """The node id in the controller key's value (NO_LEADER when unreadable)."""
    try:
        return int(json.loads(value)["node_id"])
    except (ValueError, KeyError, TypeError):
        return NO_LEADER


def broker_key(node_id: int) -> bytes:
    return BROKERS_PREFIX + str(node_id).encode()


def partition_key(topic_id: uuid.UUID, index: int) -> bytes:
    return PARTITIONS_PREFIX + f"{topic_id}/{index}".encode()


def offline_replicas_key(node_id: int) -> bytes:
    return OFFLINE_REPLICAS_PREFIX + str(node_id).encode()


@dataclass
class StoredState:
    state: PartitionState
    mod_revision: int  # 0: not in etcd yet (the initial state)


class EtcdMetadataStore:
    """The controller's store in a cluster: loaded from etcd before the broker is
    built; every save goes through `ClusterMember.save_metadata`."""

    def __init__(self, metadata: ClusterMetadata) -> None:
        self._metadata = metadata

    def load(self) -> ClusterMetadata:
        return self._metadata

    def save(self, metadata: ClusterMetadata) -> None:
        raise AssertionError("a cluster's metadata is saved by compare-and-swap in etcd")


async def load_cluster_metadata(etcd: EtcdClient) -> tuple[ClusterMetadata, int]:
    """The metadata document and its mod revision, created when the cluster is new."""
    for _ in range(3):
        kv = await etcd.get(METADATA_KEY)
        if kv is not None:
            return metadata_from_json(kv.value), kv.mod_revision
        fresh = ClusterMetadata(cluster_id=new_cluster_id())
        result = await etcd.txn(
            [Compare.absent(METADATA_KEY)], [Put(METADATA_KEY, metadata_to_json(fresh))]
        )
        if result.succeeded:
            log.info("created the cluster metadata in etcd (cluster id %s)", fresh.cluster_id)
            return fresh, result.revision
    raise MetadataCorruptError("the metadata key in etcd keeps changing")
