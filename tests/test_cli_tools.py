"""The console tools (``kclient console-producer``, ``console-consumer``,
``get-offsets``, ``topics``, ``zookeeper``, ``--version``) run as
subprocesses against the session broker, as a user runs them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import BROKER_PARTITIONS, require_zookeeper

import kclient
from kclient.testing import four_letter_word
from kclient.testing.process import free_port

ROOT = Path(__file__).resolve().parent.parent


def kc(*args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``python -m kclient ARGS`` from the repository root."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "kclient", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


def produce(broker, topic: str, lines: list[str], *extra: str) -> None:
    result = kc("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, *extra, input="".join(line + "\n" for line in lines))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_version():
    result = kc("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"kclient {kclient.__version__}"


def test_round_trip_with_keys_and_separators(broker, topic):
    produce(broker, topic, ["k1:v1", "k2:v:2", "k1:v3"], "--property", "parse.key=true", "--property", "key.separator=:", "--sync")
    result = kc(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning", "--max-messages", "3",
        "--property", "print.key=true", "--property", "key.separator=|",
    )
    assert result.returncode == 0, result.stderr
    # Same key, same partition: k1's records keep their order.
    lines = result.stdout.splitlines()
    assert sorted(lines) == ["k1|v1", "k1|v3", "k2|v:2"]
    assert lines.index("k1|v1") < lines.index("k1|v3")
    assert result.stderr.strip() == "Processed a total of 3 messages"


def test_formatter_offset_partition_timestamp(broker, topic):
    produce(broker, topic, ["only"], "--compression-codec", "gzip")
    result = kc(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning", "--max-messages", "1",
        "--property", "print.offset=true", "--property", "print.partition=true", "--property", "print.timestamp=true",
        "--property", "print.key=true",
    )
    assert result.returncode == 0, result.stderr
    ts, part, offset, key, value = result.stdout.rstrip("\n").split("\t")
    assert ts.startswith("CreateTime:") and abs(int(ts.split(":")[1]) / 1000 - time.time()) < 600
    assert part in {f"Partition:{i}" for i in range(BROKER_PARTITIONS)}
    assert (offset, key, value) == ("Offset:0", "null", "only")


def test_parse_key_without_separator_is_one_line_error(broker, topic):
    result = kc("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--property", "parse.key=true", input="no separator\n")
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1
    assert "No key separator found on line number 1" in result.stderr


def test_max_messages_and_timeout(broker, topic):
    produce(broker, topic, [f"m{i}" for i in range(5)])
    two = kc("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning", "--max-messages", "2")
    assert two.returncode == 0, two.stderr
    assert len(two.stdout.splitlines()) == 2
    assert "Processed a total of 2 messages" in two.stderr
    # --timeout-ms ends it once no record comes (kc fails it if it has not exited within its timeout).
    everything = kc("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning", "--timeout-ms", "1500")
    assert everything.returncode == 0, everything.stderr
    assert sorted(everything.stdout.splitlines()) == [f"m{i}" for i in range(5)]
    assert "Processed a total of 5 messages" in everything.stderr
    # Without --from-beginning it starts at the log end: nothing old.
    latest = kc("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--timeout-ms", "1000")
    assert latest.returncode == 0, latest.stderr
    assert latest.stdout == ""
    assert "Processed a total of 0 messages" in latest.stderr


def test_partition_and_offset(broker, topic):
    produce(broker, topic, ["a:1", "a:2", "a:3"], "--property", "parse.key=true", "--property", "key.separator=:")
    offsets = kc("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic)
    (part,) = [int(line.split(":")[1]) for line in offsets.stdout.splitlines() if line.endswith(":3")]
    result = kc(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--partition", str(part), "--offset", "1",
        "--timeout-ms", "1000",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["2", "3"]


def test_get_offsets(broker, topic):
    produce(broker, topic, [f"k{i}:v" for i in range(6)], "--property", "parse.key=true", "--property", "key.separator=:")
    latest = kc("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic)
    assert latest.returncode == 0, latest.stderr
    lines = latest.stdout.splitlines()
    assert [line.rsplit(":", 2)[:2] for line in lines] == [[topic, str(p)] for p in range(BROKER_PARTITIONS)]
    assert sum(int(line.rsplit(":", 1)[1]) for line in lines) == 6
    earliest = kc("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", "-2", "--partitions", "1")
    assert earliest.returncode == 0, earliest.stderr
    assert earliest.stdout == f"{topic}:1:0\n"
    missing = kc("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic + "-nope")
    assert missing.returncode != 0
    assert len(missing.stderr.strip().splitlines()) == 1 and "does not exist" in missing.stderr


def without_topic_id(line: str) -> str:
    """A ``topics --describe`` summary line without its ``TopicId:`` field
    (Kafka's ``Uuid`` text: 22 URL-safe base64 characters), which must be
    there (the bundled broker has topic ids, KIP-516)."""
    stripped, found = re.subn(r"\tTopicId: [A-Za-z0-9_-]{22}(?=\t)", "", line)
    assert found == 1, line
    return stripped


def test_topics_list_and_describe(broker, topic):
    produce(broker, topic, ["x"])
    listed = kc("topics", "--bootstrap-server", broker.bootstrap, "--list")
    assert listed.returncode == 0, listed.stderr
    assert topic in listed.stdout.splitlines()
    described = kc("topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", topic)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert without_topic_id(lines[0]) == f"Topic: {topic}\tPartitionCount: {BROKER_PARTITIONS}\tReplicationFactor: 1\tConfigs: "
    assert len(lines) == 1 + BROKER_PARTITIONS
    assert lines[1].startswith(f"\tTopic: {topic}\tPartition: 0\tLeader: ")
    nope = kc("topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", topic + "-nope")
    assert nope.returncode != 0 and len(nope.stderr.strip().splitlines()) == 1


def test_topics_create_and_delete_on_a_standalone_broker(broker, topic):
    created = kc("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1")
    assert created.returncode == 0, created.stderr
    described = kc("topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", topic)
    assert without_topic_id(described.stdout.splitlines()[0]) == f"Topic: {topic}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: "
    deleted = kc("topics", "--bootstrap-server", broker.bootstrap, "--delete", "--topic", topic)
    assert deleted.returncode == 0, deleted.stderr
    assert topic not in kc("topics", "--bootstrap-server", broker.bootstrap, "--list").stdout.splitlines()
    # The cluster's tools are tested in test_cluster_tools.py.


def test_topics_describe_shows_the_configs_configs_alters(broker):
    """``topics --describe`` ends the topic line with Kafka's ``Configs:``
    field (the non-default configs); ``configs --alter --add-config
    k=v,k2=v2 / --delete-config k`` (IncrementalAlterConfigs) changes what
    it and ``configs --describe`` (DescribeConfigs) show."""
    import uuid

    topic = f"configs-{uuid.uuid4().hex[:8]}"
    where = ("--bootstrap-server", broker.bootstrap)
    created = kc("topics", *where, "--create", "--topic", topic, "--partitions", "1", "--config", "retention.ms=60000")
    assert created.returncode == 0, created.stderr

    def topic_line() -> str:
        described = kc("topics", *where, "--describe", "--topic", topic)
        assert described.returncode == 0, described.stderr
        return without_topic_id(described.stdout.splitlines()[0])

    assert topic_line() == f"Topic: {topic}\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: retention.ms=60000"
    entity = ("--entity-type", "topics", "--entity-name", topic)
    altered = kc("configs", *where, *entity, "--alter", "--add-config", "cleanup.policy=compact,segment.ms=3600000")
    assert altered.returncode == 0 and altered.stdout == f"Completed updating config for topic {topic}.\n", altered.stderr
    assert topic_line().endswith("\tConfigs: cleanup.policy=compact,retention.ms=60000,segment.ms=3600000")
    altered = kc("configs", *where, *entity, "--alter", "--delete-config", "retention.ms,segment.ms")
    assert altered.returncode == 0, altered.stderr
    assert topic_line().endswith("\tConfigs: cleanup.policy=compact")
    described = kc("configs", *where, *entity, "--describe")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert [line.split()[0] for line in lines[1:]] == ["cleanup.policy=compact"]
    bad = kc("configs", *where, *entity, "--alter", "--add-config", "no.such.config=1")
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["console-producer", "--topic", "t"],
        ["console-consumer", "--topic", "t"],
        ["get-offsets", "--topic", "t"],
        ["topics", "--list"],
    ],
)
def test_bad_broker_address_is_one_line_error(args):
    dead = f"127.0.0.1:{free_port('127.0.0.1')}"
    result = kc(*args[:1], "--bootstrap-server", dead, *args[1:], input="x\n")
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if not line.startswith("Processed a total of")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert dead in lines[0]


def test_zookeeper_subcommand():
    require_zookeeper()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kclient", "zookeeper"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )
    try:
        line = proc.stdout.readline()
        assert "zookeeper.connect=127.0.0.1:" in line, proc.stderr.read() if proc.poll() is not None else line
        port = int(line.split("zookeeper.connect=127.0.0.1:")[1].split()[0])
        assert four_letter_word("127.0.0.1", port, "ruok") == "imok"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        with pytest.raises(OSError):
            four_letter_word("127.0.0.1", port, "ruok", timeout=1.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_formatter_prints_headers_as_kafka_does(broker, topic):
    """KIP-431's print.headers: ``k:v,k2:v2`` before the key, ``NO_HEADERS``
    for a record without any, a null header value as null.literal."""
    from kclient import Producer, ProducerData

    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        producer.send(ProducerData(topic, b"k", [b"with"], partition=0, headers=[("trace", b"abc"), ("empty", None)]))
        producer.send(ProducerData(topic, b"k", [b"without"], partition=0))
    result = kc(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--partition", "0", "--offset", "earliest",
        "--max-messages", "2", "--property", "print.headers=true", "--property", "print.key=true",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["trace:abc,empty:null\tk\twith", "NO_HEADERS\tk\twithout"]
    result = kc(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--partition", "0", "--offset", "earliest",
        "--max-messages", "1", "--property", "print.headers=true", "--property", "headers.separator=;", "--property", "headers.key.separator==",
    )
    assert result.stdout.splitlines() == ["trace=abc;empty=null\twith"]


def test_get_offsets_time_names(broker, topic):
    """Kafka 3.x's GetOffsetShell spellings: ``--time earliest`` is -2,
    ``latest`` -1; anything else that is not a timestamp is a usage error."""
    produce(broker, topic, [f"k{i}:v" for i in range(5)], "--property", "parse.key=true", "--property", "key.separator=:")
    for name, number in (("earliest", "-2"), ("latest", "-1"), ("LATEST", "-1")):
        named = kc("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", name)
        numbered = kc("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", number)
        assert named.returncode == 0 and named.stdout == numbered.stdout, (named.stderr, numbered.stderr)
    assert sum(int(line.rsplit(":", 1)[1]) for line in named.stdout.splitlines()) == 5
    # A timestamp: the first offset at or after it (ListOffsets v1+), none past the last record.
    ends = {line.rsplit(":", 2)[1]: int(line.rsplit(":", 1)[1]) for line in named.stdout.splitlines()}
    before = kc("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", str(int(time.time() * 1000) - 3_600_000))
    assert before.stdout.splitlines() == [f"{topic}:{p}:{'0' if end else ''}" for p, end in ends.items()], before.stderr
    after = kc("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", str(int(time.time() * 1000) + 3_600_000))
    assert after.stdout.splitlines() == [f"{topic}:{p}:" for p in ends], after.stderr
    bad = kc("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", "yesterday")
    assert bad.returncode == 2
    assert bad.stderr.splitlines()[-1] == "kclient get-offsets: error: argument --time: 'yesterday': expected latest (-1), earliest (-2) or a timestamp in ms"


def test_producer_parse_headers_as_kafka_3_2(broker, topic):
    """KIP-798's ``h1:v1,h2:v2<TAB>value`` with its separators, and KIP-810's
    null.marker, read back with print.headers."""
    produce(broker, topic, ["trace:abc,empty:NULL\tk\twith", "NULL\tk\twithout"],
            "--property", "parse.headers=true", "--property", "parse.key=true", "--property", "null.marker=NULL", "--sync")
    produce(broker, topic, ["a=1;b=2|k|custom"], "--sync", "--property", "parse.headers=true", "--property", "parse.key=true",
            "--property", "headers.delimiter=|", "--property", "headers.separator=;", "--property", "headers.key.separator==",
            "--property", "key.separator=|")
    result = kc(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning", "--max-messages", "3",
        "--property", "print.headers=true", "--property", "print.key=true",
    )
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["NO_HEADERS\tk\twithout", "a:1,b:2\tk\tcustom", "trace:abc,empty:null\tk\twith"]
    missing = kc("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--property", "parse.headers=true",
                 input="no-delimiter\n")
    assert missing.returncode == 2
    assert missing.stderr == "kclient console-producer: error: No headers delimiter found on line number 1: 'no-delimiter'\n"
    same = kc("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--property", "headers.separator=:", input="")
    assert same.returncode == 2 and "headers.separator and headers.key.separator may not be equal" in same.stderr


def test_console_consumer_group_commits_what_it_printed(broker, topic):
    """``--group``: two runs in one group print every record once between
    them (the first commits exactly the records it printed), and the group's
    offsets end at the log end."""
    produce(broker, topic, [f"v{i}" for i in range(8)], "--sync")
    group = f"{topic}-group"
    args = ("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", group, "--from-beginning")
    first = kc(*args, "--max-messages", "5")
    assert first.returncode == 0 and first.stderr == "Processed a total of 5 messages\n", first.stderr
    second = kc(*args, "--max-messages", "3")
    assert second.returncode == 0 and second.stderr == "Processed a total of 3 messages\n", second.stderr
    assert sorted(first.stdout.split() + second.stdout.split()) == [f"v{i}" for i in range(8)]
    described = kc("consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", group)
    assert described.returncode == 0, described.stderr
    rows = [line.split() for line in described.stdout.splitlines()[1:] if line.strip()]
    assert sum(int(row[3]) for row in rows) == 8 and all(row[3] == row[4] for row in rows), described.stdout
    clash = kc(*args, "--consumer-property", "group.id=other")
    assert clash.returncode == 2 and "do not match" in clash.stderr
