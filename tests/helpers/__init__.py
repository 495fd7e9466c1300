"""Helpers shared by the test modules (imported as ``helpers.<module>``;
pytest puts ``tests/`` on ``sys.path``):

- `helpers.raw`: raw Kafka frames against a live broker: request body
  builders (Produce, Fetch) and a blocking and a trio connection speaking
  them through `kclient.protocol.connection.ClientConnection`;
- `helpers.peers`: the real peer clients (kafka-python, confluent-kafka)
  producing to and consuming from the bundled broker;
- `helpers.examples`: Hypothesis example counts, full or (``-m unit``,
  ``KCLIENT_QUICK=1``) quick.
"""
