"""Kafka topic configurations: the catalog (`TOPIC_CONFIGS`) and `LogConfig`.

Names, types, defaults and valid ranges are Kafka's (3.x), with these exceptions:

- `segment.bytes` must be at least 1024 (Kafka: 14; Kafka 4.0: 1 MiB), so that
  tests can roll small segments without allowing absurd ones.
- `compression.type`: `producer` (the default) stores batches as the producer
  compressed them; `uncompressed`, `gzip`, `snappy`, `lz4` or `zstd` make the
  produce path rewrite a batch of another codec (weir/log/recompression.py).
  Kafka's per-codec levels (`compression.gzip.level`, ...) are not accepted yet.
- `segment.index.bytes` must be at least 12 (one time index entry).
- `remote.storage.enable` must be false.
- `cleanup.policy=compact` compacts the log (weir/log/compaction.py) and keeps
  every segment otherwise (no time/size retention); `compact,delete` does both.

Accepted and stored, with no effect: `flush.messages` and `flush.ms` (every
acknowledged append is fsynced anyway), `preallocate`, `file.delete.delay.ms`
(segment files are unlinked at once; reads hold copies, not mappings), the
throttled-replica lists, `local.retention.*` and `message.downconversion.enable`
(RecordBatch v2 is the only format stored and served); no code reads them, nor
the three above that allow one value only (tests/test_settings_catalog.py keeps
both lists true). The compaction settings
(`delete.retention.ms`, `min.cleanable.dirty.ratio`, `min.compaction.lag.ms`,
`max.compaction.lag.ms`) are honoured by the cleaner.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT32_MIN = -(2**31)
INT64_MIN = -(2**63)

SEGMENT_BYTES_MIN = 1024

# compression.type values other than `producer` -> Kafka's codec number.
STORED_CODECS: dict[str, int] = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class InvalidConfig(ValueError):  # noqa: N818 (the contract names it)
    """An unknown config name or a value that fails its type or validator."""

    def __init__(self, name: str, reason: str, message: str | None = None) -> None:
        super().__init__(message or f"{name}: {reason}")
        self.name = name
        self.reason = reason


def unknown_topic_config_message(name: str) -> str:
    """Kafka's wording for a config name it does not know; every admin request
    (CreateTopics, AlterConfigs, IncrementalAlterConfigs) answers with it."""
    return f"Unknown topic config name: {name}"


class ConfigType(enum.Enum):
    """Kafka's ConfigDef types (DescribeConfigs reports them)."""

    BOOLEAN = "boolean"
    STRING = "string"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    LIST = "list"


Validator = Callable[[Any], str | None]  # returns the reason a value is invalid, or None


@dataclass(frozen=True)
class ConfigDef:
    """One topic config: its Kafka name, type, default and validator."""

    name: str
    type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None

    @property
    def attribute(self) -> str:
        """The LogConfig field name: Kafka's name in snake_case."""
        return self.name.replace(".", "_")

    def parse(self, text: str) -> Any:
        """The typed value of `text`; raises InvalidConfig."""
        value = _parse_typed(self.name, self.type, text)
        if self.validator is not None:
            reason = self.validator(value)
            if reason is not None:
                raise InvalidConfig(self.name, reason)
        return value

    def format(self, value: Any) -> str:
        """Kafka's string form of a value (DescribeConfigs)."""
        if self.type is ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.type is ConfigType.LIST:
            return ",".join(value)
        return str(value)


def _parse_typed(name: str, config_type: ConfigType, text: str) -> Any:
    stripped = text.strip()
    if config_type is ConfigType.STRING:
        return stripped
    if config_type is ConfigType.LIST:
        return tuple(item.strip() for item in stripped.split(",") if item.strip())
    if config_type is ConfigType.BOOLEAN:
        lowered = stripped.lower()
        if lowered not in ("true", "false"):
            raise InvalidConfig(name, f"expected true or false, not {text!r}")
        return lowered == "true"
    if config_type is ConfigType.DOUBLE:
        try:
            return float(stripped)
        except ValueError:
            raise InvalidConfig(name, f"expected a number, not {text!r}") from None
    return _parse_integer(name, config_type, stripped, text)


def _parse_integer(name: str, config_type: ConfigType, stripped: str, text: str) -> int:
    try:
        value = int(stripped, 10)
    except ValueError:
        raise InvalidConfig(name, f"expected an integer, not {text!r}") from None
    low, high = (INT32_MIN, INT32_MAX) if config_type is ConfigType.INT else (INT64_MIN, INT64_MAX)
    if not low <= value <= high:
        raise InvalidConfig(name, f"{value} is outside the {config_type.value} range")
    return value


def at_least(minimum: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value >= minimum else f"must be at least {minimum}, not {value}"

    return check


def between(minimum: float, maximum: float) -> Validator:
    def check(value: Any) -> str | None:
        if minimum <= value <= maximum:
            return None
        return f"must be between {minimum} and {maximum}, not {value}"

    return check


def one_of(*allowed: str) -> Validator:
    def check(value: Any) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}, not {value!r}"

    return check


def subset_of(*allowed: str) -> Validator:
    def check(value: Any) -> str | None:
        unknown = [item for item in value if item not in allowed]
        if not unknown:
            return None
        return f"unknown values {', '.join(unknown)}; allowed: {', '.join(allowed)}"

    return check


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


_L, _I, _S, _B, _D, _LIST = (
    ConfigType.LONG,
    ConfigType.INT,
    ConfigType.STRING,
    ConfigType.BOOLEAN,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("cleanup.policy", _LIST, ("delete",),
              "delete: drop old segments by retention; compact: keep the latest record per key.",
              subset_of("delete", "compact")),
    ConfigDef("compression.type", _S, "producer",
              "Codec batches are stored with: producer keeps the producer's; uncompressed, "
              "gzip, snappy, lz4 or zstd recompress batches of another codec.",
              one_of("producer", *STORED_CODECS)),
    ConfigDef("delete.retention.ms", _L, 86_400_000,
              "How long delete tombstones are kept (compacted topics).", at_least(0)),
    ConfigDef("errors.deadletterqueue.group.enable", _B, False,
              "Share groups may write dead letters to this topic (KIP-1191): a group's "
              "errors.deadletterqueue.topic.name must name a topic with this set."),
    ConfigDef("file.delete.delay.ms", _L, 60_000,
              "Delay before a deleted segment's files are removed.", at_least(0)),
    ConfigDef("flush.messages", _L, INT64_MAX,
              "Accepted for compatibility; Weir fsyncs every acknowledged append.", at_least(1)),
    ConfigDef("flush.ms", _L, INT64_MAX,
              "Accepted for compatibility; Weir fsyncs every acknowledged append.", at_least(0)),
    ConfigDef("follower.replication.throttled.replicas", _LIST, (),
              "Replicas whose follower replication is throttled."),
    ConfigDef("index.interval.bytes", _I, 4096,
              "Bytes of batches between two offset index entries.", at_least(0)),
    ConfigDef("leader.replication.throttled.replicas", _LIST, (),
              "Replicas whose leader replication is throttled."),
    ConfigDef("local.retention.bytes", _L, -2, "Tiered storage; not used by Weir.", at_least(-2)),
    ConfigDef("local.retention.ms", _L, -2, "Tiered storage; not used by Weir.", at_least(-2)),
    ConfigDef("max.compaction.lag.ms", _L, INT64_MAX,
              "Longest time a record stays uncompacted.", at_least(1)),
    ConfigDef("max.message.bytes", _I, 1_048_588,
              "Largest record batch accepted, in bytes.", at_least(0)),
    ConfigDef("message.downconversion.enable", _B, True,
              "Down-conversion for old consumers (Weir serves RecordBatch v2 only)."),
    ConfigDef("message.timestamp.after.max.ms", _L, INT64_MAX,
              "How far a CreateTime timestamp may be ahead of the broker's clock.", at_least(0)),
    ConfigDef("message.timestamp.before.max.ms", _L, INT64_MAX,
              "How far a CreateTime timestamp may be behind the broker's clock.", at_least(0)),
    ConfigDef("message.timestamp.difference.max.ms", _L, INT64_MAX,
              "Deprecated: both of the above.", at_least(0)),
    ConfigDef("message.timestamp.type", _S, "CreateTime",
              "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's.",
              one_of("CreateTime", "LogAppendTime")),
    ConfigDef("min.cleanable.dirty.ratio", _D, 0.5,
              "Dirty ratio that makes a compacted log eligible for cleaning.", between(0, 1)),
    ConfigDef("min.compaction.lag.ms", _L, 0,
              "Shortest time a record stays uncompacted.", at_least(0)),
    ConfigDef("min.insync.replicas", _I, 1,
              "Replicas that must acknowledge an acks=all write.", at_least(1)),
    ConfigDef("preallocate", _B, False, "Accepted; Weir does not preallocate segment files."),
    ConfigDef("remote.storage.enable", _B, False, "Tiered storage; must stay false.",
              lambda value: "tiered storage is not supported" if value else None),
    ConfigDef("retention.bytes", _L, -1,
              "Size a partition may grow to before old segments are deleted; -1: no limit.",
              at_least(-1)),
    ConfigDef("retention.ms", _L, 604_800_000,
              "Age after which a segment is deleted (by its largest timestamp); -1: forever.",
              at_least(-1)),
    ConfigDef("segment.bytes", _I, 1_073_741_824,
              "Segment file size at which a new segment is rolled.", at_least(SEGMENT_BYTES_MIN)),
    ConfigDef("segment.index.bytes", _I, 10_485_760,
              "Size limit of a segment's offset and time index; a full index rolls.",
              at_least(12)),
    ConfigDef("segment.jitter.ms", _L, 0,
              "Random jitter subtracted from segment.ms.", at_least(0)),
    ConfigDef("segment.ms", _L, 604_800_000,
              "Age of a segment's first batch after which a new segment is rolled.", at_least(1)),
    ConfigDef("unclean.leader.election.enable", _B, False,
              "In a cluster, let an out-of-sync replica lead when no in-sync one is alive "
              "(what it lacks is lost)."),
    ConfigDef("weir.share.record.ttl.ms", _L, 0,
              "Weir's: share groups archive (or dead-letter) a record of this topic older "
              "than this instead of delivering it; 0: none. With a group's "
              "weir.share.record.ttl.ms or a record's weir.ttl.ms header, the earliest "
              "expiry wins.", at_least(0)),
    ConfigDef("weir.sqs.queue", _S, "",
              "Weir's: the topic is an SQS-compatible queue (weir/broker/http/sqs), with "
              "these attributes (JSON, written by the SQS API); empty: not a queue."),
)  # fmt: skip


@dataclass(frozen=True)
class LogConfig:
    """Typed topic configs; field names are Kafka's names in snake_case."""

    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    delete_retention_ms: int = 86_400_000
    errors_deadletterqueue_group_enable: bool = False
    file_delete_delay_ms: int = 60_000
    flush_messages: int = INT64_MAX
    flush_ms: int = INT64_MAX
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    max_compaction_lag_ms: int = INT64_MAX
    max_message_bytes: int = 1_048_588
    message_downconversion_enable: bool = True
    message_timestamp_after_max_ms: int = INT64_MAX
    message_timestamp_before_max_ms: int = INT64_MAX
    message_timestamp_difference_max_ms: int = INT64_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    remote_storage_enable: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    segment_jitter_ms: int = 0
    segment_ms: int = 604_800_000
    unclean_leader_election_enable: bool = False
    weir_share_record_ttl_ms: int = 0
    weir_sqs_queue: str = ""
    # The Kafka names set explicitly (DescribeConfigs reports the rest as defaults).
    overrides: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str]) -> LogConfig:
        """Kafka defaults with `overrides` (Kafka names -> string values) applied.

        Raises InvalidConfig for an unknown name or a bad value."""
        values: dict[str, Any] = {}
        for name, text in overrides.items():
            definition = TOPIC_CONFIGS.get(name)
            if definition is None:
                raise InvalidConfig(
                    name, "unknown topic config", unknown_topic_config_message(name)
                )
            if text is None:
                raise InvalidConfig(name, "a value is required")
            values[definition.attribute] = definition.parse(str(text))
        return cls(**values, overrides=dict(overrides))

    def value(self, name: str) -> Any:
        """The typed value of a config by its Kafka name."""
        return getattr(self, TOPIC_CONFIGS[name].attribute)

    @property
    def stored_codec(self) -> int | None:
        """The codec every stored batch must have, or None (`producer`: any)."""
        return STORED_CODECS.get(self.compression_type)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def deletes_by_retention(self) -> bool:
        return "delete" in self.cleanup_policy


def _check_catalog_matches_fields() -> None:
    fields = {f.name for f in dataclasses.fields(LogConfig)} - {"overrides"}
    names = {d.attribute for d in TOPIC_CONFIGS.values()}
    assert fields == names, fields ^ names
    defaults = LogConfig()
    for d in TOPIC_CONFIGS.values():
        assert getattr(defaults, d.attribute) == d.default, d.name


_check_catalog_matches_fields()
