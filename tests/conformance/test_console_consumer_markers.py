"""``kclient console-consumer`` on a log that ends with a transaction marker
(Apache Kafka 4.x): the records
come out once, and the next fetch starts past the marker instead of asking
for it again and again (a long poll at a marker's offset answers at once)."""

from __future__ import annotations

import io

from conformance.client_support import create_topic, log_end, simple_consumer, unique_topic
from kclient.client.consumer.simple import SimpleConsumer
from kclient.testing import kafka_tool


def test_console_consumer_moves_past_a_final_transaction_marker(kafka4_target, monkeypatch):
    from kclient.cli import build_parser
    from kclient.tools import console_consumer

    target = kafka4_target
    topic = create_topic(target, unique_topic("cc-txn"), partitions=1)
    kafka_tool(
        "kafka-producer-perf-test",
        "--topic", topic, "--num-records", "4", "--record-size", "8", "--throughput", "-1",
        "--transactional-id", unique_topic("txn"), "--transaction-duration-ms", "1",
        "--producer-props", f"bootstrap.servers={target.bootstrap}", "acks=all", "linger.ms=0", "max.block.ms=20000",
    )  # fmt: skip
    with simple_consumer(target) as consumer:
        end = log_end(consumer, topic, 0)
    assert end > 4  # records and markers

    fetched_from: list[int] = []
    real_multifetch = SimpleConsumer.multifetch

    def recording_multifetch(self, requests, *args, **kwargs):
        fetched_from.extend(r.offset for r in requests)
        return real_multifetch(self, requests, *args, **kwargs)

    monkeypatch.setattr(SimpleConsumer, "multifetch", recording_multifetch)
    # The tool's own run (kclient.cli.main would also set up the process's logging).
    args = build_parser().parse_args(["console-consumer", "--bootstrap-server", target.bootstrap, "--topic", topic, "--from-beginning", "--timeout-ms", "1500"])
    out = io.BytesIO()
    assert console_consumer.run(args, stdout=out) == 0
    assert len(out.getvalue().splitlines()) == 4
    # The first fetch reads every record; every later one starts at the log end.
    assert fetched_from[0] == 0
    assert len(fetched_from) >= 2 and set(fetched_from[1:]) == {end}, fetched_from[:10]
