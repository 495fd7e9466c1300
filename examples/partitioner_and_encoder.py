"""A custom Partitioner and a JSON Encoder/Decoder pair.

Orders are JSON objects keyed by region; the partitioner sends every region
to a fixed partition (``eu`` -> 0, ``us`` -> 1, anything else hashed over
the rest), and the records are read back with ``SimpleConsumer`` and decoded
with the matching Decoder.

Run it against a broker whose auto-created topics get at least 3 partitions
(``num.partitions``)::

    python examples/partitioner_and_encoder.py 127.0.0.1:9092
    KCLIENT_BOOTSTRAP=127.0.0.1:9092 python examples/partitioner_and_encoder.py

Without an address it starts a bundled broker (`kclient.testing.BrokerProcess`).
Plug-ins are given as a class, an instance or a dotted class path
(``"mypkg.serde.JsonEncoder"``) under Kafka's property names
(``partitioner.class``, ``serializer.class``, ``key.serializer.class``).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
import zlib

from kclient import (
    Decoder,
    Encoder,
    FetchRequest,
    Partitioner,
    Producer,
    ProducerData,
    SimpleConsumer,
)


class JsonEncoder(Encoder):
    """Values become compact UTF-8 JSON."""

    def to_message(self, value):
        return json.dumps(value, separators=(",", ":")).encode()


class JsonDecoder(Decoder):
    """The inverse of `JsonEncoder` (a null value stays None)."""

    def from_bytes(self, data):
        return None if data is None else json.loads(data)


class RegionPartitioner(Partitioner):
    """``eu`` to partition 0, ``us`` to 1, other regions spread over the rest
    by a stable hash (keys arrive serialized: ``key.serializer.class`` ran
    first)."""

    FIXED = {b"eu": 0, b"us": 1}

    def partition(self, key, num_partitions):
        if key in self.FIXED:
            return self.FIXED[key]
        return 2 + zlib.crc32(key or b"") % (num_partitions - 2)


def main(bootstrap: str) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    config = {
        "bootstrap.servers": bootstrap,  # alias of metadata.broker.list
        "partitioner.class": RegionPartitioner,
        "serializer.class": JsonEncoder,
        "key.serializer.class": "kclient.StringEncoder",
    }
    orders = [("eu", {"id": 1, "total": 9.5}), ("us", {"id": 2, "total": 20}), ("eu", {"id": 3, "total": 1.25}), ("apac", {"id": 4, "total": 7})]
    with Producer(config) as producer:  # sync: send() returns once acknowledged
        partitions = len(producer.partitions_for(topic))
        assert partitions >= 3, f"topic {topic} has {partitions} partitions; start the broker with num.partitions >= 3"
        for region, order in orders:
            producer.send(ProducerData(topic, key=region, messages=[order]))

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    decode = JsonDecoder().from_bytes
    found = {}
    with SimpleConsumer(host, int(port), so_timeout_ms=10_000, client_id="example") as consumer:
        for partition in range(partitions):
            for m in consumer.fetch(FetchRequest(topic, partition, 0, 1 << 20)):
                order = decode(m.message.payload)
                found[order["id"]] = (m.message.key.decode(), partition)
                print(f"partition {partition} offset {m.offset}: {m.message.key.decode()} {order}")
    assert found[1] == ("eu", 0) and found[3] == ("eu", 0), found
    assert found[2] == ("us", 1), found
    assert found[4][1] >= 2, found
    print(f"OK: {len(found)} orders, each in its region's partition")


if __name__ == "__main__":
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KCLIENT_BOOTSTRAP")
    if address:
        main(address)
    else:
        from kclient.testing import BrokerProcess

        with BrokerProcess(properties={"num.partitions": "3"}) as broker:
            main(broker.bootstrap)
