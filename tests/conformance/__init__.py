"""The conformance suite: the same scenarios against the bundled broker, Apache Kafka 4.x and Kafka 3.9 (a package, so its module names never clash with tests/)."""
