"""The poll consumer, `kclient.Consumer` (Kafka's ``KafkaConsumer``:
``subscribe`` / ``assign``, ``poll``, ``commit``, ``seek``...), and its trio
twin `TrioConsumer`. One job a module:

- `types`: `TopicPartition`, `OffsetAndMetadata`, `OffsetAndTimestamp`,
  `ConsumerRecord`, `TimestampType`, `ConsumerRebalanceListener`;
- `errors`: `NoOffsetForPartitionError`, `CommitFailedError`;
- `config`: the settings (modern defaults over `kclient.config.ConsumerConfig`);
- `arguments`: the forms the methods take their arguments in;
- `subscription`: the subscription, the assignment and each partition's
  position (Kafka's ``SubscriptionState``);
- `records`: fetched partitions as `ConsumerRecord` objects;
- `fetcher`: the fetches, one per leader broker, through the
  SimpleConsumer's fetch path;
- `list_offsets`: ListOffsets by time (resets, ``offsets_for_times``);
- `positions`: committed offsets and resets for partitions without a
  position;
- `record_poll`: the records half of a ``poll`` step (positions, leaders,
  buffered records, the next fetches, the wait);
- `auto_commit`: the auto-commit timer and asynchronous commits;
- `group`: membership, rebalance steps, heartbeats, the
  ``max.poll.interval.ms`` timer, commits (Kafka's ``ConsumerCoordinator``);
- `core`: `TrioConsumer`;
- `consumer`: `Consumer`, the blocking facade.
"""
