"""A group of two `kclient.Consumer` members (subscribe / poll / commit,
coordinated by the broker) sharing a topic, each committing what it
processed, and a third member resuming from their commits.

1. Produce 12 records to ``orders-<run>`` (3 partitions).
2. Two members of group ``billing-<run>`` subscribe. Each reads the
   partitions the group assigned it (a `ConsumerRebalanceListener` prints
   them), with auto-commit off, and commits after it handled a poll's
   records. Together they see all 12, none twice.
3. Both close. Three more records arrive. A new member of the same group
   resumes after the committed offsets and sees only those three.

    python examples/poll_consumer.py BOOTSTRAP     # e.g. 127.0.0.1:9092
    KCLIENT_BOOTSTRAP=... python examples/poll_consumer.py

Without an address it starts a bundled broker (`kclient.testing.BrokerProcess`).
"""

from __future__ import annotations

import os
import sys
import threading
import uuid

from kclient import Consumer, ConsumerRebalanceListener, Producer, ProducerData, TopicPartition
from kclient.client.admin import AdminClient, NewTopic


class Announce(ConsumerRebalanceListener):
    """Prints the partitions a member is given."""

    def __init__(self, name: str) -> None:
        self.name = name

    def on_partitions_assigned(self, assigned) -> None:
        print(f"{self.name}: assigned {sorted(tp.partition for tp in assigned)}")


def member(name: str, config: dict, topic: str, seen: dict, stop: threading.Event) -> None:
    """One group member: poll, handle, commit, until ``stop``."""
    with Consumer(config) as consumer:
        consumer.subscribe([topic], listener=Announce(name))
        while not stop.is_set():
            records = consumer.poll(timeout_ms=200)
            for r in records:
                seen.setdefault(r.value, []).append(name)  # "handling" the record
            if records:
                consumer.commit()  # the positions after this poll's records


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    with Producer({"bootstrap.servers": bootstrap, "request.required.acks": -1}) as producer:
        producer.send([ProducerData(topic, str(i).encode(), [v]) for i, v in enumerate(values)])


def main(bootstrap: str) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"orders-{run}", f"billing-{run}"
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 3, 1)])
    first = [b"order %d" % i for i in range(12)]
    produce(bootstrap, topic, first)

    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    seen: dict[bytes, list[str]] = {}
    stop = threading.Event()
    members = [threading.Thread(target=member, args=(name, config, topic, seen, stop)) for name in ("one", "two")]
    for t in members:
        t.start()
    # Wait for both members' records (bounded: a stuck group fails the example).
    with Consumer({"bootstrap.servers": bootstrap}) as probe:  # no group: offsets only
        ends = probe.end_offsets([TopicPartition(topic, p) for p in range(3)])
    print("log end offsets:", sorted((tp.partition, o) for tp, o in ends.items()))
    for _ in range(600):
        if len(seen) == len(first):
            break
        stop.wait(0.1)
    stop.set()
    for t in members:
        t.join(60)
    assert sorted(seen) == sorted(first), f"missing: {sorted(set(first) - set(seen))}"
    assert all(len(names) == 1 for names in seen.values()), "a record was handled twice"
    print(f"two members handled {len(seen)} records, none twice: {sorted({n for names in seen.values() for n in names})}")

    more = [b"order %d" % i for i in range(12, 15)]
    produce(bootstrap, topic, more)
    got: list[bytes] = []
    with Consumer(config) as resumed:
        resumed.subscribe([topic])
        for _ in range(300):
            got += [r.value for r in resumed.poll(timeout_ms=200)]
            if len(got) >= len(more):
                break
        resumed.commit()
    assert sorted(got) == sorted(more), got
    print(f"OK: a new member resumed after the commits and read only {sorted(v.decode() for v in got)}")


if __name__ == "__main__":
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KCLIENT_BOOTSTRAP")
    if address:
        main(address)
    else:
        from kclient.testing import BrokerProcess

        with BrokerProcess() as broker:
            main(broker.bootstrap)
