"""The producer, by role: `.producer` (the blocking `Producer`),
`.core` (`TrioProducer`, the trio core both modes share), `.data`
(`ProducerData`), `.send_thread` (the async mode's queue and send thread),
`.settings` (what the send path reads from the config), `.batching`
(per-partition chunking and encoding), `.event_handler` (serialize,
partition, send with retries), `.callbacks` (`CallbackHandler`) and
`.partitioner`. Import the public names from `kclient` itself."""
