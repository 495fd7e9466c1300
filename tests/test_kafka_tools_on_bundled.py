"""Apache Kafka's own command-line tools (Kafka 4.x, and a few of Kafka
3.9's) against the bundled broker, as real Java processes from the Maven
Central jars (`kclient.testing.kafka_tool`).

What each tool prints is checked against what kclient reads from the same
broker: ``kafka-console-producer`` (keys parsed with ``key.separator``) and
``kafka-console-consumer`` (plain and with ``--group``: the committed
offsets read back with kclient's AdminClient and with
``kafka-consumer-groups``), ``kafka-topics`` (create with partitions,
replication factor and configs, list, describe, ``--alter --partitions``
(CreatePartitions, KIP-195), delete), ``kafka-consumer-groups`` (list,
describe with CURRENT-OFFSET / LOG-END-OFFSET / LAG, reset-offsets,
delete-offsets (OffsetDelete, KIP-496), delete), ``kafka-configs`` (topics;
brokers, whose configs the bundled broker does not change at run time) and
the Java idempotent producer (``kafka-verifiable-producer``,
``kafka-producer-perf-test``) read back exactly once with kclient.

Every difference these tools found, and what was done with it, is listed
in the docs page "kclient and Apache Kafka". Fixed in the bundled broker:
CreatePartitions (``kafka-topics --alter --partitions`` failed with
"UnsupportedVersionException: The node does not support CREATE_PARTITIONS")
and OffsetDelete (``kafka-consumer-groups --delete-offsets``: "The node does
not support OFFSET_DELETE"). Kept: no dynamic broker configs (``kafka-configs
--alter --entity-type brokers`` is refused, "Cannot update these configs
dynamically"). ``kafka-consumer-groups --list --state`` needed ListGroups
v4 ("The cluster does not support [StatesFilter] in LIST_GROUPS API
version 2"): the broker now serves ListGroups v0-5. The KIP-848 consumer
protocol ("The cluster does not support the new CONSUMER group protocol")
is served since issue 27, with Metadata v12 and topic ids.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import uuid

import pytest
from helpers import records as test_records
from helpers.records import partition_messages
from helpers.wait import wait_for as _wait_for

from kclient.client.admin import AdminClient
from kclient.client.producer.partitioner import murmur2, to_positive
from kclient.testing import BrokerProcess, TestCertificates, java_unavailable_reason, kafka_tool, kafka_tool_command, security_properties


@pytest.fixture(autouse=True)
def _needs_java() -> None:
    """Skip without Java 17+, with the reason; fail in CI (helpers.skips.require)."""
    from helpers.skips import require

    require(java_unavailable_reason(), name="Java 17+", needs="needs Apache Kafka's tools (Java 17+)")

TIMEOUT = 60.0


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def tool(broker, name: str, *args: str, release: str = "4", input: str | None = None, check: bool = True):
    """Run one of Kafka's tools with ``--bootstrap-server`` of ``broker``."""
    return kafka_tool(name, "--bootstrap-server", broker.bootstrap, *args, release=release, input=input, check=check, timeout=TIMEOUT * 2)


def failed(result) -> str:
    """A tool run that must fail: its stdout and stderr, for the asserts."""
    assert result.returncode != 0, result.stdout
    return result.stdout + result.stderr


def read_partition(broker, topic: str, partition: int) -> list[tuple[int, str | None, str]]:
    """``(offset, key, value)`` of every record of one partition, read with kclient."""
    return [
        (m.offset, None if m.message.key is None else bytes(m.message.key).decode(), bytes(m.message.payload).decode())
        for m in partition_messages(broker, topic, partition, client_id="tools-check")
    ]


def log_end_offsets(broker, topic: str, partitions: int) -> dict[int, int]:
    return test_records.log_end_offsets(broker, topic, range(partitions))


def committed(broker, group: str) -> dict[tuple[str, int], int]:
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        return admin.list_consumer_group_offsets(group)


#: ``produce(broker, topic, [(key, value), ...])``: one send a record, acks=-1.
produce = functools.partial(test_records.produce, acks=-1)


def describe_group(broker, group: str, *extra: str, release: str = "4") -> list[dict[str, str]]:
    """``kafka-consumer-groups --describe`` rows as dicts by column name."""
    out = tool(broker, "kafka-consumer-groups", "--describe", "--group", group, *extra, release=release).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    header_at = next(i for i, line in enumerate(lines) if line.startswith("GROUP"))
    columns = lines[header_at].split()
    return [dict(zip(columns, line.split())) for line in lines[header_at + 1 :]]


def describe_topic(broker, topic: str, release: str = "4") -> tuple[dict[str, str], list[dict[str, str]]]:
    """``kafka-topics --describe``: the topic line and the partition lines, as ``Name: value`` dicts."""
    out = tool(broker, "kafka-topics", "--describe", "--topic", topic, release=release).stdout
    rows = []
    for line in out.splitlines():
        if not line.strip():
            continue
        fields = {}
        for part in line.strip().split("\t"):
            name, _, value = part.partition(":")
            fields[name.strip()] = value.strip()
        rows.append(fields)
    return rows[0], rows[1:]


wait_for = functools.partial(_wait_for, timeout=TIMEOUT, interval=0.2)


# ---------------------------------------------------------------- console producer and consumer


def test_console_producer_and_consumer_plain_and_in_a_group(broker):
    topic, group = new_name("console"), new_name("console-group")
    tool(broker, "kafka-topics", "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1")
    records = [(f"key-{i}", f"value-{i}") for i in range(12)]
    tool(
        broker,
        "kafka-console-producer",
        "--topic", topic,
        "--reader-property", "parse.key=true",
        "--reader-property", "key.separator=:",
        "--producer-property", "acks=all",
        input="".join(f"{k}:{v}\n" for k, v in records),
    )  # fmt: skip
    # kclient reads every record where Kafka's default partitioner put it
    # (murmur2 of the key), with the key and value the tool parsed.
    logs = {p: read_partition(broker, topic, p) for p in range(3)}
    stored = {(p, off, k, v) for p, rows in logs.items() for off, k, v in rows}
    assert {(k, v) for _, _, k, v in stored} == set(records)
    for p, _, k, _ in stored:
        assert p == to_positive(murmur2(k.encode())) % 3, k
    # The plain console consumer prints the same records, partitions and offsets.
    out = tool(
        broker,
        "kafka-console-consumer",
        "--topic", topic,
        "--from-beginning",
        "--max-messages", str(len(records)),
        "--formatter-property", "print.key=true",
        "--formatter-property", "print.partition=true",
        "--formatter-property", "print.offset=true",
    ).stdout  # fmt: skip
    printed = set()
    for line in out.splitlines():
        match = re.fullmatch(r"Partition:(\d+)\tOffset:(\d+)\t(\S+)\t(\S+)", line)
        if match:
            printed.add((int(match[1]), int(match[2]), match[3], match[4]))
    assert printed == stored
    # In a group: it reads everything and commits the log end.
    out = tool(broker, "kafka-console-consumer", "--topic", topic, "--group", group, "--from-beginning", "--max-messages", str(len(records))).stdout
    assert sorted(out.split()) == sorted(v for _, v in records)
    ends = log_end_offsets(broker, topic, 3)
    assert committed(broker, group) == {(topic, p): end for p, end in ends.items()}
    rows = describe_group(broker, group)
    assert {int(r["PARTITION"]): (int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), int(r["LAG"])) for r in rows} == {
        p: (end, end, 0) for p, end in ends.items()
    }
    # Five more (kclient's producer): the LAG shows them, and the group resumes there.
    more = [(f"key-{i}", f"value-{i}") for i in range(12, 17)]
    produce(broker, topic, more)
    new_ends = log_end_offsets(broker, topic, 3)
    rows = describe_group(broker, group)
    assert {int(r["PARTITION"]): (int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), int(r["LAG"])) for r in rows} == {
        p: (ends[p], new_ends[p], new_ends[p] - ends[p]) for p in range(3)
    }
    assert all(r["CONSUMER-ID"] == "-" for r in rows)
    out = tool(broker, "kafka-console-consumer", "--topic", topic, "--group", group, "--max-messages", str(len(more))).stdout
    assert sorted(out.split()) == sorted(v for _, v in more)
    assert committed(broker, group) == {(topic, p): end for p, end in new_ends.items()}


def test_console_producer_codecs_and_console_consumer_positions(broker):
    """Each of the Java producer's codecs is stored and read back by
    kclient; the console consumer reads from a partition and offset
    (``--partition --offset``, ListOffsets and Fetch without a group) and
    with ``--isolation-level read_committed`` (no transactions here: the
    last stable offset is the high watermark)."""
    topic = new_name("codecs")
    tool(broker, "kafka-topics", "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    for codec in codecs:
        tool(broker, "kafka-console-producer", "--topic", topic, "--compression-codec", codec, input=f"{codec}-1\n{codec}-2\n")
    expected = [f"{codec}-{i}" for codec in codecs for i in (1, 2)]
    assert [(off, v) for off, _, v in read_partition(broker, topic, 0)] == list(enumerate(expected))
    out = tool(broker, "kafka-console-consumer", "--topic", topic, "--partition", "0", "--offset", "5", "--max-messages", "3").stdout
    assert out.split() == expected[5:8]
    out = tool(broker, "kafka-console-consumer", "--topic", topic, "--from-beginning", "--max-messages", "10", "--isolation-level", "read_committed").stdout
    assert out.split() == expected


# ---------------------------------------------------------------- kafka-topics


def test_kafka_topics_create_list_describe_alter_delete(broker):
    topic = new_name("topics")
    out = tool(
        broker,
        "kafka-topics",
        "--create", "--topic", topic,
        "--partitions", "3", "--replication-factor", "1",
        "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact",
    ).stdout  # fmt: skip
    assert f"Created topic {topic}." in out
    assert topic in tool(broker, "kafka-topics", "--list").stdout.split()
    head, parts = describe_topic(broker, topic)
    assert head["Topic"] == topic and head["PartitionCount"] == "3" and head["ReplicationFactor"] == "1"
    assert set(head["Configs"].split(",")) == {"retention.ms=3600000", "cleanup.policy=compact"}
    assert [(p["Partition"], p["Leader"], p["Replicas"], p["Isr"]) for p in parts] == [(str(i), "0", "0", "0") for i in range(3)]
    # Exists already; more replicas than brokers.
    # Kafka's own messages (Kafka 3.9 and 4.4 print the same).
    text = failed(tool(broker, "kafka-topics", "--create", "--topic", topic, check=False))
    assert f"Error while executing topic command : Topic '{topic}' already exists." in text
    text = failed(tool(broker, "kafka-topics", "--create", "--topic", "bad/name", check=False))
    assert "InvalidTopicException: Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'" in text
    text = failed(tool(broker, "kafka-topics", "--create", "--topic", new_name("manual"), "--replica-assignment", "7", check=False))
    assert "InvalidReplicaAssignmentException: The manual partition assignment includes broker 7, but no such broker is registered." in text
    text = failed(tool(broker, "kafka-topics", "--create", "--topic", new_name("rf3"), "--replication-factor", "3", check=False))
    assert "InvalidReplicationFactorException" in text
    # --alter --partitions: CreatePartitions (KIP-195). The new partition takes records.
    tool(broker, "kafka-topics", "--alter", "--topic", topic, "--partitions", "5")
    head, parts = describe_topic(broker, topic)
    assert head["PartitionCount"] == "5" and [p["Leader"] for p in parts] == ["0"] * 5
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        assert len(admin.describe_topics([topic])[topic].partitions) == 5
    keys = [f"k{i}" for i in range(40)]
    produce(broker, topic, [(k, k) for k in keys])
    on_new = [k for k in keys if to_positive(murmur2(k.encode())) % 5 == 4]
    assert [v for _, _, v in read_partition(broker, topic, 4)] == on_new
    text = failed(tool(broker, "kafka-topics", "--alter", "--topic", topic, "--partitions", "4", check=False))
    assert "InvalidPartitionsException: Topic currently has 5 partitions, which is higher than the requested 4." in text
    assert "InvalidPartitionsException" in failed(tool(broker, "kafka-topics", "--alter", "--topic", topic, "--partitions", "5", check=False))
    # --delete
    tool(broker, "kafka-topics", "--delete", "--topic", topic)
    wait_for(lambda: topic not in tool(broker, "kafka-topics", "--list").stdout.split(), "the topic to leave the list")
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        assert topic not in admin.list_topics()


def test_kafka_topics_alter_partitions_through_the_zookeeper_controller(zk_broker):
    """On a broker with ``zookeeper.connect`` CreatePartitions goes through
    the controller: ``/brokers/topics/<topic>`` is rewritten and the new
    partitions get their states and leaders."""
    topic = new_name("zk-topics")
    tool(zk_broker, "kafka-topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1")
    tool(zk_broker, "kafka-topics", "--alter", "--topic", topic, "--partitions", "4")
    head, parts = describe_topic(zk_broker, topic)
    assert head["PartitionCount"] == "4"
    assert [p["Partition"] for p in parts] == ["0", "1", "2", "3"] and all(p["Leader"] == p["Isr"] != "-1" for p in parts)
    keys = [f"k{i}" for i in range(40)]
    produce(zk_broker, topic, [(k, k) for k in keys])
    assert [v for _, _, v in read_partition(zk_broker, topic, 3)] == [k for k in keys if to_positive(murmur2(k.encode())) % 4 == 3]


# ---------------------------------------------------------------- kafka-consumer-groups


def test_kafka_consumer_groups_list_describe_reset_delete(broker):
    topic, group = new_name("groups"), new_name("groups-group")
    tool(broker, "kafka-topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1")
    values = [f"v{i}" for i in range(10)]
    produce(broker, topic, [(f"k{i}", v) for i, v in enumerate(values)])
    ends = log_end_offsets(broker, topic, 2)
    tool(broker, "kafka-console-consumer", "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "10")
    assert group in tool(broker, "kafka-consumer-groups", "--list").stdout.split()
    state = describe_group(broker, group, "--state")
    assert [(r["GROUP"], r["STATE"], r["#MEMBERS"]) for r in state] == [(group, "Empty", "0")]
    # ListGroups v4 / v5 filters (KIP-518 states, KIP-848 types).
    assert f"\n{group} " in tool(broker, "kafka-consumer-groups", "--list", "--state", "Empty").stdout
    assert group not in tool(broker, "kafka-consumer-groups", "--list", "--state", "Stable").stdout
    assert re.search(rf"^{group}\s+Classic\s*$", tool(broker, "kafka-consumer-groups", "--list", "--type").stdout, re.M)
    assert group not in tool(broker, "kafka-consumer-groups", "--list", "--type", "consumer").stdout
    # --reset-offsets --to-earliest: the group then reads everything again.
    out = tool(broker, "kafka-consumer-groups", "--group", group, "--reset-offsets", "--to-earliest", "--topic", topic, "--execute").stdout
    assert sorted(re.findall(rf"^{group}\s+{topic}\s+(\d+)\s+(\d+)$", out, re.M)) == [("0", "0"), ("1", "0")], out
    assert committed(broker, group) == {(topic, 0): 0, (topic, 1): 0}
    out = tool(broker, "kafka-console-consumer", "--topic", topic, "--group", group, "--max-messages", "10").stdout
    assert sorted(out.split()) == sorted(values)
    assert committed(broker, group) == {(topic, p): end for p, end in ends.items()}
    # --to-offset on one partition: the group reads from there.
    start = ends[0] - 2
    tool(broker, "kafka-consumer-groups", "--group", group, "--reset-offsets", "--to-offset", str(start), "--topic", f"{topic}:0", "--execute")
    assert committed(broker, group) == {(topic, 0): start, (topic, 1): ends[1]}
    rows = {int(r["PARTITION"]): r for r in describe_group(broker, group)}
    assert (rows[0]["CURRENT-OFFSET"], rows[0]["LAG"]) == (str(start), "2")
    expected = [v for _, _, v in read_partition(broker, topic, 0)][start:]
    out = tool(broker, "kafka-console-consumer", "--topic", topic, "--group", group, "--max-messages", "2").stdout
    assert out.split() == expected
    # --shift-by and --to-datetime in a dry run change nothing.
    tool(broker, "kafka-consumer-groups", "--group", group, "--reset-offsets", "--shift-by", "-1", "--all-topics", "--dry-run")
    assert committed(broker, group) == {(topic, p): end for p, end in ends.items()}
    # --delete-offsets (OffsetDelete, KIP-496) of one partition.
    out = tool(broker, "kafka-consumer-groups", "--delete-offsets", "--group", group, "--topic", f"{topic}:1").stdout
    assert re.search(rf"{topic}\s+1\s+Successful", out), out
    assert committed(broker, group) == {(topic, 0): ends[0]}
    # --delete: gone from the list, kclient sees no offsets.
    out = tool(broker, "kafka-consumer-groups", "--delete", "--group", group).stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out
    assert group not in tool(broker, "kafka-consumer-groups", "--list").stdout.split()
    assert committed(broker, group) == {}
    out = tool(broker, "kafka-consumer-groups", "--delete", "--group", group).stdout
    assert "GroupIdNotFoundException" in out
    out = tool(broker, "kafka-consumer-groups", "--describe", "--group", group, check=False)
    assert f"Consumer group '{group}' does not exist." in out.stdout + out.stderr


def test_kafka_consumer_groups_on_a_group_with_a_live_member(broker, tmp_path):
    """A console consumer keeps running in the group: describe shows its
    member and assignment; its topic's offsets cannot be deleted
    (GROUP_SUBSCRIBED_TO_TOPIC), nor the group (NON_EMPTY_GROUP), nor its
    offsets reset (the group is not inactive)."""
    topic, other, group = new_name("live"), new_name("live-other"), new_name("live-group")
    tool(broker, "kafka-topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1")
    produce(broker, topic, [(f"k{i}", f"v{i}") for i in range(6)])
    produce(broker, other, [("k", "v")])
    tool(broker, "kafka-consumer-groups", "--group", group, "--reset-offsets", "--to-earliest", "--topic", other, "--execute")
    stderr = open(tmp_path / "consumer.stderr", "wb")
    consumer = subprocess.Popen(
        kafka_tool_command("kafka-console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", group, "--from-beginning"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    try:

        def stable_rows():
            rows = describe_group(broker, group)
            live = [r for r in rows if r.get("TOPIC") == topic and r.get("CONSUMER-ID", "-") != "-"]
            return rows if len(live) == 2 and all(r["CURRENT-OFFSET"] == r["LOG-END-OFFSET"] for r in live) else None

        rows = wait_for(stable_rows, "the console consumer to own both partitions and commit the log end")
        member = {r["CONSUMER-ID"] for r in rows if r["TOPIC"] == topic}
        assert len(member) == 1 and next(iter(member)).startswith("console-consumer-")
        state = describe_group(broker, group, "--state")
        assert (state[0]["STATE"], state[0]["#MEMBERS"], state[0]["ASSIGNMENT-STRATEGY"]) == ("Stable", "1", "range")
        assert re.search(rf"^{group}\s+Stable\s*$", tool(broker, "kafka-consumer-groups", "--list", "--state", "stable").stdout, re.M)
        members = describe_group(broker, group, "--members", "--verbose")
        assert [(m["#PARTITIONS"], m["CURRENT-ASSIGNMENT"], m["CURRENT-EPOCH"]) for m in members] == [("2", f"{topic}:0,1", "-")]
        out = tool(broker, "kafka-consumer-groups", "--delete-offsets", "--group", group, "--topic", topic, "--topic", other).stdout
        assert re.search(rf"{topic}\s+0\s+Error: .*GroupSubscribedToTopicException", out), out
        assert re.search(rf"{other}\s+0\s+Successful", out), out
        assert (other, 0) not in committed(broker, group)
        out = tool(broker, "kafka-consumer-groups", "--delete", "--group", group).stdout
        assert "GroupNotEmptyException" in out, out
        result = tool(broker, "kafka-consumer-groups", "--group", group, "--reset-offsets", "--to-earliest", "--topic", topic, "--execute", check=False)
        assert "Assignments can only be reset if the group" in result.stdout + result.stderr
    finally:
        consumer.terminate()
        consumer.wait(TIMEOUT)
        stderr.close()
    wait_for(lambda: describe_group(broker, group, "--state")[0]["STATE"] == "Empty", "the group to be empty after the consumer left")


def test_kafka_console_consumer_with_the_kip_848_consumer_protocol(broker):
    """The bundled broker serves Kafka 4.0's consumer group protocol
    (ConsumerGroupHeartbeat, KIP-848): Kafka's console consumer with
    ``group.protocol=consumer`` joins, reads and commits, and
    ``kafka-consumer-groups`` then lists the group as type Consumer."""
    topic, group = new_name("kip848"), new_name("kip848-group")
    produce(broker, topic, [("k", "v")])
    result = tool(
        broker,
        "kafka-console-consumer",
        "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "1",
        "--consumer-property", "group.protocol=consumer",
        check=False,
    )  # fmt: skip
    text = result.stdout + result.stderr
    assert result.returncode == 0, text
    assert "UnsupportedVersionException" not in text
    assert "v" in result.stdout.splitlines()
    assert "Processed a total of 1 messages" in text
    listed = tool(broker, "kafka-consumer-groups", "--list", "--type").stdout
    assert any(line.split()[:2] == [group, "Consumer"] for line in listed.splitlines()), listed


# ---------------------------------------------------------------- kafka-configs


def test_kafka_configs_topics_and_brokers(broker):
    topic = new_name("configs")
    tool(broker, "kafka-topics", "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1", "--config", "retention.ms=100000")
    out = tool(broker, "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic).stdout
    assert f"Dynamic configs for topic {topic} are:" in out
    assert "retention.ms=100000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=100000}" in out
    out = tool(broker, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config", "retention.ms=5000,cleanup.policy=compact,max.message.bytes=2000000").stdout
    assert f"Completed updating config for topic {topic}." in out
    out = tool(broker, "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic).stdout
    assert "retention.ms=5000 " in out and "cleanup.policy=compact " in out and "max.message.bytes=2000000 " in out
    assert "DEFAULT_CONFIG:log.cleanup.policy=delete" in out
    tool(broker, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic, "--delete-config", "retention.ms,max.message.bytes")
    out = tool(broker, "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic).stdout
    assert "retention.ms=" not in out and "max.message.bytes=" not in out and "cleanup.policy=compact " in out
    head, _ = describe_topic(broker, topic)
    assert head["Configs"] == "cleanup.policy=compact"
    out = tool(broker, "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic, "--all").stdout
    # Kafka 4.4 prints the same line: log.retention.hours is no synonym of retention.ms.
    assert "  retention.ms=604800000 sensitive=false synonyms={}" in out
    assert "  delete.retention.ms=86400000 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.delete.retention.ms=86400000}" in out
    text = failed(tool(broker, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config", "no.such.config=1", check=False))
    assert "InvalidConfigurationException: Unknown topic config name: no.such.config" in text
    text = failed(tool(broker, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config", "retention.ms=xyz", check=False))
    assert "InvalidConfigurationException: Invalid value xyz for configuration retention.ms: Not a number of type LONG" in text
    text = failed(tool(broker, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config", "min.insync.replicas=0", check=False))
    assert "InvalidConfigurationException: Invalid value 0 for configuration min.insync.replicas: Value must be at least 1" in text
    text = failed(tool(broker, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "no-such-topic", "--add-config", "retention.ms=1", check=False))
    assert "UnknownTopicOrPartitionException: The topic 'no-such-topic' does not exist." in text
    # Brokers: described (static and default values), never changed at run
    # time: the bundled broker has no dynamic broker configs (Kafka's
    # KIP-226), and refuses each as Kafka refuses a config that is not
    # dynamically updatable.
    out = tool(broker, "kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "0").stdout
    assert out.strip() == "Dynamic configs for broker 0 are:"
    out = tool(broker, "kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "0", "--all").stdout
    assert "num.partitions=2 sensitive=false synonyms={STATIC_BROKER_CONFIG:num.partitions=2, DEFAULT_CONFIG:num.partitions=1}" in out
    out = tool(broker, "kafka-configs", "--describe", "--entity-type", "brokers", "--entity-default").stdout
    assert out.strip() == "Default configs for brokers in the cluster are:"
    for target in (("--entity-name", "0"), ("--entity-default",)):
        text = failed(tool(broker, "kafka-configs", "--alter", "--entity-type", "brokers", *target, "--add-config", "log.cleaner.threads=2", check=False))
        assert "InvalidRequestException: Cannot update these configs dynamically: log.cleaner.threads" in text


# ---------------------------------------------------------------- the Java idempotent producer


def test_java_idempotent_producer_read_back_exactly_once(broker, tmp_path):
    topic = new_name("idempotent")
    tool(broker, "kafka-topics", "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1")
    config = tmp_path / "producer.properties"
    config.write_text("enable.idempotence=true\nacks=all\nretries=2147483647\nmax.in.flight.requests.per.connection=5\nlinger.ms=5\n")
    count = 3000
    out = tool(
        broker,
        "kafka-verifiable-producer",
        "--topic", topic,
        "--max-messages", str(count),
        "--repeating-keys", "30",
        "--command-config", str(config),
    ).stdout  # fmt: skip
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    acked = [e for e in events if e["name"] == "producer_send_success"]
    summary = [e for e in events if e["name"] == "tool_data"][-1]
    assert not [e for e in events if e["name"] == "producer_send_error"]
    assert summary["sent"] == summary["acked"] == len(acked) == count
    logs = {p: read_partition(broker, topic, p) for p in range(3)}
    stored = {(p, off): v for p, rows in logs.items() for off, _, v in rows}
    assert sum(len(rows) for rows in logs.values()) == count, "each acked record once, nothing more"
    assert sorted(stored.values(), key=int) == [str(i) for i in range(count)]
    assert all(stored[(e["partition"], e["offset"])] == e["value"] for e in acked), "every delivery report names the record's offset"
    # ProducerPerformance with the same settings: exactly num-records records.
    perf_topic = new_name("perf")
    tool(broker, "kafka-topics", "--create", "--topic", perf_topic, "--partitions", "2", "--replication-factor", "1")
    out = tool(
        broker,
        "kafka-producer-perf-test",
        "--topic", perf_topic,
        "--num-records", "20000",
        "--record-size", "100",
        "--throughput", "-1",
        "--command-property", "acks=all", "enable.idempotence=true", "linger.ms=5",
    ).stdout  # fmt: skip
    assert re.search(r"^20000 records sent", out, re.M), out
    assert sum(log_end_offsets(broker, perf_topic, 2).values()) == 20000


# ---------------------------------------------------------------- Kafka 3.9's tools


def test_kafka_3_9_tools(broker):
    """Kafka 3.9's tools (older protocol versions: the 3.9 clients still
    send Produce v3-, Fetch v4-, ... where 4.x starts higher, KIP-896)."""
    topic, group = new_name("tools39"), new_name("tools39-group")
    out = tool(broker, "kafka-topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=86400000", release="3.9").stdout
    assert f"Created topic {topic}." in out
    head, parts = describe_topic(broker, topic, release="3.9")
    assert (head["PartitionCount"], head["Configs"], len(parts)) == ("2", "retention.ms=86400000", 2)
    records = [(f"key-{i}", f"value-{i}") for i in range(8)]
    tool(
        broker,
        "kafka-console-producer",
        "--topic", topic,
        "--property", "parse.key=true",
        "--property", "key.separator=:",
        input="".join(f"{k}:{v}\n" for k, v in records),
        release="3.9",
    )  # fmt: skip
    stored = {(p, k, v) for p in range(2) for _, k, v in read_partition(broker, topic, p)}
    assert stored == {(to_positive(murmur2(k.encode())) % 2, k, v) for k, v in records}
    out = tool(broker, "kafka-console-consumer", "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "8", release="3.9").stdout
    assert sorted(out.split()) == sorted(v for _, v in records)
    ends = log_end_offsets(broker, topic, 2)
    rows = describe_group(broker, group, release="3.9")
    assert {int(r["PARTITION"]): (int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), int(r["LAG"])) for r in rows} == {p: (e, e, 0) for p, e in ends.items()}
    tool(broker, "kafka-consumer-groups", "--group", group, "--reset-offsets", "--to-earliest", "--all-topics", "--execute", release="3.9")
    assert committed(broker, group) == {(topic, 0): 0, (topic, 1): 0}
    tool(broker, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config", "cleanup.policy=compact", release="3.9")
    out = tool(broker, "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic, release="3.9").stdout
    assert "cleanup.policy=compact" in out and "retention.ms=86400000" in out
    tool(broker, "kafka-topics", "--alter", "--topic", topic, "--partitions", "3", release="3.9")
    assert describe_topic(broker, topic, release="3.9")[0]["PartitionCount"] == "3"
    tool(broker, "kafka-consumer-groups", "--delete", "--group", group, release="3.9")
    tool(broker, "kafka-topics", "--delete", "--topic", topic, release="3.9")
    wait_for(lambda: topic not in tool(broker, "kafka-topics", "--list", release="3.9").stdout.split(), "the topic to leave the list")


# ---------------------------------------------------------------- TLS and SASL


@pytest.fixture(scope="module")
def secured(zookeeper, tmp_path_factory):
    """A bundled broker with PLAINTEXT, SSL and SASL_SSL (PLAIN and
    SCRAM-SHA-256/512) listeners, its SCRAM users in ZooKeeper."""
    directory = tmp_path_factory.mktemp("secured")
    with TestCertificates(directory / "certs") as certs:
        props = security_properties(certs, listeners=("PLAINTEXT", "SSL", "SASL_SSL"), mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
        props["zookeeper.connect"] = f"{zookeeper.connect}/secured-{uuid.uuid4().hex[:8]}"
        with BrokerProcess(properties=props) as broker:
            yield broker, certs, props["zookeeper.connect"], directory


def client_config(directory, certs, protocol: str, mechanism: str | None = None, user: str = "", password: str = "") -> str:
    """A Java client's ``--command-config`` file."""
    lines = [f"security.protocol={protocol}", "ssl.truststore.type=PEM", f"ssl.truststore.location={certs.truststore_location}"]
    if mechanism:
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        lines += [f"sasl.mechanism={mechanism}", f'sasl.jaas.config=org.apache.kafka.common.security.{module} required username="{user}" password="{password}";']
    path = directory / f"{protocol}-{mechanism}-{user}-{uuid.uuid4().hex[:6]}.properties"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_console_tools_over_tls_and_sasl(secured):
    """Kafka's console tools over SSL, SASL_SSL/PLAIN and SASL_SSL/SCRAM;
    the SCRAM user created with Kafka 3.9's own ``kafka-configs
    --zookeeper`` (``/config/users/<name>``, the layout the bundled broker
    reads). Kafka 4's ``kafka-configs --bootstrap-server --entity-type
    users`` needs AlterUserScramCredentials (KIP-554), which the bundled
    broker does not serve."""
    broker, certs, zk_connect, directory = secured
    out = kafka_tool(
        "kafka-configs", "--zookeeper", zk_connect,
        "--alter", "--entity-type", "users", "--entity-name", "bob",
        "--add-config", "SCRAM-SHA-256=[iterations=4096,password=bob-secret],SCRAM-SHA-512=[password=bob-secret]",
        release="3.9",
    ).stdout  # fmt: skip
    assert "Completed updating config for entity: user-principal 'bob'." in out
    topic = new_name("secured")
    kafka_tool("kafka-topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    cases = [
        ("SSL", client_config(directory, certs, "SSL")),
        ("SASL_SSL", client_config(directory, certs, "SASL_SSL", "PLAIN", "alice", "alice-secret")),
        ("SASL_SSL", client_config(directory, certs, "SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret")),
        ("SASL_SSL", client_config(directory, certs, "SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret")),
    ]
    for i, (listener, config) in enumerate(cases):
        address = f"{broker.host}:{broker.ports[listener]}"
        kafka_tool("kafka-console-producer", "--bootstrap-server", address, "--topic", topic, "--command-config", config, input=f"secret-{i}\n", timeout=TIMEOUT)
        out = kafka_tool(
            "kafka-console-consumer", "--bootstrap-server", address, "--topic", topic, "--command-config", config,
            "--group", new_name("secured-group"), "--from-beginning", "--max-messages", str(i + 1), timeout=TIMEOUT,
        ).stdout  # fmt: skip
        assert out.split() == [f"secret-{j}" for j in range(i + 1)], (config, out)
    wrong = client_config(directory, certs, "SASL_SSL", "SCRAM-SHA-256", "bob", "not-the-password")
    result = kafka_tool("kafka-topics", "--bootstrap-server", f"{broker.host}:{broker.ports['SASL_SSL']}", "--list", "--command-config", wrong, check=False, timeout=TIMEOUT)
    assert result.returncode != 0
    assert (
        "SaslAuthenticationException: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
        in result.stdout + result.stderr
    )
    result = kafka_tool(
        "kafka-configs", "--bootstrap-server", broker.bootstrap,
        "--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config", "SCRAM-SHA-256=[password=carol-secret]",
    ).stdout  # fmt: skip
    # KIP-554 through the broker: the new user logs in with Kafka's tools at once.
    assert result.strip() == "Completed updating config for user carol."
    carol = client_config(directory, certs, "SASL_SSL", "SCRAM-SHA-256", "carol", "carol-secret")
    listing = kafka_tool("kafka-topics", "--bootstrap-server", f"{broker.host}:{broker.ports['SASL_SSL']}", "--list", "--command-config", carol, timeout=TIMEOUT)
    assert topic in listing.stdout.split()
