"""The APIs the bundled broker decodes (their schemas, by key): `BROKER_APIS`
(moved out of `kclient.broker.server`, which re-exports it)."""

from kclient.protocol.messages import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    ALTER_CLIENT_QUOTAS,
    ALTER_CONFIGS,
    APIS,
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    CREATE_ACLS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_ACLS,
    DELETE_GROUPS,
    DELETE_TOPICS,
    DESCRIBE_ACLS,
    DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    HEARTBEAT,
    INCREMENTAL_ALTER_CONFIGS,
    INIT_PRODUCER_ID_FULL,
    JOIN_GROUP,
    LEADER_AND_ISR,
    LEAVE_GROUP,
    LIST_GROUPS,
    LIST_TRANSACTIONS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH_FULL,
    OFFSET_FOR_LEADER_EPOCH,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    STOP_REPLICA,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
    UPDATE_METADATA,
)
from kclient.protocol.messages.metadata import METADATA_FULL
from kclient.protocol.messages.write_txn_markers import WRITE_TXN_MARKERS
from kclient.protocol.schema import Api

__all__ = ["BROKER_APIS"]

#: The APIs the broker decodes: `kclient.protocol.messages.APIS` and the
#: SASL exchange (KIP-43, KIP-152; neither version served is flexible).
BROKER_APIS: dict[int, Api] = {
    **APIS,
    # Metadata up to v12 (v10+: topic ids, KIP-516) and OffsetFetch up to v9
    # (v9: KIP-848 member epochs), beyond the versions of APIS.
    METADATA_FULL.key: METADATA_FULL,
    OFFSET_FETCH_FULL.key: OFFSET_FETCH_FULL,
    SASL_HANDSHAKE.key: SASL_HANDSHAKE,
    SASL_AUTHENTICATE.key: SASL_AUTHENTICATE,
    # Inter-broker (controller requests, followers' epoch queries).
    LEADER_AND_ISR.key: LEADER_AND_ISR,
    STOP_REPLICA.key: STOP_REPLICA,
    UPDATE_METADATA.key: UPDATE_METADATA,
    OFFSET_FOR_LEADER_EPOCH.key: OFFSET_FOR_LEADER_EPOCH,
    WRITE_TXN_MARKERS.key: WRITE_TXN_MARKERS,  # (from a transaction coordinator, KIP-98)
    # Admin (KIP-4).
    CREATE_TOPICS.key: CREATE_TOPICS,
    DELETE_TOPICS.key: DELETE_TOPICS,
    CREATE_PARTITIONS.key: CREATE_PARTITIONS,
    DESCRIBE_CONFIGS.key: DESCRIBE_CONFIGS,
    ALTER_CONFIGS.key: ALTER_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS.key: INCREMENTAL_ALTER_CONFIGS,
    # Consumer groups (kclient.broker.group).
    OFFSET_COMMIT.key: OFFSET_COMMIT,
    JOIN_GROUP.key: JOIN_GROUP,
    HEARTBEAT.key: HEARTBEAT,
    LEAVE_GROUP.key: LEAVE_GROUP,
    SYNC_GROUP.key: SYNC_GROUP,
    DESCRIBE_GROUPS.key: DESCRIBE_GROUPS,
    LIST_GROUPS.key: LIST_GROUPS,
    DELETE_GROUPS.key: DELETE_GROUPS,
    OFFSET_DELETE.key: OFFSET_DELETE,
    # The consumer group protocol (KIP-848).
    CONSUMER_GROUP_HEARTBEAT.key: CONSUMER_GROUP_HEARTBEAT,
    CONSUMER_GROUP_DESCRIBE.key: CONSUMER_GROUP_DESCRIBE,
    # Transactions (kclient.broker.txn; KIP-98, KIP-664).
    INIT_PRODUCER_ID_FULL.key: INIT_PRODUCER_ID_FULL,
    ADD_PARTITIONS_TO_TXN.key: ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN.key: ADD_OFFSETS_TO_TXN,
    END_TXN.key: END_TXN,
    DESCRIBE_TRANSACTIONS.key: DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS.key: LIST_TRANSACTIONS,
    TXN_OFFSET_COMMIT.key: TXN_OFFSET_COMMIT,  # (to the group coordinator)
    # Client quotas (KIP-546).
    DESCRIBE_CLIENT_QUOTAS.key: DESCRIBE_CLIENT_QUOTAS,
    ALTER_CLIENT_QUOTAS.key: ALTER_CLIENT_QUOTAS,
    # ACLs (kclient.broker.authz; KIP-11, KIP-290).
    DESCRIBE_ACLS.key: DESCRIBE_ACLS,
    CREATE_ACLS.key: CREATE_ACLS,
    DELETE_ACLS.key: DELETE_ACLS,
}

