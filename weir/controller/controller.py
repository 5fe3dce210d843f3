"""Topic decisions: validation, placement and persistence of topic metadata.

A plain state machine over a `MetadataStore`; it never touches sockets or logs.
The broker applies its decisions to the partition logs.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from weir.controller.client_quotas import (
    QuotaAlteration,
    QuotaEntity,
    QuotaOutcome,
    plan_alterations,
)
from weir.controller.errors import ControllerError
from weir.controller.metadata import ClusterMetadata, MetadataStore, TopicRecord
from weir.controller.partition_state import BrokerInfo, check_assignment, place_replicas
from weir.controller.security_state import (
    ScramCredentials,
    ScramDeletion,
    ScramOutcome,
    ScramUpsertion,
    add_bindings,
    delete_bindings,
    plan_scram_alteration,
)
from weir.format.errors import ErrorCode
from weir.security.acl import AclBinding
from weir.security.acl_filters import AclBindingFilter
from weir.security.scram import ScramCredential, ScramMechanism

TOPIC_NAME_LENGTH_MAX = 249
TOPIC_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9._-]+$")

# Internal topics (Kafka's Topic.INTERNAL_TOPICS): only the broker creates them,
# with its own settings, and writes to them; clients may read and describe them
# but never create, delete, configure, extend, truncate or produce to them.
# Every such rule in Weir tests this one set.
OFFSETS_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"
INTERNAL_TOPIC_NAMES = frozenset(
    {OFFSETS_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME, SHARE_GROUP_STATE_TOPIC_NAME}
)


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPIC_NAMES


@dataclass(frozen=True)
class TopicDefaults:
    partition_count: int = 1
    replication_factor: int = 1
    partitions_per_topic_max: int = 1000
    topics_max: int = 10_000


@dataclass(frozen=True)
class MetadataChange:
    """A checked change: the whole document to save, and what to do in memory
    once it is saved (see `Controller.save`)."""

    document: ClusterMetadata
    apply: Callable[[], None]


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise ControllerError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"illegal topic name {name!r}")
    if len(name) > TOPIC_NAME_LENGTH_MAX:
        raise ControllerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name is longer than {TOPIC_NAME_LENGTH_MAX} characters",
        )
    if not TOPIC_NAME_PATTERN.match(name):
        raise ControllerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_', '-'",
        )


PRODUCER_ID_MAX = 2**63 - 1

# Validates a topic's config overrides, raising ValueError with the reason when one is
# unknown or invalid. The broker passes the log's catalog (`LogConfig.from_overrides`):
# the controller decides with it but does not import the log.
TopicConfigCheck = Callable[[Mapping[str, str]], object]


class Controller:
    """Owns cluster metadata for one node (single-node: this node leads everything)."""

    def __init__(
        self,
        store: MetadataStore,
        node_id: int,
        defaults: TopicDefaults,
        *,
        check_topic_configs: TopicConfigCheck,
    ) -> None:
        self._store = store
        self._check_topic_configs = check_topic_configs
        # The live brokers, when this node is one of a cluster (set by the broker's
        # cluster member); a single node places every partition on itself.
        self.clustered = False
        self.live_brokers: Callable[[], Sequence[BrokerInfo]] = lambda: ()
        self.node_id = node_id
        self.defaults = defaults
        self.metadata: ClusterMetadata = store.load()
        self._topics_by_id = {t.topic_id: t for t in self.metadata.topics.values()}
        # Moves whenever a topic is created or deleted, so that readers of the
        # topic names (regex subscriptions) notice a change without comparing them.
        self.topic_names_version = 0
        # Called with every binding after the ACLs changed, whether this broker saved
        # the change or took another broker's document (the authorizer follows them).
        self.acl_listeners: list[Callable[[Sequence[AclBinding]], None]] = []
        # Called after the push subscriptions changed (saved here or taken from
        # another broker's document): the push deliveries follow them.
        self.push_listeners: list[Callable[[], None]] = []

    def replace_metadata(self, metadata: ClusterMetadata) -> None:
        """Take a newer document another broker of the cluster saved."""
        names_before = set(self.metadata.topics)
        acls_before = self.metadata.acls
        push_before = self.metadata.push_subscriptions
        self.metadata = metadata
        self._topics_by_id = {t.topic_id: t for t in metadata.topics.values()}
        if set(metadata.topics) != names_before:
            self.topic_names_version += 1
        if metadata.acls != acls_before:
            self._acls_changed()
        if metadata.push_subscriptions != push_before:
            self._push_changed()

    def _push_changed(self) -> None:
        for listener in self.push_listeners:
            listener()

    def _acls_changed(self) -> None:
        bindings = tuple(self.metadata.acls)
        for listener in self.acl_listeners:
            listener(bindings)

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    def topics(self) -> list[TopicRecord]:
        return list(self.metadata.topics.values())

    def topic(self, name: str) -> TopicRecord | None:
        return self.metadata.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRecord | None:
        return self._topics_by_id.get(topic_id)

    def plan_topic(
        self,
        name: str,
        partition_count: int,
        replication_factor: int,
        assignments: Sequence[Sequence[int]] = (),
        configs: Mapping[str, str] | None = None,
        *,
        internal: bool = False,
    ) -> TopicRecord:
        """Validate a new topic and return its record without persisting it.
        Only the broker's own code plans an internal topic (`internal=True`)."""
        validate_topic_name(name)
        assert not internal or is_internal_topic(name), f"{name} is not an internal topic"
        if is_internal_topic(name) and not internal:
            raise ControllerError(
                ErrorCode.INVALID_REQUEST,
                f"Creation of internal topic {name} is prohibited: the broker creates it.",
            )
        if name in self.metadata.topics:
            raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if len(self.metadata.topics) >= self.defaults.topics_max:
            raise ControllerError(
                ErrorCode.POLICY_VIOLATION, f"the broker holds {self.defaults.topics_max} topics"
            )
        if assignments:
            if replication_factor != -1:
                raise ControllerError(
                    ErrorCode.INVALID_REQUEST,
                    "both a replica assignment and a replication factor were given",
                )
            partition_count = self._check_assignments(assignments)
        elif partition_count == -1:
            partition_count = self.defaults.partition_count
        self._check_partition_count(partition_count)
        if replication_factor == -1:
            replication_factor = (
                len(assignments[0]) if assignments else self.defaults.replication_factor
            )
        overrides = dict(configs or {})
        self._check_configs(overrides)
        return TopicRecord(
            name=name,
            topic_id=uuid.uuid4(),
            partition_count=partition_count,
            replication_factor=replication_factor,
            configs=overrides,
            is_internal=internal,
            assignment=self._assignment(partition_count, replication_factor, assignments),
        )

    def _assignment(
        self, partition_count: int, replication_factor: int, given: Sequence[Sequence[int]]
    ) -> list[list[int]]:
        """Replicas of new partitions: as given (checked), else placed over the live
        brokers. A single node's topics record none (it holds every partition)."""
        brokers = self.live_brokers()
        if not self.clustered:
            if replication_factor != 1:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"replication factor {replication_factor} is larger than the 1 available broker"
                    if replication_factor > 1
                    else f"replication factor must be at least 1, not {replication_factor}",
                )
            return []
        if given:
            return [list(r) for r in given]
        return place_replicas(
            partition_count, replication_factor, brokers, replica_counts=self.replica_counts()
        )

    def replica_counts(self) -> dict[int, int]:
        """Partition replicas each broker holds, over every topic."""
        counts: dict[int, int] = {}
        for topic in self.metadata.topics.values():
            for replicas in topic.assignment:
                for node_id in replicas:
                    counts[node_id] = counts.get(node_id, 0) + 1
        return counts

    # Every change is saved before it is applied in memory: when the store fails
    # (disk full), nothing changed, and the caller answers with the error. A
    # change is staged (checked, its document built) and later saved and applied,
    # so the broker can save on a worker thread and apply on its own; it must
    # apply each change before staging the next one (one writer at a time).

    def _staged(
        self,
        apply: Callable[[], None],
        topics: dict[str, TopicRecord] | None = None,
        next_producer_id: int | None = None,
        deleting_topic_ids: list[uuid.UUID] | None = None,
        group_configs: dict[str, dict[str, str]] | None = None,
        acls: list[AclBinding] | None = None,
        scram_credentials: ScramCredentials | None = None,
        client_quotas: dict[QuotaEntity, dict[str, float]] | None = None,
        push_subscriptions: dict[str, dict[str, Any]] | None = None,
    ) -> MetadataChange:
        current = self.metadata
        document = ClusterMetadata(
            cluster_id=current.cluster_id,
            topics=current.topics if topics is None else topics,
            next_producer_id=(
                current.next_producer_id if next_producer_id is None else next_producer_id
            ),
            deleting_topic_ids=(
                current.deleting_topic_ids if deleting_topic_ids is None else deleting_topic_ids
            ),
            group_configs=current.group_configs if group_configs is None else group_configs,
            acls=current.acls if acls is None else acls,
            scram_credentials=(
                current.scram_credentials if scram_credentials is None else scram_credentials
            ),
            client_quotas=current.client_quotas if client_quotas is None else client_quotas,
            push_subscriptions=(
                current.push_subscriptions if push_subscriptions is None else push_subscriptions
            ),
        )
        return MetadataChange(document, apply)

    def save(self, change: MetadataChange) -> None:
        """Persist a staged change (any thread; the store is only written here)."""
        self._store.save(change.document)

    def commit(self, change: MetadataChange) -> None:
        """Save and apply on the calling thread (startup and tests)."""
        self.save(change)
        change.apply()

    def stage_add_topic(self, record: TopicRecord) -> MetadataChange:
        if record.name in self.metadata.topics:
            raise ControllerError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {record.name!r} already exists"
            )

        def apply() -> None:
            self.metadata.topics[record.name] = record
            self._topics_by_id[record.topic_id] = record
            self.topic_names_version += 1

        return self._staged(apply, topics={**self.metadata.topics, record.name: record})

    def add_topic(self, record: TopicRecord) -> None:
        self.commit(self.stage_add_topic(record))

    def stage_allocate_producer_ids(self, count: int) -> tuple[MetadataChange, int]:
        """The change reserving `count` producer ids, and the first of them."""
        assert count > 0
        first = self.metadata.next_producer_id
        if first + count > PRODUCER_ID_MAX:
            raise ControllerError(ErrorCode.UNKNOWN_SERVER_ERROR, "producer ids are exhausted")

        def apply() -> None:
            self.metadata.next_producer_id = first + count

        return self._staged(apply, next_producer_id=first + count), first

    def allocate_producer_ids(self, count: int) -> int:
        """Reserve `count` producer ids, persisted before they are used; returns
        the first. Ids are never handed out twice, across restarts too."""
        change, first = self.stage_allocate_producer_ids(count)
        self.commit(change)
        return first

    def stage_remove_topic(self, name: str) -> tuple[MetadataChange, TopicRecord]:
        """Remove the topic from the metadata and remember its id until
        `forget_deletion`: partition directories of a topic being deleted are
        removed at the next start if a crash leaves them behind."""
        record = self._require(name)
        topics = {n: t for n, t in self.metadata.topics.items() if n != name}
        deleting = [*self.metadata.deleting_topic_ids, record.topic_id]

        def apply() -> None:
            del self.metadata.topics[name]
            self._topics_by_id.pop(record.topic_id, None)
            self.topic_names_version += 1
            self.metadata.deleting_topic_ids = deleting

        return self._staged(apply, topics=topics, deleting_topic_ids=deleting), record

    def remove_topic(self, name: str) -> TopicRecord:
        change, record = self.stage_remove_topic(name)
        self.commit(change)
        return record

    @property
    def deleting_topic_ids(self) -> list[uuid.UUID]:
        return list(self.metadata.deleting_topic_ids)

    def stage_forget_deletions(self, topic_ids: Sequence[uuid.UUID]) -> MetadataChange | None:
        """The partition directories of these deleted topics are gone (None: no change)."""
        remaining = [i for i in self.metadata.deleting_topic_ids if i not in set(topic_ids)]
        if remaining == self.metadata.deleting_topic_ids:
            return None

        def apply() -> None:
            self.metadata.deleting_topic_ids = remaining

        return self._staged(apply, deleting_topic_ids=remaining)

    def forget_deletions(self, topic_ids: Sequence[uuid.UUID]) -> None:
        change = self.stage_forget_deletions(topic_ids)
        if change is not None:
            self.commit(change)

    def plan_partition_increase(
        self, name: str, count: int, assignments: Sequence[Sequence[int]] = ()
    ) -> TopicRecord:
        record = self._require(name)
        if count <= record.partition_count:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {record.partition_count} partitions; "
                f"the new count must be larger, not {count}",
            )
        self._check_partition_count(count)
        if assignments:
            if len(assignments) != count - record.partition_count:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "assignments must name exactly the new partitions",
                )
            self._check_assignments(assignments)
        return record

    def stage_increase_partitions(
        self, name: str, count: int, assignments: Sequence[Sequence[int]] = ()
    ) -> MetadataChange:
        record = self._require(name)
        added_epochs = [0] * (count - record.partition_count)
        added_replicas: list[list[int]] = []
        if self.clustered:
            added_replicas = [list(r) for r in assignments] or place_replicas(
                count - record.partition_count,
                record.replication_factor,
                self.live_brokers(),
                first_partition=record.partition_count,
                replica_counts=self.replica_counts(),
            )
        grown = replace(
            record,
            partition_count=count,
            leader_epochs=[*record.leader_epochs, *added_epochs],
            assignment=[*record.assignment, *added_replicas],
        )

        def apply() -> None:
            record.leader_epochs.extend(added_epochs)
            record.assignment.extend(added_replicas)
            record.partition_count = count

        return self._staged(apply, topics={**self.metadata.topics, name: grown})

    def increase_partitions(self, name: str, count: int) -> None:
        self.commit(self.stage_increase_partitions(name, count))

    def stage_set_topic_configs(self, name: str, configs: Mapping[str, str]) -> MetadataChange:
        record = self._require(name)
        self._check_configs(configs)
        changed = replace(record, configs=dict(configs))

        def apply() -> None:
            record.configs = dict(configs)

        return self._staged(apply, topics={**self.metadata.topics, name: changed})

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self.commit(self.stage_set_topic_configs(name, configs))

    def stage_reassign(self, name: str, targets: Mapping[int, list[int] | None]) -> MetadataChange:
        """Start (or with None, cancel) moving partitions' replicas: the assignment
        becomes the union of the original and target replicas until the controller
        finishes the move (`stage_finish_reassignment`) once the targets are in sync."""
        record = self._require(name)
        assignment = [list(r) for r in record.assignment]
        moves = dict(record.reassignments)
        for index, target in targets.items():
            original = moves[index][1] if index in moves else list(assignment[index])
            if target is None or target == original:
                assignment[index] = original
                moves.pop(index, None)
            else:
                assignment[index] = original + [r for r in target if r not in original]
                moves[index] = (list(target), original)
        changed = replace(record, assignment=assignment, reassignments=moves)
        return self._replace_topic(record, changed)

    def stage_finish_reassignment(self, name: str, index: int) -> MetadataChange | None:
        record = self.metadata.topics.get(name)
        if record is None or index not in record.reassignments:
            return None
        target, _ = record.reassignments[index]
        assignment = [list(r) for r in record.assignment]
        assignment[index] = list(target)
        moves = {i: m for i, m in record.reassignments.items() if i != index}
        changed = replace(record, assignment=assignment, reassignments=moves)
        return self._replace_topic(record, changed)

    def _replace_topic(self, record: TopicRecord, changed: TopicRecord) -> MetadataChange:
        def apply() -> None:
            record.assignment = changed.assignment
            record.reassignments = changed.reassignments

        return self._staged(apply, topics={**self.metadata.topics, record.name: changed})

    def group_configs(self, group_id: str) -> dict[str, str]:
        """The group's config overrides (empty when it has none)."""
        return dict(self.metadata.group_configs.get(group_id, {}))

    def stage_set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> MetadataChange:
        """Replace the group's config overrides (the broker validated them against
        its group settings); an empty mapping removes the entry."""
        updated = dict(self.metadata.group_configs)
        if configs:
            updated[group_id] = dict(configs)
        else:
            updated.pop(group_id, None)

        def apply() -> None:
            self.metadata.group_configs = updated

        return self._staged(apply, group_configs=updated)

    # -- push subscriptions (weir.broker.push) ---------------------------------------

    def push_subscriptions(self) -> dict[str, dict[str, Any]]:
        return dict(self.metadata.push_subscriptions)

    def stage_set_push_subscription(
        self,
        name: str,
        document: Mapping[str, Any] | None,
        group_id: str,
        group_configs: Mapping[str, str] | None,
    ) -> MetadataChange:
        """Store (None: remove) the subscription `name`, and set (None: leave; an empty
        mapping removes) its share group's config overrides in the same change."""
        subscriptions = dict(self.metadata.push_subscriptions)
        if document is None:
            subscriptions.pop(name, None)
        else:
            subscriptions[name] = dict(document)
        configs = dict(self.metadata.group_configs)
        if group_configs is not None:
            if group_configs:
                configs[group_id] = dict(group_configs)
            else:
                configs.pop(group_id, None)

        def apply() -> None:
            self.metadata.push_subscriptions = subscriptions
            self.metadata.group_configs = configs
            self._push_changed()

        return self._staged(apply, group_configs=configs, push_subscriptions=subscriptions)

    # -- security state: ACLs, SCRAM credentials, client quotas ----------------------

    def acl_bindings(self) -> list[AclBinding]:
        return list(self.metadata.acls)

    def stage_create_acls(self, bindings: Sequence[AclBinding]) -> MetadataChange | None:
        """Add the (validated) bindings; None when every one exists already."""
        updated = add_bindings(self.metadata.acls, bindings)
        if len(updated) == len(self.metadata.acls):
            return None

        def apply() -> None:
            self.metadata.acls = updated
            self._acls_changed()

        return self._staged(apply, acls=updated)

    def stage_delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> tuple[MetadataChange | None, list[list[AclBinding]]]:
        """Remove every binding a filter matches; the bindings each filter matched
        (None for the change when nothing matched)."""
        remaining, matched = delete_bindings(self.metadata.acls, filters)
        if len(remaining) == len(self.metadata.acls):
            return None, matched

        def apply() -> None:
            self.metadata.acls = remaining
            self._acls_changed()

        return self._staged(apply, acls=remaining), matched

    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self.metadata.scram_credentials.get(user, {}).get(mechanism)

    def scram_credentials(self) -> dict[str, dict[ScramMechanism, ScramCredential]]:
        return {user: dict(c) for user, c in self.metadata.scram_credentials.items()}

    def stage_alter_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> tuple[MetadataChange | None, list[ScramOutcome]]:
        """Kafka's checks and the change (None when every alteration was refused)."""
        updated, outcomes = plan_scram_alteration(
            self.metadata.scram_credentials, deletions, upsertions
        )
        if all(outcome.error_code != ErrorCode.NONE for outcome in outcomes):
            return None, outcomes

        def apply() -> None:
            self.metadata.scram_credentials = updated

        return self._staged(apply, scram_credentials=updated), outcomes

    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        return {entity: dict(q) for entity, q in self.metadata.client_quotas.items()}

    def stage_alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration]
    ) -> tuple[MetadataChange | None, list[QuotaOutcome]]:
        """Kafka's checks and the change (None when nothing changes)."""
        updated, outcomes = plan_alterations(self.metadata.client_quotas, alterations)
        if updated == self.metadata.client_quotas:
            return None, outcomes

        def apply() -> None:
            self.metadata.client_quotas = updated

        return self._staged(apply, client_quotas=updated), outcomes

    def _check_configs(self, configs: Mapping[str, str]) -> None:
        try:
            self._check_topic_configs(configs)
        except ValueError as exc:
            raise ControllerError(ErrorCode.INVALID_CONFIG, str(exc)) from exc

    def _require(self, name: str) -> TopicRecord:
        record = self.metadata.topics.get(name)
        if record is None:
            raise ControllerError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
            )
        return record

    def _check_partition_count(self, count: int) -> None:
        if count < 1:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS, f"partition count must be at least 1, not {count}"
            )
        if count > self.defaults.partitions_per_topic_max:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS,
                f"partition count {count} exceeds the limit of "
                f"{self.defaults.partitions_per_topic_max}",
            )

    def _check_assignments(self, assignments: Sequence[Sequence[int]]) -> int:
        if self.clustered:
            known = [b.node_id for b in self.live_brokers()]
            for replicas in assignments:
                check_assignment(replicas, known)
            if len({len(r) for r in assignments}) > 1:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "every partition must have the same number of replicas",
                )
            return len(assignments)
        for replicas in assignments:
            if list(replicas) != [self.node_id]:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"replica assignment {list(replicas)} names brokers other than "
                    f"the only broker {self.node_id}",
                )
        return len(assignments)
