"""Every consumer-group setting and its one default.

The coordinators read these; the broker's `BrokerConfig` exposes each one to users
(flags, `WEIR_*` variables, the TOML file) under Kafka's broker setting name and
builds this from them (`BrokerConfig.group_settings`). Times are in ms here, as
everywhere in the coordinators, whatever unit the user-facing name has."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupSettings:
    # offsets.topic.num.partitions: a group's offsets partition is its id's hash
    # modulo this (only when the broker creates the topic; an existing one keeps
    # its count).
    offsets_topic_partition_count: int = 50
    # offsets.retention.minutes: committed offsets of a group empty this long (or,
    # for standalone commits, this long after the commit) are deleted.
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    # offsets.retention.check.interval.ms: how often expired offsets are looked for.
    offsets_retention_check_interval_ms: int = 600_000
    # offset.metadata.max.bytes: longest metadata string an OffsetCommit may carry.
    offset_metadata_max_bytes: int = 4_096
    # group.max.size and group.consumer.max.size (Kafka: unbounded; Weir names a
    # maximum): members of one group, classic or KIP-848.
    group_max_size: int = 1_000
    # group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms:
    # KIP-848 members are fenced after a session without heartbeats, and are told
    # to heartbeat this often.
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    # group.consumer.{min,max}.session.timeout.ms and
    # group.consumer.{min,max}.heartbeat.interval.ms: the bounds of the two above
    # and of a group's own consumer.session.timeout.ms and
    # consumer.heartbeat.interval.ms (weir.groupcoord.group_configs).
    consumer_session_timeout_min_ms: int = 45_000
    consumer_session_timeout_max_ms: int = 60_000
    consumer_heartbeat_interval_min_ms: int = 5_000
    consumer_heartbeat_interval_max_ms: int = 15_000
    # group.min.session.timeout.ms and group.max.session.timeout.ms: the session
    # timeouts a classic JoinGroup may ask for.
    classic_session_timeout_min_ms: int = 6_000
    classic_session_timeout_max_ms: int = 1_800_000
    # group.initial.rebalance.delay.ms: a new classic group's first rebalance waits
    # this long for more members (KIP-134).
    classic_initial_rebalance_delay_ms: int = 3_000
