"""ConsumerConnector / KafkaStream against a real ZooKeeper and real broker
processes (Kafka 0.8 documentation https://kafka.apache.org/082/documentation.html:
"API Design", consumer APIs; "Distribution", consumer registration and
rebalancing). No mocks; waits are bounded by generous deadlines, never
asserted as speeds."""

from __future__ import annotations

import collections
import functools
import threading
import time
import uuid

import pytest
from helpers.records import is_sentinel, produce, produce_sentinels
from helpers.wait import wait_for

from kclient.client.consumer.group.connector import ConsumerConnector
from kclient.client.consumer.group.streams import Blacklist, KafkaStream, MessageAndMetadata, Whitelist
from kclient.client.serde import StringDecoder
from kclient.errors import (
    ConfigError,
    ConsumerRebalanceFailedError,
    ConsumerTimeoutError,
    CorruptRecordError,
    IllegalStateError,
    ZkTimeoutError,
)
from kclient.zk import paths
from kclient.zk.client import ZkClient

PARTITIONS = 5  # zk_broker's num.partitions
DEADLINE = 60.0

wait_until = functools.partial(wait_for, timeout=DEADLINE)


def marks(broker, topic: str, partitions: int = PARTITIONS) -> set[str]:
    """A sentinel on each partition of ``topic`` (see `drain_all`)."""
    return produce_sentinels(broker, topic, range(partitions))


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def zk(zookeeper):
    client = ZkClient(zookeeper.connect)
    client.start()
    yield client
    client.close()


def props(zookeeper, group, **extra):
    settings = {
        "group.id": group,
        "zookeeper.connect": zookeeper.connect,
        "auto.offset.reset": "smallest",
        "consumer.timeout.ms": 1500,
        "rebalance.backoff.ms": 200,
        "rebalance.max.retries": 50,  # generous: a slow machine only waits longer
        "auto.commit.enable": False,
        "zookeeper.session.timeout.ms": 4000,
    }
    settings.update({k.replace("_", "."): v for k, v in extra.items()})
    return settings


def wait_for_leaders(brokers, topic, count, leader=None):
    """Wait until each broker's Metadata shows ``count`` partitions of
    ``topic``, each with a leader (``leader`` if given): the controller
    tells each broker on its own queue, and a producer's retries are few."""
    from kclient.testing.cluster import metadata_shows_leaders

    wait_until(lambda: metadata_shows_leaders(brokers, topic, range(count), leader), f"{[b.bootstrap for b in brokers]} to show {topic} with leaders")


def wait_for_topic(zk, topic):
    wait_until(lambda: zk.get(paths.partition_state_path(topic, PARTITIONS - 1)) is not None, f"{topic} in ZooKeeper")


def drain(stream: KafkaStream, *, until: int | None = None) -> list[MessageAndMetadata]:
    """Iterate until ``until`` messages or a ConsumerTimeoutError."""
    out = []
    deadline = time.monotonic() + DEADLINE
    while until is None or len(out) < until:
        assert time.monotonic() < deadline
        try:
            out.append(next(stream))
        except ConsumerTimeoutError:
            if until is None:
                break
        except StopIteration:
            break
    return out


def value_of(m: MessageAndMetadata) -> str:
    return m.message.decode() if isinstance(m.message, bytes) else m.message


def drain_all(streams, sentinels: set[str], per_stream: dict | None = None) -> list[MessageAndMetadata]:
    """Read ``streams`` in parallel threads until every one of
    ``sentinels`` arrived (`helpers.records.produce_sentinels`, produced
    after the records to read): then so did everything before them, and
    any duplicate of it. Returns the messages read (``per_stream`` gets
    them by stream), the sentinels left out."""
    out: list[MessageAndMetadata] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def run(stream):
        try:
            while not stop.is_set():
                try:
                    m = next(stream)
                except ConsumerTimeoutError:
                    continue
                except StopIteration:
                    return
                with lock:
                    out.append(m)
                    if per_stream is not None and not is_sentinel(m.message):
                        per_stream.setdefault(stream, []).append(m)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in streams]
    for t in threads:
        t.start()

    def read_up_to_the_sentinels() -> bool:
        with lock:
            return sentinels <= {value_of(m) for m in out}

    try:
        wait_until(read_up_to_the_sentinels, "every sentinel")
    finally:
        stop.set()
        for t in threads:
            t.join(DEADLINE)
    assert not errors, errors
    return [m for m in out if not is_sentinel(m.message)]


def owners(zk, group, topic) -> dict[int, str]:
    result = {}
    for p in range(PARTITIONS):
        data = zk.get(paths.owner_path(group, topic, p))
        if data is not None:
            result[p] = data.decode()
    return result


def wait_for_owners(zk, group, topic, consumer_ids: set[str]) -> dict[int, str]:
    """Until every partition has an owner and the owners are exactly the
    threads of ``consumer_ids`` (a settled rebalance)."""

    def settled() -> dict[int, str] | None:
        current = owners(zk, group, topic)
        consumers = {thread.rsplit("-", 1)[0] for thread in current.values()}
        return current if len(current) == PARTITIONS and consumers == consumer_ids else None

    return wait_until(settled, f"the ownership to settle on {consumer_ids}")


def keys_values(messages):
    return sorted((m.key, m.message) for m in messages)


# ---------------------------------------------------------------- pure


@pytest.mark.unit
def test_message_and_metadata_is_a_cheap_named_tuple():
    m = MessageAndMetadata(b"k", b"v", "t", 3, 42, 1000)
    assert (m.key, m.message, m.value, m.topic, m.partition, m.offset, m.timestamp) == (b"k", b"v", b"v", "t", 3, 42, 1000)
    assert isinstance(m, tuple) and not hasattr(m, "__dict__")
    assert "offset=42" in repr(m)


@pytest.mark.unit
def test_topic_filters_match_whole_names_like_kafka():
    wl = Whitelist("orders.*, audit")
    assert wl.is_topic_allowed("orders-eu") and wl.is_topic_allowed("audit")
    assert not wl.is_topic_allowed("audit2") and not wl.is_topic_allowed("x-orders")
    assert not Whitelist(".*").is_topic_allowed("__consumer_offsets")
    assert Whitelist(".*").is_topic_allowed("__consumer_offsets", exclude_internal_topics=False)
    bl = Blacklist("tmp-.*")
    assert bl.is_topic_allowed("orders") and not bl.is_topic_allowed("tmp-1")
    with pytest.raises(ValueError):
        Whitelist("(")


@pytest.mark.unit
def test_chunks_decode_every_format_like_the_simple_consumer():
    from kclient.client.consumer.fetcher import PartitionTopicInfo, decode_chunk
    from kclient.client.consumer.message_set import ByteBufferMessageSet
    from kclient.protocol.records import codecs as record_codecs
    from kclient.protocol.records import legacy, v2

    recs = [(f"k{i}".encode(), f"v{i}".encode(), 1000 + i) for i in range(6)]
    buffer = (
        legacy.build_message_set(recs[:2], magic=0, base_offset=0)
        + legacy.build_message_set(recs[2:4], magic=1, base_offset=2, codec=record_codecs.GZIP)
        + v2.build_batch([(None, b"marker", 5)], base_offset=4, is_control=True)
        + v2.build_batch(recs[4:], base_offset=5)
    )
    buffer += v2.build_batch(recs, base_offset=7)[:30]  # a partial batch at the end is dropped
    info = PartitionTopicInfo("t", 3, 0, 1)
    message_set = ByteBufferMessageSet("t", 3, buffer, 1)  # starts inside the first set
    chunk = decode_chunk(info, message_set, None, lambda b: b.decode().upper())
    reference = [(mo.message.key, mo.message.payload.decode().upper(), "t", 3, mo.offset, mo.message.timestamp) for mo in message_set]
    assert [tuple(m) for m in chunk] == reference
    assert [m.offset for m in chunk] == [1, 2, 3, 5, 6]  # offset 4 is the control batch
    assert chunk[0].timestamp == -1 and chunk[-1].timestamp == 1005  # v0 has no timestamps
    damaged = bytearray(v2.build_batch(recs, base_offset=0))
    damaged[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="t-3 offset 0"):
        decode_chunk(info, ByteBufferMessageSet("t", 3, bytes(damaged), 0), None, None)


# ---------------------------------------------------------------- configuration


def test_bad_config_values_name_the_property(zookeeper, group):
    for key, value in [
        ("auto.offset.reset", "sometimes"),
        ("consumer.timeout.ms", -7),
        ("rebalance.max.retries", "many"),
        ("queued.max.message.chunks", 0),
        ("auto.commit.enable", "perhaps"),
    ]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            ConsumerConnector(props(zookeeper, group, **{key: value}))
    with pytest.raises(ConfigError, match="group.id"):
        ConsumerConnector({"zookeeper.connect": zookeeper.connect})
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        ConsumerConnector({"group.id": group})


def test_roundrobin_assignment_deals_partitions_by_hash_order(zookeeper, zk_broker, zk, group, topic):
    """partition.assignment.strategy=roundrobin (Kafka 0.8.2's
    RoundRobinAssignor): two consumers, one stream each, get the topic's
    partitions dealt alternately in the Java-hash order of "[topic,p]"."""
    from kclient.client.consumer.group.assignors import java_string_hash

    produce(zk_broker, topic, [(f"k{i}", f"v{i}") for i in range(50)])
    wait_for_topic(zk, topic)
    settings = props(zookeeper, group, **{"partition.assignment.strategy": "roundrobin"})
    with ConsumerConnector({**settings, "consumer.id": "a"}) as a, ConsumerConnector({**settings, "consumer.id": "b"}) as b:
        (sa,) = a.create_message_streams({topic: 1})[topic]
        (sb,) = b.create_message_streams({topic: 1})[topic]
        current = wait_for_owners(zk, group, topic, {"a", "b"})
        order = sorted(range(PARTITIONS), key=lambda p: (java_string_hash(f"[{topic},{p}]"), p))
        assert current == {p: ("a-0" if i % 2 == 0 else "b-0") for i, p in enumerate(order)}
        got = drain_all([sa, sb], marks(zk_broker, topic))
    assert sorted(m.message for m in got) == sorted(f"v{i}".encode() for i in range(50))


def test_unreachable_zookeeper_fails_within_the_connection_timeout(group):
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # It gives up with the connection timeout's error rather than hanging
    # (pytest-timeout fails a hang).
    with pytest.raises(ZkTimeoutError, match=r"zookeeper\.connection\.timeout\.ms=1000"):
        ConsumerConnector({"group.id": group, "zookeeper.connect": f"127.0.0.1:{port}", "zookeeper.connection.timeout.ms": 1000})


# ---------------------------------------------------------------- consuming


def test_single_consumer_reads_everything_with_keys_and_values(zookeeper, zk_broker, zk, group, topic):
    sent = [(f"k{i}", f"value-{i}") for i in range(200)]
    produce(zk_broker, topic, sent)
    wait_for_topic(zk, topic)
    with ConsumerConnector(props(zookeeper, group)) as connector:
        streams = connector.create_message_streams({topic: 1}, key_decoder=StringDecoder(), value_decoder=StringDecoder())
        assert list(streams) == [topic] and len(streams[topic]) == 1
        got = drain(streams[topic][0], until=len(sent))
        # the consumer is registered with Kafka's "Consumer Id Registry" JSON
        reg = paths.ConsumerRegistration.from_json(zk.get(paths.consumer_id_path(group, connector.consumer_id)))
        assert reg.subscription == {topic: 1} and reg.pattern == "static"
        assert owners(zk, group, topic) == dict.fromkeys(range(PARTITIONS), f"{connector.consumer_id}-0")
    assert keys_values(got) == sorted(sent)
    assert all(m.topic == topic for m in got)
    by_partition = collections.defaultdict(list)
    for m in got:
        by_partition[m.partition].append(m.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))  # in order, from the start, no gaps
    # shutdown left the group: registration and owner nodes are gone
    assert zk.get(paths.consumer_id_path(group, connector.consumer_id)) is None
    assert owners(zk, group, topic) == {}


def test_two_consumers_split_partitions_with_one_owner_each(zookeeper, zk_broker, zk, group, topic):
    produce(zk_broker, topic, [("warm", "up")])
    wait_for_topic(zk, topic)
    c1 = ConsumerConnector(props(zookeeper, group, **{"consumer.id": "a"}))
    c2 = ConsumerConnector(props(zookeeper, group, **{"consumer.id": "b"}))
    try:
        s1 = c1.create_message_streams({topic: 2})[topic]
        s2 = c2.create_message_streams({topic: 2})[topic]
        current = wait_for_owners(zk, group, topic, {"a", "b"})
        # range over a-0, a-1, b-0, b-1 with 5 partitions: a-0 takes the extra one
        assert current == {0: "a-0", 1: "a-0", 2: "a-1", 3: "b-0", 4: "b-1"}
        sent = [(f"k{i}", f"v{i}") for i in range(300)]
        produce(zk_broker, topic, sent)
        per_stream: dict = {}
        got = drain_all(s1 + s2, marks(zk_broker, topic), per_stream)
        assert len(got) == len(sent) + 1, "duplicates or losses"
        assert keys_values(m for m in got if m.key != b"warm") == sorted((k.encode(), v.encode()) for k, v in sent)
        # each stream got exactly the partitions its thread owns
        for stream, thread_partitions in zip(s1 + s2, [{0, 1}, {2}, {3}, {4}]):
            assert {m.partition for m in per_stream.get(stream, [])} == thread_partitions
    finally:
        c1.shutdown()
        c2.shutdown()


def test_join_and_leave_rebalance_and_consumption_continues(zookeeper, zk_broker, zk, group, topic):
    produce(zk_broker, topic, [(f"a{i}", "1") for i in range(50)])
    wait_for_topic(zk, topic)
    settings = dict(auto_commit_enable=True, auto_commit_interval_ms=600000)
    c1 = ConsumerConnector(props(zookeeper, group, **{"consumer.id": "c1"}, **settings))
    c2 = None
    try:
        s1 = c1.create_message_streams({topic: 1})[topic]
        batch1 = drain_all(s1, marks(zk_broker, topic))
        assert len(batch1) == 50
        wait_for_owners(zk, group, topic, {"c1"})

        c2 = ConsumerConnector(props(zookeeper, group, **{"consumer.id": "c2"}, **settings))
        s2 = c2.create_message_streams({topic: 1})[topic]
        wait_for_owners(zk, group, topic, {"c1", "c2"})
        produce(zk_broker, topic, [(f"b{i}", "2") for i in range(60)])
        batch2 = drain_all(s1 + s2, marks(zk_broker, topic))
        assert sorted(m.key for m in batch2) == sorted(f"b{i}".encode() for i in range(60))
        assert {m.partition for m in batch2 if m.key.startswith(b"b")} == set(range(PARTITIONS))

        c2.shutdown()  # commits (auto.commit.enable) and leaves: c1 takes everything back
        c2 = None
        wait_for_owners(zk, group, topic, {"c1"})
        produce(zk_broker, topic, [(f"c{i}", "3") for i in range(40)])
        batch3 = drain_all(s1, marks(zk_broker, topic))
        assert sorted(m.key for m in batch3) == sorted(f"c{i}".encode() for i in range(40)), "lost or re-delivered messages"
    finally:
        c1.shutdown()
        if c2 is not None:
            c2.shutdown()


def test_commit_then_new_connector_resumes_without_redelivery(zookeeper, zk_broker, zk, group, topic):
    sent = [(f"k{i}", f"v{i}") for i in range(100)]
    produce(zk_broker, topic, sent)
    wait_for_topic(zk, topic)
    with ConsumerConnector(props(zookeeper, group)) as first:
        stream = first.create_message_streams({topic: 1})[topic][0]
        part1 = drain(stream, until=37)  # stop in the middle of a chunk
        first.commit_offsets()
        committed = {p: zk.get(paths.offset_path(group, topic, p)) for p in range(PARTITIONS)}
    # auto.commit.enable=false: shutdown did not commit further
    assert {p: zk.get(paths.offset_path(group, topic, p)) for p in range(PARTITIONS)} == committed
    last = {}
    for m in part1:
        last[m.partition] = m.offset + 1
    for p, offset in last.items():
        assert paths.decode_offset(committed[p]) == offset
    with ConsumerConnector(props(zookeeper, group)) as second:
        stream = second.create_message_streams({topic: 1})[topic][0]
        part2 = drain(stream)
        second.commit_offsets()
    assert len(part1) + len(part2) == len(sent), "re-delivered or lost messages"
    assert keys_values(part1 + part2) == sorted((k.encode(), v.encode()) for k, v in sent)
    ends = collections.Counter(m.partition for m in part1 + part2)
    for p in range(PARTITIONS):
        assert paths.decode_offset(zk.get(paths.offset_path(group, topic, p))) == ends[p]


def test_auto_offset_reset_smallest_and_largest(zookeeper, zk_broker, zk, group, topic):
    produce(zk_broker, topic, [(f"old{i}", "x") for i in range(20)])
    wait_for_topic(zk, topic)
    with ConsumerConnector(props(zookeeper, group + "-s", **{"auto.offset.reset": "smallest"})) as smallest, ConsumerConnector(
        props(zookeeper, group + "-l", **{"auto.offset.reset": "largest"})
    ) as largest:
        s_small = smallest.create_message_streams({topic: 1})[topic][0]
        s_large = largest.create_message_streams({topic: 1})[topic][0]
        assert len(drain(s_small, until=20)) == 20
        assert drain(s_large) == []  # starts at the log end
        produce(zk_broker, topic, [(f"new{i}", "y") for i in range(10)])
        new = drain(s_large, until=10)
        assert sorted(m.key for m in new) == sorted(f"new{i}".encode() for i in range(10))
        assert sorted(m.key for m in drain(s_small, until=10)) == sorted(f"new{i}".encode() for i in range(10))


def test_out_of_range_committed_offset_is_reset(zookeeper, zk_broker, zk, group, topic):
    produce(zk_broker, topic, [(f"k{i}", "v") for i in range(30)])
    wait_for_topic(zk, topic)
    for p in range(PARTITIONS):
        zk.write_persistent(paths.offset_path(group, topic, p), paths.encode_offset(10**9))
    with ConsumerConnector(props(zookeeper, group, **{"auto.offset.reset": "smallest"})) as connector:
        stream = connector.create_message_streams({topic: 1})[topic][0]
        assert len(drain(stream, until=30)) == 30


def test_consumer_timeout_raises_and_the_stream_stays_usable(zookeeper, zk_broker, zk, group, topic):
    produce(zk_broker, topic, [("only", "one")])
    wait_for_topic(zk, topic)
    with ConsumerConnector(props(zookeeper, group, **{"consumer.timeout.ms": 300})) as connector:
        stream = connector.create_message_streams({topic: 1})[topic][0]
        assert next(stream).key == b"only"
        with pytest.raises(ConsumerTimeoutError, match="consumer.timeout.ms=300"):
            next(stream)
        with pytest.raises(ConsumerTimeoutError):
            next(stream)
        produce(zk_broker, topic, [("after", "timeout")])
        assert drain(stream, until=1)[0].key == b"after"


def test_shutdown_ends_a_blocked_iteration(zookeeper, zk_broker, zk, group, topic):
    produce(zk_broker, topic, [("k", "v")])
    wait_for_topic(zk, topic)
    connector = ConsumerConnector(props(zookeeper, group, **{"consumer.timeout.ms": -1}))
    stream = connector.create_message_streams({topic: 1})[topic][0]
    seen = []
    done = threading.Event()

    def iterate():
        for m in stream:  # blocks after the single message until shutdown
            seen.append(m)
        done.set()

    thread = threading.Thread(target=iterate)
    thread.start()
    wait_until(lambda: seen, "the message", interval=0.02)
    connector.shutdown()
    thread.join(DEADLINE)
    assert done.is_set() and len(seen) == 1
    with pytest.raises(StopIteration):
        next(stream)
    with pytest.raises(IllegalStateError):
        connector.commit_offsets()


def test_rebalance_fails_clearly_when_a_partition_stays_owned(zookeeper, zk_broker, zk, group, topic):
    produce(zk_broker, topic, [("k", "v")])
    wait_for_topic(zk, topic)
    # Another consumer of the group ("zzz", sorting after ours) holds
    # partition 0, which the range assignment gives to our consumer "aaa".
    squatter = ZkClient(zookeeper.connect)
    squatter.start()
    try:
        squatter.create_ephemeral_if_absent(
            paths.consumer_id_path(group, "zzz"), paths.ConsumerRegistration({topic: 1}, "static", 0).to_json()
        )
        squatter.create_ephemeral_if_absent(paths.owner_path(group, topic, 0), b"zzz-0")
        connector = ConsumerConnector(
            props(zookeeper, group, **{"consumer.id": "aaa", "rebalance.max.retries": 2, "rebalance.backoff.ms": 50})
        )
        try:
            with pytest.raises(ConsumerRebalanceFailedError, match="aaa can't rebalance after 3 attempts"):
                connector.create_message_streams({topic: 1})
            # nothing half-claimed is left behind
            assert owners(zk, group, topic) == {0: "zzz-0"}
        finally:
            connector.shutdown()
    finally:
        squatter.close()


def test_whitelist_streams_follow_matching_topics(zookeeper, zk_broker, zk, group):
    prefix = f"wl{uuid.uuid4().hex[:6]}"
    produce(zk_broker, f"{prefix}-a", [("a", "1")])
    produce(zk_broker, f"{prefix}-skip", [("s", "1")])
    wait_for_topic(zk, f"{prefix}-a")
    wait_for_topic(zk, f"{prefix}-skip")
    with ConsumerConnector(props(zookeeper, group)) as connector:
        streams = connector.create_message_streams_by_filter(Whitelist(f"{prefix}-a,{prefix}-b"), 2)
        assert len(streams) == 2
        reg = paths.ConsumerRegistration.from_json(zk.get(paths.consumer_id_path(group, connector.consumer_id)))
        assert reg.pattern == "white_list" and reg.subscription == {f"{prefix}-a|{prefix}-b": 2}
        first = drain_all(streams, marks(zk_broker, f"{prefix}-a"))
        assert [(m.topic, m.key) for m in first] == [(f"{prefix}-a", b"a")]
        # a new matching topic is picked up (the /brokers/topics watch)
        produce(zk_broker, f"{prefix}-b", [("b", "2")])
        later = drain_all(streams, marks(zk_broker, f"{prefix}-b"))
        assert [(m.topic, m.key) for m in later] == [(f"{prefix}-b", b"b")]


def test_streams_are_created_once(zookeeper, zk_broker, zk, group, topic):
    with ConsumerConnector(props(zookeeper, group)) as connector:
        with pytest.raises(ValueError):
            connector.create_message_streams({topic: 0})
        connector.create_message_streams({topic: 1})
        with pytest.raises(IllegalStateError):
            connector.create_message_streams({topic: 1})


def test_auto_commit_writes_consumed_offsets_periodically(zookeeper, zk_broker, zk, group, topic):
    produce(zk_broker, topic, [(f"k{i}", "v") for i in range(40)])
    wait_for_topic(zk, topic)
    settings = {"auto.commit.enable": True, "auto.commit.interval.ms": 100}
    with ConsumerConnector(props(zookeeper, group, **settings)) as connector:
        got = drain(connector.create_message_streams({topic: 1})[topic][0], until=40)
        ends = collections.Counter(m.partition for m in got)

        def committed() -> bool:  # no commit_offsets() call: the auto-commit task writes them
            stored = {p: zk.get(paths.offset_path(group, topic, p)) for p in range(PARTITIONS)}
            return all(stored[p] is not None and paths.decode_offset(stored[p]) == ends[p] for p in range(PARTITIONS))

        wait_until(committed, "the auto-commit of every consumed offset")


def test_expired_session_reregisters_and_keeps_consuming(zookeeper, zk_broker, zk, group, topic):
    from kazoo.client import KazooClient

    produce(zk_broker, topic, [(f"a{i}", "1") for i in range(20)])
    wait_for_topic(zk, topic)
    with ConsumerConnector(props(zookeeper, group, **{"consumer.id": "phoenix"})) as connector:
        stream = connector.create_message_streams({topic: 1})[topic][0]
        assert len(drain(stream, until=20)) == 20
        connector.commit_offsets()
        # Expire the consumer's session the way ZooKeeper's own tests do: a
        # second client attaches to the same session and closes it.
        session_id, password = connector._core.zk_client.kazoo.client_id
        intruder = KazooClient(hosts=zookeeper.connect, client_id=(session_id, password))
        intruder.start(timeout=30)
        intruder.stop()
        intruder.close()
        # the consumer comes back: registration and ownership re-created by a new session
        nodes = [paths.consumer_id_path(group, "phoenix")] + [paths.owner_path(group, topic, p) for p in range(PARTITIONS)]

        def reregistered() -> bool:
            sessions = {zk.owner_session(path) for path in nodes}
            return len(sessions) == 1 and sessions.pop() not in (None, session_id)

        wait_until(reregistered, "the consumer to re-register after its session expired")
        wait_for_owners(zk, group, topic, {"phoenix"})
        produce(zk_broker, topic, [(f"b{i}", "2") for i in range(20)])
        later = drain(stream, until=20)
        assert sorted(m.key for m in later) == sorted(f"b{i}".encode() for i in range(20))


def test_partitions_are_fetched_from_their_own_leaders(zookeeper, group):
    from kclient.testing import BrokerProcess

    connect = zookeeper.connect_string(f"two-brokers-{uuid.uuid4().hex[:8]}")
    with BrokerProcess(properties={"zookeeper.connect": connect, "broker.id": 1, "num.partitions": 2}) as b1, BrokerProcess(
        properties={"zookeeper.connect": connect, "broker.id": 2, "num.partitions": 3}
    ) as b2:
        # The controller spreads auto-created topics over both brokers; this
        # test wants one topic per broker, so it assigns the replicas itself.
        from kclient import AdminClient, NewTopic

        with AdminClient({"bootstrap.servers": f"{b1.bootstrap},{b2.bootstrap}"}) as admin:
            admin.create_topics(
                [NewTopic("left", -1, -1, replica_assignment={p: [1] for p in range(2)}), NewTopic("right", -1, -1, replica_assignment={p: [2] for p in range(3)})],
                timeout_ms=30_000,
            )
        wait_for_leaders([b1, b2], "left", 2, leader=1)
        wait_for_leaders([b1, b2], "right", 3, leader=2)
        produce(b1, "left", [(f"l{i}", "1") for i in range(20)])
        produce(b2, "right", [(f"r{i}", "2") for i in range(30)])
        with ConsumerConnector(dict(props(zookeeper, group), **{"zookeeper.connect": connect})) as connector:
            streams = connector.create_message_streams({"left": 1, "right": 2})
            got = drain_all(streams["left"] + streams["right"], marks(b1, "left", 2) | marks(b2, "right", 3))
            assert sorted(m.key for m in got) == sorted([f"l{i}".encode() for i in range(20)] + [f"r{i}".encode() for i in range(30)])
            assert {(m.topic, m.partition) for m in got} == {("left", 0), ("left", 1), ("right", 0), ("right", 1), ("right", 2)}
            # broker 2 leaves: its partitions lose their leader, the rest keeps flowing
            b2.stop()
            produce(b1, "left", [(f"m{i}", "3") for i in range(10)])
            later = drain_all(streams["left"], marks(b1, "left", 2))
            assert sorted(m.key for m in later) == sorted(f"m{i}".encode() for i in range(10))
            # broker 2 comes back (on another port): its partitions are found and read again
            b2.start()
            wait_for_leaders([b2], "right", 3, leader=2)  # the controller makes it leader again
            produce(b2, "right", [(f"s{i}", "4") for i in range(15)])
            again = drain_all(streams["right"], marks(b2, "right", 3))
            assert sorted(m.key for m in again) == sorted(f"s{i}".encode() for i in range(15))
