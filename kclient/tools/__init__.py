"""Command-line tools that work on files rather than on a broker.

* `kclient.tools.dump_log`: ``kclient dump-log``, a port of Kafka's
  ``kafka.tools.DumpLogSegments`` for ``.log``, ``.index`` and
  ``.timeindex`` files.
"""
