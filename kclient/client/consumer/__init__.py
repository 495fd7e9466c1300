"""The consumers: `.simple` (`SimpleConsumer`, `TrioSimpleConsumer`),
`.message_set` (what a fetch returns) and `.fetcher` (the high-level
consumer's fetch loops); `.group` holds the ZooKeeper-coordinated
`ConsumerConnector`. Import the public names from `kclient` itself."""
