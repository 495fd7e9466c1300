"""One benchmark measurement, run in a fresh process by ``benchmarks/run.py``.

Usage (the suite does this; by hand only for debugging)::

    python benchmarks/worker.py '{"kind": "produce", "client": "kclient", ...}'

The spec is a JSON object (see `main`). The worker pins itself to
``spec["cpu"]`` (when given), loads the shared payload pool, sets up its
client (not timed), then times the measured section with
``time.perf_counter`` and ``resource.getrusage(RUSAGE_SELF)`` (user + system
CPU of every thread of this process: librdkafka's threads, kclient's trio and
send threads, aiokafka's event loop) and prints ONE line::

    BENCH-RESULT {"records": ..., "bytes": ..., "elapsed_s": ..., "cpu_s": ..., "peak_rss_kb": ..., ...}

``peak_rss_kb`` is the process's peak resident set (``VmHWM``) over its
whole life, so it includes the interpreter, the client library and the
payload pool (the pool is small: 10,000 distinct payloads, ``run.POOL``,
reused in turn). The producer memory rows (run.py's "memory" group)
compare it between two record counts with one fixed
``queue.buffering.max.messages`` (``spec["queue_max_messages"]``).

Every client produces the same records: record ``i`` has a null key and
the value ``pool[i % len(pool)]`` (with ``spec["keyed"]``, the scaling rows:
the key ``keys()[i % KEYS]``, 10,000 distinct 9-byte keys, each client
partitioning by its default partitioner). Consumers check that they read the
expected number of records and value bytes; a mismatch fails the run.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
import time
import warnings
from pathlib import Path

# Run as a script (python benchmarks/worker.py): make the checkout importable
# even when kclient is not installed.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

RESULT_PREFIX = "BENCH-RESULT "
#: Longest any single consume or produce loop may run before it is declared
#: stuck (seconds); a run that hits it fails instead of hanging the suite.
DEADLINE_S = 900.0


class BenchError(RuntimeError):
    """A measurement failed its correctness check or timed out."""


# ----------------------------------------------------------------- helpers


class Timer:
    """Wall clock and CPU (all threads) of the measured section."""

    def __init__(self) -> None:
        self.t0 = self.t1 = 0.0
        self.cpu0 = self.cpu1 = 0.0

    @staticmethod
    def _cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def start(self) -> None:
        self.cpu0 = self._cpu()
        self.t0 = time.perf_counter()

    def stop(self) -> None:
        self.t1 = time.perf_counter()
        self.cpu1 = self._cpu()

    @property
    def elapsed(self) -> float:
        return self.t1 - self.t0

    @property
    def cpu(self) -> float:
        return self.cpu1 - self.cpu0


def load_pool(spec: dict) -> list[bytes]:
    """The payload pool: ``pool_count`` payloads of ``size`` bytes, cut from
    the file the suite generated once (fixed seed) and shared by all
    clients."""
    data = Path(spec["payload_file"]).read_bytes()
    size = spec["size"]
    n = len(data) // size
    return [data[i * size : (i + 1) * size] for i in range(n)]


def values(pool: list[bytes], count: int):
    """The ``count`` record values, in order (cycling through the pool)."""
    n = len(pool)
    for i in range(count):
        yield pool[i % n]


#: Distinct keys of the keyed (scaling) rows; record i has key i % KEYS.
KEYS = 10_000


def keys() -> list[bytes]:
    """The keys of the keyed rows: b"key-00000" .. b"key-09999"."""
    return [b"key-%05d" % i for i in range(KEYS)]


def keyed_values(pool: list[bytes], count: int):
    """``(key, value)`` of the ``count`` records of a keyed row, in order."""
    ks = keys()
    n, nk = len(pool), len(ks)
    for i in range(count):
        yield ks[i % nk], pool[i % n]


def peak_rss_kb() -> int:
    """This process's peak resident set, in KiB: ``VmHWM`` of
    /proc/self/status. Not ``ru_maxrss``: the suite starts workers with
    subprocess (vfork + exec), and Linux then folds the parent's high-water
    mark into the child's ``ru_maxrss``; VmHWM belongs to the exec'd image
    only. Falls back to ``ru_maxrss`` where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def security(spec: dict) -> dict:
    """The client security properties of the run (Kafka's names, as
    `kclient.testing.client_properties` makes them; empty for PLAINTEXT),
    set by ``benchmarks/security.py``; run.py never sets them."""
    return dict(spec.get("security") or {})


def kafka_python_security(spec: dict) -> dict:
    """`security` as kafka-python keyword arguments."""
    from kclient.testing import kafka_python_options

    return kafka_python_options(security(spec))


def check_consumed(spec: dict, records: int, nbytes: int) -> None:
    want = spec["count"]
    want_bytes = spec["count"] * spec["size"]
    if records != want or nbytes != want_bytes:
        raise BenchError(f"consumed {records} records / {nbytes} value bytes, expected {want} / {want_bytes}")


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = (len(sorted_values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


# ----------------------------------------------------------------- produce


def produce_kclient(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    from kclient import Producer, ProducerData

    if spec.get("idempotent"):
        return produce_kclient_transactional(spec, pool, timer)
    count, topic = spec["count"], spec["topic"]
    config = {
        "metadata.broker.list": spec["bootstrap"],
        "producer.type": "async",
        "request.required.acks": spec.get("acks", 1),
        # the peers' knobs: a batch per partition of up to batch.size bytes,
        # sent linger.ms after its first record (issue 28's accumulator)
        "linger.ms": spec["linger_ms"],
        "batch.size": spec["batch_bytes"],
        # the peers keep 5 requests in flight (kafka-python, aiokafka defaults)
        "max.in.flight.requests.per.connection": 5,
        "compression.codec": spec.get("codec", "none"),
        "client.id": "bench",
    }
    if spec.get("queue_max_messages"):
        # the memory rows fix the bound on queued records
        config["queue.buffering.max.messages"] = spec["queue_max_messages"]
    producer = Producer({**config, **security(spec)})
    results = spec.get("results")  # None, "callback" or "futures": per-record delivery results
    delivered = [0]
    errors: list = []
    try:
        timer.start()
        if results is None and spec.get("keyed"):
            send = producer.send
            for k, v in keyed_values(pool, count):
                send(ProducerData(topic, k, [v]))
        elif results is None:
            send = producer.send
            for v in values(pool, count):
                send(ProducerData(topic, None, [v]))
        elif results == "list":
            # send(list): a batch-level send of 1,000 ProducerData per call
            send = producer.send
            chunk: list = []
            for v in values(pool, count):
                chunk.append(ProducerData(topic, None, [v]))
                if len(chunk) == 1000:
                    send(chunk)
                    chunk = []
            if chunk:
                send(chunk)
        elif results == "callback":
            # send(data, callback=fn): fn(metadata, exception) per record, on the send thread
            def on_completion(metadata, exc, delivered=delivered, errors=errors):
                if exc is None:
                    delivered[0] += 1
                else:
                    errors.append(exc)

            send = producer.send
            for v in values(pool, count):
                send(ProducerData(topic, None, [v]), callback=on_completion)
        else:
            # send_with_result(data) -> [RecordFuture]; every 10,000 sends the
            # previous 10,000 futures are read (result()) and dropped
            send_with_result = producer.send_with_result
            window: list = []
            previous: list = []
            for v in values(pool, count):
                window += send_with_result(ProducerData(topic, None, [v]))
                if len(window) == 10_000:
                    for f in previous:
                        if f.result().offset >= 0:
                            delivered[0] += 1
                    previous, window = window, []
            producer.flush()
            for f in previous + window:
                if f.result().offset >= 0:
                    delivered[0] += 1
        producer.flush()
        timer.stop()
        stats = producer.statistics()
    finally:
        producer.close()
    if stats.sent_messages != count or stats.failed_messages:
        raise BenchError(f"kclient producer sent {stats.sent_messages} of {count} ({stats.failed_messages} failed: {stats.first_error})")
    if results not in (None, "list") and (delivered[0] != count or errors):
        raise BenchError(f"kclient producer ({results}): {delivered[0]} of {count} delivery results ({len(errors)} errors)")
    settings = {k: v for k, v in config.items() if k not in ("metadata.broker.list", "client.id")}
    if results == "list":
        settings["send"] = "send(list of 1,000 ProducerData)"
    elif results is not None:
        settings["delivery results"] = "send(data, callback=fn)" if results == "callback" else "send_with_result(data) futures"
    return {"records": count, "bytes": count * spec["size"], "settings": settings}


def produce_kclient_transactional(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    """The transactional rows (issue 29): idempotent, acks=all, and with
    ``commit_every`` N > 0 a transaction of N records at a time
    (begin_transaction, N sends, commit_transaction)."""
    from kclient import Producer, ProducerData

    count, topic, every = spec["count"], spec["topic"], spec.get("commit_every", 0)
    config = {
        "metadata.broker.list": spec["bootstrap"],
        "producer.type": "async",
        "request.required.acks": -1,
        "enable.idempotence": True,
        "linger.ms": spec["linger_ms"],
        "batch.size": spec["batch_bytes"],
        "max.in.flight.requests.per.connection": 5,
        "client.id": "bench",
    }
    if every:
        config["transactional.id"] = f"bench-{topic}"
    producer = Producer(config)
    transactions = 0
    warm = 0
    try:
        if every:
            producer.init_transactions(DEADLINE_S * 1000)
        else:
            # untimed, as init_transactions is for the transactional rows:
            # the producer id (InitProducerId) and the metadata
            producer.send(ProducerData(topic, None, [b"warm-up"]))
            producer.flush()
            warm = 1
        timer.start()
        send = producer.send
        for i, v in enumerate(values(pool, count)):
            if every and not i % every:
                if i:
                    producer.commit_transaction(DEADLINE_S * 1000)
                producer.begin_transaction()
                transactions += 1
            send(ProducerData(topic, None, [v]))
        if every:
            producer.commit_transaction(DEADLINE_S * 1000)
        producer.flush()
        timer.stop()
        stats = producer.statistics()
    finally:
        producer.close()
    if stats.sent_messages != count + warm or stats.failed_messages:
        raise BenchError(f"kclient producer sent {stats.sent_messages - warm} of {count} ({stats.failed_messages} failed: {stats.first_error})")
    settings = {k: v for k, v in config.items() if k not in ("metadata.broker.list", "client.id")}
    # one COMMIT marker per transaction on the one partition
    return {"records": count, "bytes": count * spec["size"], "settings": settings, "expected_end_offsets": count + transactions + warm}


def produce_kclient_list(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    return produce_kclient({**spec, "results": "list"}, pool, timer)


def produce_kclient_callback(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    return produce_kclient({**spec, "results": "callback"}, pool, timer)


def produce_kclient_futures(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    return produce_kclient({**spec, "results": "futures"}, pool, timer)


def produce_kafka_python(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    import kafka

    count, topic = spec["count"], spec["topic"]
    codec = spec.get("codec", "none")
    settings = dict(
        acks=spec.get("acks", 1),
        linger_ms=spec["linger_ms"],
        batch_size=spec["batch_bytes"],
        compression_type=None if codec == "none" else codec,
        enable_idempotence=False,
    )
    producer = kafka.KafkaProducer(bootstrap_servers=spec["bootstrap"], request_timeout_ms=30000, **settings, **kafka_python_security(spec))
    try:
        timer.start()
        send = producer.send
        if spec.get("keyed"):
            for k, v in keyed_values(pool, count):
                send(topic, v, key=k)
        else:
            for v in values(pool, count):
                send(topic, v)
        producer.flush(timeout=DEADLINE_S)
        timer.stop()
    finally:
        producer.close(timeout=30)
    return {"records": count, "bytes": count * spec["size"], "settings": settings}


def produce_aiokafka(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    import asyncio

    import aiokafka

    count, topic = spec["count"], spec["topic"]
    codec = spec.get("codec", "none")
    settings = dict(
        acks=spec.get("acks", 1),
        linger_ms=spec["linger_ms"],
        max_batch_size=spec["batch_bytes"],
        compression_type=None if codec == "none" else codec,
        enable_idempotence=False,
    )

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=spec["bootstrap"], request_timeout_ms=30000, **settings)
        await producer.start()
        try:
            timer.start()
            send = producer.send
            if spec.get("keyed"):
                for k, v in keyed_values(pool, count):
                    await send(topic, v, key=k)
            else:
                for v in values(pool, count):
                    await send(topic, v)
            await producer.flush()
            timer.stop()
        finally:
            await producer.stop()

    asyncio.run(run())
    return {"records": count, "bytes": count * spec["size"], "settings": settings}


def produce_confluent(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    import confluent_kafka

    count, topic = spec["count"], spec["topic"]
    settings = {
        "acks": spec.get("acks", 1),
        "linger.ms": spec["linger_ms"],
        "batch.size": spec["batch_bytes"],
        "compression.type": spec.get("codec", "none"),
    }
    settings.update(spec.get("extra_confluent", {}))
    every = spec.get("commit_every", 0)
    if spec.get("idempotent"):
        settings.update({"acks": "all", "enable.idempotence": True})
    if every:
        settings["transactional.id"] = f"bench-{topic}"
    producer = confluent_kafka.Producer({"bootstrap.servers": spec["bootstrap"], **settings, **security(spec)})
    transactions = warm = 0
    if every:
        producer.init_transactions(DEADLINE_S)
    elif spec.get("idempotent"):
        # untimed, as init_transactions is for the transactional rows: the
        # producer id and the metadata
        producer.produce(topic, b"warm-up")
        if producer.flush(DEADLINE_S):
            raise BenchError("confluent-kafka: the warm-up record was not delivered")
        warm = 1
    timer.start()
    produce = producer.produce
    poll = producer.poll
    items = keyed_values(pool, count) if spec.get("keyed") else ((None, v) for v in values(pool, count))
    for i, (k, v) in enumerate(items):
        if every and not i % every:
            if i:
                producer.commit_transaction(DEADLINE_S)
            producer.begin_transaction()
            transactions += 1
        while True:
            try:
                produce(topic, v, k)
                break
            except BufferError:  # local queue full: serve delivery reports and retry
                poll(0.005)
        if not i & 1023:
            poll(0)
    if every:
        producer.commit_transaction(DEADLINE_S)
    left = producer.flush(DEADLINE_S)
    timer.stop()
    if left:
        raise BenchError(f"confluent-kafka: {left} records not delivered")
    result = {"records": count, "bytes": count * spec["size"], "settings": settings}
    if every or warm:
        result["expected_end_offsets"] = count + transactions + warm  # one COMMIT marker per transaction
    return result


# ----------------------------------------------------------------- produce latency


def latency_kclient(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    from kclient import Producer, ProducerData

    settings = {"producer.type": "sync", "request.required.acks": spec.get("acks", 1)}
    if spec["client"] != "kclient-no-busy-poll" and spec.get("busy_poll_us"):
        # Poll the socket for the acknowledgement before sleeping (the
        # peers' latency settings: linger 0); "kclient-no-busy-poll" keeps
        # the default, 0.
        settings["socket.busy.poll.us"] = spec["busy_poll_us"]
    producer = Producer({"metadata.broker.list": spec["bootstrap"], "client.id": "bench", **settings})
    topic = spec["topic"]
    try:
        return _timed_sends(spec, pool, timer, lambda v: producer.send(ProducerData(topic, None, [v])), settings)
    finally:
        producer.close()


def latency_kafka_python(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    import kafka

    settings = dict(acks=spec.get("acks", 1), linger_ms=0, enable_idempotence=False)
    producer = kafka.KafkaProducer(bootstrap_servers=spec["bootstrap"], request_timeout_ms=30000, **settings)
    topic = spec["topic"]
    try:
        return _timed_sends(spec, pool, timer, lambda v: producer.send(topic, v).get(timeout=30), {**settings, "per_record": "send().get()"})
    finally:
        producer.close(timeout=30)


def latency_aiokafka(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    import asyncio

    import aiokafka

    settings = dict(acks=spec.get("acks", 1), linger_ms=0, enable_idempotence=False)
    topic = spec["topic"]
    out: dict = {}

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=spec["bootstrap"], request_timeout_ms=30000, **settings)
        await producer.start()
        try:
            warmup, count = spec.get("warmup", 50), spec["count"]
            pool_n = len(pool)
            for i in range(warmup):
                await producer.send_and_wait(topic, pool[i % pool_n])
            lat = []
            timer.start()
            for i in range(count):
                t0 = time.perf_counter()
                await producer.send_and_wait(topic, pool[i % pool_n])
                lat.append(time.perf_counter() - t0)
            timer.stop()
            out.update(_latency_summary(spec, lat, {**settings, "per_record": "await send_and_wait()"}))
        finally:
            await producer.stop()

    asyncio.run(run())
    return out


def latency_confluent(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    import confluent_kafka

    settings = {"acks": spec.get("acks", 1), "linger.ms": 0}
    producer = confluent_kafka.Producer({"bootstrap.servers": spec["bootstrap"], **settings})
    topic = spec["topic"]

    def send(v: bytes) -> None:
        producer.produce(topic, v)
        if producer.flush(30):
            raise BenchError("confluent-kafka: record not delivered within 30 s")

    return _timed_sends(spec, pool, timer, send, {**settings, "per_record": "produce() + flush()"})


def _timed_sends(spec: dict, pool: list[bytes], timer: Timer, send, settings: dict) -> dict:
    warmup, count = spec.get("warmup", 50), spec["count"]
    pool_n = len(pool)
    for i in range(warmup):
        send(pool[i % pool_n])
    lat = []
    perf = time.perf_counter
    timer.start()
    for i in range(count):
        t0 = perf()
        send(pool[i % pool_n])
        lat.append(perf() - t0)
    timer.stop()
    return _latency_summary(spec, lat, settings)


def _latency_summary(spec: dict, lat: list[float], settings: dict) -> dict:
    lat.sort()
    return {
        "records": len(lat),
        "bytes": len(lat) * spec["size"],
        "p50_ms": percentile(lat, 0.50) * 1000,
        "p99_ms": percentile(lat, 0.99) * 1000,
        "max_ms": lat[-1] * 1000 if lat else float("nan"),
        "settings": settings,
        "expected_end_offsets": spec["count"] + spec.get("warmup", 50),
    }


# ----------------------------------------------------------------- consume


def consume_kclient(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    from kclient import FetchRequest, OffsetRequest, SimpleConsumer

    topic, parts = spec["topic"], spec["partitions"]
    max_size = spec.get("fetch_bytes", 1 << 20)
    host, port = host_port(spec["bootstrap"])
    n = nbytes = 0
    with SimpleConsumer(host, port, so_timeout_ms=30000, buffer_size=1 << 20, client_id="bench", config=security(spec) or None) as consumer:
        # The log end offsets only tell this loop when to stop (the peers
        # stop at the expected count), so they are looked up before the
        # timed section: at 2,048 partitions that is 2,048 round trips.
        ends = {p: consumer.get_offsets_before(topic, p, OffsetRequest.LATEST_TIME, 1)[0] for p in range(parts)}
        timer.start()
        offsets = dict.fromkeys(range(parts), 0)
        active = [p for p in range(parts) if ends[p] > 0]
        deadline = time.monotonic() + DEADLINE_S
        while active:
            if time.monotonic() > deadline:
                raise BenchError(f"kclient consume timed out after {n} records")
            # multifetch_iter: each partition's messages are read here while
            # the broker reads the next part of the answer
            response = consumer.multifetch_iter([FetchRequest(topic, p, offsets[p], max_size) for p in active])
            for p, message_set in zip(active, response):
                last = -1
                for mo in message_set:
                    v = mo.message.payload
                    n += 1
                    nbytes += len(v)
                    last = mo.offset
                if last >= 0:
                    offsets[p] = last + 1
            active = [p for p in active if offsets[p] < ends[p]]
        timer.stop()
    check_consumed(spec, n, nbytes)
    return {"records": n, "bytes": nbytes, "settings": {"api": "SimpleConsumer.multifetch_iter", "FetchRequest.max_size": max_size}}


def consume_kclient_stream(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    """The high-level consumer: a ConsumerConnector (ZooKeeper-coordinated,
    a fresh group, auto.offset.reset=smallest) with ONE KafkaStream over
    every partition, iterated until the expected count. Timed from
    create_message_streams: joining the group (ZooKeeper registration and
    rebalance, some 0.1-0.2 s) is inside the measurement, because the
    fetchers start prefetching as soon as the rebalance ends (timing only
    the iteration would count prefetched chunks as free)."""
    import uuid

    from kclient import ConsumerConnector, ConsumerTimeoutError

    topic, count = spec["topic"], spec["count"]
    fetch_bytes = spec.get("fetch_bytes", 1 << 20)
    config = {
        "group.id": f"bench-{uuid.uuid4().hex[:12]}",
        "zookeeper.connect": spec["zookeeper"],
        "auto.offset.reset": "smallest",
        "auto.commit.enable": False,
        "consumer.timeout.ms": 30000,
        "fetch.message.max.bytes": fetch_bytes,
    }
    n = nbytes = 0
    with ConsumerConnector(config) as connector:
        timer.start()
        stream = connector.create_message_streams({topic: 1})[topic][0]
        try:
            for m in stream:
                nbytes += len(m.message)
                n += 1
                if n >= count:
                    break
        except ConsumerTimeoutError:
            raise BenchError(f"kclient-stream consume stalled after {n} records") from None
        timer.stop()
    check_consumed(spec, n, nbytes)
    return {
        "records": n,
        "bytes": nbytes,
        "settings": {"api": "ConsumerConnector.create_message_streams({topic: 1}), iterate KafkaStream", "fetch.message.max.bytes": fetch_bytes, "queued.max.message.chunks": 2},
    }


def consume_kclient_poll(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    """The poll consumer, kclient.Consumer (Kafka's KafkaConsumer API):
    every partition assigned from offset 0 (no group join, as the
    confluent-kafka row), poll(max.poll.records records) until the expected
    count, reading each value. It is compared with confluent-kafka's
    Consumer.consume, the same shape of call."""
    from kclient import Consumer, TopicPartition

    topic, parts, count = spec["topic"], spec["partitions"], spec["count"]
    fetch_bytes = spec.get("fetch_bytes", 1 << 20)
    batch = spec.get("consume_batch", 10000)
    config = {
        "bootstrap.servers": spec["bootstrap"],
        "enable.auto.commit": False,
        "max.poll.records": batch,
        "max.partition.fetch.bytes": fetch_bytes,
        **security(spec),
    }
    n = nbytes = 0
    with Consumer(config) as consumer:
        tps = [TopicPartition(topic, p) for p in range(parts)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        deadline = time.monotonic() + DEADLINE_S
        timer.start()
        while n < count:
            if time.monotonic() > deadline:
                raise BenchError(f"kclient-poll consume timed out after {n} records")
            for record in consumer.poll(timeout_ms=1000):
                nbytes += len(record.value)
                n += 1
        timer.stop()
    check_consumed(spec, n, nbytes)
    return {"records": n, "bytes": nbytes, "settings": {"api": f"Consumer.assign + seek(0) + poll(), max.poll.records={batch}", "max.partition.fetch.bytes": fetch_bytes}}


def consume_kafka_python(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    import kafka

    topic, parts, count = spec["topic"], spec["partitions"], spec["count"]
    consumer = kafka.KafkaConsumer(bootstrap_servers=spec["bootstrap"], enable_auto_commit=False, request_timeout_ms=30000, **kafka_python_security(spec))
    n = nbytes = 0
    try:
        consumer.assign([kafka.TopicPartition(topic, p) for p in range(parts)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + DEADLINE_S
        timer.start()
        while n < count:
            if time.monotonic() > deadline:
                raise BenchError(f"kafka-python consume timed out after {n} records")
            for records in consumer.poll(timeout_ms=1000).values():
                for r in records:
                    v = r.value
                    n += 1
                    nbytes += len(v)
        timer.stop()
    finally:
        consumer.close()
    check_consumed(spec, n, nbytes)
    return {"records": n, "bytes": nbytes, "settings": {"api": "assign + seek_to_beginning + poll()", "defaults": "max_partition_fetch_bytes=1 MB, max_poll_records=500"}}


def consume_aiokafka(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    import asyncio

    import aiokafka

    topic, parts, count = spec["topic"], spec["partitions"], spec["count"]
    totals = [0, 0]

    async def run() -> None:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=spec["bootstrap"], enable_auto_commit=False, request_timeout_ms=30000)
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition(topic, p) for p in range(parts)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + DEADLINE_S
            n = nbytes = 0
            timer.start()
            while n < count:
                if time.monotonic() > deadline:
                    raise BenchError(f"aiokafka consume timed out after {n} records")
                batches = await consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    for r in records:
                        v = r.value
                        n += 1
                        nbytes += len(v)
            timer.stop()
            totals[:] = [n, nbytes]
        finally:
            await consumer.stop()

    asyncio.run(run())
    check_consumed(spec, *totals)
    return {"records": totals[0], "bytes": totals[1], "settings": {"api": "assign + seek_to_beginning + getmany()"}}


def consume_confluent(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    import confluent_kafka

    topic, parts, count = spec["topic"], spec["partitions"], spec["count"]
    # librdkafka >= 2.4 postpones a partition's next fetch by
    # fetch.queue.backoff.ms (default 1000 ms) whenever its local queue holds
    # queued.min.messages (100,000); a fast application then sits idle for
    # up to a second, at random (measured: 270k to 1.3M records/s for the
    # same 1M x 100 B run). "confluent-kafka" turns that off;
    # "confluent-kafka-defaults" keeps every default.
    tuned = {} if spec["client"].endswith("-defaults") else {"fetch.queue.backoff.ms": 0}
    tuned.update(spec.get("extra_consumer", {}))
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "group.id": f"bench-{topic}-{os.getpid()}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            **tuned,
            **security(spec),
        }
    )
    batch = spec.get("consume_batch", 10000)
    n = nbytes = 0
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(parts)])
        deadline = time.monotonic() + DEADLINE_S
        timer.start()
        while n < count:
            if time.monotonic() > deadline:
                raise BenchError(f"confluent-kafka consume timed out after {n} records")
            # Ask for no more than are left: consume() waits for num_messages
            # or the timeout, so asking for more would idle at the end.
            for m in consumer.consume(num_messages=min(batch, count - n), timeout=1.0):
                if m.error() is not None:
                    raise BenchError(f"confluent-kafka consume error: {m.error()}")
                v = m.value()
                n += 1
                nbytes += len(v)
        timer.stop()
    finally:
        consumer.close()
    check_consumed(spec, n, nbytes)
    return {"records": n, "bytes": nbytes, "settings": {"api": f"assign(offset 0) + consume(num_messages={batch})", **tuned}}


# ----------------------------------------------------------------- broker bounds


def fetch_raw(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    """The broker's fetch rate: Fetch requests encoded with kclient.protocol
    over a blocking socket, the response read with recv_into into one
    buffer; only the response header and the batch headers are parsed (to
    find the next offset), no record is decoded."""
    from kclient.protocol.connection import encode_request
    from kclient.protocol.messages import FETCH
    from kclient.protocol.records import scan_batches

    topic, partition = spec["topic"], 0
    fetch_bytes = spec.get("fetch_bytes", 8 << 20)
    end = spec["end_offset"]
    version = 4
    response_schema = FETCH.response(version)
    buf = bytearray(fetch_bytes + (1 << 20))
    view = memoryview(buf)
    offset = 0
    total = 0
    requests = 0
    with socket.create_connection(host_port(spec["bootstrap"]), timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        timer.start()
        while offset < end:
            body = {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": fetch_bytes,
                "isolation_level": 0,
                "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset, "partition_max_bytes": fetch_bytes}]}],
            }
            sock.sendall(encode_request(FETCH, version, requests, "bench-fetch", body))
            _recv_exact(sock, view[:4])
            size = int.from_bytes(view[:4], "big")
            if size > len(buf):
                buf = bytearray(size)
                view = memoryview(buf)
            _recv_exact(sock, view[:size])
            requests += 1
            resp = response_schema.decode(view[4:size])  # after the correlation id
            part = resp["responses"][0]["partitions"][0]
            if part["error_code"]:
                raise BenchError(f"fetch error {part['error_code']} at offset {offset}")
            records = part["records"] or b""
            last = -1
            for info in scan_batches(records):
                last = info.last_offset
                total += info.size
            if last < 0:
                raise BenchError(f"fetch at offset {offset} returned no complete batch")
            offset = last + 1
        timer.stop()
    return {"records": offset, "bytes": total, "settings": {"Fetch version": version, "partition_max_bytes": fetch_bytes, "requests": requests}}


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    n = len(view)
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise BenchError("connection closed mid-response")
        got += k


def raw_append(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    """Append ``bytes`` bytes to a new file in the broker's log dir in 1 MB
    chunks, fsync every ``fsync_every`` bytes and at the end."""
    total = spec["total_bytes"]
    chunk_size = 1 << 20
    fsync_every = spec.get("fsync_every", 16 << 20)
    chunk = b"".join(pool)
    chunk = (chunk * (chunk_size // max(1, len(chunk)) + 1))[:chunk_size]
    path = Path(spec["dir"]) / f"raw-append-{os.getpid()}.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        written = since_sync = 0
        timer.start()
        while written < total:
            n = os.write(fd, chunk[: min(chunk_size, total - written)])
            written += n
            since_sync += n
            if since_sync >= fsync_every:
                os.fsync(fd)
                since_sync = 0
        os.fsync(fd)
        timer.stop()
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return {"records": 0, "bytes": written, "settings": {"chunk": "1 MB", "fsync every": f"{fsync_every >> 20} MB and at the end"}}


def raw_sendfile(spec: dict, pool: list[bytes], timer: Timer) -> dict:
    """``os.sendfile`` of ``file`` over a loopback TCP connection: a forked
    sender pinned to ``sender_cpu`` (the broker's core) sends the whole file,
    this process (the client's core) reads it with recv_into into a 1 MB
    buffer."""
    path = spec["file"]
    size = os.path.getsize(path)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    pid = os.fork()
    if pid == 0:  # the sender
        code = 0
        try:
            if spec.get("sender_cpu") is not None:
                os.sched_setaffinity(0, {spec["sender_cpu"]})
            conn, _ = listener.accept()
            with conn, open(path, "rb") as f:
                sent = 0
                while sent < size:
                    n = os.sendfile(conn.fileno(), f.fileno(), sent, size - sent)
                    if n == 0:
                        break
                    sent += n
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    listener.close()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    got = 0
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        timer.start()
        sock.connect(("127.0.0.1", port))
        while True:
            k = sock.recv_into(view)
            if not k:
                break
            got += k
        timer.stop()
    _, status = os.waitpid(pid, 0)
    if got != size or status != 0:
        raise BenchError(f"sendfile: received {got} of {size} bytes (sender status {status})")
    return {"records": 0, "bytes": got, "settings": {"file": "the broker's segment of the ingest topic", "receive buffer": "1 MB"}}


WORKERS = {
    ("produce", "kclient"): produce_kclient,
    ("produce", "kclient-list"): produce_kclient_list,
    ("produce", "kclient-callback"): produce_kclient_callback,
    ("produce", "kclient-futures"): produce_kclient_futures,
    ("produce", "kafka-python"): produce_kafka_python,
    ("produce", "aiokafka"): produce_aiokafka,
    ("produce", "confluent-kafka"): produce_confluent,
    ("latency", "kclient"): latency_kclient,
    ("latency", "kclient-no-busy-poll"): latency_kclient,
    ("latency", "kafka-python"): latency_kafka_python,
    ("latency", "aiokafka"): latency_aiokafka,
    ("latency", "confluent-kafka"): latency_confluent,
    ("consume", "kclient"): consume_kclient,
    ("consume", "kclient-stream"): consume_kclient_stream,
    ("consume", "kclient-poll"): consume_kclient_poll,
    ("consume", "kafka-python"): consume_kafka_python,
    ("consume", "aiokafka"): consume_aiokafka,
    ("consume", "confluent-kafka"): consume_confluent,
    ("consume", "confluent-kafka-defaults"): consume_confluent,
    ("bound", "broker-fetch"): fetch_raw,
    ("bound", "raw-append-fsync"): raw_append,
    ("bound", "raw-sendfile"): raw_sendfile,
}


def run_spec(spec: dict) -> dict:
    """Run one measurement in this process and return its result dict."""
    fn = WORKERS[(spec["kind"], spec["client"])]
    pool = load_pool(spec) if spec.get("payload_file") else []
    timer = Timer()
    result = fn(spec, pool, timer)
    result.setdefault("elapsed_s", timer.elapsed)
    result.setdefault("cpu_s", timer.cpu)
    result["peak_rss_kb"] = peak_rss_kb()
    return result


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    if spec.get("cpu") is not None:
        try:
            os.sched_setaffinity(0, {spec["cpu"]})
        except OSError:
            pass
    warnings.simplefilter("ignore", DeprecationWarning)
    if spec.get("quiet_logs", True):
        import logging

        logging.basicConfig(level=logging.ERROR)
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    result = run_spec(spec)
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
