"""A consumer group (`kclient.ConsumerConnector`, coordinated through
ZooKeeper) reading every topic a `kclient.Whitelist` matches, committing
its offsets by hand.

1. Produce 6 records to ``clicks-<run>`` and 4 to ``views-<run>`` (and 3 to
   ``other-<run>``, which the whitelist leaves out).
2. Member one reads the whitelisted topics from the start
   (``auto.offset.reset=earliest``), with auto-commit off
   (``enable.auto.commit=false``), and commits after it handled everything.
3. Two more records arrive. A new member of the same group resumes after the
   committed offsets and sees only those two.

    python examples/group_consumer.py BOOTSTRAP ZOOKEEPER   # e.g. 127.0.0.1:9092 127.0.0.1:2181
    KCLIENT_BOOTSTRAP=... KCLIENT_ZOOKEEPER=... python examples/group_consumer.py

The broker must be registered in that ZooKeeper (``zookeeper.connect`` in its
properties). Without addresses it starts ZooKeeper (`kclient.testing.ZooKeeperProcess`,
which needs Java and Debian's ``zookeeper`` package) and a broker.
"""

from __future__ import annotations

import os
import sys
import uuid

from kclient import (
    ConsumerConnector,
    ConsumerTimeoutError,
    Producer,
    ProducerData,
    StringDecoder,
    Whitelist,
)


def drain(stream) -> list:
    """Every message until the stream is idle for consumer.timeout.ms."""
    got = []
    try:
        for m in stream:
            got.append(m)
    except ConsumerTimeoutError:
        pass
    return got


def main(bootstrap: str, zookeeper: str) -> None:
    run = uuid.uuid4().hex[:8]
    with Producer({"bootstrap.servers": bootstrap, "serializer.class": "kclient.StringEncoder"}) as producer:
        producer.send([ProducerData(f"clicks-{run}", None, [f"click {i}" for i in range(6)])])
        producer.send([ProducerData(f"views-{run}", None, [f"view {i}" for i in range(4)])])
        producer.send([ProducerData(f"other-{run}", None, ["not for us"] * 3)])

    config = {
        "group.id": f"example-{run}",
        "zookeeper.connect": zookeeper,
        "auto.offset.reset": "earliest",  # Kafka 0.8: smallest
        "enable.auto.commit": "false",  # Kafka 0.8: auto.commit.enable
        "consumer.timeout.ms": 3000,  # an idle stream raises ConsumerTimeoutError instead of blocking
    }
    only_ours = Whitelist(rf"(clicks|views)-{run}")
    with ConsumerConnector(config) as member:
        [stream] = member.create_message_streams_by_filter(only_ours, 1, value_decoder=StringDecoder())
        first = drain(stream)
        for m in first:
            print(f"member 1: {m.topic}[{m.partition}]@{m.offset} {m.message}")
        member.commit_offsets()  # /consumers/<group>/offsets/<topic>/<partition>
    assert sorted(m.message for m in first) == sorted([f"click {i}" for i in range(6)] + [f"view {i}" for i in range(4)])

    with Producer({"bootstrap.servers": bootstrap, "serializer.class": "kclient.StringEncoder"}) as producer:
        producer.send([ProducerData(f"clicks-{run}", None, ["click 6"]), ProducerData(f"views-{run}", None, ["view 4"])])

    with ConsumerConnector(config) as member:  # the same group: resumes at the committed offsets
        [stream] = member.create_message_streams_by_filter(only_ours, 1, value_decoder=StringDecoder())
        second = drain(stream)
        for m in second:
            print(f"member 2: {m.topic}[{m.partition}]@{m.offset} {m.message}")
    assert sorted(m.message for m in second) == ["click 6", "view 4"], [m.message for m in second]
    print(f"OK: {len(first)} records, committed, then only the {len(second)} new ones")


if __name__ == "__main__":
    bootstrap = sys.argv[1] if len(sys.argv) > 2 else os.environ.get("KCLIENT_BOOTSTRAP")
    zookeeper = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("KCLIENT_ZOOKEEPER")
    if bootstrap and zookeeper:
        main(bootstrap, zookeeper)
    else:
        from kclient.testing import BrokerProcess, ZooKeeperProcess

        with ZooKeeperProcess() as zk, BrokerProcess(properties={"zookeeper.connect": zk.connect, "num.partitions": "2"}) as broker:
            main(broker.bootstrap, zk.connect)
