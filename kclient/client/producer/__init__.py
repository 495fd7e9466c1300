"""The producer, by role: `.producer` (the blocking `Producer`),
`.core` (`TrioProducer`, the trio core both modes share), `.data`
(`ProducerData`), `.queue` (the async mode's bounded queue), `.send_thread`
(its send thread),
`.settings` (what the send path reads from the config), `.batching`
(per-partition chunking and encoding), `.event_handler` (serialize,
partition, send with retries), `.callbacks` (`CallbackHandler`) and
`.partitioner`. Import the public names from `kclient` itself."""
