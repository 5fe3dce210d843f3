"""Cluster metadata: topics, their ids, partition counts and config overrides;
group config overrides (KIP-848 GROUP resources, by group id); the security state
(ACL bindings, SCRAM credentials, client quotas: `security_state.py`,
`client_quotas.py`); push subscriptions (name -> their stored JSON document, which
`weir.broker.push.subscription` reads: opaque here).

The controller owns every decision about topics; a `MetadataStore` only persists
the result. The embedded store keeps one JSON document in the data directory,
replaced atomically (write temp file, fsync, rename, fsync the directory), so a
crash leaves either the old or the new document, never a torn one.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from weir.controller.client_quotas import QuotaEntity, quotas_from_json, quotas_to_json
from weir.controller.security_state import (
    ScramCredentials,
    acls_from_json,
    acls_to_json,
    scram_from_json,
    scram_to_json,
)
from weir.security.acl import AclBinding

METADATA_FILE_NAME = "cluster-metadata.json"
METADATA_FORMAT_VERSION = 1


@dataclass
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    partition_count: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)
    # One leader epoch per partition; bumped on every leadership change.
    leader_epochs: list[int] = field(default_factory=list)
    is_internal: bool = False
    # Replicas of each partition, preferred leader first (a cluster over etcd).
    # Empty on a single node: its one broker holds every partition.
    assignment: list[list[int]] = field(default_factory=list)
    # Partitions being moved: index -> (target replicas, replicas before the move).
    # Meanwhile the assignment is the union, the original replicas first.
    reassignments: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.leader_epochs:
            self.leader_epochs = [0] * self.partition_count
        assert len(self.leader_epochs) == self.partition_count
        assert not self.assignment or len(self.assignment) == self.partition_count

    def replicas(self, index: int, local_node_id: int) -> list[int]:
        """The partition's replicas (a single node's topics name none: it holds all)."""
        return list(self.assignment[index]) if self.assignment else [local_node_id]

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partition_count": self.partition_count,
            "replication_factor": self.replication_factor,
            "configs": dict(self.configs),
            "leader_epochs": list(self.leader_epochs),
            "is_internal": self.is_internal,
            "assignment": [list(r) for r in self.assignment],
            "reassignments": {
                str(index): {"target": list(target), "original": list(original)}
                for index, (target, original) in self.reassignments.items()
            },
        }

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> TopicRecord:
        configs = doc.get("configs", {})
        epochs = doc.get("leader_epochs", [])
        assignment = doc.get("assignment", [])
        assert isinstance(configs, dict) and isinstance(epochs, list)
        assert isinstance(assignment, list) and all(isinstance(r, list) for r in assignment)
        return cls(
            name=str(doc["name"]),
            topic_id=uuid.UUID(str(doc["topic_id"])),
            partition_count=int(str(doc["partition_count"])),
            replication_factor=int(str(doc.get("replication_factor", 1))),
            configs={str(k): str(v) for k, v in configs.items()},
            leader_epochs=[int(e) for e in epochs],
            is_internal=bool(doc.get("is_internal", False)),
            assignment=[[int(n) for n in r] for r in assignment],
            reassignments=_reassignments_from_json(doc.get("reassignments", {})),
        )


def _reassignments_from_json(doc: object) -> dict[int, tuple[list[int], list[int]]]:
    assert isinstance(doc, dict)
    moves: dict[int, tuple[list[int], list[int]]] = {}
    for index, move in doc.items():
        assert isinstance(move, dict)
        target, original = move["target"], move["original"]
        assert isinstance(target, list) and isinstance(original, list)
        moves[int(index)] = ([int(n) for n in target], [int(n) for n in original])
    return moves


@dataclass
class ClusterMetadata:
    cluster_id: str
    topics: dict[str, TopicRecord] = field(default_factory=dict)
    # Producer ids below this were handed out (in blocks) and are never reused.
    next_producer_id: int = 0
    # Topics deleted from the metadata whose partition directories may still be
    # on disk (a crash interrupted the removal): the next start removes them.
    deleting_topic_ids: list[uuid.UUID] = field(default_factory=list)
    # Group id -> its group config overrides (Kafka names -> values); a group id
    # without overrides has no entry. Kept like topic configs: in the metadata.
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # ACL bindings (CreateAcls/DeleteAcls), in creation order.
    acls: list[AclBinding] = field(default_factory=list)
    # User -> mechanism -> salted credential (AlterUserScramCredentials).
    scram_credentials: ScramCredentials = field(default_factory=dict)
    # Client quota entity -> quota key -> value (AlterClientQuotas).
    client_quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    # Push subscription name -> its document (weir.broker.push.subscription's).
    push_subscriptions: dict[str, dict[str, Any]] = field(default_factory=dict)


class MetadataStore(Protocol):
    """Persistence of cluster metadata; embedded now, etcd-backed later."""

    def load(self) -> ClusterMetadata: ...

    def save(self, metadata: ClusterMetadata) -> None: ...


class MetadataCorruptError(Exception):
    pass


class MetadataMissingError(Exception):
    """The metadata document is gone but partition data is not: starting with
    empty metadata would treat every partition as unknown."""


class EmbeddedMetadataStore:
    """A single JSON document in the data directory, replaced atomically."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / METADATA_FILE_NAME

    @property
    def path(self) -> Path:
        return self._path

    def exists(self) -> bool:
        return self._path.exists()

    def load(self) -> ClusterMetadata:
        if not self._path.exists():
            metadata = ClusterMetadata(cluster_id=new_cluster_id())
            self.save(metadata)
            return metadata
        try:
            return metadata_from_json(self._path.read_bytes())
        except MetadataCorruptError as exc:
            raise MetadataCorruptError(f"{self._path}: {exc}") from exc

    def save(self, metadata: ClusterMetadata) -> None:
        temp_path = self._path.with_suffix(".tmp")
        with open(temp_path, "wb") as f:
            f.write(metadata_to_json(metadata, indent=1))
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp_path, self._path)
        _fsync_directory(self._path.parent)


def metadata_to_json(metadata: ClusterMetadata, *, indent: int | None = None) -> bytes:
    """The metadata document (the embedded store's file, the value of etcd's key)."""
    doc = {
        "format_version": METADATA_FORMAT_VERSION,
        "cluster_id": metadata.cluster_id,
        "topics": [t.to_json() for t in metadata.topics.values()],
        "next_producer_id": metadata.next_producer_id,
        "deleting_topic_ids": [str(i) for i in metadata.deleting_topic_ids],
        "group_configs": {g: dict(c) for g, c in metadata.group_configs.items()},
        "acls": acls_to_json(metadata.acls),
        "scram_credentials": scram_to_json(metadata.scram_credentials),
        "client_quotas": quotas_to_json(metadata.client_quotas),
        "push_subscriptions": {n: dict(d) for n, d in metadata.push_subscriptions.items()},
    }
    return json.dumps(doc, indent=indent, sort_keys=True).encode()


def metadata_from_json(value: bytes) -> ClusterMetadata:
    """Raises MetadataCorruptError for anything but a well-formed document."""
    try:
        doc = json.loads(value)
        topics = [TopicRecord.from_json(t) for t in doc["topics"]]
        return ClusterMetadata(
            cluster_id=str(doc["cluster_id"]),
            topics={t.name: t for t in topics},
            next_producer_id=int(doc.get("next_producer_id", 0)),
            deleting_topic_ids=[uuid.UUID(str(i)) for i in doc.get("deleting_topic_ids", [])],
            group_configs=_group_configs_from_json(doc.get("group_configs", {})),
            acls=acls_from_json(doc.get("acls", [])),
            scram_credentials=scram_from_json(doc.get("scram_credentials", {})),
            client_quotas=quotas_from_json(doc.get("client_quotas", [])),
            push_subscriptions=_push_subscriptions_from_json(doc.get("push_subscriptions", {})),
        )
    except (ValueError, KeyError, TypeError, AssertionError) as exc:
        raise MetadataCorruptError(str(exc)) from exc


def _group_configs_from_json(doc: object) -> dict[str, dict[str, str]]:
    assert isinstance(doc, dict)
    configs: dict[str, dict[str, str]] = {}
    for group_id, overrides in doc.items():
        assert isinstance(overrides, dict)
        configs[str(group_id)] = {str(k): str(v) for k, v in overrides.items()}
    return configs


def _push_subscriptions_from_json(doc: object) -> dict[str, dict[str, Any]]:
    assert isinstance(doc, dict)
    subscriptions: dict[str, dict[str, Any]] = {}
    for name, subscription in doc.items():
        assert isinstance(subscription, dict)
        subscriptions[str(name)] = dict(subscription)
    return subscriptions


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def new_cluster_id() -> str:
    # Kafka cluster ids are 22-character url-safe base64 UUIDs.
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
