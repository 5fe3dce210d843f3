from pathlib import Path

import pytest

from weir.controller.controller import (
    INTERNAL_TOPIC_NAMES,
    Controller,
    ControllerError,
    TopicDefaults,
)
from weir.controller.metadata import ClusterMetadata, EmbeddedMetadataStore
from weir.format.errors import ErrorCode
from weir.log.config import LogConfig


def make_controller(data_dir: Path) -> Controller:
    return Controller(
        EmbeddedMetadataStore(data_dir),
        node_id=1,
        defaults=TopicDefaults(),
        check_topic_configs=LogConfig.from_overrides,
    )


def test_created_topic_survives_reload_with_same_id(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    record = controller.plan_topic("orders", 3, 1, configs={"retention.ms": "1000"})
    controller.add_topic(record)
    reloaded = make_controller(tmp_path)
    again = reloaded.topic("orders")
    assert again is not None
    assert again.topic_id == record.topic_id
    assert again.partition_count == 3
    assert again.configs == {"retention.ms": "1000"}
    assert reloaded.cluster_id == controller.cluster_id
    assert reloaded.topic_by_id(record.topic_id) is again


@pytest.mark.parametrize(
    ("name", "partitions", "replication", "configs", "error"),
    [
        ("bad name", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("x" * 250, 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("t", 0, 1, {}, ErrorCode.INVALID_PARTITIONS),
        ("t", 100_000, 1, {}, ErrorCode.INVALID_PARTITIONS),
        ("t", 1, 3, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("t", 1, 0, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("t", 1, 1, {"no.such.config": "1"}, ErrorCode.INVALID_CONFIG),
        ("t", 1, 1, {"retention.ms": "soon"}, ErrorCode.INVALID_CONFIG),
    ],
)
def test_invalid_topic_is_rejected_with_kafka_error(
    tmp_path: Path,
    name: str,
    partitions: int,
    replication: int,
    configs: dict[str, str],
    error: ErrorCode,
) -> None:
    controller = make_controller(tmp_path)
    with pytest.raises(ControllerError) as raised:
        controller.plan_topic(name, partitions, replication, configs=configs)
    assert raised.value.error_code == error


def test_duplicate_topic_is_rejected(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    controller.add_topic(controller.plan_topic("t", 1, 1))
    with pytest.raises(ControllerError) as raised:
        controller.plan_topic("t", 1, 1)
    assert raised.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_defaults_apply_when_counts_are_minus_one(tmp_path: Path) -> None:
    controller = Controller(
        EmbeddedMetadataStore(tmp_path),
        node_id=1,
        defaults=TopicDefaults(partition_count=4),
        check_topic_configs=LogConfig.from_overrides,
    )
    record = controller.plan_topic("t", -1, -1)
    assert record.partition_count == 4
    assert record.replication_factor == 1


def test_partition_count_only_grows(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    controller.add_topic(controller.plan_topic("t", 2, 1))
    with pytest.raises(ControllerError) as raised:
        controller.plan_partition_increase("t", 2)
    assert raised.value.error_code == ErrorCode.INVALID_PARTITIONS
    controller.plan_partition_increase("t", 5)
    controller.increase_partitions("t", 5)
    record = make_controller(tmp_path).topic("t")
    assert record is not None
    assert record.partition_count == 5
    assert record.leader_epochs == [0] * 5


def test_replica_assignment_naming_other_brokers_is_rejected(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    with pytest.raises(ControllerError) as raised:
        controller.plan_topic("t", -1, -1, assignments=[[1], [2]])
    assert raised.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert controller.plan_topic("t", -1, -1, assignments=[[1], [1]]).partition_count == 2


class FailingStore:
    """A store whose saves fail (a full disk) after `saves_ok` successes."""

    def __init__(self, saves_ok: int) -> None:
        self.saves_ok = saves_ok
        self.saved: list[ClusterMetadata] = []

    def load(self) -> ClusterMetadata:
        return ClusterMetadata(cluster_id="c")

    def save(self, metadata: ClusterMetadata) -> None:
        if len(self.saved) >= self.saves_ok:
            raise OSError(28, "No space left on device")
        self.saved.append(metadata)


def test_a_change_the_store_cannot_save_leaves_the_metadata_unchanged() -> None:
    store = FailingStore(saves_ok=1)
    controller = Controller(
        store, node_id=1, defaults=TopicDefaults(), check_topic_configs=LogConfig.from_overrides
    )
    controller.add_topic(controller.plan_topic("kept", 2, 1))
    record = controller.plan_topic("never", 1, 1)
    with pytest.raises(OSError):
        controller.add_topic(record)
    with pytest.raises(OSError):
        controller.remove_topic("kept")
    with pytest.raises(OSError):
        controller.increase_partitions("kept", 4)
    with pytest.raises(OSError):
        controller.set_topic_configs("kept", {"retention.ms": "1000"})
    with pytest.raises(OSError):
        controller.allocate_producer_ids(1000)
    assert [t.name for t in controller.topics()] == ["kept"]
    kept = controller.topic("kept")
    assert kept is not None and (kept.partition_count, kept.configs) == (2, {})
    assert controller.metadata.next_producer_id == 0
    assert controller.deleting_topic_ids == []


def test_a_deleted_topic_is_remembered_until_its_files_are_gone() -> None:
    store = FailingStore(saves_ok=10)
    controller = Controller(
        store, node_id=1, defaults=TopicDefaults(), check_topic_configs=LogConfig.from_overrides
    )
    record = controller.plan_topic("gone", 1, 1)
    controller.add_topic(record)
    controller.remove_topic("gone")
    assert store.saved[-1].deleting_topic_ids == [record.topic_id]
    controller.forget_deletions([record.topic_id])
    assert store.saved[-1].deleting_topic_ids == []


@pytest.mark.parametrize("name", sorted(INTERNAL_TOPIC_NAMES))
def test_only_the_broker_plans_an_internal_topic(tmp_path: Path, name: str) -> None:
    controller = make_controller(tmp_path)
    with pytest.raises(ControllerError) as refused:
        controller.plan_topic(name, 1, 1)
    assert refused.value.error_code == ErrorCode.INVALID_REQUEST
    assert "internal topic" in refused.value.message
    planned = controller.plan_topic(name, 3, 1, internal=True)
    assert planned.is_internal and planned.partition_count == 3
    assert not controller.plan_topic("orders", 1, 1).is_internal


def test_group_configs_survive_reload_and_an_empty_set_removes_them(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    controller.commit(
        controller.stage_set_group_configs("g1", {"consumer.session.timeout.ms": "50000"})
    )
    controller.commit(
        controller.stage_set_group_configs("g2", {"consumer.heartbeat.interval.ms": "6000"})
    )
    controller.commit(controller.stage_set_group_configs("g2", {}))
    reloaded = make_controller(tmp_path)
    assert reloaded.group_configs("g1") == {"consumer.session.timeout.ms": "50000"}
    assert reloaded.group_configs("g2") == {}
    assert reloaded.metadata.group_configs == {"g1": {"consumer.session.timeout.ms": "50000"}}


def test_a_group_config_change_is_applied_only_after_it_is_saved(tmp_path: Path) -> None:
    controller = make_controller(tmp_path)
    change = controller.stage_set_group_configs("g", {"consumer.session.timeout.ms": "50000"})
    assert controller.group_configs("g") == {}
    controller.save(change)
    assert controller.group_configs("g") == {}
    change.apply()
    assert controller.group_configs("g") == {"consumer.session.timeout.ms": "50000"}


def test_topic_names_version_moves_only_when_a_topic_is_created_or_deleted() -> None:
    store = FailingStore(saves_ok=4)
    controller = Controller(
        store, node_id=1, defaults=TopicDefaults(), check_topic_configs=LogConfig.from_overrides
    )
    start = controller.topic_names_version
    controller.add_topic(controller.plan_topic("t", 1, 1))
    created = controller.topic_names_version
    assert created != start
    controller.increase_partitions("t", 2)
    controller.set_topic_configs("t", {"retention.ms": "1000"})
    assert controller.topic_names_version == created
    controller.remove_topic("t")
    deleted = controller.topic_names_version
    assert deleted != created
    with pytest.raises(OSError):  # the store is full: nothing changed, nor the version
        controller.add_topic(controller.plan_topic("never", 1, 1))
    assert controller.topic_names_version == deleted
