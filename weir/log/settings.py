"""The broker-wide log settings and their one default each (a topic's own settings
are `LogConfig`, weir/log/config.py).

`BrokerConfig` exposes each one to users (the TOML file; `WEIR_*` variables and
flags where the broker has one) under the same name and builds this from them
(`BrokerConfig.log_settings`)."""

from __future__ import annotations

from dataclasses import dataclass

# Decompressed bytes of one batch that are inflated to read its records: a
# timestamp lookup, a compaction pass, the key check of a produce to a compacted
# topic, loading group state. A bound on memory per batch, not a setting.
BATCH_INFLATE_BYTES_MAX = 64 * 1024 * 1024


@dataclass(frozen=True)
class LogSettings:
    # How often retention runs (deletes segments by retention.ms/retention.bytes,
    # expires idle producer state, releases idle partitions' descriptors).
    retention_check_interval_ms: int = 10_000
    # Kafka's log.cleaner.backoff.ms: compaction passes run at most this often.
    log_cleaner_backoff_ms: int = 15_000
    # Kafka's producer.id.expiration.ms: idempotent-producer state idle this long
    # is dropped from a partition.
    producer_id_expiration_ms: int = 86_400_000
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
