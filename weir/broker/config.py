"""Broker settings: command-line flags over WEIR_* environment variables over a
TOML file over defaults. Every limit the broker enforces has a name here."""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, NoReturn

from weir.log.filesystem_sync import (
    FSYNC_METHODS,
    FsyncMethodUnavailableError,
    resolve_fsync_method,
)

ENV_PREFIX = "WEIR_"


class ConfigError(Exception):
    """A setting is missing, malformed or unusable; the message is one line."""


@dataclass(frozen=True)
class HostPort:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Limits:
    """Named maxima for everything a client can make the broker hold."""

    frame_bytes_max: int = 100 * 1024 * 1024
    connections_max: int = 1000
    http_connections_max: int = 64
    requests_in_flight_per_connection_max: int = 64
    request_receive_timeout_ms: int = 30_000
    connection_idle_timeout_ms: int = 600_000
    fetch_wait_ms_max: int = 30_000
    fetch_response_bytes_max: int = 64 * 1024 * 1024
    produce_timeout_ms_max: int = 60_000


@dataclass(frozen=True)
class BrokerConfig:
    data_dir: Path = Path("./weir-data")
    node_id: int = 1
    kafka_listen: HostPort = HostPort("127.0.0.1", 9092)
    kafka_advertise: HostPort | None = None
    http_listen: HostPort = HostPort("127.0.0.1", 8090)
    etcd: str | None = None
    auto_create_topics: bool = True
    default_partition_count: int = 1
    retention_check_interval_ms: int = 10_000
    # Kafka's log.cleaner.backoff.ms: compaction passes run at most this often.
    log_cleaner_backoff_ms: int = 15_000
    # Opt-in relaxed durability: acknowledge before fsync. Off by default.
    unsafe_skip_fsync: bool = False
    # How a flush round makes appends durable: "syncfs" (one call per round),
    # "fdatasync" (one per file), or "auto" (syncfs where it reports errors).
    fsync_method: str = "auto"
    # Newest bytes of each partition's log kept in the OS page cache; older
    # synced bytes are evicted after each fsync round. -1 keeps everything.
    page_cache_window_bytes: int = 16 * 1024 * 1024
    # While appends keep arriving during fsync rounds, each next round waits this
    # long to gather more of them (0: never wait). An idle broker syncs at once.
    group_commit_delay_ms: int = 1
    shutdown_timeout_ms: int = 8_000
    # Consumer groups (Kafka's offsets.topic.num.partitions, offsets.retention.minutes,
    # group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms).
    offsets_topic_partition_count: int = 50
    offsets_retention_minutes: int = 10_080
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    limits: Limits = field(default_factory=Limits)

    @property
    def advertised(self) -> HostPort:
        return self.kafka_advertise or self.kafka_listen


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
    """Reports a bad flag as a ConfigError (one line), not usage text plus exit."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def build_argument_parser() -> argparse.ArgumentParser:
    parser = _FlagParser(prog="weir serve", description="Run a Weir broker.")
    parser.add_argument("--config", metavar="FILE", help="TOML settings file")
    parser.add_argument("--data-dir", metavar="DIR")
    parser.add_argument("--node-id", metavar="N")
    parser.add_argument("--kafka-listen", metavar="HOST:PORT")
    parser.add_argument("--kafka-advertise", metavar="HOST:PORT")
    parser.add_argument("--http-listen", metavar="HOST:PORT")
    parser.add_argument("--etcd", metavar="URL")
    return parser


FLAG_NAMES = (
    "config",
    "data_dir",
    "node_id",
    "kafka_listen",
    "kafka_advertise",
    "http_listen",
    "etcd",
)


def load_config(argv: Sequence[str], environ: Mapping[str, str]) -> BrokerConfig:
    """Resolve settings; raises ConfigError (argparse exits on unknown flags)."""
    args = vars(build_argument_parser().parse_args(list(argv)))
    chosen: dict[str, str] = {}
    for name in FLAG_NAMES:
        env_value = environ.get(ENV_PREFIX + name.upper())
        if args.get(name) is not None:
            chosen[name] = str(args[name])
        elif env_value:
            chosen[name] = env_value
    file_settings: dict[str, Any] = {}
    if "config" in chosen:
        file_settings = _read_toml(Path(chosen.pop("config")))
    return _apply(BrokerConfig(), file_settings, chosen)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"--config: cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config: {path} is not valid TOML: {exc}") from None


def _apply(
    config: BrokerConfig, file_settings: Mapping[str, Any], flags: Mapping[str, str]
) -> BrokerConfig:
    settings: dict[str, Any] = {k.replace("-", "_"): v for k, v in file_settings.items()}
    settings.update(flags)
    limits = settings.pop("limits", {})
    if not isinstance(limits, dict):
        raise ConfigError("limits: expected a table")
    known = {f.name for f in fields(BrokerConfig)} - {"limits"}
    unknown = set(settings) - known
    if unknown:
        raise ConfigError(f"unknown setting {sorted(unknown)[0]!r}")
    values = {name: _convert(name, value) for name, value in settings.items()}
    return replace(config, limits=_apply_limits(limits), **values)


def _apply_limits(settings: Mapping[str, Any]) -> Limits:
    known = {f.name for f in fields(Limits)}
    values: dict[str, int] = {}
    for name, value in settings.items():
        key = name.replace("-", "_")
        if key not in known:
            raise ConfigError(f"unknown setting 'limits.{name}'")
        values[key] = _positive_int(f"limits.{name}", value)
    return Limits(**values)


def _convert(name: str, value: Any) -> Any:
    setting = "--" + name.replace("_", "-")
    if name in ("kafka_listen", "http_listen", "kafka_advertise"):
        return parse_host_port(str(value), setting)
    if name == "data_dir":
        return Path(str(value))
    if name == "node_id":
        node_id = _int(setting, value)
        if node_id < 0:
            raise ConfigError(f"{setting}: must be >= 0, got {node_id}")
        return node_id
    if name in ("auto_create_topics", "unsafe_skip_fsync"):
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: expected true or false")
        return value
    if name == "etcd":
        return str(value)
    if name == "fsync_method":
        if value not in FSYNC_METHODS:
            raise ConfigError(f"fsync_method: expected one of {', '.join(FSYNC_METHODS)}")
        try:
            resolve_fsync_method(value)
        except FsyncMethodUnavailableError as exc:
            raise ConfigError(f"fsync_method: {exc}") from None
        return value
    if name == "page_cache_window_bytes":
        number = _int(name, value)
        if number < -1:
            raise ConfigError(f"{name}: must be -1 (keep everything) or >= 0, got {number}")
        return number
    if name in NON_NEGATIVE_SETTINGS:
        number = _int(name, value)
        if number < 0:
            raise ConfigError(f"{name}: must be >= 0, got {number}")
        return number
    return _positive_int(name, value)


NON_NEGATIVE_SETTINGS = ("group_initial_rebalance_delay_ms", "group_commit_delay_ms")


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


def check_data_dir(path: Path) -> None:
    """Create the data dir if needed and prove it is writable."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".weir-write-probe"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"--data-dir: {path} is not usable: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK):
        raise ConfigError(f"--data-dir: {path} is not writable")
