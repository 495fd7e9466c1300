"""The high-level consumer, by role: `.connector` (the blocking
`ConsumerConnector` facade and `Consumer.create`), `.core_base` (what every
core shares: streams, consumed offsets, commits, fetchers), `.core` (the
ZooKeeper-coordinated core), `.registration` (consumer registration and
the range rebalance in ZooKeeper), `.broker_core` (the broker-coordinated
core), `.membership` (JoinGroup / SyncGroup / Heartbeat / LeaveGroup),
`.assignors` (range and roundrobin), `.coordinator` (finding the group
coordinator, OffsetCommit / OffsetFetch), `.offsets` (consumed offsets,
offsets in ZooKeeper), `.offset_stores` (``offsets.storage``: ZooKeeper,
Kafka, dual commit), `.concurrent_calls` (several ZooKeeper reads at once)
and `.streams` (`KafkaStream`, topic filters). Import
the public names from `kclient` itself."""
