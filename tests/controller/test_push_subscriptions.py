"""Push subscriptions in the cluster metadata (weir.broker.push stores them)."""

from __future__ import annotations

from pathlib import Path

from weir.controller.controller import Controller, TopicDefaults
from weir.controller.metadata import (
    ClusterMetadata,
    EmbeddedMetadataStore,
    metadata_from_json,
    metadata_to_json,
)
from weir.log.config import LogConfig


def controller_at(path: Path) -> Controller:
    return Controller(
        EmbeddedMetadataStore(path),
        node_id=1,
        defaults=TopicDefaults(),
        check_topic_configs=LogConfig.from_overrides,
    )


def test_a_subscription_and_its_groups_configs_are_stored_in_one_change(tmp_path: Path) -> None:
    controller = controller_at(tmp_path)
    notified: list[bool] = []
    controller.push_listeners.append(lambda: notified.append(True))
    document = {"name": "hook", "topic": "t", "secret": "s"}
    change = controller.stage_set_push_subscription(
        "hook", document, "weir-push-hook", {"share.delivery.count.limit": "3"}
    )
    controller.commit(change)
    assert notified == [True]
    reloaded = controller_at(tmp_path)
    assert reloaded.push_subscriptions() == {"hook": document}
    assert reloaded.group_configs("weir-push-hook") == {"share.delivery.count.limit": "3"}

    controller.commit(controller.stage_set_push_subscription("hook", None, "weir-push-hook", {}))
    reloaded = controller_at(tmp_path)
    assert reloaded.push_subscriptions() == {}
    assert reloaded.group_configs("weir-push-hook") == {}


def test_another_brokers_document_notifies_the_push_listeners(tmp_path: Path) -> None:
    controller = controller_at(tmp_path)
    notified: list[bool] = []
    controller.push_listeners.append(lambda: notified.append(True))
    metadata = ClusterMetadata(
        cluster_id=controller.cluster_id, push_subscriptions={"a": {"name": "a"}}
    )
    controller.replace_metadata(metadata_from_json(metadata_to_json(metadata)))
    assert notified == [True]
    controller.replace_metadata(metadata_from_json(metadata_to_json(metadata)))
    assert notified == [True]  # nothing changed
