"""Broker settings: command-line flags over WEIR_* environment variables over a
TOML file over defaults. Every limit the broker enforces has a name here."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, NoReturn

from weir.broker.config_errors import ConfigError
from weir.broker.security_config import (
    Listener,
    SecurityConfig,
    SecurityProtocol,
    parse_security_table,
)
from weir.groupcoord.group_configs import GROUP_CONFIGS, InvalidGroupConfig
from weir.groupcoord.settings import GroupSettings
from weir.log.filesystem_sync import (
    FSYNC_METHODS,
    FsyncMethodUnavailableError,
    resolve_fsync_method,
)
from weir.log.settings import LogSettings
from weir.txn.transaction_coordinator import TransactionSettings

_TRANSACTION_DEFAULTS = TransactionSettings()

ENV_PREFIX = "WEIR_"


@dataclass(frozen=True)
class HostPort:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Limits:
    """Named maxima for everything a client can make the broker hold.

    Memory: request frames and responses held in user space are charged to one
    broker-wide budget (`weir.broker.in_flight_budget`): at most
    `in_flight_bytes_max` from a shared pool, plus up to
    `connection_in_flight_bytes_min` per connection outside it (so small requests
    get through while stuck peers hold the pool). A connection holding more than
    `connection_in_flight_bytes_max` takes no new frame. docs/user-guide.md
    derives the broker's RSS bound from these."""

    frame_bytes_max: int = 100 * 1024 * 1024
    connections_max: int = 1000
    # Kafka's max.connections.per.ip (unlimited there): one address, a host or
    # every host behind one NAT address, holds at most a fifth of
    # connections_max, so idle or leaked sockets from one place cannot take every
    # slot, while a host running a hundred clients (one or two connections each)
    # is not refused.
    connections_per_address_max: int = 200
    requests_in_flight_per_connection_max: int = 64
    request_receive_timeout_ms: int = 30_000
    # Also the longest a response may wait for its peer to read anything.
    connection_idle_timeout_ms: int = 600_000
    in_flight_bytes_max: int = 256 * 1024 * 1024
    connection_in_flight_bytes_max: int = 16 * 1024 * 1024
    connection_in_flight_bytes_min: int = 64 * 1024
    fetch_wait_ms_max: int = 30_000
    fetch_response_bytes_max: int = 64 * 1024 * 1024
    produce_timeout_ms_max: int = 60_000
    # The HTTP listener's own pool; when full, the oldest connection still
    # waiting for its request is closed to make room (health checks get in).
    http_connections_max: int = 64
    http_request_timeout_ms: int = 5_000
    # An HTTP request's line and headers.
    http_request_bytes_max: int = 8192
    # An HTTP request's body, held whole by the endpoint that reads it (SQS's largest
    # batch, 256 KiB of messages, fits with its JSON; REST produce's streaming mode
    # bounds each record instead).
    http_body_bytes_max: int = 1024 * 1024
    # A classic JoinGroup's protocol metadata (all protocols of the member), and a
    # SyncGroup's assignments (all members): held with the group until it moves on.
    group_member_metadata_bytes_max: int = 1024 * 1024
    group_assignments_bytes_max: int = 1024 * 1024
    # Addresses whose refused connections are remembered for rate-limited logging.
    refusal_log_addresses_max: int = 1024


@dataclass(frozen=True)
class BrokerConfig:
    """Every broker setting, flat, under the name users write (TOML key; flag and
    `WEIR_*` variable for those in FLAG_NAMES).

    Settings a pure layer reads are declared, with their one default, in that
    layer's dataclass (`GroupSettings`, `LogSettings`); the fields here take their
    defaults from there and `group_settings()`/`log_settings()` build the layer's
    dataclass from them (the one place the names are mapped)."""

    data_dir: Path = Path("./weir-data")
    node_id: int = 1
    kafka_listen: HostPort = HostPort("127.0.0.1", 9092)
    kafka_advertise: HostPort | None = None
    http_listen: HostPort = HostPort("127.0.0.1", 8090)
    etcd: str | None = None
    # A cluster broker's rack (rack-aware replica placement); none by default.
    rack: str | None = None
    # A cluster broker whose lease (renewed every third of this) is not renewed for
    # this long leaves the cluster: its partitions get new leaders (Kafka's
    # broker.session.timeout.ms).
    broker_session_timeout_ms: int = 9_000
    # A follower not caught up for this long leaves the ISR (Kafka's default is 30 s).
    replica_lag_time_max_ms: int = 10_000
    # The active controller hands leadership back to preferred (first) replicas
    # that are alive and in sync, every leader_imbalance_check_interval_ms, for each
    # broker that leads fewer than (100 - leader_imbalance_per_broker_percentage) %
    # of the partitions it is preferred for (Kafka's auto.leader.rebalance.enable,
    # leader.imbalance.per.broker.percentage, leader.imbalance.check.interval.seconds).
    # 30 s, not Kafka's 300: after a broker returns, the broker that took over its
    # leaderships is the single point whose next fault stops all of them, so the
    # window is kept short; a check is a scan of the controller's view (no etcd
    # read), and a broker that keeps restarting gets its leaderships back at most
    # once per check, each only after it rejoined the ISR.
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_ms: int = 30_000
    # A follower whose fetch connection closed (a killed process's kernel closes it)
    # and that has not fetched again within this leaves the ISR without waiting for
    # replica_lag_time_max_ms; one paused or cut off (no close) still waits for that.
    replica_disconnect_grace_ms: int = 1_000
    auto_create_topics: bool = True
    default_partition_count: int = 1
    # SIGTERM to exit: in-flight requests get up to a quarter of it (after the
    # listener closes), closing the logs the rest; logs not closed by then are
    # recovered at the next start. 8 s keeps the documented 10 s with margin.
    shutdown_timeout_ms: int = 8_000
    # The log (weir.log.settings.LogSettings), under the same names.
    retention_check_interval_ms: int = LogSettings.retention_check_interval_ms
    log_cleaner_backoff_ms: int = LogSettings.log_cleaner_backoff_ms
    producer_id_expiration_ms: int = LogSettings.producer_id_expiration_ms
    unsafe_skip_fsync: bool = LogSettings.unsafe_skip_fsync
    fsync_method: str = LogSettings.fsync_method
    page_cache_window_bytes: int = LogSettings.page_cache_window_bytes
    group_commit_delay_ms: int = LogSettings.group_commit_delay_ms
    # Consumer groups (weir.groupcoord.settings.GroupSettings), under Kafka's names.
    offsets_topic_partition_count: int = GroupSettings.offsets_topic_partition_count
    offsets_retention_minutes: int = GroupSettings.offsets_retention_ms // 60_000
    offsets_retention_check_interval_ms: int = GroupSettings.offsets_retention_check_interval_ms
    offset_metadata_max_bytes: int = GroupSettings.offset_metadata_max_bytes
    group_max_size: int = GroupSettings.group_max_size
    group_consumer_session_timeout_ms: int = GroupSettings.consumer_session_timeout_ms
    group_consumer_heartbeat_interval_ms: int = GroupSettings.consumer_heartbeat_interval_ms
    group_consumer_min_session_timeout_ms: int = GroupSettings.consumer_session_timeout_min_ms
    group_consumer_max_session_timeout_ms: int = GroupSettings.consumer_session_timeout_max_ms
    group_consumer_min_heartbeat_interval_ms: int = GroupSettings.consumer_heartbeat_interval_min_ms
    group_consumer_max_heartbeat_interval_ms: int = GroupSettings.consumer_heartbeat_interval_max_ms
    group_min_session_timeout_ms: int = GroupSettings.classic_session_timeout_min_ms
    group_max_session_timeout_ms: int = GroupSettings.classic_session_timeout_max_ms
    group_initial_rebalance_delay_ms: int = GroupSettings.classic_initial_rebalance_delay_ms
    # Share groups (KIP-932; GroupSettings' share_* fields), under Kafka's names.
    group_share_record_lock_duration_ms: int = GroupSettings.share_record_lock_duration_ms
    group_share_min_record_lock_duration_ms: int = GroupSettings.share_record_lock_duration_min_ms
    group_share_max_record_lock_duration_ms: int = GroupSettings.share_record_lock_duration_max_ms
    group_share_delivery_count_limit: int = GroupSettings.share_delivery_count_limit
    group_share_min_delivery_count_limit: int = GroupSettings.share_delivery_count_limit_min
    group_share_max_delivery_count_limit: int = GroupSettings.share_delivery_count_limit_max
    group_share_partition_max_record_locks: int = GroupSettings.share_partition_max_record_locks
    group_share_min_partition_max_record_locks: int = (
        GroupSettings.share_partition_max_record_locks_min
    )
    group_share_max_partition_max_record_locks: int = (
        GroupSettings.share_partition_max_record_locks_max
    )
    group_share_session_timeout_ms: int = GroupSettings.share_session_timeout_ms
    group_share_min_session_timeout_ms: int = GroupSettings.share_session_timeout_min_ms
    group_share_max_session_timeout_ms: int = GroupSettings.share_session_timeout_max_ms
    group_share_heartbeat_interval_ms: int = GroupSettings.share_heartbeat_interval_ms
    group_share_min_heartbeat_interval_ms: int = GroupSettings.share_heartbeat_interval_min_ms
    group_share_max_heartbeat_interval_ms: int = GroupSettings.share_heartbeat_interval_max_ms
    group_share_assignment_interval_ms: int = GroupSettings.share_assignment_interval_ms
    group_share_min_assignment_interval_ms: int = GroupSettings.share_assignment_interval_min_ms
    group_share_max_assignment_interval_ms: int = GroupSettings.share_assignment_interval_max_ms
    group_share_max_size: int = GroupSettings.share_group_max_size
    group_share_max_share_sessions: int = GroupSettings.share_sessions_max
    # The defaults of the group configs of these names (Kafka has no broker setting).
    share_auto_offset_reset: str = GroupSettings.share_auto_offset_reset
    share_isolation_level: str = GroupSettings.share_isolation_level
    share_renew_acknowledge_enable: bool = GroupSettings.share_renew_acknowledge_enable
    # Dead-letter topics (KIP-1191).
    errors_deadletterqueue_topic_name_prefix: str = GroupSettings.dead_letter_topic_prefix
    errors_deadletterqueue_auto_create_topics_enable: bool = (
        GroupSettings.dead_letter_auto_create_topics
    )
    # Delayed delivery and release backoff of share groups (Weir's own setting).
    share_delivery_delay_max_ms: int = GroupSettings.share_delivery_delay_max_ms
    # Transactions (weir.txn.transaction_coordinator.TransactionSettings), Kafka's names.
    transaction_state_partition_count: int = 50
    transaction_max_timeout_ms: int = _TRANSACTION_DEFAULTS.max_timeout_ms
    transactional_id_expiration_ms: int = _TRANSACTION_DEFAULTS.id_expiration_ms
    # The finalized `transaction.version` feature ApiVersions advertises (2: KIP-890's
    # epoch bump on every end and implicit adds; 1 pins the older protocol).
    transaction_version: int = _TRANSACTION_DEFAULTS.transaction_version
    limits: Limits = field(default_factory=Limits)
    # The `[security]` table (weir.broker.security_config): listeners, TLS, SASL, ACLs.
    security: SecurityConfig = field(default_factory=SecurityConfig)

    def group_settings(self) -> GroupSettings:
        return GroupSettings(
            offsets_topic_partition_count=self.offsets_topic_partition_count,
            offsets_retention_ms=self.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms=self.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes=self.offset_metadata_max_bytes,
            group_max_size=self.group_max_size,
            consumer_session_timeout_ms=self.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=self.group_consumer_heartbeat_interval_ms,
            consumer_session_timeout_min_ms=self.group_consumer_min_session_timeout_ms,
            consumer_session_timeout_max_ms=self.group_consumer_max_session_timeout_ms,
            consumer_heartbeat_interval_min_ms=self.group_consumer_min_heartbeat_interval_ms,
            consumer_heartbeat_interval_max_ms=self.group_consumer_max_heartbeat_interval_ms,
            classic_session_timeout_min_ms=self.group_min_session_timeout_ms,
            classic_session_timeout_max_ms=self.group_max_session_timeout_ms,
            classic_initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            share_record_lock_duration_ms=self.group_share_record_lock_duration_ms,
            share_record_lock_duration_min_ms=self.group_share_min_record_lock_duration_ms,
            share_record_lock_duration_max_ms=self.group_share_max_record_lock_duration_ms,
            share_delivery_count_limit=self.group_share_delivery_count_limit,
            share_delivery_count_limit_min=self.group_share_min_delivery_count_limit,
            share_delivery_count_limit_max=self.group_share_max_delivery_count_limit,
            share_partition_max_record_locks=self.group_share_partition_max_record_locks,
            share_partition_max_record_locks_min=self.group_share_min_partition_max_record_locks,
            share_partition_max_record_locks_max=self.group_share_max_partition_max_record_locks,
            share_session_timeout_ms=self.group_share_session_timeout_ms,
            share_session_timeout_min_ms=self.group_share_min_session_timeout_ms,
            share_session_timeout_max_ms=self.group_share_max_session_timeout_ms,
            share_heartbeat_interval_ms=self.group_share_heartbeat_interval_ms,
            share_heartbeat_interval_min_ms=self.group_share_min_heartbeat_interval_ms,
            share_heartbeat_interval_max_ms=self.group_share_max_heartbeat_interval_ms,
            share_assignment_interval_ms=self.group_share_assignment_interval_ms,
            share_assignment_interval_min_ms=self.group_share_min_assignment_interval_ms,
            share_assignment_interval_max_ms=self.group_share_max_assignment_interval_ms,
            share_group_max_size=self.group_share_max_size,
            share_sessions_max=self.group_share_max_share_sessions,
            share_auto_offset_reset=self.share_auto_offset_reset,
            share_isolation_level=self.share_isolation_level,
            share_renew_acknowledge_enable=self.share_renew_acknowledge_enable,
            dead_letter_topic_prefix=self.errors_deadletterqueue_topic_name_prefix,
            dead_letter_auto_create_topics=self.errors_deadletterqueue_auto_create_topics_enable,
            share_delivery_delay_max_ms=self.share_delivery_delay_max_ms,
        )

    def transaction_settings(self) -> TransactionSettings:
        return TransactionSettings(
            max_timeout_ms=self.transaction_max_timeout_ms,
            id_expiration_ms=self.transactional_id_expiration_ms,
            transaction_version=self.transaction_version,
        )

    def log_settings(self) -> LogSettings:
        return LogSettings(
            retention_check_interval_ms=self.retention_check_interval_ms,
            log_cleaner_backoff_ms=self.log_cleaner_backoff_ms,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            unsafe_skip_fsync=self.unsafe_skip_fsync,
            fsync_method=self.fsync_method,
            page_cache_window_bytes=self.page_cache_window_bytes,
            group_commit_delay_ms=self.group_commit_delay_ms,
        )

    @property
    def advertised(self) -> HostPort:
        """The address other brokers reach this one at: the inter-broker listener's
        (the first listener's when none is named) when `security.listeners` is set."""
        if not self.security.listeners:
            return self.kafka_advertise or self.kafka_listen
        return self.advertised_on(self.security.inter_broker_listener_name)

    @property
    def kafka_listeners(self) -> tuple[Listener, ...]:
        """Every Kafka listener: the security table's, or one PLAINTEXT listener on
        `kafka_listen` (advertised as `kafka_advertise`)."""
        if self.security.listener_list:
            return self.security.listener_list
        advertised = self.kafka_advertise or self.kafka_listen
        return (
            Listener(
                "PLAINTEXT",
                self.kafka_listen.host,
                self.kafka_listen.port,
                SecurityProtocol.PLAINTEXT,
                advertised.host,
                advertised.port,
            ),
        )

    def advertised_on(self, listener_name: str) -> HostPort:
        """The address a client that came in on `listener_name` is told (the
        inter-broker listener's for a name this broker has no listener of)."""
        listeners = self.security.listener_list
        if not self.security.listeners or not listeners:
            return self.kafka_advertise or self.kafka_listen
        chosen = next((item for item in listeners if item.name == listener_name), None)
        if chosen is None:
            name = self.security.inter_broker_listener_name
            chosen = next((item for item in listeners if item.name == name), listeners[0])
        return HostPort(chosen.advertised_host, chosen.advertised_port)


def parse_host_port(text: str, setting: str) -> HostPort:
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{setting}: expected HOST:PORT, got {text!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"{setting}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{setting}: port {port} is out of range")
    return HostPort(host.strip("[]"), port)


class _FlagParser(argparse.ArgumentParser):
    """Reports a bad flag as a ConfigError (one line), not usage text plus exit.
    `--help` still prints the help and exits 0 (argparse's own exit)."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


@dataclass(frozen=True)
class _Flag:
    """A setting that also has a flag and a WEIR_* variable (both derived from the
    name, its TOML key); `help` prints `meaning` and the default."""

    name: str
    metavar: str
    meaning: str
    when_unset: str = "none"  # the default, described, when BrokerConfig's is None


_FLAGS = (
    _Flag("config", "FILE", "TOML file with any setting; flags and variables win over it"),
    _Flag("data_dir", "DIR", "logs and metadata; created if absent; one broker per dir"),
    _Flag("node_id", "N", "this broker's id, unique in a cluster"),
    _Flag("kafka_listen", "HOST:PORT", "the Kafka protocol listener"),
    _Flag(
        "kafka_advertise",
        "HOST:PORT",
        "the address clients and other brokers are told to connect to",
        when_unset="the listen address",
    ),
    _Flag("http_listen", "HOST:PORT", "health checks, /metrics and the group views"),
    _Flag(
        "etcd",
        "URL[,URL...]",
        "etcd client URLs: this broker joins a replicated cluster",
        when_unset="none, a single node with its metadata in the data dir",
    ),
)

FLAG_NAMES = tuple(flag.name for flag in _FLAGS)

_EPILOG = (
    "Flags win over WEIR_* variables, which win over the --config file. "
    "WEIR_LOG_LEVEL sets the log level (DEBUG, INFO, WARNING, ERROR, CRITICAL; default INFO). "
    "Every setting, those only the file sets included, is documented in docs/user-guide.md "
    '("Running a broker").'
)


def flag_of(name: str) -> str:
    """`data_dir` -> `--data-dir`."""
    return "--" + name.replace("_", "-")


def variable_of(name: str) -> str:
    """`data_dir` -> `WEIR_DATA_DIR`."""
    return ENV_PREFIX + name.upper()


def build_argument_parser() -> argparse.ArgumentParser:
    parser = _FlagParser(prog="weir serve", description="Run a Weir broker.", epilog=_EPILOG)
    defaults = BrokerConfig()
    for flag in _FLAGS:
        default = getattr(defaults, flag.name, None)
        default_text = flag.when_unset if default is None else str(default)
        parser.add_argument(
            flag_of(flag.name),
            metavar=flag.metavar,
            help=f"{flag.meaning} (default: {default_text}; env {variable_of(flag.name)})",
        )
    return parser


@dataclass(frozen=True)
class _Given:
    """A value given for a setting and where it came from, as errors name it:
    `--node-id`, `WEIR_NODE_ID` or `FILE: node_id`."""

    value: Any
    source: str


class SettingSources:
    """Where each setting was given, for errors found after loading (a listener
    that cannot bind, a data dir that is not usable): the flag, the variable or
    the file key the user wrote; the flag for a flag setting left at its default."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self._sources = dict(sources)

    def of(self, name: str) -> str:
        default = flag_of(name) if name in FLAG_NAMES else name
        return self._sources.get(name, default)


def load_config(argv: Sequence[str], environ: Mapping[str, str]) -> BrokerConfig:
    """Resolve settings; raises ConfigError naming the flag, variable or file key."""
    return load_config_and_sources(argv, environ)[0]


def load_config_and_sources(
    argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[BrokerConfig, SettingSources]:
    """The settings, and where each was given (flags over WEIR_* variables over
    the --config file over defaults). Raises ConfigError."""
    given = _flags_and_variables(argv, environ)
    config_file = given.pop("config", None)
    file_settings: dict[str, _Given] = {}
    file_label = ""
    if config_file is not None:
        path = Path(str(config_file.value))
        file_label = str(path)
        file_settings = _file_settings(_read_toml(path, config_file.source), file_label)
    settings = {**file_settings, **given}
    config = _apply(BrokerConfig(), settings, file_label)
    return config, SettingSources({name: g.source for name, g in settings.items()})


def _flags_and_variables(argv: Sequence[str], environ: Mapping[str, str]) -> dict[str, _Given]:
    args = vars(build_argument_parser().parse_args(list(argv)))
    given: dict[str, _Given] = {}
    for name in FLAG_NAMES:
        env_value = environ.get(variable_of(name))
        if args.get(name) is not None:
            given[name] = _Given(str(args[name]), flag_of(name))
        elif env_value:
            given[name] = _Given(env_value, variable_of(name))
    return given


def _read_toml(path: Path, source: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: {path} is not valid TOML: {exc}") from None


def _file_settings(document: Mapping[str, Any], file_label: str) -> dict[str, _Given]:
    """The file's keys (dashes read as underscores), each labelled `FILE: key`;
    an unknown key is an error naming the file."""
    known = {f.name for f in fields(BrokerConfig)}
    settings: dict[str, _Given] = {}
    for key, value in document.items():
        name = key.replace("-", "_")
        if name not in known:
            raise ConfigError(f"{file_label}: unknown setting {key!r}")
        settings[name] = _Given(value, f"{file_label}: {key}")
    return settings


def _apply(config: BrokerConfig, settings: Mapping[str, _Given], file_label: str) -> BrokerConfig:
    """`config` with `settings` applied and checked. `file_label` (the settings
    file, or "") prefixes errors about settings that only the file sets."""
    where = f"{file_label}: " if file_label else ""
    limits = settings.get("limits")
    values = {
        name: _convert(name, given.value, given.source)
        for name, given in settings.items()
        if name not in ("limits", "security")
    }
    resolved = replace(config, limits=_apply_limits(limits, where), **values)
    _check_consumer_group_bounds(resolved, where)
    _check_share_group_bounds(resolved, where)
    return replace(resolved, security=_apply_security(resolved, settings.get("security"), where))


def _apply_security(config: BrokerConfig, given: _Given | None, where: str) -> SecurityConfig:
    """The `[security]` table (only a file has one), its listeners resolved against
    `kafka_listen`/`kafka_advertise` when it names none."""
    advertised = config.advertised
    return parse_security_table(
        None if given is None else given.value,
        given.source if given is not None else f"{where}[security]",
        (config.kafka_listen.host, config.kafka_listen.port),
        (advertised.host, advertised.port),
    )


def _check_consumer_group_bounds(config: BrokerConfig, where: str) -> None:
    """KIP-848 defaults lie within their bounds, as Kafka requires at start."""
    for name in ("session_timeout", "heartbeat_interval"):
        low = getattr(config, f"group_consumer_min_{name}_ms")
        value = getattr(config, f"group_consumer_{name}_ms")
        high = getattr(config, f"group_consumer_max_{name}_ms")
        if not low <= value <= high:
            raise ConfigError(
                f"{where}group_consumer_{name}_ms ({value}) must lie within "
                f"group_consumer_min_{name}_ms ({low}) and group_consumer_max_{name}_ms ({high})"
            )


def _check_share_group_bounds(config: BrokerConfig, where: str) -> None:
    """Share-group defaults lie within their bounds, as Kafka requires at start."""
    for name in (
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "record_lock_duration_ms",
        "delivery_count_limit",
        "partition_max_record_locks",
        "assignment_interval_ms",
    ):
        low = getattr(config, f"group_share_min_{name}")
        value = getattr(config, f"group_share_{name}")
        high = getattr(config, f"group_share_max_{name}")
        if not low <= value <= high:
            raise ConfigError(
                f"{where}group_share_{name} ({value}) must lie within "
                f"group_share_min_{name} ({low}) and group_share_max_{name} ({high})"
            )


def _apply_limits(given: _Given | None, where: str) -> Limits:
    """The `[limits]` table (only a file has one); `where` prefixes errors."""
    if given is None:
        return Limits()
    if not isinstance(given.value, dict):
        raise ConfigError(f"{given.source}: expected a table")
    known = {f.name for f in fields(Limits)}
    values: dict[str, int] = {}
    for name, value in given.value.items():
        key = name.replace("-", "_")
        if key not in known:
            raise ConfigError(f"{where}unknown setting 'limits.{name}'")
        values[key] = _positive_int(f"{where}limits.{name}", value)
    limits = Limits(**values)
    _check_in_flight_limits(limits, where)
    return limits


def _check_in_flight_limits(limits: Limits, where: str) -> None:
    """The budget can always admit one frame into an empty pool, and a
    connection's guaranteed minimum is within its share, within the pool."""
    ordered = (
        ("connection_in_flight_bytes_min", limits.connection_in_flight_bytes_min),
        ("connection_in_flight_bytes_max", limits.connection_in_flight_bytes_max),
        ("in_flight_bytes_max", limits.in_flight_bytes_max),
    )
    for (low_name, low), (high_name, high) in zip(ordered, ordered[1:]):  # noqa: B905
        if low > high:
            raise ConfigError(
                f"{where}limits.{low_name} ({low}) must not exceed limits.{high_name} ({high})"
            )
    if limits.frame_bytes_max > limits.in_flight_bytes_max:
        raise ConfigError(
            f"{where}limits.frame_bytes_max ({limits.frame_bytes_max}) must not exceed "
            f"limits.in_flight_bytes_max ({limits.in_flight_bytes_max})"
        )


def _convert(name: str, value: Any, setting: str) -> Any:
    """`value` given for setting `name` as its type; errors name `setting`, where the
    value came from (`--node-id`, `WEIR_NODE_ID`, `FILE: node_id`)."""
    if name in ("kafka_listen", "http_listen", "kafka_advertise"):
        return parse_host_port(str(value), setting)
    if name == "data_dir":
        return Path(str(value))
    if name == "node_id":
        node_id = _int(setting, value)
        if node_id < 0:
            raise ConfigError(f"{setting}: must be >= 0, got {node_id}")
        return node_id
    if name in BOOLEAN_SETTINGS:
        if not isinstance(value, bool):
            raise ConfigError(f"{setting}: expected true or false, got {value!r}")
        return value
    if name in ("etcd", "rack"):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{setting}: expected a non-empty string, got {value!r}")
        return value
    if name == "fsync_method":
        return _fsync_method(setting, value)
    if name in GROUP_CONFIG_DEFAULT_SETTINGS:
        return _group_config_default(name, setting, value)
    if name == "errors_deadletterqueue_topic_name_prefix":
        if not isinstance(value, str):
            raise ConfigError(f"{setting}: expected a string, got {value!r}")
        return value
    if name in SHARE_SETTING_RANGES:
        return _share_setting(name, setting, value)
    if name == "page_cache_window_bytes":
        number = _int(setting, value)
        if number < -1:
            raise ConfigError(f"{setting}: must be -1 (keep everything) or >= 0, got {number}")
        return number
    if name in PERCENTAGE_SETTINGS:
        number = _int(setting, value)
        if not 0 <= number <= 100:
            raise ConfigError(f"{setting}: must be a percentage from 0 to 100, got {number}")
        return number
    if name == "transaction_version":
        number = _int(setting, value)
        if number not in (1, 2):
            raise ConfigError(f"{setting}: must be 1 or 2, got {number}")
        return number
    if name in NON_NEGATIVE_SETTINGS:
        number = _int(setting, value)
        if number < 0:
            raise ConfigError(f"{setting}: must be >= 0, got {number}")
        return number
    return _positive_int(setting, value)


def _fsync_method(setting: str, value: Any) -> str:
    if value not in FSYNC_METHODS:
        raise ConfigError(f"{setting}: expected one of {', '.join(FSYNC_METHODS)}, got {value!r}")
    try:
        resolve_fsync_method(value)
    except FsyncMethodUnavailableError as exc:
        raise ConfigError(f"{setting}: {exc}") from None
    return str(value)


BOOLEAN_SETTINGS = (
    "auto_create_topics",
    "unsafe_skip_fsync",
    "auto_leader_rebalance_enable",
    "share_renew_acknowledge_enable",
    "errors_deadletterqueue_auto_create_topics_enable",
)
NON_NEGATIVE_SETTINGS = (
    "group_initial_rebalance_delay_ms",
    "group_commit_delay_ms",
    "share_delivery_delay_max_ms",
)
# Share-group settings and Kafka's range for each (None: no maximum); the others
# of them are positive.
SHARE_SETTING_RANGES: dict[str, tuple[int, int | None]] = {
    "group_share_record_lock_duration_ms": (1_000, 3_600_000),
    "group_share_min_record_lock_duration_ms": (1_000, 30_000),
    "group_share_max_record_lock_duration_ms": (30_000, 3_600_000),
    "group_share_delivery_count_limit": (2, 10),
    "group_share_min_delivery_count_limit": (2, 5),
    "group_share_max_delivery_count_limit": (5, 25),
    "group_share_partition_max_record_locks": (100, 10_000),
    "group_share_min_partition_max_record_locks": (100, 2_000),
    "group_share_max_partition_max_record_locks": (2_000, 10_000),
    "group_share_assignment_interval_ms": (0, None),
    "group_share_min_assignment_interval_ms": (0, None),
    "group_share_max_assignment_interval_ms": (0, None),
    "group_share_max_size": (1, 1_000),
}
# Broker settings that are the defaults of the group configs of the same names.
GROUP_CONFIG_DEFAULT_SETTINGS = ("share_auto_offset_reset", "share_isolation_level")


def _share_setting(name: str, setting: str, value: Any) -> int:
    number = _int(setting, value)
    low, high = SHARE_SETTING_RANGES[name]
    if number < low or (high is not None and number > high):
        within = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ConfigError(f"{setting}: must be {within}, got {number}")
    return number


def _group_config_default(name: str, setting: str, value: Any) -> str:
    """A group config's default, checked as a group's own value would be."""
    if not isinstance(value, str):
        raise ConfigError(f"{setting}: expected a string, got {value!r}")
    try:
        return str(GROUP_CONFIGS[name.replace("_", ".")].parse(value))
    except InvalidGroupConfig as exc:
        raise ConfigError(f"{setting}: {exc}") from None


PERCENTAGE_SETTINGS = ("leader_imbalance_per_broker_percentage",)


def _int(setting: str, value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{setting}: expected an integer, got {value!r}") from None


def _positive_int(setting: str, value: Any) -> int:
    number = _int(setting, value)
    if number <= 0:
        raise ConfigError(f"{setting}: must be positive, got {number}")
    return number


def check_data_dir(path: Path, setting: str = "--data-dir") -> Path | None:
    """Create the data dir if needed and prove it is writable. Returns the outermost
    directory this created (the data dir or a parent of it), None when the data dir
    existed: what a start that fails removes again (`remove_new_data_dir`).
    Errors name `setting`, where the path was given."""
    created = _outermost_missing(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".weir-write-probe"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        remove_new_data_dir(created)
        raise ConfigError(f"{setting}: {path} is not usable: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK):
        remove_new_data_dir(created)
        raise ConfigError(f"{setting}: {path} is not writable")
    return created


def _outermost_missing(path: Path) -> Path | None:
    """The outermost of `path` and its parents that does not exist (all below it
    do not either), or None when `path` exists."""
    missing = None
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            break
        missing = candidate
    return missing


def remove_new_data_dir(created: Path | None) -> None:
    """Remove `created`, a directory `check_data_dir` created for a start that then
    failed, with what that start put in it. Nothing when None (the data dir existed:
    it and everything in it stay)."""
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)


LOG_LEVEL_VARIABLE = "WEIR_LOG_LEVEL"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(environ: Mapping[str, str]) -> int:
    """The level WEIR_LOG_LEVEL names (any case; INFO when unset or empty)."""
    text = environ.get(LOG_LEVEL_VARIABLE) or "INFO"
    name = text.strip().upper()
    if name not in LOG_LEVELS:
        raise ConfigError(
            f"{LOG_LEVEL_VARIABLE}: expected one of {', '.join(LOG_LEVELS)}, got {text!r}"
        )
    return logging.getLevelNamesMapping()[name]
