"""The async producer with `kclient.CallbackHandler` hooks and per-record
delivery results.

The hooks of Kafka 0.8's ``callback.handler`` (Kafka 0.8 documentation,
section 5.1 "API Design"): this handler stamps a header on every record
before it is queued, counts what each batch carries, adds a last record
when the producer closes, and hears about batches that failed. The
producer's ``statistics()`` gives the totals afterwards.

Delivery results, as Kafka's ``send(record, callback)`` gives them: a
callback per record (``send(data, callback=fn)``, called on the producer's
send thread) and futures (``send_with_result``), each with the record's
partition and offset, checked here against what a consumer reads back.

    python examples/async_callbacks.py 127.0.0.1:9092      # or KCLIENT_BOOTSTRAP=...

Without an address it starts a bundled broker.
"""

from __future__ import annotations

import os
import sys
import threading
import uuid

from kclient import (
    CallbackHandler,
    FetchRequest,
    Producer,
    ProducerData,
    SimpleConsumer,
)


class AuditingHandler(CallbackHandler):
    """Counts batches and records, tags records, reports failures."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.lock = threading.Lock()  # before_enqueue runs on the sending threads
        self.enqueued = 0
        self.batches: list[int] = []
        self.errors: list[BaseException] = []

    def before_enqueue(self, data):
        # On the thread calling send(): return the item to queue (or None to drop it).
        with self.lock:
            self.enqueued += 1
        if data.messages == ("drop me",):
            return None
        return ProducerData(data.topic, data.key, data.messages, headers=[("source", b"example")])

    def before_sending_data(self, batch):
        # On the send thread, once per batch (batch.num.messages or queue.buffering.max.ms).
        self.batches.append(sum(len(d.messages) for d in batch))
        return batch

    def last_batch_before_close(self):
        # On the send thread during close(), after the queue was drained.
        return [ProducerData(self.topic, b"k", [b"end of stream"])]

    def on_send_error(self, events, exc):
        self.errors.append(exc)
        print(f"failed batch of {len(events)} items: {exc}", file=sys.stderr)


def main(bootstrap: str) -> None:
    topic = f"audit-{uuid.uuid4().hex[:8]}"
    handler = AuditingHandler(topic)
    config = {
        "bootstrap.servers": bootstrap,
        "producer.type": "async",
        "batch.num.messages": 50,  # a batch is sent when 50 records wait ...
        "linger.ms": 20,  # ... or the oldest has waited 20 ms (queue.buffering.max.ms)
        "compression.type": "gzip",
        "callback.handler": handler,  # an instance, a class or a dotted path
        "client.id": "audit",  # names the send thread: kclient-producer-audit-send
    }
    delivered = {}  # value -> (partition, offset), filled by the callback

    def on_completion(metadata, exc):
        # Kafka's Callback.onCompletion: on the producer's send thread, once per record.
        if exc is not None:
            print(f"not delivered: {exc}", file=sys.stderr)
            return
        delivered[metadata.offset] = (metadata.partition, threading.current_thread().name)

    with Producer(config) as producer:  # close() flushes the queue
        for i in range(500):
            producer.send(ProducerData(topic, key=b"k", messages=[f"record {i}".encode()]))
        producer.send(ProducerData(topic, key=b"k", messages=["drop me"]))
        # Delivery results: a callback per record, or a future per record.
        producer.send(ProducerData(topic, key=b"k", messages=[b"cb 1", b"cb 2"]), callback=on_completion)
        [future] = producer.send_with_result(ProducerData(topic, key=b"k", messages=[b"with a future"]))
        metadata = future.result(timeout=30)  # RecordMetadata(topic, partition, offset, timestamp, ...)
        print(f"'with a future' is at {metadata.topic}-{metadata.partition} offset {metadata.offset}")
        producer.flush()
        stats = producer.statistics()
        print(f"sent {stats.sent_messages} records in {stats.sent_batches} batches, {stats.failed_messages} failed")

    assert handler.enqueued == 503 and not handler.errors  # ProducerData: 500 + "drop me" + 2 with results
    assert sum(handler.batches) == 504, handler.batches  # 503 records and the last batch's one
    assert {thread for _, thread in delivered.values()} == {"kclient-producer-audit-send"}, delivered
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with SimpleConsumer(host, int(port), so_timeout_ms=10_000) as consumer:
        records = []
        for p in consumer.partitions_for(topic):  # key b"k": every record lands in one partition
            offset = 0
            while chunk := consumer.fetch(FetchRequest(topic, p.partition, offset, 1 << 20)).messages():
                records += chunk
                offset = chunk[-1].next_offset
    assert len(records) == 504, len(records)
    assert records[0].message.headers[0].key == "source" and records[-1].message.payload == b"end of stream"
    by_offset = {r.offset: r.message.payload for r in records}
    assert by_offset[metadata.offset] == b"with a future"
    assert sorted(by_offset[offset] for offset in delivered) == [b"cb 1", b"cb 2"]
    print(f"OK: {len(records)} records, {len(handler.batches)} batches ({handler.batches[:5]}...)")


if __name__ == "__main__":
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KCLIENT_BOOTSTRAP")
    if address:
        main(address)
    else:
        from kclient.testing import BrokerProcess

        with BrokerProcess() as broker:
            main(broker.bootstrap)
