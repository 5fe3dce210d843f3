"""Group configs: per-group overrides of the broker-wide group settings, set with
IncrementalAlterConfigs (or AlterConfigs) on the GROUP resource and described with
DescribeConfigs, as Kafka 4.4's `GroupConfig`.

Served, in Kafka's order (`GROUP_CONFIGS`):

- KIP-848 consumer groups: `consumer.session.timeout.ms` and
  `consumer.heartbeat.interval.ms`, which the KIP-848 coordinator uses for that
  group instead of the broker's `group.consumer.*` settings (`GroupConfig`);
- KIP-932 share groups: `share.session.timeout.ms`, `share.heartbeat.interval.ms`,
  `share.record.lock.duration.ms`, `share.delivery.count.limit`,
  `share.partition.max.record.locks`, `share.auto.offset.reset` (`latest`,
  `earliest` or `by_duration:<ISO-8601 duration>`), `share.isolation.level`,
  `share.renew.acknowledge.enable`, `share.assignment.interval.ms`, and KIP-1191's
  `errors.deadletterqueue.topic.name` and `errors.deadletterqueue.copy.record.enable`
  (`ShareGroupConfig`, built by `share_group_config_of`);
- Weir's own share-group configs, named `weir.share.*` so that they never collide
  with Kafka's: `weir.share.record.headers.enable` (the delay and TTL record
  headers are honoured), `weir.share.record.ttl.ms`,
  `weir.share.release.backoff.initial.ms` and `weir.share.release.backoff.max.ms`
  (docs/queues.md, "Delays and expiry"), and `weir.share.key.ordering.enable`
  (records of one key delivered one acquisition at a time, in offset order:
  docs/queues.md, "Per-key ordering").

Kafka's streams-group configs (`streams.*`) and `consumer.assignment.interval.ms`
are not: Weir serves no streams groups and assigns at every heartbeat, and an
unknown name is refused.

A change is validated as Kafka 4.4's GroupConfig.validate does: the names first;
then each given value parsed by its type (INT, BOOLEAN, STRING: trimmed; an INT
at least Kafka's fixed minimum; a STRING one of its allowed values), in
definition order; then each given bounded value within the broker's min/max
(`group.share.min.record.lock.duration.ms`, ...); then each session timeout
greater than its heartbeat interval; then the dead-letter topic name not
starting with `__` (Kafka checks its `errors.deadletterqueue.topic.name.prefix`
only when it writes a dead letter: `dead_letter_topic_refusal`). Errors are
Kafka's words, except the consumer bounds, which keep the wording of the Kafka
releases Weir matched first ("must be greater than or equal to
group.consumer.min.session.timeout.ms"; 4.4 says "must be in the range 45000 to
60000 inclusive.", as Weir says for the share bounds).

Stored consumer overrides are applied as they are at load, even if the broker's
bounds changed since. Stored share overrides are read leniently
(`share_group_config_of`): a bounded value now outside the broker's bounds is
capped to the nearest bound, as Kafka 4.4's GroupConfig.evaluate does, and a
value that no longer parses is replaced by the broker's default; both come back
as warnings for the caller to log."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from weir.groupcoord.settings import GroupSettings

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
SHARE_PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
SHARE_RENEW_ACKNOWLEDGE_ENABLE = "share.renew.acknowledge.enable"
SHARE_ASSIGNMENT_INTERVAL_MS = "share.assignment.interval.ms"
DEAD_LETTER_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DEAD_LETTER_COPY_RECORD_ENABLE = "errors.deadletterqueue.copy.record.enable"
WEIR_RECORD_HEADERS_ENABLE = "weir.share.record.headers.enable"
WEIR_RECORD_TTL_MS = "weir.share.record.ttl.ms"
WEIR_RELEASE_BACKOFF_INITIAL_MS = "weir.share.release.backoff.initial.ms"
WEIR_RELEASE_BACKOFF_MAX_MS = "weir.share.release.backoff.max.ms"
WEIR_KEY_ORDERING_ENABLE = "weir.share.key.ordering.enable"
RELEASE_BACKOFF_MAX_MS_DEFAULT = 60_000
INT32_MAX = 2**31 - 1
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"

GroupConfigValue = int | bool | str


class GroupConfigType(enum.Enum):
    """A group config's type, as DescribeConfigs reports it (Kafka's ConfigDef.Type)."""

    INT = "INT"
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"


class InvalidGroupConfig(ValueError):  # noqa: N818 (the contract names it)
    """An unknown group config name or a value Kafka would refuse."""


def unknown_group_config_message(name: str) -> str:
    """Kafka's wording, the one AlterConfigs and IncrementalAlterConfigs answer."""
    return f"Unknown group config name: {name}"


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: GroupConfigType
    # The name DescribeConfigs gives the default's synonym, as Kafka does: the
    # broker setting that holds it, or the config's own name where Kafka has none.
    default_name: str
    doc: str
    # The group's value when it has no override: the broker's setting.
    default: Callable[[GroupSettings], GroupConfigValue]
    # INT: Kafka's fixed minimum (ConfigDef's atLeast), checked at parsing.
    at_least: int = 1
    # INT: the broker's (min, max) a group's value must lie within.
    bounds: Callable[[GroupSettings], tuple[int, int]] | None = None
    # The consumer bounds' settings, named in the older wording (see the docstring).
    bound_names: tuple[str, str] | None = None
    # STRING: the values allowed (Kafka's ValidString), or a check raising
    # InvalidGroupConfig.
    allowed: tuple[str, ...] = ()
    check: Callable[[str], object] | None = None

    def parse(self, text: str | None) -> GroupConfigValue:
        """`text` as this config's type, checked as Kafka's ConfigDef parses it.
        Raises InvalidGroupConfig."""
        if text is None:
            raise InvalidGroupConfig(f"{self.name}: a value is required")
        if self.type is GroupConfigType.INT:
            return _parse_int(self.name, text, self.at_least)
        if self.type is GroupConfigType.BOOLEAN:
            return _parse_bool(self.name, text)
        value = text.strip()
        if self.allowed and value not in self.allowed:
            raise InvalidGroupConfig(
                f"Invalid value {value} for configuration {self.name}: "
                f"String must be one of: {', '.join(self.allowed)}"
            )
        if self.check is not None:
            self.check(value)
        return value

    def format(self, value: GroupConfigValue) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def bounds_error(self, value: int, settings: GroupSettings) -> str | None:
        """Kafka's refusal of `value` outside the broker's bounds; None within them."""
        if self.bounds is None:
            return None
        low, high = self.bounds(settings)
        if self.bound_names is not None:
            low_name, high_name = self.bound_names
            if value < low:
                return f"{self.name} must be greater than or equal to {low_name}"
            if value > high:
                return f"{self.name} must be less than or equal to {high_name}"
            return None
        if not low <= value <= high:
            return f"{self.name} must be in the range {low} to {high} inclusive."
        return None


# -- share.auto.offset.reset -----------------------------------------------------------


@dataclass(frozen=True)
class AutoOffsetReset:
    """Where a share partition starts when its group has no state for it."""

    earliest: bool = False  # share.auto.offset.reset=earliest
    duration_ms: int | None = None  # by_duration:<duration>; neither: latest


BY_DURATION_PREFIX = "by_duration:"
# java.time.Duration.parse's grammar, letters in any case: PnDTnHnMn.nS, each part
# optional and signed, the seconds with up to 9 fraction digits.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)
_JAVA_LONG_MAX = 2**63 - 1


def duration_ms(text: str) -> int | None:
    """An ISO-8601 duration (`P1D`, `PT1H30M`, `PT0.5S`) in ms, as Java's
    Duration.parse reads it; None for text it refuses, or a negative duration."""
    match = _DURATION.fullmatch(text)
    if match is None:
        return None
    sign, days, time_part, hours, minutes, seconds, fraction = match.groups()
    if days is None and hours is None and minutes is None and seconds is None:
        return None  # "P", "PT"
    if time_part is not None and hours is None and minutes is None and seconds is None:
        return None  # "P1DT"
    whole_s = int(days or 0) * 86_400 + int(hours or 0) * 3_600 + int(minutes or 0) * 60
    whole_s += int(seconds or 0)
    nanos = int((fraction or "").ljust(9, "0")) if fraction else 0
    if seconds is not None and seconds.startswith("-"):
        nanos = -nanos
    total_ns = whole_s * 1_000_000_000 + nanos
    if sign == "-":
        total_ns = -total_ns
    if abs(whole_s) > _JAVA_LONG_MAX or total_ns < 0:
        return None
    return total_ns // 1_000_000


def parse_auto_offset_reset(text: str) -> AutoOffsetReset:
    """`latest`, `earliest` or `by_duration:<duration>` (exactly these words; the
    duration in any case). Raises InvalidGroupConfig with Kafka's wording."""
    if text == "latest":
        return AutoOffsetReset()
    if text == "earliest":
        return AutoOffsetReset(earliest=True)
    if text.startswith(BY_DURATION_PREFIX):
        found = duration_ms(text[len(BY_DURATION_PREFIX) :])
        if found is not None:
            return AutoOffsetReset(duration_ms=found)
    name = SHARE_AUTO_OFFSET_RESET
    raise InvalidGroupConfig(
        f"Invalid value {text} for configuration {name}: Invalid value `{text}` for "
        f"configuration {name}. The value must be either 'earliest', 'latest' or of the "
        "format 'by_duration:<PnDTnHnMn.nS>'."
    )


def _check_dead_letter_topic_name(text: str) -> None:
    """Kafka 4.4 refuses only names of internal topics here; the prefix is checked
    when a dead letter is written (`dead_letter_topic_refusal`)."""
    if text.startswith("__"):
        raise InvalidGroupConfig(
            f"{DEAD_LETTER_TOPIC_NAME}: DLQ topic name must not start with '__'"
        )


def dead_letter_topic_refusal(group_id: str, topic: str, prefix: str) -> str | None:
    """Why Kafka writes no dead letter of `group_id` to `topic` (its
    `errors.deadletterqueue.topic.name`) under the broker's `prefix`
    (`errors.deadletterqueue.topic.name.prefix`); None when it may. Kafka's words."""
    if not topic:
        return f"Configured DLQ topic name in share group: {group_id} is empty."
    if topic.startswith("__"):
        return (
            f"Configured DLQ topic name in share group: {group_id} cannot start with __, "
            f"topic: {topic}."
        )
    if prefix and not topic.startswith(prefix):
        return (
            "Configured DLQ topic name does not comply with the DLQ topic prefix in share "
            f"group: {group_id}, topic: {topic}, prefix: {prefix}."
        )
    return None


# -- the catalog -----------------------------------------------------------------------

_INT, _BOOLEAN, _STRING = GroupConfigType.INT, GroupConfigType.BOOLEAN, GroupConfigType.STRING

GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(
            CONSUMER_SESSION_TIMEOUT_MS, _INT, "group.consumer.session.timeout.ms",
            "The timeout to detect client failures when using the consumer group protocol.",
            lambda s: s.consumer_session_timeout_ms,
            bounds=lambda s: (s.consumer_session_timeout_min_ms, s.consumer_session_timeout_max_ms),
            bound_names=(
                "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"
            ),
        ),
        GroupConfigDef(
            CONSUMER_HEARTBEAT_INTERVAL_MS, _INT, "group.consumer.heartbeat.interval.ms",
            "The heartbeat interval given to the members of a consumer group.",
            lambda s: s.consumer_heartbeat_interval_ms,
            bounds=lambda s: (
                s.consumer_heartbeat_interval_min_ms, s.consumer_heartbeat_interval_max_ms
            ),
            bound_names=(
                "group.consumer.min.heartbeat.interval.ms",
                "group.consumer.max.heartbeat.interval.ms",
            ),
        ),
        GroupConfigDef(
            SHARE_SESSION_TIMEOUT_MS, _INT, "group.share.session.timeout.ms",
            "The timeout to detect client failures when using the share group protocol.",
            lambda s: s.share_session_timeout_ms,
            bounds=lambda s: (s.share_session_timeout_min_ms, s.share_session_timeout_max_ms),
        ),
        GroupConfigDef(
            SHARE_HEARTBEAT_INTERVAL_MS, _INT, "group.share.heartbeat.interval.ms",
            "The heartbeat interval given to the members of a share group.",
            lambda s: s.share_heartbeat_interval_ms,
            bounds=lambda s: (s.share_heartbeat_interval_min_ms, s.share_heartbeat_interval_max_ms),
        ),
        GroupConfigDef(
            SHARE_RECORD_LOCK_DURATION_MS, _INT, "group.share.record.lock.duration.ms",
            "The record acquisition lock duration in milliseconds for share groups.",
            lambda s: s.share_record_lock_duration_ms,
            at_least=1_000,
            bounds=lambda s: (
                s.share_record_lock_duration_min_ms, s.share_record_lock_duration_max_ms
            ),
        ),
        GroupConfigDef(
            SHARE_DELIVERY_COUNT_LIMIT, _INT, "group.share.delivery.count.limit",
            "The maximum number of delivery attempts for a record delivered to a share group.",
            lambda s: s.share_delivery_count_limit,
            at_least=2,
            bounds=lambda s: (s.share_delivery_count_limit_min, s.share_delivery_count_limit_max),
        ),
        GroupConfigDef(
            SHARE_PARTITION_MAX_RECORD_LOCKS, _INT, "group.share.partition.max.record.locks",
            "Share-group record lock limit per share-partition.",
            lambda s: s.share_partition_max_record_locks,
            at_least=100,
            bounds=lambda s: (
                s.share_partition_max_record_locks_min, s.share_partition_max_record_locks_max
            ),
        ),
        GroupConfigDef(
            SHARE_AUTO_OFFSET_RESET, _STRING, SHARE_AUTO_OFFSET_RESET,
            "The strategy to initialize the share-partition start offset: earliest, latest, "
            "or by_duration:<duration> (ISO-8601, PnDTnHnMn.nS, not negative): the first "
            "record at or after that long before now.",
            lambda s: s.share_auto_offset_reset,
            check=parse_auto_offset_reset,
        ),
        GroupConfigDef(
            SHARE_ISOLATION_LEVEL, _STRING, SHARE_ISOLATION_LEVEL,
            'Controls how to read records written transactionally: "read_committed" '
            'delivers only committed transactional records, "read_uncommitted" all records.',
            lambda s: s.share_isolation_level,
            allowed=(READ_COMMITTED, READ_UNCOMMITTED),
        ),
        GroupConfigDef(
            SHARE_RENEW_ACKNOWLEDGE_ENABLE, _BOOLEAN, SHARE_RENEW_ACKNOWLEDGE_ENABLE,
            "Whether the renew acknowledge type is enabled for the share group.",
            lambda s: s.share_renew_acknowledge_enable,
        ),
        GroupConfigDef(
            SHARE_ASSIGNMENT_INTERVAL_MS, _INT, "group.share.assignment.interval.ms",
            "The interval between assignment updates for a share group.",
            lambda s: s.share_assignment_interval_ms,
            at_least=0,
            bounds=lambda s: (
                s.share_assignment_interval_min_ms, s.share_assignment_interval_max_ms
            ),
        ),
        GroupConfigDef(
            DEAD_LETTER_TOPIC_NAME, _STRING, DEAD_LETTER_TOPIC_NAME,
            "The name of the topic to be used as the dead-letter queue (DLQ) topic for this "
            "share group. If blank (the default), the group does not have a DLQ topic.",
            lambda s: "",
            check=_check_dead_letter_topic_name,
        ),
        GroupConfigDef(
            DEAD_LETTER_COPY_RECORD_ENABLE, _BOOLEAN, DEAD_LETTER_COPY_RECORD_ENABLE,
            "When writing onto the dead-letter queue topic, whether to copy the original "
            "record onto the DLQ topic, or just write a record containing the context "
            "information headers.",
            lambda s: False,
        ),
        GroupConfigDef(
            WEIR_RECORD_HEADERS_ENABLE, _BOOLEAN, WEIR_RECORD_HEADERS_ENABLE,
            "Weir: whether the group honours the weir.deliver.at.ms, weir.delay.ms and "
            "weir.ttl.ms record headers (delayed delivery and expiry). Reading them costs "
            "decoding the records that may carry them.",
            lambda s: False,
        ),
        GroupConfigDef(
            WEIR_RECORD_TTL_MS, _INT, WEIR_RECORD_TTL_MS,
            "Weir: a record older than this (from its timestamp) is archived, reason "
            "EXPIRED, instead of delivered. 0: records do not expire.",
            lambda s: 0,
            at_least=0,
        ),
        GroupConfigDef(
            WEIR_RELEASE_BACKOFF_INITIAL_MS, _INT, WEIR_RELEASE_BACKOFF_INITIAL_MS,
            "Weir: a record released, or whose lock expired, is delivered again no sooner "
            "than this after its first delivery, doubled for each further delivery. "
            "0: at once (Kafka's behaviour).",
            lambda s: 0,
            at_least=0,
        ),
        GroupConfigDef(
            WEIR_RELEASE_BACKOFF_MAX_MS, _INT, WEIR_RELEASE_BACKOFF_MAX_MS,
            "Weir: the longest release backoff (also capped by the broker's "
            "share_delivery_delay_max_ms).",
            lambda s: RELEASE_BACKOFF_MAX_MS_DEFAULT,
            at_least=0,
        ),
        GroupConfigDef(
            WEIR_KEY_ORDERING_ENABLE, _BOOLEAN, WEIR_KEY_ORDERING_ENABLE,
            "Weir: whether a share partition delivers the records of one key in offset "
            "order, one acquisition at a time (records with a null key are not ordered). "
            "Reading keys costs decoding the records read.",
            lambda s: False,
        ),
    )
}  # fmt: skip

# Kafka 4.4's order of the bounds checks, and of the session/heartbeat checks after them.
_BOUNDS_ORDER = (
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    SHARE_HEARTBEAT_INTERVAL_MS,
    SHARE_SESSION_TIMEOUT_MS,
    SHARE_RECORD_LOCK_DURATION_MS,
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_PARTITION_MAX_RECORD_LOCKS,
    SHARE_ASSIGNMENT_INTERVAL_MS,
)
_SESSION_OVER_HEARTBEAT = (
    (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
    (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
)


def default_group_configs(settings: GroupSettings) -> dict[str, GroupConfigValue]:
    """Every group config's value for a group without overrides."""
    return {name: d.default(settings) for name, d in GROUP_CONFIGS.items()}


def parse_group_configs(overrides: Mapping[str, str | None]) -> dict[str, GroupConfigValue]:
    """`overrides` as typed values, names checked first, then each value in
    definition order (as Kafka's ConfigDef parses). Raises InvalidGroupConfig."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            raise InvalidGroupConfig(unknown_group_config_message(name))
    return {
        name: definition.parse(overrides[name])
        for name, definition in GROUP_CONFIGS.items()
        if name in overrides
    }


def group_config_values(
    overrides: Mapping[str, str | None], settings: GroupSettings
) -> dict[str, GroupConfigValue]:
    """Every group config's effective value: the broker's settings with `overrides`
    applied (names and types checked, not the bounds). Raises InvalidGroupConfig."""
    return default_group_configs(settings) | parse_group_configs(overrides)


def validate_group_configs(overrides: Mapping[str, str], settings: GroupSettings) -> GroupConfig:
    """The config `overrides` give, checked as Kafka's GroupConfig.validate checks
    a change. Raises InvalidGroupConfig with Kafka's wording."""
    given = parse_group_configs(overrides)
    values = default_group_configs(settings) | given
    for name in _BOUNDS_ORDER:
        value = given.get(name)
        if isinstance(value, int):
            error = GROUP_CONFIGS[name].bounds_error(value, settings)
            if error is not None:
                raise InvalidGroupConfig(error)
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if (session in given or heartbeat in given) and int(values[session]) <= int(
            values[heartbeat]
        ):
            raise InvalidGroupConfig(f"{session} must be greater than {heartbeat}")
    return GroupConfig.of(values)


def lenient_group_config_values(
    overrides: Mapping[str, str], settings: GroupSettings
) -> tuple[dict[str, GroupConfigValue], list[str]]:
    """Every group config's effective value from stored `overrides`, each read on
    its own: an unknown name is ignored and a value that does not parse is the
    broker's default. Returns the values and a warning for each override left out."""
    values = default_group_configs(settings)
    warnings = []
    for name, text in overrides.items():
        definition = GROUP_CONFIGS.get(name)
        if definition is None:
            warnings.append(f"unknown group config {name!r} ignored")
            continue
        try:
            values[name] = definition.parse(text)
        except InvalidGroupConfig as exc:
            warnings.append(f"{exc}; the broker's default {definition.format(values[name])} used")
    return values, warnings


# -- consumer groups (KIP-848) ---------------------------------------------------------


@dataclass(frozen=True)
class GroupConfig:
    """A KIP-848 group's effective settings: its overrides on top of the broker's."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int

    @classmethod
    def defaults(cls, settings: GroupSettings) -> GroupConfig:
        return cls(settings.consumer_session_timeout_ms, settings.consumer_heartbeat_interval_ms)

    @classmethod
    def of(cls, values: Mapping[str, GroupConfigValue]) -> GroupConfig:
        return cls(
            int(values[CONSUMER_SESSION_TIMEOUT_MS]), int(values[CONSUMER_HEARTBEAT_INTERVAL_MS])
        )

    def value(self, name: str) -> int:
        return int(getattr(self, name.replace(".", "_")))

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str], settings: GroupSettings) -> GroupConfig:
        """The broker's defaults with `overrides` applied, names and types checked
        (not the bounds: see `validate_group_configs`). Raises InvalidGroupConfig."""
        return cls.of(group_config_values(overrides, settings))


# -- share groups (KIP-932) ------------------------------------------------------------


@dataclass(frozen=True)
class ShareGroupConfig:
    """A share group's effective settings: its overrides on top of the broker's."""

    record_lock_duration_ms: int
    delivery_count_limit: int
    partition_max_record_locks: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    assignment_interval_ms: int
    auto_offset_reset: AutoOffsetReset
    read_committed: bool
    renew_acknowledge_enable: bool
    dead_letter_topic: str | None  # errors.deadletterqueue.topic.name; None: none
    dead_letter_copy_record: bool
    # Weir's delays and expiry (weir.share.*; the broker's share_delivery_delay_max_ms).
    record_headers_enabled: bool = False
    record_ttl_ms: int = 0
    release_backoff_initial_ms: int = 0
    release_backoff_max_ms: int = RELEASE_BACKOFF_MAX_MS_DEFAULT
    delivery_delay_max_ms: int = GroupSettings.share_delivery_delay_max_ms
    # Weir's per-key ordering (weir.share.key.ordering.enable).
    key_ordering: bool = False


_SHARE_BOUNDED = (
    SHARE_HEARTBEAT_INTERVAL_MS,
    SHARE_SESSION_TIMEOUT_MS,
    SHARE_RECORD_LOCK_DURATION_MS,
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_PARTITION_MAX_RECORD_LOCKS,
    SHARE_ASSIGNMENT_INTERVAL_MS,
)


def share_group_config_of(
    group_id: str, overrides: Mapping[str, str], settings: GroupSettings
) -> tuple[ShareGroupConfig, list[str]]:
    """Share group `group_id`'s effective config from its stored `overrides`, and
    the warnings for overrides not applied as stored: one that no longer parses is
    the broker's default, and a bounded one outside the broker's current bounds is
    capped to the nearest (Kafka 4.4's GroupConfig.evaluate, with its words)."""
    values, warnings = lenient_group_config_values(overrides, settings)
    for name in _SHARE_BOUNDED:
        bounds = GROUP_CONFIGS[name].bounds
        assert bounds is not None
        low, high = bounds(settings)
        value = int(values[name])
        capped = min(max(value, low), high)
        if capped != value:
            side = "is below the broker's allowed minimum"
            if value > high:
                side = "exceeds the broker's allowed maximum"
            warnings.append(
                f"The group config '{name}' for group '{group_id}' has value {value} which "
                f"{side} {capped}. The effective value will be capped to {capped}."
            )
            values[name] = capped
    reset_text = str(values[SHARE_AUTO_OFFSET_RESET])
    config = ShareGroupConfig(
        record_lock_duration_ms=int(values[SHARE_RECORD_LOCK_DURATION_MS]),
        delivery_count_limit=int(values[SHARE_DELIVERY_COUNT_LIMIT]),
        partition_max_record_locks=int(values[SHARE_PARTITION_MAX_RECORD_LOCKS]),
        session_timeout_ms=int(values[SHARE_SESSION_TIMEOUT_MS]),
        heartbeat_interval_ms=int(values[SHARE_HEARTBEAT_INTERVAL_MS]),
        assignment_interval_ms=int(values[SHARE_ASSIGNMENT_INTERVAL_MS]),
        auto_offset_reset=parse_auto_offset_reset(reset_text),
        read_committed=values[SHARE_ISOLATION_LEVEL] == READ_COMMITTED,
        renew_acknowledge_enable=bool(values[SHARE_RENEW_ACKNOWLEDGE_ENABLE]),
        dead_letter_topic=str(values[DEAD_LETTER_TOPIC_NAME]) or None,
        dead_letter_copy_record=bool(values[DEAD_LETTER_COPY_RECORD_ENABLE]),
        record_headers_enabled=bool(values[WEIR_RECORD_HEADERS_ENABLE]),
        record_ttl_ms=int(values[WEIR_RECORD_TTL_MS]),
        release_backoff_initial_ms=int(values[WEIR_RELEASE_BACKOFF_INITIAL_MS]),
        release_backoff_max_ms=int(values[WEIR_RELEASE_BACKOFF_MAX_MS]),
        delivery_delay_max_ms=settings.share_delivery_delay_max_ms,
        key_ordering=bool(values[WEIR_KEY_ORDERING_ENABLE]),
    )
    return config, warnings


# -- parsing ---------------------------------------------------------------------------


def _parse_int(name: str, text: str, at_least: int) -> int:
    try:
        value = int(text.strip(), 10)
    except ValueError:
        value = None
    if value is None or not -INT32_MAX - 1 <= value <= INT32_MAX:  # Kafka's INT: a Java int
        raise InvalidGroupConfig(
            f"Invalid value {text} for configuration {name}: Not a number of type INT"
        )
    if value < at_least:
        raise InvalidGroupConfig(
            f"Invalid value {value} for configuration {name}: Value must be at least {at_least}"
        )
    return value


def _parse_bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise InvalidGroupConfig(
            f"Invalid value {text} for configuration {name}: "
            "Expected value to be either true or false"
        )
    return value == "true"
