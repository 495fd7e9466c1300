"""``kclient consumer-groups --bootstrap-server`` against the bundled broker:
``--reset-offsets`` (every scenario and scope; a dry run changes nothing,
``--execute`` commits, a group with an active member is refused),
``--delete``, ``--all-groups``, the HOST and CLIENT-ID columns and the exit
statuses (1 for "no such group", 2 for bad arguments), with the committed
offsets read back through kclient's AdminClient (OffsetFetch). The admin
calls the tool is built on (DeleteGroups, OffsetCommit as an admin,
ListOffsets by time) are checked here too. Kafka's own tool on the same
groups: tests/test_kafka_consumer_groups_compared.py."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers.records import produce
from helpers.wait import wait_for

from kclient.client.admin import AdminClient, NewTopic
from kclient.errors import ConfigError, GroupIdNotFoundError, GroupNotEmptyError
from kclient.tools.reset_offsets import ResetScenario, format_reset_rows, parse_datetime, parse_topic_partitions

ROOT = Path(__file__).resolve().parent.parent

#: Records per partition of the test topic.
SIZES = {0: 10, 1: 4}


def kc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kclient", *args], check=False, capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def groups_tool(broker, *args: str) -> subprocess.CompletedProcess:
    return kc("consumer-groups", "--bootstrap-server", broker.bootstrap, *args)


def reset_rows(stdout: str) -> dict[tuple[str, str, int], int]:
    """The ``--reset-offsets`` table: (group, topic, partition) -> NEW-OFFSET."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], stdout
    return {(g, t, int(p)): int(o) for g, t, p, o in (line.split() for line in lines[1:])}


@pytest.fixture(scope="module")
def admin(broker):
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as client:
        yield client


@pytest.fixture(scope="module")
def filled(broker, admin) -> str:
    """A topic with 2 partitions holding `SIZES` records."""
    topic = f"reset-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 2, 1)])
    for partition, count in SIZES.items():
        produce(broker, topic, [f"v{i}" for i in range(count)], partition=partition, per_send=None)
    return topic


def new_group(admin, offsets: dict[tuple[str, int], int]) -> str:
    group = f"reset-group-{uuid.uuid4().hex[:8]}"
    admin.alter_consumer_group_offsets(group, offsets)
    return group


# ---------------------------------------------------------------- the admin calls


def test_admin_commits_lists_offsets_by_time_and_deletes_groups(admin, filled):
    group = new_group(admin, {(filled, 0): 3, (filled, 1): 1})
    assert admin.list_consumer_group_offsets(group) == {(filled, 0): 3, (filled, 1): 1}
    assert admin.describe_consumer_groups([group])[group].state == "Empty"
    ends = admin.list_offsets({(filled, 0): -1, (filled, 1): -1})
    assert ends == {(filled, 0): SIZES[0], (filled, 1): SIZES[1]}
    assert admin.list_offsets({(filled, 0): -2}) == {(filled, 0): 0}
    assert admin.list_offsets({(filled, 0): 0}) == {(filled, 0): 0}  # every record is after the epoch
    future = int(datetime.datetime(2999, 1, 1, tzinfo=datetime.timezone.utc).timestamp() * 1000)
    assert admin.list_offsets({(filled, 1): future}) == {(filled, 1): -1}
    results = admin.delete_consumer_groups([group, "no-such-group-" + uuid.uuid4().hex[:8]])
    assert results[group] is None
    assert [type(e) for g, e in results.items() if g != group] == [GroupIdNotFoundError]
    assert admin.list_consumer_group_offsets(group) == {}


# ---------------------------------------------------------------- --reset-offsets


def test_dry_run_prints_new_offsets_and_changes_nothing(broker, admin, filled):
    group = new_group(admin, {(filled, 0): 5, (filled, 1): 1})
    result = groups_tool(broker, "--group", group, "--reset-offsets", "--to-earliest", "--all-topics")
    assert result.returncode == 0, result.stderr
    assert reset_rows(result.stdout) == {(group, filled, 0): 0, (group, filled, 1): 0}
    assert "--execute" in result.stderr  # the dry-run warning
    result = groups_tool(broker, "--group", group, "--reset-offsets", "--shift-by", "-2", "--topic", filled, "--dry-run")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert reset_rows(result.stdout) == {(group, filled, 0): 3, (group, filled, 1): 0}  # 1 - 2 is kept at the log start
    assert admin.list_consumer_group_offsets(group) == {(filled, 0): 5, (filled, 1): 1}


@pytest.mark.parametrize(
    ("scenario", "scope", "expected"),
    [
        (["--to-latest"], ["--topic", "{t}"], {0: SIZES[0], 1: SIZES[1]}),
        (["--to-earliest"], ["--topic", "{t}:1"], {0: 5, 1: 0}),
        (["--to-offset", "3"], ["--topic", "{t}:0,1"], {0: 3, 1: 3}),
        (["--to-offset", "999"], ["--all-topics"], {0: SIZES[0], 1: SIZES[1]}),  # kept at the log end
        (["--shift-by", "2"], ["--all-topics"], {0: 7, 1: 3}),
        (["--shift-by", "-100"], ["--topic", "{t}:0"], {0: 0, 1: 1}),
        (["--to-datetime", "1970-01-02T00:00:00.000"], ["--all-topics"], {0: 0, 1: 0}),
        (["--to-datetime", "2999-01-01T00:00:00.000Z"], ["--all-topics"], {0: SIZES[0], 1: SIZES[1]}),  # none that late: the log end, warned
    ],
)
def test_execute_commits_the_new_offsets(broker, admin, filled, scenario, scope, expected):
    group = new_group(admin, {(filled, 0): 5, (filled, 1): 1})
    args = [a.format(t=filled) for a in scope]
    result = groups_tool(broker, "--group", group, "--reset-offsets", *scenario, *args, "--execute")
    assert result.returncode == 0, result.stderr
    committed = admin.list_consumer_group_offsets(group)
    assert committed == {(filled, p): o for p, o in expected.items()}
    printed = reset_rows(result.stdout)
    assert all(committed[(t, p)] == o for (_, t, p), o in printed.items()) and printed


def test_reset_of_a_new_group_commits_its_first_offsets(broker, admin, filled):
    """A group nobody has used yet (Dead to its coordinator) may be reset,
    as in Kafka: its offsets are committed."""
    group = f"reset-new-{uuid.uuid4().hex[:8]}"
    result = groups_tool(broker, "--group", group, "--reset-offsets", "--to-latest", "--topic", f"{filled}:0", "--execute")
    assert result.returncode == 0, result.stderr
    assert admin.list_consumer_group_offsets(group) == {(filled, 0): SIZES[0]}


def test_reset_is_refused_while_a_member_is_active_and_describe_shows_it(broker, admin, filled):
    """A kclient.Consumer in the group: ``--describe`` shows its member id,
    host and client id; ``--reset-offsets --execute`` and ``--delete`` are
    refused (status 1) and change nothing; once it left, both work."""
    from kclient import Consumer

    group = new_group(admin, {(filled, 0): 2, (filled, 1): 2})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "reset-member", "enable.auto.commit": False})
    try:
        consumer.subscribe([filled])
        wait_for(lambda: consumer.poll(200) is not None and len(consumer.assignment()) == 2, "the consumer to own both partitions", timeout=60)
        [member] = admin.describe_consumer_groups([group])[group].members
        result = groups_tool(broker, "--describe", "--group", group)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        rows = sorted(line.split() for line in lines[1:])
        assert rows == [
            [group, filled, "0", "2", str(SIZES[0]), str(SIZES[0] - 2), member.member_id, member.client_host, "reset-member"],
            [group, filled, "1", "2", str(SIZES[1]), str(SIZES[1] - 2), member.member_id, member.client_host, "reset-member"],
        ]
        result = groups_tool(broker, "--group", group, "--reset-offsets", "--to-earliest", "--all-topics", "--execute")
        assert result.returncode == 1
        assert f"Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable." in result.stderr
        assert admin.list_consumer_group_offsets(group) == {(filled, 0): 2, (filled, 1): 2}
        result = groups_tool(broker, "--delete", "--group", group)
        assert result.returncode == 1 and "GroupNotEmptyError" in result.stderr, result.stderr
        assert type(admin.delete_consumer_groups([group])[group]) is GroupNotEmptyError
    finally:
        consumer.close()
    wait_for(lambda: admin.describe_consumer_groups([group])[group].state == "Empty", "the group to be empty", timeout=60)
    result = groups_tool(broker, "--group", group, "--reset-offsets", "--to-earliest", "--all-topics", "--execute")
    assert result.returncode == 0, result.stderr
    assert admin.list_consumer_group_offsets(group) == {(filled, 0): 0, (filled, 1): 0}
    result = groups_tool(broker, "--delete", "--group", group)
    assert result.returncode == 0 and f"Deletion of requested consumer groups ('{group}') was successful." in result.stdout
    result = groups_tool(broker, "--describe", "--group", group)
    assert result.returncode == 1 and result.stderr.strip().endswith(f"Consumer group '{group}' does not exist."), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- --all-groups, --delete, exit statuses


def test_all_groups_describe_list_and_delete(broker, admin, filled):
    first = new_group(admin, {(filled, 0): 1})
    second = new_group(admin, {(filled, 1): 2})
    result = groups_tool(broker, "--describe", "--all-groups")
    assert result.returncode == 0, result.stderr
    described = {(cells[0], cells[2]): cells[3] for cells in (line.split() for line in result.stdout.splitlines()) if cells and cells[1] == filled}
    assert described[(first, "0")] == "1" and described[(second, "1")] == "2"
    assert f"Consumer group '{first}' has no active members." in result.stderr
    listed = groups_tool(broker, "--list", "--all-groups")
    assert listed.returncode == 0 and {first, second} <= set(listed.stdout.split())
    missing = f"no-such-{uuid.uuid4().hex[:8]}"
    result = groups_tool(broker, "--delete", "--group", first, "--group", missing)
    assert result.returncode == 1
    assert f"These consumer groups were deleted successfully: '{first}'" in result.stdout
    assert f"Group '{missing}' could not be deleted due to: Consumer group '{missing}' does not exist." in result.stderr
    assert admin.list_consumer_group_offsets(first) == {}
    assert admin.list_consumer_group_offsets(second) == {(filled, 1): 2}
    assert groups_tool(broker, "--delete", "--group", second).returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--describe"], "--describe needs --group or --all-groups"),
        (["--describe", "--group", "g", "--all-groups"], "cannot be given together"),
        (["--reset-offsets", "--group", "g", "--all-topics"], "requires exactly one of the following scenarios"),
        (["--reset-offsets", "--group", "g", "--to-earliest"], "One of the reset scopes should be defined"),
        (["--reset-offsets", "--group", "g", "--to-earliest", "--all-topics", "--execute", "--dry-run"], "--execute and --dry-run"),
        (["--reset-offsets", "--group", "g", "--to-datetime", "yesterday", "--all-topics"], "--to-datetime 'yesterday'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(broker, args, message):
    result = groups_tool(broker, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_reset_and_delete_need_bootstrap_server():
    result = kc("consumer-groups", "--zookeeper", "127.0.0.1:1", "--delete", "--group", "g")
    assert result.returncode == 2 and "--bootstrap-server" in result.stderr


# ---------------------------------------------------------------- parsing


@pytest.mark.unit
def test_topic_scopes_and_datetimes_parse_as_kafka_reads_them():
    assert parse_topic_partitions(["a", "b:0,2", "c:1"]) == [("a", None), ("b", [0, 2]), ("c", [1])]
    for bad in ("", ":0", "t:", "t:x"):
        with pytest.raises(ConfigError):
            parse_topic_partitions([bad])
    assert parse_datetime("2024-03-01T12:00:00.000Z") == 1709294400000
    assert parse_datetime("2024-03-01T14:00:00.000+02:00") == 1709294400000
    local = datetime.datetime(2024, 3, 1, 12, 0, 0).astimezone()
    assert parse_datetime("2024-03-01T12:00:00.000") == int(local.timestamp() * 1000)
    for bad in ("2024-03-01", "noon", "2024-13-01T00:00:00.000"):
        with pytest.raises(ConfigError):
            parse_datetime(bad)
    assert ResetScenario("earliest").value == 0


@pytest.mark.unit
def test_reset_table_has_kafkas_columns():
    text = format_reset_rows([("g", "t", 0, 5), ("g", "topic", 10, 0)])
    lines = text.splitlines()
    assert lines[0] == f"{'GROUP':<15} {'TOPIC':<15} {'PARTITION':<10} NEW-OFFSET"
    wide = format_reset_rows([("g" * 20, "t", 0, 5)]).splitlines()
    assert wide[0].index("TOPIC") == 21 and wide[1].split() == ["g" * 20, "t", "0", "5"]
    assert lines[2].split() == ["g", "topic", "10", "0"] and lines[1].index("0") == lines[0].index("PARTITION")
