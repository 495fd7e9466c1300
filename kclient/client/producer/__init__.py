"""The producer, by role, from the top down (each layer imports only the
ones below it and is given its collaborators, as in Kafka's producer):

- `.producer`: the blocking `Producer` facade (sync and async modes);
- `.send_thread`: the async mode's send thread, which drains `.queue` (the
  bounded queue) into any `BatchSubmitter`;
- `.core`: `TrioProducer`, the trio core both modes share (plug-ins,
  cluster, batches in flight);
- `.event_handler`: the `EventHandler` and the default send path with its
  retries, built from `.collate` (serialize, partition), `.batching`
  (per-partition chunking and encoding), `.sender` (write requests, read
  answers) and `.idempotence` (KIP-98);
- transactions (KIP-98, ``transactional.id``): `.transactions` (the pure
  `TransactionManager` state machine, with `.transaction_rules` and
  `.transaction_types`) and `.transaction_client` (sends its requests on
  the producer's cluster; the send path waits on it to add partitions);
- leaves shared by the layers: `.data` (`ProducerData`), `.delivery`
  (per-record results), `.failures` (the errors of failed partitions),
  `.settings` (what the send path reads from the config), `.callbacks`
  (`CallbackHandler`) and `.partitioner`.

Import the public names from `kclient` itself."""
