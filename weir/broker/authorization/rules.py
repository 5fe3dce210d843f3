"""Every served API's authorization rule: Kafka 4.4's per-API checks (KafkaApis,
ControllerApis, AclApis), declared once per API, by family:

- `rules_data`: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, Metadata,
  DeleteRecords;
- `rules_groups`: FindCoordinator, the offsets and group membership APIs, group
  administration;
- `rules_transactions`: InitProducerId and the transaction APIs;
- `rules_admin`: topics, configurations, partitions, DescribeCluster;
- `rules_security`: ACLs, SCRAM credentials, client quotas;
- `rules_share`: share groups' membership, ShareFetch, ShareAcknowledge and the
  share-group offsets APIs;
- `rules_share_state`: the share coordinator's internal APIs (CLUSTER_ACTION).

Their helpers are `rules_shared`'s. An API with no rule is refused (the dispatcher
closes the connection); `missing_rules` names the served APIs without one, and the
registry checks at import that there are none among the handlers' keys."""

from __future__ import annotations

import weir.broker.authorization.rules_admin as admin
import weir.broker.authorization.rules_data as data
import weir.broker.authorization.rules_groups as groups
import weir.broker.authorization.rules_security as security
import weir.broker.authorization.rules_share as share
import weir.broker.authorization.rules_share_state as share_state
import weir.broker.authorization.rules_transactions as transactions
from weir.broker.authorization.gate import Rule
from weir.wire.protocol import ApiKey

RULES: dict[int, Rule] = {
    # Not authorized in Kafka: they come before authentication, or are it.
    ApiKey.API_VERSIONS: admin.unrestricted,
    ApiKey.SASL_HANDSHAKE: admin.unrestricted,
    ApiKey.SASL_AUTHENTICATE: admin.unrestricted,
    # The data path.
    ApiKey.PRODUCE: data.produce,
    ApiKey.FETCH: data.fetch,
    ApiKey.LIST_OFFSETS: data.list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: data.offset_for_leader_epoch,
    ApiKey.METADATA: data.metadata,
    ApiKey.DELETE_RECORDS: data.delete_records,
    # Groups and their offsets.
    ApiKey.FIND_COORDINATOR: groups.find_coordinator,
    ApiKey.OFFSET_COMMIT: groups.offset_commit,
    ApiKey.OFFSET_FETCH: groups.offset_fetch,
    ApiKey.OFFSET_DELETE: groups.offset_delete,
    ApiKey.JOIN_GROUP: groups.join_group,
    ApiKey.SYNC_GROUP: groups.sync_group,
    ApiKey.HEARTBEAT: groups.heartbeat,
    ApiKey.LEAVE_GROUP: groups.leave_group,
    ApiKey.LIST_GROUPS: groups.list_groups,
    ApiKey.DESCRIBE_GROUPS: groups.describe_groups,
    ApiKey.DELETE_GROUPS: groups.delete_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: groups.consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: groups.consumer_group_describe,
    # Share groups (KIP-932).
    ApiKey.SHARE_GROUP_HEARTBEAT: share.share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: share.share_group_describe,
    ApiKey.SHARE_FETCH: share.share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: share.share_acknowledge,
    # The share coordinator's internal APIs (brokers only).
    ApiKey.READ_SHARE_GROUP_STATE: share_state.read_share_group_state,
    ApiKey.WRITE_SHARE_GROUP_STATE: share_state.write_share_group_state,
    ApiKey.DELETE_SHARE_GROUP_STATE: share_state.delete_share_group_state,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: share_state.read_share_group_state_summary,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share.describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: share.alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: share.delete_share_group_offsets,
    # Transactions.
    ApiKey.INIT_PRODUCER_ID: transactions.init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: transactions.add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: transactions.add_offsets_to_txn,
    ApiKey.END_TXN: transactions.end_txn,
    ApiKey.WRITE_TXN_MARKERS: transactions.write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: transactions.txn_offset_commit,
    ApiKey.DESCRIBE_PRODUCERS: transactions.describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: transactions.describe_transactions,
    ApiKey.LIST_TRANSACTIONS: transactions.list_transactions,
    # Administration.
    ApiKey.CREATE_TOPICS: admin.create_topics,
    ApiKey.DELETE_TOPICS: admin.delete_topics,
    ApiKey.CREATE_PARTITIONS: admin.create_partitions,
    ApiKey.DESCRIBE_CONFIGS: admin.describe_configs,
    ApiKey.ALTER_CONFIGS: admin.alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: admin.incremental_alter_configs,
    ApiKey.DESCRIBE_CLUSTER: admin.describe_cluster,
    ApiKey.ELECT_LEADERS: admin.elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: admin.alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: admin.list_partition_reassignments,
    # Security administration.
    ApiKey.CREATE_ACLS: security.create_acls,
    ApiKey.DESCRIBE_ACLS: security.describe_acls,
    ApiKey.DELETE_ACLS: security.delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: security.describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: security.alter_user_scram_credentials,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: security.describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: security.alter_client_quotas,
}


def missing_rules(served: set[int]) -> list[str]:
    """The served APIs (keys) without a rule, by name."""
    return sorted(ApiKey(key).name for key in served - set(RULES))


def _check_every_handler_has_a_rule() -> None:
    from weir.broker.handlers.apis import HANDLERS

    missing = missing_rules(set(HANDLERS))
    if missing:
        raise RuntimeError(f"served APIs without an authorization rule: {missing}")


_check_every_handler_has_a_rule()
