"""Declarative request/response schemas, one module per Kafka API.

``APIS`` maps an API key to its `Api`;
``choose_version`` picks the highest version both sides support
(ApiVersions negotiation).
"""

from __future__ import annotations

from kclient.protocol.messages.add_offsets_to_txn import ADD_OFFSETS_TO_TXN
from kclient.protocol.messages.add_partitions_to_txn import ADD_PARTITIONS_TO_TXN
from kclient.protocol.messages.alter_configs import ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from kclient.protocol.messages.api_versions import API_VERSIONS
from kclient.protocol.messages.client_quotas import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS
from kclient.protocol.messages.consumer_group_describe import CONSUMER_GROUP_DESCRIBE
from kclient.protocol.messages.consumer_group_heartbeat import CONSUMER_GROUP_HEARTBEAT
from kclient.protocol.messages.create_acls import CREATE_ACLS
from kclient.protocol.messages.create_partitions import CREATE_PARTITIONS
from kclient.protocol.messages.create_topics import CREATE_TOPICS
from kclient.protocol.messages.delete_acls import DELETE_ACLS
from kclient.protocol.messages.delete_groups import DELETE_GROUPS
from kclient.protocol.messages.delete_topics import DELETE_TOPICS
from kclient.protocol.messages.describe_acls import DESCRIBE_ACLS
from kclient.protocol.messages.describe_configs import DESCRIBE_CONFIGS
from kclient.protocol.messages.describe_groups import DESCRIBE_GROUPS
from kclient.protocol.messages.describe_transactions import DESCRIBE_TRANSACTIONS
from kclient.protocol.messages.end_txn import END_TXN
from kclient.protocol.messages.fetch import FETCH
from kclient.protocol.messages.find_coordinator import FIND_COORDINATOR
from kclient.protocol.messages.heartbeat import HEARTBEAT
from kclient.protocol.messages.init_producer_id import INIT_PRODUCER_ID, INIT_PRODUCER_ID_FULL
from kclient.protocol.messages.join_group import JOIN_GROUP
from kclient.protocol.messages.leader_and_isr import LEADER_AND_ISR
from kclient.protocol.messages.leave_group import LEAVE_GROUP
from kclient.protocol.messages.list_groups import LIST_GROUPS
from kclient.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, LIST_OFFSETS, MAX_TIMESTAMP
from kclient.protocol.messages.list_transactions import LIST_TRANSACTIONS
from kclient.protocol.messages.metadata import METADATA
from kclient.protocol.messages.offset_commit import OFFSET_COMMIT
from kclient.protocol.messages.offset_delete import OFFSET_DELETE
from kclient.protocol.messages.offset_fetch import OFFSET_FETCH, OFFSET_FETCH_FULL
from kclient.protocol.messages.offset_for_leader_epoch import OFFSET_FOR_LEADER_EPOCH
from kclient.protocol.messages.produce import PRODUCE
from kclient.protocol.messages.sasl_authenticate import SASL_AUTHENTICATE
from kclient.protocol.messages.sasl_handshake import SASL_HANDSHAKE
from kclient.protocol.messages.stop_replica import STOP_REPLICA
from kclient.protocol.messages.sync_group import SYNC_GROUP
from kclient.protocol.messages.txn_offset_commit import TXN_OFFSET_COMMIT
from kclient.protocol.messages.update_metadata import UPDATE_METADATA
from kclient.protocol.messages.user_scram_credentials import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS
from kclient.protocol.messages.write_txn_markers import WRITE_TXN_MARKERS
from kclient.protocol.schema import Api

APIS: dict[int, Api] = {api.key: api for api in (PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_FETCH, FIND_COORDINATOR, API_VERSIONS, INIT_PRODUCER_ID)}

# `APIS` stays the set of APIs the bundled broker decodes: the broker closes
# the connection for a key it lacks, and `parse_request_header` reads a
# flexible header's tagged fields only for keys and versions found in it, so
# adding keys or versions there would change how the broker treats requests
# it does not serve. `ALL_APIS` is every schema kclient has, by key, with the
# widest version range (OffsetFetch v0-9 instead of the broker's v0-5); a
# client sends these by passing the `Api` itself.
ALL_APIS: dict[int, Api] = {
    **APIS,
    **{
        api.key: api
        for api in (
            LEADER_AND_ISR,
            STOP_REPLICA,
            UPDATE_METADATA,
            OFFSET_COMMIT,
            OFFSET_FETCH_FULL,
            JOIN_GROUP,
            HEARTBEAT,
            LEAVE_GROUP,
            SYNC_GROUP,
            DESCRIBE_GROUPS,
            LIST_GROUPS,
            SASL_HANDSHAKE,
            CREATE_TOPICS,
            DELETE_TOPICS,
            OFFSET_FOR_LEADER_EPOCH,
            DESCRIBE_CONFIGS,
            ALTER_CONFIGS,
            INCREMENTAL_ALTER_CONFIGS,
            SASL_AUTHENTICATE,
            DELETE_GROUPS,
            CREATE_PARTITIONS,
            OFFSET_DELETE,
            CONSUMER_GROUP_HEARTBEAT,
            CONSUMER_GROUP_DESCRIBE,
            # Transactions (KIP-98, KIP-360, KIP-447, KIP-664): not served by
            # the bundled broker yet, so not in APIS.
            INIT_PRODUCER_ID_FULL,
            ADD_PARTITIONS_TO_TXN,
            ADD_OFFSETS_TO_TXN,
            END_TXN,
            WRITE_TXN_MARKERS,
            TXN_OFFSET_COMMIT,
            DESCRIBE_TRANSACTIONS,
            LIST_TRANSACTIONS,
            # Client quotas (KIP-546).
            DESCRIBE_CLIENT_QUOTAS,
            ALTER_CLIENT_QUOTAS,
            # ACLs (KIP-11, KIP-290).
            DESCRIBE_ACLS,
            CREATE_ACLS,
            DELETE_ACLS,
            # SCRAM credentials (KIP-554).
            DESCRIBE_USER_SCRAM_CREDENTIALS,
            ALTER_USER_SCRAM_CREDENTIALS,
        )
    },
}


def choose_version(api: Api, broker_versions: dict[int, tuple[int, int]], *, floor: int | None = None, ceiling: int | None = None) -> int:
    """Highest version of ``api`` that kclient and the broker both support.

    Args:
        api: The API to send.
        broker_versions: API key -> ``(min, max)`` from an ApiVersions
            response.
        floor: Narrows kclient's own range from below (e.g. Produce needs
            v3+ for record batch v2).
        ceiling: Narrows kclient's own range from above.

    Returns:
        The version to use.

    Raises:
        kclient.errors.UnsupportedVersionError: The broker does not support
            ``api`` or the ranges do not meet.
    """
    from kclient.errors import UnsupportedVersionError

    lo = api.min_version if floor is None else max(api.min_version, floor)
    hi = api.max_version if ceiling is None else min(api.max_version, ceiling)
    if api.key not in broker_versions:
        raise UnsupportedVersionError(f"broker does not support {api.name}")
    b_lo, b_hi = broker_versions[api.key]
    best = min(hi, b_hi)
    if best < max(lo, b_lo):
        raise UnsupportedVersionError(f"{api.name}: kclient supports {lo}-{hi}, broker {b_lo}-{b_hi}")
    return best


__all__ = [
    "ADD_OFFSETS_TO_TXN",
    "ADD_PARTITIONS_TO_TXN",
    "ALL_APIS",
    "ALTER_CLIENT_QUOTAS",
    "ALTER_CONFIGS",
    "ALTER_USER_SCRAM_CREDENTIALS",
    "APIS",
    "API_VERSIONS",
    "CONSUMER_GROUP_DESCRIBE",
    "CONSUMER_GROUP_HEARTBEAT",
    "CREATE_ACLS",
    "CREATE_PARTITIONS",
    "CREATE_TOPICS",
    "DELETE_ACLS",
    "DELETE_GROUPS",
    "DELETE_TOPICS",
    "DESCRIBE_CLIENT_QUOTAS",
    "DESCRIBE_ACLS",
    "DESCRIBE_CONFIGS",
    "DESCRIBE_GROUPS",
    "DESCRIBE_TRANSACTIONS",
    "DESCRIBE_USER_SCRAM_CREDENTIALS",
    "END_TXN",
    "FETCH",
    "FIND_COORDINATOR",
    "HEARTBEAT",
    "INCREMENTAL_ALTER_CONFIGS",
    "INIT_PRODUCER_ID",
    "INIT_PRODUCER_ID_FULL",
    "JOIN_GROUP",
    "LEADER_AND_ISR",
    "LEAVE_GROUP",
    "LIST_GROUPS",
    "LIST_OFFSETS",
    "LIST_TRANSACTIONS",
    "METADATA",
    "OFFSET_COMMIT",
    "OFFSET_DELETE",
    "OFFSET_FETCH",
    "OFFSET_FETCH_FULL",
    "OFFSET_FOR_LEADER_EPOCH",
    "PRODUCE",
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "STOP_REPLICA",
    "SYNC_GROUP",
    "TXN_OFFSET_COMMIT",
    "UPDATE_METADATA",
    "WRITE_TXN_MARKERS",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "choose_version",
]
