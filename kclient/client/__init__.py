"""The client SDK, by role (trio inside, with blocking facades):

- `kclient.client.producer`: the Producer, its trio core and send path;
- `kclient.client.consumer`: the SimpleConsumer, message sets and the
  high-level consumer's fetchers; `kclient.client.consumer.group`: the
  ZooKeeper-coordinated ConsumerConnector;
- `kclient.client.serde`: encoders and decoders;
- `kclient.client.cluster`: the metadata cache and broker connections.

Import the public names from `kclient` itself."""
