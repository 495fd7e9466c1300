"""The ZooKeeper-coordinated high-level consumer, by role: `.connector`
(the blocking `ConsumerConnector` facade), `.core` (the connector's state
on its trio loop), `.registration` (consumer registration and the range
rebalance), `.offsets` (offsets in ZooKeeper) and `.streams`
(`KafkaStream`, topic filters). Import the public names from `kclient`
itself."""
