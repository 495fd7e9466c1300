"""The consumers: `.simple` (`SimpleConsumer`, `TrioSimpleConsumer`),
`.message_set` (what a fetch returns), `.fetcher` (the high-level
consumer's fetch loops), `.chunk` (the decoded chunks the fetchers hand to
the streams) and `.partition_topic_info` (an owned partition's fetch
state); `.group` holds the `ConsumerConnector` (ZooKeeper- or
broker-coordinated). Import the public names from `kclient` itself."""
