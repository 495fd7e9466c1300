"""Compression: the same 2,000 JSON records produced with each codec
(``compression.type`` = none, gzip, snappy, lz4, zstd), read back, and the
bytes each takes in the log compared.

A codec compresses a whole batch (``batch.num.messages`` records in async
mode), never single records, so bigger batches compress better. The
consumer needs no setting: each batch names its codec.

    python examples/compression.py 127.0.0.1:9092       # or KCLIENT_BOOTSTRAP=...

Without an address it starts a bundled broker.
"""

from __future__ import annotations

import json
import os
import sys
import uuid

from kclient import FetchRequest, Producer, ProducerData, SimpleConsumer

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS = 2000


def main(bootstrap: str) -> None:
    run = uuid.uuid4().hex[:8]
    records = [json.dumps({"id": i, "carrier": "UA", "origin": "EWR", "dest": "SFO", "delay": i % 37}).encode() for i in range(RECORDS)]
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    sizes = {}
    for codec in CODECS:
        topic = f"compressed-{codec}-{run}"
        config = {
            "bootstrap.servers": bootstrap,
            "producer.type": "async",
            "compression.type": codec,  # Kafka 0.8: compression.codec
            "batch.num.messages": 500,
        }
        with Producer(config) as producer:
            for value in records:
                producer.send(ProducerData(topic, partition=0, messages=[value]))
        with SimpleConsumer(host, int(port), so_timeout_ms=10_000) as consumer:
            fetched = consumer.fetch(FetchRequest(topic, 0, 0, 16 << 20))
            values = [m.message.payload for m in fetched]
        assert values == records, f"{codec}: {len(values)} records back"
        sizes[codec] = fetched.size_in_bytes
    for codec in CODECS:
        print(f"{codec:>6}: {sizes[codec]:>8,} bytes in the log ({sizes['none'] / sizes[codec]:.1f}x)")
    assert all(sizes[c] < sizes["none"] for c in CODECS if c != "none"), sizes
    print(f"OK: {RECORDS} records read back unchanged with every codec")


if __name__ == "__main__":
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KCLIENT_BOOTSTRAP")
    if address:
        main(address)
    else:
        from kclient.testing import BrokerProcess

        with BrokerProcess() as broker:
            main(broker.bootstrap)
