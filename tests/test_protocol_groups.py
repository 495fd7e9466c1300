"""Schemas of the group, admin, SASL and inter-broker APIs, tested byte for byte.

Every version kclient implements is compared with kafka-python (installed
in the venv, 3.x) wherever kafka-python has the same version:

- its hand-written classes (`kafka.protocol.old.*`, the kafka-python 2.x
  definitions: `commit`, `group`, `admin`, `sasl_*`, `find_coordinator`,
  `offset_for_leader_epoch`), non-flexible versions only;
- its classes generated from Kafka's message JSON (`kafka.protocol.consumer`,
  `kafka.protocol.admin`, `kafka.protocol.metadata`, `kafka.protocol.sasl`),
  every version including the flexible ones.

Both encode the body only (`.encode()`; kafka-python adds a header through
`with_header`), so bodies are compared. The same values are handed to both
sides and kafka-python's bytes are decoded with our schema and compared
value by value. The generated classes get every field by name (a misnamed
field, or two fields of one type in the wrong order, fails); the
hand-written ones name fields their own way and get them positionally.

kafka-python's limits: the hand-written classes stop at OffsetCommit v7,
OffsetFetch v5, JoinGroup v5, Heartbeat/LeaveGroup/SyncGroup/DescribeGroups/
CreateTopics/DeleteTopics v3, ListGroups/DescribeConfigs/FindCoordinator v2,
DeleteGroups/SaslHandshake/SaslAuthenticate v1 and OffsetForLeaderEpoch v4
(its flexible v4 is compared with the generated class only); the generated
classes reach every version implemented here. kafka-python has no
LeaderAndIsr, StopReplica or UpdateMetadata: those are checked against
layouts spelled out by hand from the Kafka protocol guide
(https://kafka.apache.org/protocol).
"""

from __future__ import annotations

import importlib
import socket
import struct
import uuid

import pytest
from helpers.examples import examples
from helpers.wait import wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.errors import ProtocolError
from kclient.protocol import consumer_protocol as cp
from kclient.protocol.connection import encode_request, parse_request_header
from kclient.protocol.messages import (
    ALL_APIS,
    API_VERSIONS,
    APIS,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID_FULL,
    LEADER_AND_ISR,
    LIST_GROUPS,
    OFFSET_FETCH,
    OFFSET_FETCH_FULL,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    STOP_REPLICA,
    UPDATE_METADATA,
)
from kclient.protocol.schema import Api, Field

kafka = pytest.importorskip("kafka")

# KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): kafka-python
# has no classes for them; tests/test_consumer_group_messages.py spells their bytes out.
_HAND_LAYOUT_KEYS = {68, 69}
#: The transaction APIs (issue 29) have their own byte-for-byte, round-trip
#: and kafka-python tests in tests/test_transaction_messages.py.
_TRANSACTION_KEYS = {24, 25, 26, 27, 28, 65, 66}
#: DescribeClientQuotas / AlterClientQuotas (issue 30): byte-for-byte,
#: round-trip and kafka-python tests in tests/test_quota_units.py.
_QUOTA_KEYS = {48, 49}
NEW_APIS = [
    api for key, api in sorted(ALL_APIS.items()) if key not in APIS and key not in _HAND_LAYOUT_KEYS and key not in _TRANSACTION_KEYS and key not in _QUOTA_KEYS
] + [OFFSET_FETCH_FULL]

TOPIC_ID = uuid.UUID("6f1e3c2a-95d4-4b8e-9a51-0c7d2e4f8b13")
OTHER_TOPIC_ID = uuid.UUID("0b9d3f5e-1c2a-4e6f-8a7b-9c0d1e2f3a4b")
METADATA_BYTES = b"\x00\x01\x00\x00\x00\x02\x00\x06orders\x00\x08payments\xff\xff\xff\xff"

# ---------------------------------------------------------------- sample bodies
# One body per (api key, kind) holding the fields of every version; the codec
# of a version takes the fields it has. Nulls sit where the schema allows them
# (in some array items, and in the VARIANTS below for top-level fields).

SAMPLES: dict[tuple[int, str], dict] = {
    # DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554, issue 30).
    (50, "request"): {"users": [{"name": "alice"}, {"name": "bob"}]},
    (50, "response"): {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "results": [
            {"user": "alice", "error_code": 0, "error_message": None, "credential_infos": [{"mechanism": 1, "iterations": 8192}, {"mechanism": 2, "iterations": 4096}]},
            {"user": "bob", "error_code": 91, "error_message": "Attempt to describe a user credential that does not exist: bob", "credential_infos": []},
        ],
    },
    (51, "request"): {
        "deletions": [{"name": "bob", "mechanism": 2}],
        "upsertions": [{"name": "alice", "mechanism": 1, "iterations": 8192, "salt": b"0123456789ab", "salted_password": bytes(range(32))}],
    },
    (51, "response"): {"throttle_time_ms": 5, "results": [{"user": "alice", "error_code": 0, "error_message": None}, {"user": "bob", "error_code": 93, "error_message": "Too few iterations"}]},
    (8, "request"): {
        "group_id": "billing-consumers",
        "generation_id_or_member_epoch": 7,
        "member_id": "rdkafka-5c1b2a4e-0d7f-4c1e-9e58-2b3f7a6c9d10",
        "group_instance_id": "billing-1",
        "retention_time_ms": 86_400_000,
        "topics": [
            {
                "name": "orders",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1234, "committed_leader_epoch": 5, "commit_timestamp": 1_700_000_000_000, "committed_metadata": "checkpoint-a"},
                    {"partition_index": 1, "committed_offset": 99, "committed_leader_epoch": -1, "commit_timestamp": -1, "committed_metadata": None},
                ],
            },
            {"name": "payments", "partitions": [{"partition_index": 3, "committed_offset": 0, "committed_leader_epoch": 2, "commit_timestamp": 17, "committed_metadata": ""}]},
        ],
    },
    (8, "response"): {
        "throttle_time_ms": 25,
        "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 27}]},
            {"name": "payments", "partitions": [{"partition_index": 3, "error_code": 22}]},
        ],
    },
    (9, "request"): {
        "group_id": "billing-consumers",
        "topics": [
            {"name": "orders", "partition_indexes": [0, 1, 2]},
            {"name": "payments", "partition_indexes": [7]},
        ],
        "groups": [
            {
                "group_id": "billing-consumers",
                "member_id": "member-1",
                "member_epoch": 12,
                "topics": [{"name": "orders", "partition_indexes": [0, 1, 2]}, {"name": "payments", "partition_indexes": [7]}],
            },
            {"group_id": "audit", "member_id": None, "member_epoch": -1, "topics": None},
        ],
        "require_stable": True,
    },
    (9, "response"): {
        "throttle_time_ms": 3,
        "topics": [
            {
                "name": "orders",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1234, "committed_leader_epoch": 5, "metadata": "checkpoint-a", "error_code": 0},
                    {"partition_index": 1, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": None, "error_code": 0},
                ],
            },
            {"name": "payments", "partitions": [{"partition_index": 7, "committed_offset": 42, "committed_leader_epoch": 1, "metadata": "", "error_code": 3}]},
        ],
        "error_code": 0,
        "groups": [
            {
                "group_id": "billing-consumers",
                "topics": [
                    {
                        "name": "orders",
                        "partitions": [
                            {"partition_index": 0, "committed_offset": 1234, "committed_leader_epoch": 5, "metadata": "checkpoint-a", "error_code": 0},
                            {"partition_index": 1, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": None, "error_code": 0},
                        ],
                    }
                ],
                "error_code": 0,
            },
            {"group_id": "audit", "topics": [], "error_code": 69},
        ],
    },
    (10, "request"): {"key": "billing-consumers", "key_type": 0},
    (10, "response"): {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": 2, "host": "broker-2.internal", "port": 9093},
    (11, "request"): {
        "group_id": "billing-consumers",
        "session_timeout_ms": 45_000,
        "rebalance_timeout_ms": 300_000,
        "member_id": "",
        "group_instance_id": "billing-1",
        "protocol_type": "consumer",
        "protocols": [
            {"name": "range", "metadata": METADATA_BYTES},
            {"name": "roundrobin", "metadata": b""},
            {"name": "cooperative-sticky", "metadata": b"\x00\x01\x02"},
        ],
        "reason": "rebalance after metadata change",
    },
    (11, "response"): {
        "throttle_time_ms": 10,
        "error_code": 0,
        "generation_id": 8,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "leader": "member-a",
        "skip_assignment": False,
        "member_id": "member-b",
        "members": [
            {"member_id": "member-a", "group_instance_id": "billing-1", "metadata": METADATA_BYTES},
            {"member_id": "member-b", "group_instance_id": None, "metadata": b"\xff"},
        ],
    },
    (12, "request"): {"group_id": "billing-consumers", "generation_id": 8, "member_id": "member-b", "group_instance_id": "billing-2"},
    (12, "response"): {"throttle_time_ms": 4, "error_code": 27},
    (13, "request"): {
        "group_id": "billing-consumers",
        "member_id": "member-b",
        "members": [
            {"member_id": "member-b", "group_instance_id": "billing-2", "reason": "shutting down"},
            {"member_id": "member-c", "group_instance_id": None, "reason": None},
        ],
    },
    (13, "response"): {
        "throttle_time_ms": 1,
        "error_code": 0,
        "members": [
            {"member_id": "member-b", "group_instance_id": "billing-2", "error_code": 0},
            {"member_id": "member-c", "group_instance_id": None, "error_code": 25},
        ],
    },
    (14, "request"): {
        "group_id": "billing-consumers",
        "generation_id": 8,
        "member_id": "member-a",
        "group_instance_id": "billing-1",
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [
            {"member_id": "member-a", "assignment": b"\x00\x00\x00\x00\x00\x01\x00\x06orders\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"},
            {"member_id": "member-b", "assignment": b""},
        ],
    },
    (14, "response"): {"throttle_time_ms": 2, "error_code": 0, "protocol_type": "consumer", "protocol_name": "range", "assignment": b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"},
    (15, "request"): {"groups": ["billing-consumers", "audit"], "include_authorized_operations": True},
    (15, "response"): {
        "throttle_time_ms": 6,
        "groups": [
            {
                "error_code": 0,
                "group_id": "billing-consumers",
                "group_state": "Stable",
                "protocol_type": "consumer",
                "protocol_data": "range",
                "members": [
                    {
                        "member_id": "member-a",
                        "group_instance_id": "billing-1",
                        "client_id": "billing",
                        "client_host": "/10.0.0.7",
                        "member_metadata": METADATA_BYTES,
                        "member_assignment": b"\x00\x00",
                    },
                    {"member_id": "member-b", "group_instance_id": None, "client_id": "billing", "client_host": "/10.0.0.8", "member_metadata": b"", "member_assignment": b""},
                ],
                "authorized_operations": 0x0F0,
            },
            {"error_code": 16, "group_id": "audit", "group_state": "Dead", "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": -2147483648},
        ],
    },
    (16, "request"): {"states_filter": ["Stable", "PreparingRebalance"], "types_filter": ["classic", "consumer"]},
    (16, "response"): {
        "throttle_time_ms": 0,
        "error_code": 0,
        "groups": [
            {"group_id": "billing-consumers", "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"},
            {"group_id": "connect-sink", "protocol_type": "connect", "group_state": "Empty", "group_type": "classic"},
        ],
    },
    (17, "request"): {"mechanism": "SCRAM-SHA-256"},
    (17, "response"): {"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]},
    (19, "request"): {
        "topics": [
            {"name": "orders", "num_partitions": 6, "replication_factor": 3, "assignments": [], "configs": [{"name": "cleanup.policy", "value": "compact"}, {"name": "retention.ms", "value": None}]},
            {
                "name": "payments",
                "num_partitions": -1,
                "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [1, 2, 3]}, {"partition_index": 1, "broker_ids": [2, 3, 1]}],
                "configs": [],
            },
        ],
        "timeout_ms": 30_000,
        "validate_only": True,
    },
    (19, "response"): {
        "throttle_time_ms": 0,
        "topics": [
            {"name": "orders", "error_code": 0, "error_message": None},
            {"name": "payments", "error_code": 36, "error_message": "Topic 'payments' already exists."},
        ],
    },
    (20, "request"): {
        "topics": [{"name": "orders", "topic_id": OTHER_TOPIC_ID}, {"name": None, "topic_id": TOPIC_ID}],
        "topic_names": ["orders", "payments", "audit-log"],
        "timeout_ms": 15_000,
    },
    (20, "response"): {
        "throttle_time_ms": 9,
        "responses": [
            {"name": "orders", "topic_id": OTHER_TOPIC_ID, "error_code": 0, "error_message": None},
            {"name": "payments", "topic_id": TOPIC_ID, "error_code": 3, "error_message": "This server does not host this topic-partition."},
        ],
    },
    (23, "request"): {
        "replica_id": -2,
        "topics": [
            {"topic": "orders", "partitions": [{"partition": 0, "current_leader_epoch": 5, "leader_epoch": 4}, {"partition": 1, "current_leader_epoch": -1, "leader_epoch": 0}]},
            {"topic": "payments", "partitions": [{"partition": 2, "current_leader_epoch": 9, "leader_epoch": 9}]},
        ],
    },
    (23, "response"): {
        "throttle_time_ms": 0,
        "topics": [
            {"topic": "orders", "partitions": [{"error_code": 0, "partition": 0, "leader_epoch": 4, "end_offset": 1000}, {"error_code": 74, "partition": 1, "leader_epoch": -1, "end_offset": -1}]},
            {"topic": "payments", "partitions": [{"error_code": 0, "partition": 2, "leader_epoch": 9, "end_offset": 2**40}]},
        ],
    },
    (32, "request"): {
        "resources": [
            {"resource_type": 2, "resource_name": "orders", "configuration_keys": ["retention.ms", "cleanup.policy"]},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
        ],
        "include_synonyms": True,
        "include_documentation": True,
    },
    (32, "response"): {
        "throttle_time_ms": 0,
        "results": [
            {
                "error_code": 0,
                "error_message": None,
                "resource_type": 2,
                "resource_name": "orders",
                "configs": [
                    {
                        "name": "retention.ms",
                        "value": "604800000",
                        "read_only": False,
                        "is_default": True,
                        "config_source": 5,
                        "is_sensitive": False,
                        "synonyms": [{"name": "log.retention.ms", "value": None, "source": 4}, {"name": "log.retention.hours", "value": "168", "source": 5}],
                        "config_type": 5,
                        "documentation": "How long to keep a log segment.",
                    },
                    {
                        "name": "sasl.jaas.config",
                        "value": None,
                        "read_only": True,
                        "is_default": False,
                        "config_source": 4,
                        "is_sensitive": True,
                        "synonyms": [],
                        "config_type": 9,
                        "documentation": None,
                    },
                ],
            },
            {"error_code": 29, "error_message": "Authorization failed.", "resource_type": 4, "resource_name": "1", "configs": []},
        ],
    },
    (33, "request"): {
        "resources": [
            {"resource_type": 2, "resource_name": "orders", "configs": [{"name": "retention.ms", "value": "3600000"}, {"name": "cleanup.policy", "value": None}]},
            {"resource_type": 4, "resource_name": "1", "configs": []},
        ],
        "validate_only": True,
    },
    (33, "response"): {
        "throttle_time_ms": 0,
        "responses": [
            {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "orders"},
            {"error_code": 42, "error_message": "Cannot update these configs dynamically: log.retention.hours", "resource_type": 4, "resource_name": "1"},
        ],
    },
    (44, "request"): {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "orders",
                "configs": [
                    {"name": "retention.ms", "config_operation": 0, "value": "3600000"},
                    {"name": "segment.ms", "config_operation": 1, "value": None},
                    {"name": "cleanup.policy", "config_operation": 2, "value": "compact"},
                ],
            },
            {"resource_type": 8, "resource_name": "1", "configs": [{"name": "kclient.broker", "config_operation": 0, "value": "DEBUG"}]},
        ],
        "validate_only": False,
    },
    (44, "response"): {
        "throttle_time_ms": 5,
        "responses": [
            {"error_code": 40, "error_message": "Unknown topic config name: x", "resource_type": 2, "resource_name": "orders"},
            {"error_code": 0, "error_message": None, "resource_type": 8, "resource_name": "1"},
        ],
    },
    (36, "request"): {"auth_bytes": b"\x00alice\x00alice-secret"},
    (36, "response"): {"error_code": 0, "error_message": None, "auth_bytes": b"r=fyko+d2lbbFgONRv9qkxdawL,s=QSXCR+Q6sek8bf92,i=4096", "session_lifetime_ms": 3_600_000},
    (42, "request"): {"groups_names": ["billing-consumers", "audit", "connect-sink"]},
    (42, "response"): {"throttle_time_ms": 0, "results": [{"group_id": "billing-consumers", "error_code": 0}, {"group_id": "audit", "error_code": 68}, {"group_id": "connect-sink", "error_code": 69}]},
    (37, "request"): {
        "topics": [
            {"name": "orders", "count": 6, "assignments": [{"broker_ids": [1, 2, 3]}, {"broker_ids": [2, 3, 1]}]},
            {"name": "payments", "count": 4, "assignments": None},
        ],
        "timeout_ms": 30000,
        "validate_only": True,
    },
    (37, "response"): {
        "throttle_time_ms": 0,
        "results": [
            {"name": "orders", "error_code": 0, "error_message": None},
            {"name": "payments", "error_code": 37, "error_message": "Topic currently has 8 partitions, which is higher than the requested 4."},
        ],
    },
    (47, "request"): {"group_id": "billing-consumers", "topics": [{"name": "orders", "partitions": [{"partition_index": 0}, {"partition_index": 5}]}]},
    (47, "response"): {
        "error_code": 0,
        "throttle_time_ms": 0,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "error_code": 0}, {"partition_index": 5, "error_code": 86}]}],
    },
    (29, "request"): {
        "resource_type_filter": 2,
        "resource_name_filter": "orders-",
        "pattern_type_filter": 4,
        "principal_filter": "User:alice",
        "host_filter": "10.0.0.7",
        "operation": 3,
        "permission_type": 3,
    },
    (29, "response"): {
        "throttle_time_ms": 7,
        "error_code": 0,
        "error_message": None,
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "orders-",
                "pattern_type": 4,
                "acls": [{"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}, {"principal": "User:*", "host": "10.0.0.7", "operation": 4, "permission_type": 2}],
            },
            {"resource_type": 4, "resource_name": "kafka-cluster", "pattern_type": 3, "acls": []},
        ],
    },
    (30, "request"): {
        "creations": [
            {"resource_type": 2, "resource_name": "orders", "resource_pattern_type": 3, "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3},
            {"resource_type": 3, "resource_name": "billing-", "resource_pattern_type": 4, "principal": "User:bob", "host": "10.0.0.8", "operation": 2, "permission_type": 2},
        ],
    },
    (30, "response"): {"throttle_time_ms": 0, "results": [{"error_code": 0, "error_message": None}, {"error_code": 42, "error_message": "Invalid ACL host"}]},
    (31, "request"): {
        "filters": [
            {"resource_type_filter": 2, "resource_name_filter": "orders", "pattern_type_filter": 3, "principal_filter": "User:alice", "host_filter": "*", "operation": 3, "permission_type": 3},
            {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
        ],
    },
    (31, "response"): {
        "throttle_time_ms": 3,
        "filter_results": [
            {
                "error_code": 0,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": 0,
                        "error_message": None,
                        "resource_type": 2,
                        "resource_name": "orders",
                        "pattern_type": 3,
                        "principal": "User:alice",
                        "host": "*",
                        "operation": 3,
                        "permission_type": 3,
                    },
                ],
            },
            {"error_code": 31, "error_message": "Cluster authorization failed.", "matching_acls": []},
        ],
    },
}

#: Second bodies: (overrides of SAMPLES, lowest version they apply to) —
#: top-level nulls and values the first body does not exercise.
VARIANTS: dict[tuple[int, str], list[tuple[dict, int]]] = {
    (8, "request"): [({"group_instance_id": None, "topics": []}, 0)],
    (9, "request"): [({"topics": None, "groups": [{"group_id": "g", "member_id": None, "member_epoch": -1, "topics": []}], "require_stable": False}, 2)],
    (9, "response"): [({"error_code": 16, "topics": [], "groups": []}, 0)],
    (10, "response"): [({"error_code": 15, "error_message": "The coordinator is not available.", "node_id": -1, "host": "", "port": -1}, 0)],
    (11, "request"): [({"group_instance_id": None, "reason": None, "protocols": []}, 0)],
    (11, "response"): [({"protocol_type": None, "protocol_name": None, "members": [], "skip_assignment": True}, 7)],
    (12, "request"): [({"group_instance_id": None}, 0)],
    (14, "request"): [({"group_instance_id": None, "protocol_type": None, "protocol_name": None, "assignments": []}, 0)],
    (14, "response"): [({"protocol_type": None, "protocol_name": None, "assignment": b""}, 0)],
    (15, "request"): [({"groups": [], "include_authorized_operations": False}, 0)],
    (16, "request"): [({"states_filter": [], "types_filter": []}, 0)],
    (17, "response"): [({"error_code": 0, "mechanisms": []}, 0)],
    (19, "request"): [({"topics": [], "validate_only": False}, 0)],
    (23, "request"): [({"replica_id": -1, "topics": []}, 0)],
    (36, "request"): [({"auth_bytes": b""}, 0)],
    (36, "response"): [({"error_code": 58, "error_message": "Authentication failed: invalid credentials", "auth_bytes": b"", "session_lifetime_ms": 0}, 0)],
    (37, "request"): [({"topics": [], "validate_only": False}, 0)],
    (47, "response"): [({"error_code": 69, "topics": []}, 0)],
    (50, "request"): [({"users": None}, 0), ({"users": []}, 0)],
    (29, "request"): [({"resource_name_filter": None, "principal_filter": None, "host_filter": None}, 0)],
    (29, "response"): [({"error_code": 31, "error_message": "Cluster authorization failed.", "resources": []}, 0)],
}


def bodies(key: int, kind: str, version: int) -> list[dict]:
    """The sample body and the variants that apply to `version`."""
    base = SAMPLES[(key, kind)]
    out = [base]
    for overrides, lowest in VARIANTS.get((key, kind), []):
        if version >= lowest:
            out.append({**base, **overrides})
    return out


# ---------------------------------------------------------------- helpers


def is_struct(t) -> bool:
    return isinstance(t, (list, tuple)) and bool(t) and isinstance(t[0], Field)


def bit_set(value: int) -> set[int]:
    """An int32 bit field as the set of its bit numbers (how kafka-python
    takes `authorized_operations`, KIP-430)."""
    return {b for b in range(32) if (value & 0xFFFFFFFF) >> b & 1}


def to_tuple(fields, version: int, value: dict) -> tuple:
    """The values of `value` present in `version`, in field order, nested
    structs as tuples: the positional form kafka-python's hand-written
    classes take."""
    out = []
    for f in fields:
        if not f.present_in(version):
            continue
        v = value.get(f.name, f.default)
        if is_struct(f.type) and v is not None:
            v = [to_tuple(f.type, version, item) for item in v]
        elif isinstance(v, memoryview):
            v = bytes(v)
        out.append(v)
    return tuple(out)


def normalized(fields, version: int, value) -> tuple:
    """`to_tuple` with lists for every array (kafka-python decodes some as
    lists, some as tuples) and None for an unset null."""
    def norm(v):
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        if isinstance(v, memoryview):
            return bytes(v)
        return v

    return norm(to_tuple(fields, version, value))


def fields_of(api: Api, kind: str):
    return api.request_fields if kind == "request" else api.response_fields


def codec_of(api: Api, kind: str, version: int):
    return api.request(version) if kind == "request" else api.response(version)


_OLD_MODULES = ["commit", "find_coordinator", "group", "admin", "sasl_handshake", "sasl_authenticate", "offset_for_leader_epoch"]
_NEW_MODULES = ["kafka.protocol.consumer", "kafka.protocol.admin", "kafka.protocol.metadata", "kafka.protocol.sasl"]


def old_class(api: Api, kind: str, version: int):
    """kafka-python's hand-written (2.x) class for this version, or None."""
    name = f"{api.name}{'Request' if kind == 'request' else 'Response'}_v{version}"
    for mod in _OLD_MODULES:
        module = importlib.import_module(f"kafka.protocol.old.{mod}")
        if hasattr(module, name):
            return getattr(module, name)
    return None


def new_class(api: Api, kind: str, version: int):
    """kafka-python's JSON-generated class for this version, or None."""
    name = f"{api.name}{'Request' if kind == 'request' else 'Response'}"
    for mod in _NEW_MODULES:
        module = importlib.import_module(mod)
        cls = getattr(module, name, None)
        if cls is not None and version <= cls.max_version:
            return cls[version]
    return None


def by_name(their, fields, version: int, value: dict) -> dict:
    """Keyword arguments for kafka-python's generated class (or nested data
    class) `their`: every field by our name, so a field that is misnamed,
    or in the wrong place among fields of the same type, shows up."""
    kwargs = {}
    for f in fields:
        if not f.present_in(version):
            continue
        v = value.get(f.name, f.default)
        theirs = their.fields[f.name]  # KeyError: a name that differs from Kafka's
        if f.name == "authorized_operations" and isinstance(v, int):
            v = bit_set(v)
        if is_struct(f.type) and v is not None:
            v = [theirs.data_class(version=version, **by_name(theirs, f.type, version, item)) for item in v]
        kwargs[f.name] = v
    return kwargs


def for_old(schema, values):
    """Adapt values to kafka-python's hand-written schema: it takes an
    authorized-operations bit field as the set of bit numbers."""
    from kafka.protocol.old.types import Array, BitField, Schema

    out = []
    for field, value in zip(schema.fields, values):
        if field is BitField and isinstance(value, int):
            value = bit_set(value)
        elif isinstance(field, Array) and isinstance(field.array_of, Schema) and value is not None:
            value = [for_old(field.array_of, item) for item in value]
        out.append(value)
    return tuple(out)


def kafka_python_cases():
    """(api, kind, version, implementation) for every version kafka-python has too."""
    cases = []
    for api in NEW_APIS + [FIND_COORDINATOR]:
        if (api.key, "request") not in SAMPLES:
            continue
        for kind in ("request", "response"):
            for version in range(api.min_version, api.max_version + 1):
                old = old_class(api, kind, version)
                if (api.key, kind) == (37, "request"):
                    old = None  # its hand-written class nests count and assignments in a struct of its own (same bytes)
                if old is not None and not api.flexible(version):
                    cases.append(pytest.param(api, kind, version, "old", id=f"{api.name}-{kind}-v{version}-old"))
                if new_class(api, kind, version) is not None:
                    cases.append(pytest.param(api, kind, version, "new", id=f"{api.name}-{kind}-v{version}-new"))
    return cases


# ---------------------------------------------------------------- byte for byte against kafka-python


@pytest.mark.unit
@pytest.mark.parametrize("api, kind, version, impl", kafka_python_cases())
def test_same_bytes_as_kafka_python(api, kind, version, impl):
    fields = fields_of(api, kind)
    codec = codec_of(api, kind, version)
    for body in bodies(api.key, kind, version):
        values = to_tuple(fields, version, body)
        if impl == "old":
            cls = old_class(api, kind, version)
            theirs = cls(*for_old(cls.SCHEMA, values)).encode()
        else:
            cls = new_class(api, kind, version)
            theirs = cls(**by_name(cls._struct, fields, version, body)).encode()
        theirs = bytes(theirs)
        ours = codec.encode(body)
        assert ours == theirs, f"{api.name} {kind} v{version} ({impl}) differs"
        # and kafka-python's bytes decode, with our schema, to the same values
        decoded = codec.decode(theirs)
        assert normalized(fields, version, decoded) == normalized(fields, version, body)


@pytest.mark.unit
def test_every_kafka_python_version_is_covered():
    """The versions compared above: all our versions up to kafka-python's
    highest for every client-facing API (none of the inter-broker ones:
    kafka-python has no classes for them)."""
    covered = {(p.values[0].key, p.values[1], p.values[2]) for p in kafka_python_cases()}
    for api in NEW_APIS + [FIND_COORDINATOR]:
        if api in (LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA):
            assert not any(key == api.key for key, _, _ in covered)
            continue
        for kind in ("request", "response"):
            for version in range(api.min_version, api.max_version + 1):
                assert (api.key, kind, version) in covered, (api.name, kind, version)


@pytest.mark.unit
def test_kafka_python_old_classes_agree_on_the_versions_they_have():
    """Spot check that the hand-written (2.x) classes were used where they
    exist: every non-flexible version of JoinGroup 0-5, OffsetCommit 0-7, ..."""
    cases = [p.values for p in kafka_python_cases() if p.values[3] == "old"]
    versions = {(api.name, kind): set() for api, kind, _, _ in cases}
    for api, kind, version, _ in cases:
        versions[(api.name, kind)].add(version)
    assert versions[("JoinGroup", "request")] == set(range(6))
    assert versions[("OffsetCommit", "request")] == set(range(8))
    assert versions[("OffsetFetch", "response")] == set(range(6))
    assert versions[("CreateTopics", "request")] == set(range(4))
    assert versions[("OffsetForLeaderEpoch", "request")] == set(range(4))


# ---------------------------------------------------------------- round trips


def round_trip_cases():
    return [
        pytest.param(api, kind, version, id=f"{api.name}-{kind}-v{version}")
        for api in NEW_APIS
        for kind in ("request", "response")
        for version in range(api.min_version, api.max_version + 1)
    ]


@pytest.mark.unit
@pytest.mark.parametrize("api, kind, version", round_trip_cases())
def test_every_version_round_trips(api, kind, version):
    codec = codec_of(api, kind, version)
    fields = fields_of(api, kind)
    samples = bodies(api.key, kind, version) if (api.key, kind) in SAMPLES else [INTER_BROKER[(api.key, kind)]]
    for body in samples + [{}]:
        encoded = codec.encode(body)
        decoded = codec.decode(encoded)
        assert codec.encode(decoded) == encoded
        if body:
            assert normalized(fields, version, decoded) == normalized(fields, version, body)
        with pytest.raises(ProtocolError):
            codec.decode(encoded + b"\x00")


_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _primitive_strategy(name: str):
    if name in _INTS:
        bits = _INTS[name]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if name == "bool":
        return st.booleans()
    if name == "uuid":
        return st.uuids()
    if name == "string":
        return st.text(max_size=12)
    if name == "nullable_string":
        return st.none() | st.text(max_size=12)
    if name == "bytes":
        return st.binary(max_size=12)
    if name == "nullable_bytes":
        return st.none() | st.binary(max_size=12)
    raise AssertionError(name)


def body_strategy(fields, version: int):
    """Bodies with every field of `version`: random ints over the whole
    range, unicode strings, nulls where nullable, 0-3 array items."""
    parts = {}
    for f in fields:
        if not f.present_in(version):
            continue
        if is_struct(f.type):
            parts[f.name] = st.lists(body_strategy(f.type, version), max_size=3)
        elif isinstance(f.type, tuple) and f.type[0] == "array":
            parts[f.name] = st.lists(_primitive_strategy(f.type[1]), max_size=3)
        else:
            parts[f.name] = _primitive_strategy(f.type)
    return st.fixed_dictionaries(parts)


@st.composite
def api_bodies(draw):
    api = draw(st.sampled_from(NEW_APIS))
    kind = draw(st.sampled_from(["request", "response"]))
    version = draw(st.integers(api.min_version, api.max_version))
    return api, kind, version, draw(body_strategy(fields_of(api, kind), version))


@pytest.mark.unit
@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=api_bodies())
def test_random_bodies_round_trip_and_match_kafka_python(case):
    api, kind, version, body = case
    fields = fields_of(api, kind)
    codec = codec_of(api, kind, version)
    encoded = codec.encode(body)
    decoded = codec.decode(encoded)
    assert normalized(fields, version, decoded) == normalized(fields, version, body)
    assert codec.encode(decoded) == encoded
    cls = new_class(api, kind, version)
    if cls is not None:
        assert bytes(cls(**by_name(cls._struct, fields, version, body)).encode()) == encoded


@pytest.mark.unit
def test_offset_fetch_full_encodes_v0_5_like_the_broker_schema():
    for kind in ("request", "response"):
        for version in range(OFFSET_FETCH.min_version, OFFSET_FETCH.max_version + 1):
            for body in bodies(9, kind, version):
                assert codec_of(OFFSET_FETCH_FULL, kind, version).encode(body) == codec_of(OFFSET_FETCH, kind, version).encode(body)


@pytest.mark.unit
def test_flexible_versions_use_compact_forms():
    # ListGroups v3: request is just the empty tag section
    assert LIST_GROUPS.request(3).encode({}) == b"\x00"
    # v4: states filter as a compact array of compact strings
    assert LIST_GROUPS.request(4).encode({"states_filter": ["Stable"]}) == b"\x02\x07Stable\x00"
    response = {"throttle_time_ms": 0, "error_code": 0, "groups": [{"group_id": "g", "protocol_type": "consumer", "group_state": "Empty"}]}
    assert LIST_GROUPS.response(4).encode(response) == (
        b"\x00\x00\x00\x00" b"\x00\x00" b"\x02" b"\x02g" b"\x09consumer" b"\x06Empty" b"\x00" b"\x00"
    )


@pytest.mark.unit
def test_sasl_handshake_is_never_flexible():
    assert not SASL_HANDSHAKE.flexible(SASL_HANDSHAKE.max_version)
    assert SASL_HANDSHAKE.request(1).encode({"mechanism": "PLAIN"}) == b"\x00\x05PLAIN"


# ---------------------------------------------------------------- inter-broker APIs, by hand

INTER_BROKER: dict[tuple[int, str], dict] = {
    (4, "request"): {
        "controller_id": 1,
        "controller_epoch": 3,
        "broker_epoch": 4_294_967_296,
        "ungrouped_partition_states": [
            {"topic_name": "orders", "partition_index": 0, "controller_epoch": 3, "leader": 1, "leader_epoch": 7, "isr": [1, 2], "partition_epoch": 11, "replicas": [1, 2, 3], "is_new": True},
        ],
        "topic_states": [
            {
                "topic_name": "orders",
                "partition_states": [
                    {
                        "partition_index": 0,
                        "controller_epoch": 3,
                        "leader": 1,
                        "leader_epoch": 7,
                        "isr": [1, 2],
                        "partition_epoch": 11,
                        "replicas": [1, 2, 3],
                        "adding_replicas": [3],
                        "removing_replicas": [],
                        "is_new": False,
                    },
                ],
            }
        ],
        "live_leaders": [{"broker_id": 1, "host_name": "broker-1", "port": 9092}],
    },
    (4, "response"): {"error_code": 0, "partition_errors": [{"topic_name": "orders", "partition_index": 0, "error_code": 0}, {"topic_name": "orders", "partition_index": 1, "error_code": 6}]},
    (5, "request"): {
        "controller_id": 1,
        "controller_epoch": 3,
        "broker_epoch": 77,
        "delete_partitions": True,
        "ungrouped_partitions": [{"topic_name": "orders", "partition_index": 0}, {"topic_name": "orders", "partition_index": 1}],
        "topics": [{"name": "orders", "partition_indexes": [0, 1]}],
    },
    (5, "response"): {"error_code": 0, "partition_errors": [{"topic_name": "orders", "partition_index": 1, "error_code": 6}]},
    (6, "request"): {
        "controller_id": 1,
        "controller_epoch": 3,
        "broker_epoch": 77,
        "ungrouped_partition_states": [
            {"topic_name": "orders", "partition_index": 0, "controller_epoch": 3, "leader": 1, "leader_epoch": 7, "isr": [1, 2], "zk_version": 11, "replicas": [1, 2], "offline_replicas": []},
        ],
        "topic_states": [
            {
                "topic_name": "orders",
                "partition_states": [
                    {"partition_index": 0, "controller_epoch": 3, "leader": 1, "leader_epoch": 7, "isr": [1, 2], "zk_version": 11, "replicas": [1, 2], "offline_replicas": [2]},
                ],
            }
        ],
        "live_brokers": [
            {
                "id": 1,
                "v0_host": "broker-1",
                "v0_port": 9092,
                "endpoints": [{"port": 9092, "host": "broker-1", "listener": "PLAINTEXT", "security_protocol": 0}, {"port": 9093, "host": "broker-1", "listener": "SSL", "security_protocol": 1}],
                "rack": "rack-a",
            },
            {"id": 2, "v0_host": "broker-2", "v0_port": 9092, "endpoints": [], "rack": None},
        ],
    },
    (6, "response"): {"error_code": 0},
}


def s16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def i32s(*values: int) -> bytes:
    return struct.pack(">i", len(values)) + b"".join(struct.pack(">i", v) for v in values)


@pytest.mark.unit
def test_leader_and_isr_v0_and_v3_by_hand():
    body = INTER_BROKER[(4, "request")]
    v0 = (
        struct.pack(">ii", 1, 3)
        + struct.pack(">i", 1) + s16("orders") + struct.pack(">iiii", 0, 3, 1, 7) + i32s(1, 2) + struct.pack(">i", 11) + i32s(1, 2, 3)
        + struct.pack(">i", 1) + struct.pack(">i", 1) + s16("broker-1") + struct.pack(">i", 9092)
    )
    assert LEADER_AND_ISR.request(0).encode(body) == v0
    v3 = (
        struct.pack(">iiq", 1, 3, 4_294_967_296)
        + struct.pack(">i", 1) + s16("orders")
        + struct.pack(">i", 1) + struct.pack(">iiii", 0, 3, 1, 7) + i32s(1, 2) + struct.pack(">i", 11) + i32s(1, 2, 3) + i32s(3) + i32s() + b"\x00"
        + struct.pack(">i", 1) + struct.pack(">i", 1) + s16("broker-1") + struct.pack(">i", 9092)
    )
    assert LEADER_AND_ISR.request(3).encode(body) == v3
    assert LEADER_AND_ISR.request(3).decode(v3)["topic_states"][0]["partition_states"][0]["adding_replicas"] == [3]
    response = struct.pack(">h", 0) + struct.pack(">i", 2) + s16("orders") + struct.pack(">ih", 0, 0) + s16("orders") + struct.pack(">ih", 1, 6)
    for version in range(4):
        assert LEADER_AND_ISR.response(version).encode(INTER_BROKER[(4, "response")]) == response


@pytest.mark.unit
def test_stop_replica_v0_and_v1_by_hand():
    body = INTER_BROKER[(5, "request")]
    v0 = struct.pack(">ii", 1, 3) + b"\x01" + struct.pack(">i", 2) + s16("orders") + struct.pack(">i", 0) + s16("orders") + struct.pack(">i", 1)
    assert STOP_REPLICA.request(0).encode(body) == v0
    v1 = struct.pack(">iiq", 1, 3, 77) + b"\x01" + struct.pack(">i", 1) + s16("orders") + i32s(0, 1)
    assert STOP_REPLICA.request(1).encode(body) == v1
    assert STOP_REPLICA.request(1).decode(v1)["topics"] == [{"name": "orders", "partition_indexes": [0, 1]}]
    response = struct.pack(">h", 0) + struct.pack(">i", 1) + s16("orders") + struct.pack(">ih", 1, 6)
    assert STOP_REPLICA.response(0).encode(INTER_BROKER[(5, "response")]) == response


@pytest.mark.unit
def test_update_metadata_v0_and_v5_by_hand():
    body = INTER_BROKER[(6, "request")]
    state_v0 = s16("orders") + struct.pack(">iiii", 0, 3, 1, 7) + i32s(1, 2) + struct.pack(">i", 11) + i32s(1, 2)
    v0 = (
        struct.pack(">ii", 1, 3)
        + struct.pack(">i", 1) + state_v0
        + struct.pack(">i", 2) + struct.pack(">i", 1) + s16("broker-1") + struct.pack(">i", 9092) + struct.pack(">i", 2) + s16("broker-2") + struct.pack(">i", 9092)
    )
    assert UPDATE_METADATA.request(0).encode(body) == v0
    v5 = (
        struct.pack(">iiq", 1, 3, 77)
        + struct.pack(">i", 1) + s16("orders") + struct.pack(">i", 1) + struct.pack(">iiii", 0, 3, 1, 7) + i32s(1, 2) + struct.pack(">i", 11) + i32s(1, 2) + i32s(2)
        + struct.pack(">i", 2)
        + struct.pack(">i", 1) + struct.pack(">i", 2)
        + struct.pack(">i", 9092) + s16("broker-1") + s16("PLAINTEXT") + struct.pack(">h", 0)
        + struct.pack(">i", 9093) + s16("broker-1") + s16("SSL") + struct.pack(">h", 1)
        + s16("rack-a")
        + struct.pack(">i", 2) + struct.pack(">i", 0) + struct.pack(">h", -1)
    )
    assert UPDATE_METADATA.request(5).encode(body) == v5
    decoded = UPDATE_METADATA.request(5).decode(v5)
    assert decoded["live_brokers"][1]["rack"] is None
    assert decoded["live_brokers"][0]["endpoints"][1]["listener"] == "SSL"
    assert UPDATE_METADATA.response(5).encode({"error_code": 0}) == b"\x00\x00"


# ---------------------------------------------------------------- registration leaves the broker alone


@pytest.mark.unit
def test_apis_is_still_what_the_broker_serves():
    """The broker serves `APIS`, the SASL APIs (which it advertises on
    every listener, as Kafka does; `kclient.broker.security` answers them)
    and the inter-broker and admin APIs; it decodes exactly what it serves."""
    from kclient.broker.handlers import SUPPORTED_VERSIONS
    from kclient.broker.server import _BROKER_APIS

    assert set(SUPPORTED_VERSIONS) == set(_BROKER_APIS)
    assert set(APIS) | {SASL_HANDSHAKE.key, SASL_AUTHENTICATE.key} <= set(SUPPORTED_VERSIONS)
    for key, (lo, hi) in SUPPORTED_VERSIONS.items():
        assert _BROKER_APIS[key].min_version <= lo <= hi <= _BROKER_APIS[key].max_version, key
    assert APIS[OFFSET_FETCH.key] is OFFSET_FETCH and OFFSET_FETCH.max_version == 5
    for key, api in ALL_APIS.items():
        if key in APIS and api not in (OFFSET_FETCH_FULL, INIT_PRODUCER_ID_FULL):
            assert api is APIS[key]
    assert ALL_APIS[OFFSET_FETCH.key] is OFFSET_FETCH_FULL
    assert ALL_APIS[INIT_PRODUCER_ID_FULL.key] is INIT_PRODUCER_ID_FULL  # the clients' capped one stays in APIS


@pytest.mark.unit
def test_header_of_an_unserved_flexible_api_is_read_as_before():
    """`parse_request_header` reads a flexible header's tagged fields only for
    the APIs in `APIS`: for ListGroups v3 (flexible, not served) the body
    still starts right after the client id, so garbage there cannot turn
    "unknown api key" into "unreadable request header"."""
    frame = struct.pack(">hhi", 16, 3, 7) + s16("probe") + b"\xff\xff\xff"
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.body_offset) == (16, 3, 7, 8 + 7)


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _served() -> set[int]:
    from kclient.broker.handlers import SUPPORTED_VERSIONS

    return set(SUPPORTED_VERSIONS)


#: Kafka API keys kclient neither implements nor serves (DeleteRecords,
#: DescribeLogDirs, DescribeCluster), plus any implemented one not served.
_UNSERVED = sorted({21, 35, 60} | set(ALL_APIS) - _served())


@pytest.mark.parametrize("key", _UNSERVED)
def test_broker_still_refuses_the_new_apis_and_advertises_the_same(broker, key):
    """A request of an API the broker does not serve (every implemented
    version when kclient has its schema, else version 0 with an empty body)
    closes the connection with the "unknown api key" WARNING, and
    ApiVersions still advertises exactly `SUPPORTED_VERSIONS`."""
    from kclient.broker.handlers import supported_triples

    assert key not in _served()
    api = ALL_APIS.get(key)
    for version in sorted({api.min_version, api.max_version}) if api is not None else [0]:
        correlation_id = 4000 + key * 100 + version
        if api is not None:
            frame = encode_request(api, version, correlation_id, "groups-probe", {})
        else:
            payload = struct.pack(">hhi", key, version, correlation_id) + s16("groups-probe")
            frame = struct.pack(">i", len(payload)) + payload
        with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
            sock.sendall(frame)
            assert _closed_by_peer(sock)
        expected = f"unknown api key {key} (version {version}, correlation id {correlation_id})"
        wait_for(lambda expected=expected: expected in broker.output(), f"the broker's line {expected!r}", timeout=10)
        line = next(line for line in broker.output().splitlines() if expected in line)
        assert "WARNING" in line
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        sock.sendall(encode_request(API_VERSIONS, 3, 1, "groups-probe", {"client_software_name": "t", "client_software_version": "1"}))
        frame = _read_frame(sock)
    body = API_VERSIONS.response(3).decode(frame[4:])
    assert body["error_code"] == 0
    assert [(k["api_key"], k["min_version"], k["max_version"]) for k in body["api_keys"]] == supported_triples()


# ---------------------------------------------------------------- the consumer embedded protocol


@pytest.mark.unit
def test_subscription_v0_matches_kafka_python_member_metadata():
    from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberMetadata_v0

    for topics, user_data in ((["orders", "payments"], None), (["orders"], b"sticky-data"), ([], b"")):
        theirs = ConsumerProtocolMemberMetadata_v0(0, topics, user_data).encode()
        assert cp.encode_subscription(topics, user_data, version=0) == theirs
        ours = cp.decode_subscription(theirs)
        assert ours == cp.Subscription(version=0, topics=tuple(topics), user_data=user_data)


@pytest.mark.unit
def test_assignment_v0_matches_kafka_python_member_assignment():
    from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberAssignment_v0

    for assigned, user_data in (([("orders", [0, 2, 4]), ("payments", [1])], None), ([], b"\x00\x01"), ([("orders", [])], b"")):
        theirs = ConsumerProtocolMemberAssignment_v0(0, assigned, user_data).encode()
        assert cp.encode_assignment(assigned, user_data, version=0) == theirs
        decoded = cp.decode_assignment(theirs)
        assert decoded.assigned_partitions == tuple((t, tuple(ps)) for t, ps in assigned)
        assert decoded.user_data == user_data


@pytest.mark.unit
@pytest.mark.parametrize("version", range(cp.SUBSCRIPTION_MAX_VERSION + 1))
def test_subscription_every_version_matches_kafka_python(version):
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    topics = ["orders", "payments", "audit-log"]
    owned = [("orders", [0, 1]), ("payments", [5])]
    for user_data, rack in ((b"\x00\x00\x00\x01", "eu-west-1a"), (None, None)):
        kwargs = {"topics": topics, "user_data": user_data}
        if version >= 1:
            kwargs["owned_partitions"] = [ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps, version=version) for t, ps in owned]
        if version >= 2:
            kwargs["generation_id"] = 12
        if version >= 3:
            kwargs["rack_id"] = rack
        theirs = bytes(ConsumerProtocolSubscription(version=version, **kwargs).encode())
        ours = cp.encode_subscription(topics, user_data, owned_partitions=owned, generation_id=12, rack_id=rack, version=version)
        assert ours == theirs
        decoded = cp.decode_subscription(theirs)
        assert decoded.version == version and decoded.topics == tuple(topics) and decoded.user_data == user_data
        assert decoded.owned_partitions == (tuple((t, tuple(ps)) for t, ps in owned) if version >= 1 else ())
        assert decoded.generation_id == (12 if version >= 2 else -1)
        assert decoded.rack_id == (rack if version >= 3 else None)
        # and kafka-python reads ours back
        back = ConsumerProtocolSubscription.decode(ours)
        assert list(back.topics) == topics


@pytest.mark.unit
@pytest.mark.parametrize("version", range(cp.ASSIGNMENT_MAX_VERSION + 1))
def test_assignment_every_version_matches_kafka_python(version):
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    assigned = [("orders", [0, 2, 4]), ("payments", [1])]
    tps = [ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps, version=version) for t, ps in assigned]
    theirs = bytes(ConsumerProtocolAssignment(version=version, assigned_partitions=tps, user_data=b"ud").encode())
    assert cp.encode_assignment(assigned, b"ud", version=version) == theirs
    decoded = cp.decode_assignment(theirs)
    assert decoded == cp.Assignment(version=version, assigned_partitions=(("orders", (0, 2, 4)), ("payments", (1,))), user_data=b"ud")


@pytest.mark.unit
def test_newer_consumer_protocol_versions_are_read_as_the_newest_known():
    v3 = cp.encode_subscription(["orders"], None, owned_partitions=[("orders", [0])], generation_id=4, rack_id="r1", version=3)
    v9 = struct.pack(">h", 9) + v3[2:] + b"future-field"
    decoded = cp.decode_subscription(v9)
    assert (decoded.version, decoded.topics, decoded.rack_id) == (9, ("orders",), "r1")
    a9 = struct.pack(">h", 9) + cp.encode_assignment([("orders", [3])])[2:] + b"\x01"
    assert cp.decode_assignment(a9).assigned_partitions == (("orders", (3,)),)


@pytest.mark.unit
def test_consumer_protocol_errors():
    with pytest.raises(ProtocolError):
        cp.decode_subscription(b"\x00")
    with pytest.raises(ProtocolError):
        cp.decode_subscription(cp.encode_subscription(["t"], version=1) + b"\x00")
    with pytest.raises(ProtocolError):
        cp.decode_subscription(b"\xff\xff" + b"\x00" * 8)
    with pytest.raises(ProtocolError):
        cp.decode_assignment(cp.encode_assignment([("t", [0])])[:-3])
    with pytest.raises(ValueError):
        cp.encode_subscription(["t"], version=4)
    with pytest.raises(ValueError):
        cp.encode_assignment([], version=-1)
    assert cp.decode_assignment(b"") == cp.Assignment(version=0)
