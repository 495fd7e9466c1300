"""The ``kclient`` command line tools, one module per subcommand (each
has a ``register(subparsers)`` that `kclient.cli` calls).

* `kclient.tools.broker`: ``kclient broker``, the bundled broker
  (``kafka-server-start.sh``).
* `kclient.tools.console_producer`: ``kclient console-producer``
  (``kafka-console-producer.sh``): stdin lines to a topic; its line format
  in `kclient.tools.line_reader`.
* `kclient.tools.console_consumer`: ``kclient console-consumer``
  (``kafka-console-consumer.sh``): a topic's records to stdout; with
  ``--group``, `kclient.tools.console_group`. Both console tools share
  `kclient.tools.console_arguments` and take Ctrl-C as a request to stop
  (`kclient.tools.shutdown`).
* `kclient.tools.topics`: ``kclient topics --list/--describe/--create/--delete``
  (``kafka-topics.sh``).
* `kclient.tools.get_offsets`: ``kclient get-offsets``
  (``kafka-get-offsets.sh``, GetOffsetShell).
* `kclient.tools.consumer_groups`: ``kclient consumer-groups --list /
  --describe`` (``kafka-consumer-groups.sh --zookeeper``, 0.8's
  ConsumerOffsetChecker): committed offsets, log end offsets and lag.
* `kclient.tools.transactions`: ``kclient transactions --list /
  --describe`` (``kafka-transactions.sh``, KIP-664): transactional ids,
  their state, producer and partitions.
* `kclient.tools.zookeeper`: ``kclient zookeeper``, a dev ZooKeeper in the
  foreground (``zookeeper-server-start.sh``).
* `kclient.tools.cluster`: ``kclient cluster``, a development cluster
  (ZooKeeper plus N brokers) in the foreground.
* `kclient.tools.dump_log`: ``kclient dump-log``, a port of Kafka's
  ``kafka.tools.DumpLogSegments`` for ``.log``, ``.index`` and
  ``.timeindex`` files.
* `kclient.tools.configs`: ``kclient configs``, SCRAM users in ZooKeeper
  (``kafka-configs.sh``).
* `kclient.tools.acls`: ``kclient acls --add / --remove / --list``
  (``kafka-acls.sh``): ACL bindings through CreateAcls, DeleteAcls and
  DescribeAcls.
"""
