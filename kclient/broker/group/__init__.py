"""The group coordinator and offset manager of the bundled broker.

Kafka's consumer-group design (documentation, "Consumer Group Protocol" and
"Offset management"; KIP-62, KIP-211, KIP-229, KIP-394): a group's
coordinator is the leader of partition ``abs(hashCode(group)) % n`` of the
compacted ``__consumer_offsets`` topic. Committed offsets and the group's
membership state are records of that partition; the coordinator keeps them
in memory, loading the partition when it becomes its leader.

- `kclient.broker.group.records`: the record key/value layouts, byte for
  byte Kafka's, and the group -> partition mapping;
- `kclient.broker.group.metadata_manager`: the offsets partitions this
  broker leads, loading, the cache, appends acknowledged once replicated,
  offset expiry;
- `kclient.broker.group.membership`: one group's members and state;
- `kclient.broker.group.coordinator`: the membership state machine
  (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, session and rebalance
  timeouts);
- `kclient.broker.group.apis`: the request handlers of the group APIs.
"""

from kclient.broker.group.records import OFFSETS_TOPIC, java_string_hash, partition_for

__all__ = ["OFFSETS_TOPIC", "java_string_hash", "partition_for"]
