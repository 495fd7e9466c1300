"""aiokafka's ``AIOKafkaConsumer`` as a blocking group member, for the
shared-group tests: each call runs the coroutine on the member's own
asyncio loop (its heartbeats run while that loop does, i.e. during every
poll)."""

from __future__ import annotations

from typing import Any


class AioKafkaMember:
    """One aiokafka member of ``group`` subscribed to ``topic``, from the
    earliest offset, committing by hand.

    Args:
        bootstrap: The brokers, ``host:port``.
        group: The group id.
        topic: The topic.
        **settings: More ``AIOKafkaConsumer`` keyword arguments (session and
            heartbeat timeouts, assignors, ...).
    """

    def __init__(self, bootstrap: str, group: str, topic: str, **settings: Any) -> None:
        import asyncio

        import aiokafka

        self.loop = asyncio.new_event_loop()

        async def start():
            consumer = aiokafka.AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                metadata_max_age_ms=1000,
                **settings,
            )
            await consumer.start()
            return consumer

        self.consumer = self.loop.run_until_complete(start())

    def poll_values(self, timeout_ms: int) -> list[str]:
        """The values of what one ``getmany`` returned, decoded."""
        batches = self.loop.run_until_complete(self.consumer.getmany(timeout_ms=timeout_ms))
        return [r.value.decode() for recs in batches.values() for r in recs]

    def commit(self) -> None:
        self.loop.run_until_complete(self.consumer.commit())

    def assignment(self):
        return self.consumer.assignment()

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.consumer.stop())
        finally:
            self.loop.close()
