"""The trio API: `kclient.TrioProducer` and `kclient.TrioSimpleConsumer` in
one trio program, a producer task and a consumer task running concurrently.

The consumer long-polls (``max_wait_ms``: the broker answers as soon as data
arrives or the wait ends) and follows the partition's log end, the way a
tailing consumer does, until it has seen every record.

    python examples/trio_api.py 127.0.0.1:9092      # or KCLIENT_BOOTSTRAP=...

Without an address it runs a bundled broker inside the same trio program
(`kclient.testing.run_broker`), no subprocess.
"""

from __future__ import annotations

import os
import sys
import uuid

import trio

from kclient import (
    FetchRequest,
    OffsetRequest,
    ProducerData,
    TrioProducer,
    TrioSimpleConsumer,
    UnknownTopicOrPartitionError,
)

RECORDS = 200


async def produce(bootstrap: str, topic: str) -> None:
    config = {"bootstrap.servers": bootstrap, "serializer.class": "kclient.StringEncoder", "acks": "all"}
    async with TrioProducer(config) as producer:  # every send() is one request, awaited until acknowledged
        for i in range(0, RECORDS, 20):
            await producer.send(ProducerData(topic, partition=0, messages=[f"event {j}" for j in range(i, i + 20)]))
            await trio.sleep(0.01)


async def consume(host: str, port: int, topic: str) -> list[str]:
    seen: list[str] = []
    async with TrioSimpleConsumer(host, port, so_timeout_ms=10_000, client_id="trio-example") as consumer:
        while True:  # the producer's first send creates the topic (auto.create.topics.enable)
            try:
                await consumer.partitions_for(topic)
                break
            except UnknownTopicOrPartitionError:
                await trio.sleep(0.05)
        offset = (await consumer.get_offsets_before(topic, 0, OffsetRequest.EARLIEST_TIME, 1))[0]
        with trio.fail_after(30):
            while len(seen) < RECORDS:
                messages = await consumer.fetch(FetchRequest(topic, 0, offset, 1 << 20), max_wait_ms=500, min_bytes=1)
                for m in messages:
                    seen.append(m.message.payload.decode())
                    offset = m.next_offset
    return seen


async def main(bootstrap: str) -> None:
    topic = f"trio-{uuid.uuid4().hex[:8]}"
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    result: list[str] = []

    async def consumer_task() -> None:
        result.extend(await consume(host, int(port), topic))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer_task)
        nursery.start_soon(produce, bootstrap, topic)
    assert result == [f"event {i}" for i in range(RECORDS)], result[:5]
    print(f"OK: {len(result)} records produced and consumed concurrently, in order")


async def with_own_broker() -> None:
    from kclient.testing import run_broker

    async with run_broker(port=0) as broker:
        await main(f"127.0.0.1:{broker.port}")


if __name__ == "__main__":
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KCLIENT_BOOTSTRAP")
    trio.run(main, address) if address else trio.run(with_own_broker)
