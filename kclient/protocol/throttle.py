"""Who waits out a throttle (KIP-219).

From the versions listed here on, a broker answers a throttled request at
once with ``throttle_time_ms`` and then mutes the connection for that
long, and the client must not send on that connection before it passes;
on older versions the broker delays the response instead, and the client
does nothing (Kafka's ``AbstractResponse.shouldClientThrottle``). APIs
newer than KIP-219 (Kafka 2.0) throttle on the client from v0.
"""

from __future__ import annotations

__all__ = ["CLIENT_THROTTLE_FROM", "client_throttles"]

#: API key -> first version whose throttle the client waits out (KIP-219);
#: keys not listed: from v0.
CLIENT_THROTTLE_FROM: dict[int, int] = {
    0: 6,  # Produce
    1: 8,  # Fetch
    2: 3,  # ListOffsets
    3: 6,  # Metadata
    8: 4,  # OffsetCommit
    9: 4,  # OffsetFetch
    10: 2,  # FindCoordinator
    11: 3,  # JoinGroup
    12: 2,  # Heartbeat
    13: 2,  # LeaveGroup
    14: 2,  # SyncGroup
    15: 2,  # DescribeGroups
    16: 2,  # ListGroups
    18: 2,  # ApiVersions
    19: 3,  # CreateTopics
    20: 2,  # DeleteTopics
    21: 1,  # DeleteRecords
    22: 1,  # InitProducerId
    23: 3,  # OffsetForLeaderEpoch
    24: 1,  # AddPartitionsToTxn
    25: 1,  # AddOffsetsToTxn
    26: 1,  # EndTxn
    28: 1,  # TxnOffsetCommit
    29: 1,  # DescribeAcls
    30: 1,  # CreateAcls
    31: 1,  # DeleteAcls
    32: 2,  # DescribeConfigs
    33: 1,  # AlterConfigs
    36: 1,  # SaslAuthenticate
    37: 1,  # CreatePartitions
    42: 1,  # DeleteGroups
}


def client_throttles(api_key: int, version: int) -> bool:
    """Whether a response of this API version makes the client wait out its
    ``throttle_time_ms`` (True) or was already delayed by the broker (False)."""
    return version >= CLIENT_THROTTLE_FROM.get(api_key, 0)
