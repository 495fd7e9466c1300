"""The transaction coordinator of the bundled broker (KIP-98): pure
modules for state, decisions and records, and the modules that wire them
to ``__transaction_state`` and the network.

Kafka's design: a transactional id's coordinator is the leader of
partition ``abs(hashCode(id)) % n`` of the compacted
``__transaction_state`` topic, whose records hold each id's producer id,
epoch, state and partitions; the coordinator keeps them in memory, loading
the partition when it becomes its leader.

- `kclient.broker.txn.partitioner`: the id -> partition mapping;
- `kclient.broker.txn.metadata`: one id's state and Kafka's legal
  transitions;
- `kclient.broker.txn.records`: state <-> ``__transaction_state`` records
  (formats in `kclient.protocol.messages.transaction_log`);
- `kclient.broker.txn.coordinator`: the decisions of InitProducerId,
  AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and timeouts;
- `kclient.broker.txn.markers`: WriteTxnMarkers routing and the handling
  of its answers, up to the completion record;
- `kclient.broker.txn.state_manager`: the cache of the ids this broker
  coordinates, loading, expiry, DescribeTransactions / ListTransactions;
- `kclient.broker.txn.transaction_coordinator`: the cache and the
  decisions together (lookups, coordinator epochs, what to write and
  answer after each write), the one object the broker wires.

The broker's I/O around them:

- `kclient.broker.txn.state_log`: ``__transaction_state`` created, loaded
  on leadership, written with acks=all;
- `kclient.broker.txn.marker_channel`: WriteTxnMarkers to the partition
  leaders, then the completion record;
- `kclient.broker.txn.service`: the coordinator with that I/O and its
  timers (timed-out aborts, id expiry), built in
  `kclient.broker.components`;
- `kclient.broker.txn.apis`: the request handlers.
"""
