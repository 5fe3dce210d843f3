"""A share group's effective settings (KIP-932, KIP-1191), as the share-group code
of the broker reads them: the group's configs (`share.*`,
`errors.deadletterqueue.*`, set with IncrementalAlterConfigs on the GROUP
resource and stored in the cluster metadata) over the broker's `group.share.*`
settings. Parsing and validation are `weir.groupcoord.group_configs`'."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from weir.broker.broker import Broker
from weir.groupcoord.group_configs import (
    AutoOffsetReset,
    ShareGroupConfig,
    dead_letter_topic_refusal,
    share_group_config_of,
)

__all__ = [
    "AutoOffsetReset",
    "ShareBrokerLimits",
    "ShareGroupConfig",
    "dead_letter_refusal",
    "share_broker_limits",
    "share_group_config",
]

log = logging.getLogger(__name__)


def share_group_config(broker: Broker, group_id: str) -> ShareGroupConfig:
    """The group's overrides over the broker's settings. A stored override that no
    longer parses is the broker's default, and one outside the broker's current
    bounds is capped to the nearest bound (as Kafka 4.4 does); each is logged as a
    warning."""
    overrides = broker.controller.group_configs(group_id)
    config, warnings = share_group_config_of(group_id, overrides, broker.config.group_settings())
    for warning in warnings:
        log.warning("share group %r: %s", group_id, warning)
    return config


@dataclass(frozen=True)
class ShareBrokerLimits:
    """The broker-wide share-group settings no group can override."""

    group_members_max: int  # group.share.max.size
    share_sessions_max: int  # group.share.max.share.sessions
    dead_letter_topic_prefix: str  # errors.deadletterqueue.topic.name.prefix ("": any)
    dead_letter_auto_create_topics: bool  # errors.deadletterqueue.auto.create.topics.enable


def share_broker_limits(broker: Broker) -> ShareBrokerLimits:
    settings = broker.config.group_settings()
    return ShareBrokerLimits(
        group_members_max=settings.share_group_max_size,
        share_sessions_max=settings.share_sessions_max,
        dead_letter_topic_prefix=settings.dead_letter_topic_prefix,
        dead_letter_auto_create_topics=settings.dead_letter_auto_create_topics,
    )


def dead_letter_refusal(broker: Broker, group_id: str, topic: str) -> str | None:
    """Why a dead letter of `group_id` may not go to `topic` (the group's
    `errors.deadletterqueue.topic.name`), in Kafka's words; None when it may: the
    name is not empty, not internal, and starts with the broker's prefix."""
    prefix = broker.config.group_settings().dead_letter_topic_prefix
    return dead_letter_topic_refusal(group_id, topic, prefix)
