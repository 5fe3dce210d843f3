"""The configs a DescribeConfigs request for resource type BROKER reports.

Weir's broker settings are static: they come from flags, `WEIR_*` variables or
the TOML file at startup (`weir.broker.config`) and no request changes them, so
every entry here is read-only. Each entry carries Kafka's name, its config type
and where its value comes from:

- `STATIC_BROKER_CONFIG` (4) for what identifies this node (`node.id`,
  `log.dirs`, `listeners`, ...) and for settings that differ from Weir's default;
- `DEFAULT_CONFIG` (5) for everything left at its default.

Kafka's broker-level defaults for topic configs (`log.retention.ms`,
`log.segment.bytes`, `message.max.bytes`, ...) are listed too, named by
`TOPIC_CONFIG_BROKER_SYNONYMS`; Weir has no broker-level overrides of topic
configs, so they always hold the topic catalog's defaults. They are what a
topic config's synonyms name in DescribeConfigs for a topic.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from weir.broker.config import BrokerConfig, HostPort
from weir.log.config import TOPIC_CONFIGS, ConfigType


class ConfigSource(enum.IntEnum):
    """DescribeConfigs `config_source` (KIP-226)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


class KafkaConfigType(enum.IntEnum):
    """DescribeConfigs `config_type` (v3+, KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


CONFIG_TYPE_CODES: dict[ConfigType, KafkaConfigType] = {
    ConfigType.BOOLEAN: KafkaConfigType.BOOLEAN,
    ConfigType.STRING: KafkaConfigType.STRING,
    ConfigType.INT: KafkaConfigType.INT,
    ConfigType.LONG: KafkaConfigType.LONG,
    ConfigType.DOUBLE: KafkaConfigType.DOUBLE,
    ConfigType.LIST: KafkaConfigType.LIST,
}

# Topic config -> the broker config that holds its cluster-wide default
# (Kafka's ServerTopicConfigSynonyms; the first, highest-priority synonym).
# Topic configs missing here have no broker-level default.
TOPIC_CONFIG_BROKER_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}


@dataclass(frozen=True)
class BrokerConfigEntry:
    """One broker config as DescribeConfigs reports it."""

    name: str
    value: str | None
    config_type: KafkaConfigType
    source: ConfigSource
    doc: str
    default: str | None = None  # Weir's default, reported as a DEFAULT_CONFIG synonym
    read_only: bool = True
    is_sensitive: bool = False

    def synonyms(self) -> list[tuple[str, str | None, ConfigSource]]:
        """(name, value, source) from the highest priority down, as Kafka lists them."""
        found = [(self.name, self.value, self.source)]
        if self.source != ConfigSource.DEFAULT_CONFIG and self.default is not None:
            found.append((self.name, self.default, ConfigSource.DEFAULT_CONFIG))
        return found


def listener_text(address: HostPort) -> str:
    host = f"[{address.host}]" if ":" in address.host else address.host
    return f"PLAINTEXT://{host}:{address.port}"


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


_DEFAULTS = BrokerConfig()


@dataclass(frozen=True)
class _Setting:
    """A broker config read from `BrokerConfig`: static when it differs from Weir's
    default (or always, for what identifies the node)."""

    name: str
    config_type: KafkaConfigType
    read: Callable[[BrokerConfig], Any]
    doc: str
    always_static: bool = False

    def entry(self, config: BrokerConfig) -> BrokerConfigEntry:
        value = self.read(config)
        default = self.read(_DEFAULTS)
        text = _format(value)
        default_text = _format(default)
        static = self.always_static or value != default
        return BrokerConfigEntry(
            name=self.name,
            value=text,
            config_type=self.config_type,
            source=ConfigSource.STATIC_BROKER_CONFIG if static else ConfigSource.DEFAULT_CONFIG,
            doc=self.doc,
            default=None if self.always_static else default_text,
        )


def _format(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return _bool_text(value)
    return str(value)


_I, _L, _S, _B = (
    KafkaConfigType.INT,
    KafkaConfigType.LONG,
    KafkaConfigType.STRING,
    KafkaConfigType.BOOLEAN,
)

_SETTINGS: tuple[_Setting, ...] = (
    _Setting("node.id", _I, lambda c: c.node_id,
             "The id of this node (--node-id).", always_static=True),
    _Setting("broker.id", _I, lambda c: c.node_id,
             "The id of this broker; the same as node.id.", always_static=True),
    _Setting("log.dirs", _S, lambda c: str(c.data_dir),
             "The directory holding partition logs and metadata (--data-dir).",
             always_static=True),
    _Setting("listeners", _S, lambda c: listener_text(c.kafka_listen),
             "The address Kafka clients connect to (--kafka-listen).", always_static=True),
    _Setting("advertised.listeners", _S, lambda c: listener_text(c.advertised),
             "The address given to clients in metadata (--kafka-advertise; defaults to "
             "the listener).", always_static=True),
    _Setting("num.partitions", _I, lambda c: c.default_partition_count,
             "Partitions of a topic created without a partition count."),
    _Setting("auto.create.topics.enable", _B, lambda c: c.auto_create_topics,
             "Whether a Metadata request for an unknown topic creates it."),
    _Setting("log.retention.check.interval.ms", _L, lambda c: c.retention_check_interval_ms,
             "How often retention deletes old segments."),
    _Setting("socket.request.max.bytes", _I, lambda c: c.limits.frame_bytes_max,
             "The largest request frame accepted, in bytes."),
    _Setting("max.connections", _I, lambda c: c.limits.connections_max,
             "The most client connections served at once."),
    _Setting("fetch.max.bytes", _I, lambda c: c.limits.fetch_response_bytes_max,
             "The most record bytes returned by one Fetch response."),
    _Setting("group.consumer.session.timeout.ms", _I, lambda c: c.group_consumer_session_timeout_ms,
             "KIP-848 members are fenced after this long without a heartbeat (a group's "
             "consumer.session.timeout.ms overrides it)."),
    _Setting("group.consumer.heartbeat.interval.ms", _I,
             lambda c: c.group_consumer_heartbeat_interval_ms,
             "How often KIP-848 members heartbeat (a group's consumer.heartbeat.interval.ms "
             "overrides it)."),
    _Setting("group.consumer.min.session.timeout.ms", _I,
             lambda c: c.group_consumer_min_session_timeout_ms,
             "The lowest consumer session timeout a group may be given."),
    _Setting("group.consumer.max.session.timeout.ms", _I,
             lambda c: c.group_consumer_max_session_timeout_ms,
             "The highest consumer session timeout a group may be given."),
    _Setting("group.consumer.min.heartbeat.interval.ms", _I,
             lambda c: c.group_consumer_min_heartbeat_interval_ms,
             "The lowest consumer heartbeat interval a group may be given."),
    _Setting("group.consumer.max.heartbeat.interval.ms", _I,
             lambda c: c.group_consumer_max_heartbeat_interval_ms,
             "The highest consumer heartbeat interval a group may be given."),
    *(
        _Setting(kafka_name, _I, attrgetter(field), doc)
        for kafka_name, field, doc in (
            ("group.share.record.lock.duration.ms", "group_share_record_lock_duration_ms",
             "How long a record delivered to a share group stays acquired (a group's "
             "share.record.lock.duration.ms overrides it)."),
            ("group.share.min.record.lock.duration.ms", "group_share_min_record_lock_duration_ms",
             "The lowest record lock duration a share group may be given."),
            ("group.share.max.record.lock.duration.ms", "group_share_max_record_lock_duration_ms",
             "The highest record lock duration a share group may be given."),
            ("group.share.delivery.count.limit", "group_share_delivery_count_limit",
             "Deliveries of a record to a share group before it is archived (a group's "
             "share.delivery.count.limit overrides it)."),
            ("group.share.min.delivery.count.limit", "group_share_min_delivery_count_limit",
             "The lowest delivery count limit a share group may be given."),
            ("group.share.max.delivery.count.limit", "group_share_max_delivery_count_limit",
             "The highest delivery count limit a share group may be given."),
            ("group.share.partition.max.record.locks", "group_share_partition_max_record_locks",
             "Records in flight per share partition (a group's "
             "share.partition.max.record.locks overrides it)."),
            ("group.share.min.partition.max.record.locks",
             "group_share_min_partition_max_record_locks",
             "The lowest in-flight record limit a share group may be given."),
            ("group.share.max.partition.max.record.locks",
             "group_share_max_partition_max_record_locks",
             "The highest in-flight record limit a share group may be given."),
            ("group.share.session.timeout.ms", "group_share_session_timeout_ms",
             "Share-group members are fenced after this long without a heartbeat."),
            ("group.share.min.session.timeout.ms", "group_share_min_session_timeout_ms",
             "The lowest share session timeout a group may be given."),
            ("group.share.max.session.timeout.ms", "group_share_max_session_timeout_ms",
             "The highest share session timeout a group may be given."),
            ("group.share.heartbeat.interval.ms", "group_share_heartbeat_interval_ms",
             "How often share-group members heartbeat."),
            ("group.share.min.heartbeat.interval.ms", "group_share_min_heartbeat_interval_ms",
             "The lowest share heartbeat interval a group may be given."),
            ("group.share.max.heartbeat.interval.ms", "group_share_max_heartbeat_interval_ms",
             "The highest share heartbeat interval a group may be given."),
            ("group.share.assignment.interval.ms", "group_share_assignment_interval_ms",
             "The least time between two assignments of a share group."),
            ("group.share.min.assignment.interval.ms", "group_share_min_assignment_interval_ms",
             "The lowest share assignment interval a group may be given."),
            ("group.share.max.assignment.interval.ms", "group_share_max_assignment_interval_ms",
             "The highest share assignment interval a group may be given."),
            ("group.share.max.size", "group_share_max_size",
             "The most members of one share group."),
            ("group.share.max.share.sessions", "group_share_max_share_sessions",
             "The most share sessions this broker holds at once."),
        )
    ),
    _Setting("errors.deadletterqueue.topic.name.prefix", _S,
             lambda c: c.errors_deadletterqueue_topic_name_prefix,
             "The prefix a share group's dead-letter topic must have (empty: any name)."),
    _Setting("errors.deadletterqueue.auto.create.topics.enable", _B,
             lambda c: c.errors_deadletterqueue_auto_create_topics_enable,
             "Whether a share group's missing dead-letter topic is created by the broker."),
)  # fmt: skip

_FIXED_ENTRIES: tuple[BrokerConfigEntry, ...] = (
    BrokerConfigEntry("default.replication.factor", "1", _I, ConfigSource.DEFAULT_CONFIG,
                      "Replicas of a topic created without a replication factor."),
    BrokerConfigEntry("delete.topic.enable", "true", _B, ConfigSource.DEFAULT_CONFIG,
                      "Whether DeleteTopics may delete topics."),
)  # fmt: skip


def topic_default_entries() -> list[BrokerConfigEntry]:
    """The broker-level defaults of topic configs, named as Kafka names them."""
    entries = (broker_synonym_of(name) for name in TOPIC_CONFIG_BROKER_SYNONYMS)
    return [entry for entry in entries if entry is not None]


def broker_config_entries(config: BrokerConfig) -> list[BrokerConfigEntry]:
    """Every broker config this node reports, sorted by name."""
    entries = [setting.entry(config) for setting in _SETTINGS]
    entries.extend(_FIXED_ENTRIES)
    entries.extend(topic_default_entries())
    by_name = {entry.name: entry for entry in entries}
    return [by_name[name] for name in sorted(by_name)]


def broker_synonym_of(topic_config: str) -> BrokerConfigEntry | None:
    """The broker config holding `topic_config`'s default, if Kafka has one."""
    broker_name = TOPIC_CONFIG_BROKER_SYNONYMS.get(topic_config)
    definition = TOPIC_CONFIGS.get(topic_config)
    if broker_name is None or definition is None:
        return None
    return BrokerConfigEntry(
        name=broker_name,
        value=definition.format(definition.default),
        config_type=CONFIG_TYPE_CODES[definition.type],
        source=ConfigSource.DEFAULT_CONFIG,
        doc=f"The default {topic_config} of topics without an override: {definition.doc}",
    )
