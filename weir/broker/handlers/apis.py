"""The registry of implemented APIs: the only place that says what is served.

ApiVersions advertises exactly the keys listed here, with the version ranges the
wire layer implements for them.
"""

from __future__ import annotations

from typing import Any

import weir.broker.handlers.admin_configs as admin_configs
import weir.broker.handlers.admin_records as admin_records
import weir.broker.handlers.admin_topics as admin_topics
import weir.broker.handlers.api_versions as api_versions
import weir.broker.handlers.classic_groups as classic_groups
import weir.broker.handlers.consumer_groups as consumer_groups
import weir.broker.handlers.describe_cluster as cluster
import weir.broker.handlers.fetch as fetch
import weir.broker.handlers.find_coordinator as find_coordinator
import weir.broker.handlers.group_admin as group_admin
import weir.broker.handlers.group_offsets as group_offsets
import weir.broker.handlers.leader_epoch as leader_epoch
import weir.broker.handlers.list_offsets as list_offsets
import weir.broker.handlers.metadata as metadata
import weir.broker.handlers.partition_admin as partition_admin
import weir.broker.handlers.produce as produce
import weir.broker.handlers.producer_ids as producer_ids
import weir.broker.handlers.sasl as sasl
import weir.broker.handlers.security_admin as security_admin
import weir.broker.handlers.share_admin as share_admin
import weir.broker.handlers.share_fetch as share_fetch
import weir.broker.handlers.share_groups as share_groups
import weir.broker.handlers.share_state as share_state
import weir.broker.handlers.transactions as transactions
from weir.broker.handlers.context import Handler
from weir.wire.protocol import SUPPORTED_VERSIONS, ApiKey

# The one place the handler types are erased: each entry is a Handler[XRequest,
# XResponse] for its key's generated classes; dispatch decodes the request as that
# key's class and encodes whatever the handler returns as that key's response.
HANDLERS: dict[int, Handler[Any, Any]] = {
    ApiKey.API_VERSIONS: api_versions.handle_api_versions,
    ApiKey.SASL_HANDSHAKE: sasl.handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: sasl.handle_sasl_authenticate,
    ApiKey.METADATA: metadata.handle_metadata,
    ApiKey.PRODUCE: produce.handle_produce,
    ApiKey.FETCH: fetch.handle_fetch,
    ApiKey.LIST_OFFSETS: list_offsets.handle_list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: leader_epoch.handle_offset_for_leader_epoch,
    ApiKey.CREATE_TOPICS: admin_topics.handle_create_topics,
    ApiKey.DELETE_TOPICS: admin_topics.handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: admin_topics.handle_create_partitions,
    ApiKey.DESCRIBE_CONFIGS: admin_configs.handle_describe_configs,
    ApiKey.ALTER_CONFIGS: admin_configs.handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: admin_configs.handle_incremental_alter_configs,
    ApiKey.DELETE_RECORDS: admin_records.handle_delete_records,
    ApiKey.DESCRIBE_CLUSTER: cluster.handle_describe_cluster,
    ApiKey.INIT_PRODUCER_ID: producer_ids.handle_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: transactions.handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: transactions.handle_add_offsets_to_txn,
    ApiKey.END_TXN: transactions.handle_end_txn,
    ApiKey.WRITE_TXN_MARKERS: transactions.handle_write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: group_offsets.handle_txn_offset_commit,
    ApiKey.DESCRIBE_PRODUCERS: transactions.handle_describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: transactions.handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: transactions.handle_list_transactions,
    ApiKey.FIND_COORDINATOR: find_coordinator.handle_find_coordinator,
    ApiKey.OFFSET_COMMIT: group_offsets.handle_offset_commit,
    ApiKey.OFFSET_FETCH: group_offsets.handle_offset_fetch,
    ApiKey.JOIN_GROUP: classic_groups.handle_join_group,
    ApiKey.SYNC_GROUP: classic_groups.handle_sync_group,
    ApiKey.HEARTBEAT: classic_groups.handle_heartbeat,
    ApiKey.LEAVE_GROUP: classic_groups.handle_leave_group,
    ApiKey.LIST_GROUPS: group_admin.handle_list_groups,
    ApiKey.DESCRIBE_GROUPS: group_admin.handle_describe_groups,
    ApiKey.DELETE_GROUPS: group_admin.handle_delete_groups,
    ApiKey.OFFSET_DELETE: group_admin.handle_offset_delete,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_groups.handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_groups.handle_consumer_group_describe,
    ApiKey.SHARE_GROUP_HEARTBEAT: share_groups.handle_share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: share_groups.handle_share_group_describe,
    ApiKey.SHARE_FETCH: share_fetch.handle_share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: share_fetch.handle_share_acknowledge,
    ApiKey.READ_SHARE_GROUP_STATE: share_state.handle_read_share_group_state,
    ApiKey.WRITE_SHARE_GROUP_STATE: share_state.handle_write_share_group_state,
    ApiKey.DELETE_SHARE_GROUP_STATE: share_state.handle_delete_share_group_state,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: share_state.handle_read_share_group_state_summary,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share_admin.handle_describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: share_admin.handle_alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: share_admin.handle_delete_share_group_offsets,
    ApiKey.ELECT_LEADERS: partition_admin.handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: partition_admin.handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: partition_admin.handle_list_partition_reassignments,
    ApiKey.CREATE_ACLS: security_admin.handle_create_acls,
    ApiKey.DESCRIBE_ACLS: security_admin.handle_describe_acls,
    ApiKey.DELETE_ACLS: security_admin.handle_delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: security_admin.handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: security_admin.handle_alter_user_scram_credentials,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: security_admin.handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: security_admin.handle_alter_client_quotas,
}


# ApiVersions advertises the wire layer's implemented APIs (`SUPPORTED_VERSIONS`):
# the registry must serve exactly those, or a client would be told of an API that
# closes its connection (or never learn of one served).
if set(HANDLERS) != set(SUPPORTED_VERSIONS):
    raise RuntimeError(
        "the handler registry and the wire layer's implemented APIs differ: "
        f"{sorted(set(HANDLERS) ^ set(SUPPORTED_VERSIONS))}"
    )
