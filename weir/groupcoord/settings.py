"""Every consumer-group and share-group setting and its one default.

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
    # Share groups (KIP-932), under Kafka's broker settings: the defaults of a share
    # group's own configs (weir.groupcoord.group_configs), and for the bounded ones
    # the range those configs may be set within.
    # group.share.record.lock.duration.ms (+ group.share.{min,max}.record.lock.duration.ms):
    # how long a delivered record stays acquired by its consumer.
    share_record_lock_duration_ms: int = 30_000
    share_record_lock_duration_min_ms: int = 15_000
    share_record_lock_duration_max_ms: int = 60_000
    # group.share.delivery.count.limit (+ group.share.{min,max}.delivery.count.limit):
    # deliveries of a record before it is archived.
    share_delivery_count_limit: int = 5
    share_delivery_count_limit_min: int = 2
    share_delivery_count_limit_max: int = 10
    # group.share.partition.max.record.locks (+ {min,max}): records in flight
    # (acquired or waiting for redelivery) per share partition.
    share_partition_max_record_locks: int = 2_000
    share_partition_max_record_locks_min: int = 100
    share_partition_max_record_locks_max: int = 4_000
    # group.share.session.timeout.ms (+ {min,max}): a member silent this long is fenced.
    share_session_timeout_ms: int = 45_000
    share_session_timeout_min_ms: int = 45_000
    share_session_timeout_max_ms: int = 60_000
    # group.share.heartbeat.interval.ms (+ {min,max}): how often members heartbeat.
    share_heartbeat_interval_ms: int = 5_000
    share_heartbeat_interval_min_ms: int = 5_000
    share_heartbeat_interval_max_ms: int = 15_000
    # group.share.assignment.interval.ms (+ {min,max}): the least time between two
    # assignments of a share group.
    share_assignment_interval_ms: int = 1_000
    share_assignment_interval_min_ms: int = 0
    share_assignment_interval_max_ms: int = 15_000
    # group.share.max.size: members of one share group.
    share_group_max_size: int = 200
    # group.share.max.share.sessions: share sessions this broker holds at once.
    share_sessions_max: int = 2_000
    # share.auto.offset.reset, share.isolation.level, share.renew.acknowledge.enable:
    # Kafka's defaults of these group configs (Kafka has no broker setting for them;
    # Weir's broker settings of the same names set the default for every group).
    share_auto_offset_reset: str = "latest"
    share_isolation_level: str = "read_uncommitted"
    share_renew_acknowledge_enable: bool = True
    # errors.deadletterqueue.topic.name.prefix: a group's dead-letter topic must start
    # with this ("" allows any name); errors.deadletterqueue.auto.create.topics.enable:
    # a missing dead-letter topic is created by the broker.
    dead_letter_topic_prefix: str = "dlq."
    dead_letter_auto_create_topics: bool = False
    # share_delivery_delay_max_ms (Weir's own): the longest a record can be kept from
    # share groups by its delay headers or a release backoff; longer ones are capped
    # (SQS's DelaySeconds maximum, 15 minutes). 0: records are never delayed.
    share_delivery_delay_max_ms: int = 900_000
