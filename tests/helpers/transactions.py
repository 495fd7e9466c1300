"""Reading a transactional topic back in tests (issue 29)."""

from __future__ import annotations

from typing import Any

import trio

import kclient
from kclient.net.connection import BrokerConnection


def kclient_values(broker: Any, topic: str, isolation: str = "read_committed", partition: int = 0) -> list[bytes]:
    """Every value kclient's `Consumer` reads from one partition with
    ``isolation``, from offset 0 until its position reaches the end offset
    it was given (the last stable offset under read_committed).

    Raises:
        AssertionError: the position did not reach the end in 300 polls.
    """
    values: list[bytes] = []
    with kclient.Consumer({"bootstrap.servers": broker.bootstrap, "isolation.level": isolation, "auto.offset.reset": "earliest"}) as consumer:
        tp = kclient.TopicPartition(topic, partition)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        for _ in range(300):
            if consumer.position(tp) >= end:
                return values
            values += [r.value for r in consumer.poll(timeout_ms=200)]
    raise AssertionError(f"kclient did not reach offset {end} of {topic}-{partition}; read {values}")


def typed_request(broker: Any, api: Any, body: Any, version: int, client_id: str = "txn-test") -> Any:
    """One typed request to ``broker`` on a new connection, answered (the
    connection is closed after)."""
    host, port = broker.bootstrap.rsplit(":", 1)

    async def go() -> Any:
        async with trio.open_nursery() as nursery:
            conn = await BrokerConnection.connect(nursery, host, int(port), client_id=client_id)
            try:
                return await conn.request(api, body, version=version)
            finally:
                await conn.aclose()
                nursery.cancel_scope.cancel()

    return trio.run(go)
