"""``kclient console-consumer --group G``: read a topic as a member of a
consumer group, as Kafka's console consumer does with ``--group``.

A `kclient.Consumer` subscribes to the topic with ``group.id`` G, so the
group's members share its partitions and a restarted console consumer goes
on from the group's committed offsets (``--from-beginning``: from the log
start where the group has none, Kafka's ``auto.offset.reset=earliest``;
else from the log end). The offsets of the records printed, and only those,
are committed: asynchronously after each poll, synchronously at the end
(``enable.auto.commit`` is off unless a ``--consumer-property`` turns it
on).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, Protocol

from kclient.errors import ConfigError

if TYPE_CHECKING:
    from kclient.client.consumer.poll.consumer import Consumer
    from kclient.client.consumer.poll.types import ConsumerRecord, TopicPartition

__all__ = ["GroupReader", "group_config", "group_id"]

#: The longest one poll waits for records (ms).
POLL_MS = 500


class RecordFormatter(Protocol):
    """What `GroupReader` prints records with (the console consumer's
    ``MessageFormatter``)."""

    def format(self, partition: int, offset: int, key: bytes | None, value: bytes | None, timestamp: int, headers: Sequence[Any] = ()) -> bytes:
        """One record as printed, line separator included."""


def group_id(group: str | None, properties: Mapping[str, str]) -> str | None:
    """The group to consume in: ``--group``, or the ``group.id`` of the
    consumer properties.

    Args:
        group: ``--group``'s value, or None.
        properties: The ``--consumer-property`` / ``--consumer.config``
            properties.

    Returns:
        The group id, or None without one.

    Raises:
        ConfigError: Both give a group and they differ (Kafka's check).
    """
    given = properties.get("group.id")
    if group is not None and given is not None and given != group:
        raise ConfigError(
            "The group ids provided in different places (directly using '--group', via '--consumer-property', "
            "or via '--consumer.config') do not match."
        )
    return group if group is not None else given


def group_config(bootstrap: str, group: str, from_beginning: bool, properties: Mapping[str, str]) -> dict[str, str]:
    """The `kclient.Consumer` properties of ``console-consumer --group``.

    Args:
        bootstrap: ``--bootstrap-server``.
        group: The group id.
        from_beginning: ``--from-beginning`` (``auto.offset.reset=earliest``).
        properties: The consumer properties given (they win).

    Returns:
        Kafka property names -> values.
    """
    config = {
        "client.id": "console-consumer",
        "enable.auto.commit": "false",
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        **properties,
    }
    config.update({"bootstrap.servers": bootstrap, "group.id": group})
    return config


class GroupReader:
    """What ``console-consumer --group`` reads and has printed: a
    subscribed `kclient.Consumer`, the offsets printed, and how many
    records were printed (up to ``limit``).

    Args:
        topic: The topic.
        formatter: Prints a record.
        out: Where records go.
        limit: ``--max-messages``, or None.
    """

    def __init__(self, topic: str, formatter: RecordFormatter, out: IO[bytes], limit: int | None) -> None:
        self.topic = topic
        self.formatter = formatter
        self.out = out
        self.limit = limit
        self.processed = 0
        self.consumer: Consumer | None = None
        #: The next offset of each partition printed from.
        self._printed: dict[TopicPartition, int] = {}

    @property
    def done(self) -> bool:
        """Whether ``--max-messages`` records were printed."""
        return self.limit is not None and self.processed >= self.limit

    def open(self, config: Mapping[str, str]) -> None:
        """Create the consumer and subscribe to the topic.

        Args:
            config: Its properties (`group_config`).
        """
        from kclient.client.consumer.poll.consumer import Consumer

        self.consumer = Consumer(dict(config))
        self.consumer.subscribe([self.topic])

    def read(self, timeout_ms: int | None, stop: Callable[[], bool] = lambda: False) -> None:
        """Print records until the limit, until ``timeout_ms`` passed
        without one (never, without a timeout), or until ``stop()`` is true
        (looked at between polls: what a poll brought is printed, counted
        and committed first)."""
        assert self.consumer is not None
        wait = POLL_MS if timeout_ms is None else min(POLL_MS, timeout_ms)
        last_record = time.monotonic()
        while not self.done and not stop():
            records = self.consumer.poll(timeout_ms=wait)
            if records:
                self._print(records)
                last_record = time.monotonic()
            elif timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
                break

    def _print(self, records: Sequence[ConsumerRecord]) -> None:
        from kclient.client.consumer.poll.types import TopicPartition

        for r in records:
            if self.done:
                break
            self.out.write(self.formatter.format(r.partition, r.offset, r.key, r.value, r.timestamp, r.headers))
            self.processed += 1
            self._printed[TopicPartition(r.topic, r.partition)] = r.offset + 1
        self.out.flush()
        if self._printed and self.consumer is not None:
            self.consumer.commit(dict(self._printed), asynchronous=True)

    def close(self) -> None:
        """Flush the output, commit what was printed and close the
        consumer (it leaves the group)."""
        try:
            self.out.flush()
        except (OSError, ValueError):
            pass
        if self.consumer is None:
            return
        try:
            if self._printed:  # again, synchronously: the last async commit may still be on its way
                self.consumer.commit(dict(self._printed))
        finally:
            self.consumer.close()
