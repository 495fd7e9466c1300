"""``kclient acls`` (kafka-acls.sh's flags), run as a subprocess against the
bundled broker and Apache Kafka 4.x with an ACL authorizer
(`helpers.acl_clients`), next to Kafka's own ``kafka-acls`` tool: what one adds
the other lists, and both list the same on both brokers (ordering
normalised: Kafka prints in hash order).

Argument errors are checked in-process (`kclient.cli.main`, no broker).
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

import pytest
from helpers.acl_clients import sasl_client, settled

from kclient.acl import AclBindingFilter
from kclient.cli import main
from kclient.client.admin import AdminClient
from kclient.testing.kafka import kafka_tool

_RESOURCE = re.compile(r"^(?:Current|Adding) ACLs for resource `(ResourcePattern\(.*\))`: ?$")
_ENTRY = re.compile(r"^ ?\t(\(principal=.*, host=.*, operation=[A-Z_]+, permissionType=(?:ALLOW|DENY)\)) ?$")


@pytest.fixture(params=["acl_bundled", pytest.param("acl_kafka", marks=pytest.mark.apache_kafka)])
def broker(request):
    return request.getfixturevalue(request.param)


@pytest.fixture
def prefix() -> str:
    return f"cli-{uuid.uuid4().hex[:8]}-"


def kclient_acls(broker, *args: str, input: str = "", check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "kclient", "acls", "--bootstrap-server", broker.bootstrap, *args], input=input, capture_output=True, text=True, timeout=120
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def kafka_acls(broker, *args: str) -> str:
    return kafka_tool("kafka-acls", "--bootstrap-server", broker.bootstrap, *args).stdout


def blocks(text: str, prefix: str = "") -> dict[str, frozenset[str]]:
    """The resource blocks of kafka-acls' output: ``{ResourcePattern(...):
    {entry, ...}}`` (only resources whose name starts with ``prefix``).
    Every line must be a header, an entry or empty."""
    out: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        if m := _RESOURCE.match(line):
            current = m[1]
            out.setdefault(current, set())
        elif m := _ENTRY.match(line):
            assert current is not None, line
            out[current].add(m[1])
        else:
            assert not line.strip() or line.startswith(("ACLs for principal", "Acl ")), f"unexpected line {line!r} in:\n{text}"
    return {k: frozenset(v) for k, v in out.items() if re.search(r"name=" + re.escape(prefix), k)}


_PATTERN = re.compile(r"ResourcePattern\(resourceType=(\w+), name=(.*), patternType=(\w+)\)")
_FIELDS = re.compile(r"\(principal=(.*), host=(.*), operation=(\w+), permissionType=(\w+)\)")


def settle(broker, prefix: str, expected: dict[str, frozenset[str]]) -> None:
    """Wait until the broker describes the bindings of ``expected`` (blocks
    as `blocks` returns them), and only those, under ``prefix``."""
    rows = set()
    for p, entries in expected.items():
        resource = _PATTERN.fullmatch(p)
        assert resource is not None, p
        for e in entries:
            fields = _FIELDS.fullmatch(e)
            assert fields is not None, e
            rows.add((*resource.groups(), *fields.groups()))
    settled(broker, prefix, rows)


def entry(principal: str, operation: str, permission: str = "ALLOW", host: str = "*") -> str:
    return f"(principal={principal}, host={host}, operation={operation}, permissionType={permission})"


def pattern(resource_type: str, name: str, pattern_type: str = "LITERAL") -> str:
    return f"ResourcePattern(resourceType={resource_type}, name={name}, patternType={pattern_type})"


def test_add_prints_and_lists_as_kafka_acls_does(broker, prefix):
    topic = prefix + "orders"
    added = kclient_acls(broker, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "write", "--topic", topic).stdout
    expected = {pattern("TOPIC", topic): frozenset({entry("User:alice", "READ"), entry("User:alice", "WRITE")})}
    assert blocks(added, prefix) == expected
    assert added.startswith(f"Adding ACLs for resource `{pattern('TOPIC', topic)}`: \n \t")
    settle(broker, prefix, expected)
    # Both tools list it alike, on both brokers.
    assert blocks(kclient_acls(broker, "--list", "--topic", topic).stdout, prefix) == expected
    assert blocks(kafka_acls(broker, "--list", "--topic", topic), prefix) == expected
    # Adding it again: kafka-acls' "already exists" line, nothing created.
    again = kclient_acls(broker, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic).stdout
    assert again.strip() == f"Acl (pattern={pattern('TOPIC', topic)}, entry={entry('User:alice', 'READ')}) already exists."
    kclient_acls(broker, "--remove", "--force", "--topic", topic)
    settle(broker, prefix, {})
    assert blocks(kafka_acls(broker, "--list"), prefix) == {}


def test_producer_and_consumer_expand_as_kafka_acls_does(broker, prefix):
    topic, group, txn = prefix + "t", prefix + "g", prefix + "tx"
    common = ("--allow-principal", "User:alice", "--topic", topic)
    kclient_acls(broker, "--add", "--producer", "--idempotent", "--transactional-id", txn, *common)
    kclient_acls(broker, "--add", "--consumer", "--group", group, *common)
    expected = {
        pattern("TOPIC", topic): frozenset(entry("User:alice", op) for op in ("READ", "WRITE", "CREATE", "DESCRIBE")),
        pattern("TRANSACTIONAL_ID", txn): frozenset(entry("User:alice", op) for op in ("WRITE", "DESCRIBE")),
        pattern("GROUP", group): frozenset({entry("User:alice", "READ")}),
    }
    settle(broker, prefix, expected)
    mine = blocks(kclient_acls(broker, "--list").stdout, prefix)
    assert mine == expected
    cluster = blocks(kclient_acls(broker, "--list", "--cluster").stdout)
    assert entry("User:alice", "IDEMPOTENT_WRITE") in cluster[pattern("CLUSTER", "kafka-cluster")]
    assert blocks(kafka_acls(broker, "--list"), prefix) == mine
    # --remove with the same role flags removes exactly those entries.
    kclient_acls(broker, "--remove", "--force", "--consumer", "--group", group, *common)
    left_expected = {
        pattern("TOPIC", topic): frozenset(entry("User:alice", op) for op in ("WRITE", "CREATE")),
        pattern("TRANSACTIONAL_ID", txn): expected[pattern("TRANSACTIONAL_ID", txn)],
    }
    settle(broker, prefix, left_expected)
    left = blocks(kafka_acls(broker, "--list"), prefix)
    assert left[pattern("TOPIC", topic)] == frozenset(entry("User:alice", op) for op in ("WRITE", "CREATE"))
    assert pattern("GROUP", group) not in left
    kclient_acls(broker, "--remove", "--force", "--topic", topic, "--transactional-id", txn)
    kclient_acls(broker, "--remove", "--force", "--cluster", "--allow-principal", "User:alice", "--operation", "IdempotentWrite")
    settle(broker, prefix, {})
    assert blocks(kafka_acls(broker, "--list"), prefix) == {}


def test_kafka_acls_adds_what_kclient_lists_with_patterns_hosts_and_deny(broker, prefix):
    kafka_acls(broker, "--add", "--allow-principal", "User:bob", "--operation", "Describe", "--topic", prefix, "--resource-pattern-type", "prefixed")
    kafka_acls(broker, "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.9", "--operation", "All", "--topic", prefix + "secret")
    kafka_acls(broker, "--add", "--allow-principal", "User:alice", "--allow-host", "127.0.0.1", "--operation", "Delete", "--group", prefix + "g")
    expected = {
        pattern("TOPIC", prefix, "PREFIXED"): frozenset({entry("User:bob", "DESCRIBE")}),
        pattern("TOPIC", prefix + "secret"): frozenset({entry("User:bob", "ALL", "DENY", "10.0.0.9")}),
        pattern("GROUP", prefix + "g"): frozenset({entry("User:alice", "DELETE", host="127.0.0.1")}),
    }
    settle(broker, prefix, expected)
    assert blocks(kclient_acls(broker, "--list").stdout, prefix) == expected
    # match: every pattern that applies to the topic named.
    matched = expected.copy()
    del matched[pattern("GROUP", prefix + "g")]
    match = ("--list", "--topic", prefix + "secret", "--resource-pattern-type", "match")
    assert blocks(kclient_acls(broker, *match).stdout, prefix) == matched
    assert blocks(kafka_acls(broker, *match), prefix) == matched
    # --principal: only bob's entries.
    by_bob = kclient_acls(broker, "--list", "--principal", "User:bob").stdout
    assert by_bob.startswith("ACLs for principal `User:bob`\n")
    assert blocks(by_bob, prefix) == {k: v for k, v in expected.items() if "GROUP" not in k}
    kclient_acls(broker, "--remove", "--force", "--topic", prefix, "--topic", prefix + "secret", "--group", prefix + "g", "--resource-pattern-type", "any")
    settle(broker, prefix, {})
    assert blocks(kafka_acls(broker, "--list"), prefix) == {}


def test_remove_asks_unless_forced(broker, prefix):
    topic = prefix + "t"
    kclient_acls(broker, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    settle(broker, prefix, {pattern("TOPIC", topic): frozenset({entry("User:alice", "READ")})})
    kept = kclient_acls(broker, "--remove", "--topic", topic, input="n\n")
    assert f"Are you sure you want to delete all ACLs for resource filter `{pattern('TOPIC', topic)}`? (y/n)" in kept.stdout
    assert blocks(kclient_acls(broker, "--list", "--topic", topic).stdout, prefix) != {}
    kclient_acls(broker, "--remove", "--topic", topic, input="y\n")
    settle(broker, prefix, {})
    assert blocks(kclient_acls(broker, "--list", "--topic", topic).stdout, prefix) == {}


def test_a_user_without_cluster_rights_is_refused(broker, tmp_path):
    config = tmp_path / "alice.properties"
    props = sasl_client(broker, "alice")
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items() if k != "bootstrap.servers"))
    result = subprocess.run(
        [sys.executable, "-m", "kclient", "acls", "--bootstrap-server", props["bootstrap.servers"], "--command-config", str(config), "--list"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "ClusterAuthorizationFailedError" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.apache_kafka
def test_kafka_acls_lists_the_same_on_both_brokers(acl_bundled, acl_kafka, prefix):
    """Kafka's own tool, the same commands against the bundled broker and
    Apache Kafka: the same listings."""
    commands = [
        ("--add", "--allow-principal", "User:alice", "--producer", "--topic", prefix + "p", "--idempotent"),
        ("--add", "--allow-principal", "User:bob", "--consumer", "--topic", prefix + "c", "--group", prefix + "g"),
        ("--add", "--deny-principal", "User:bob", "--operation", "Write", "--topic", prefix, "--resource-pattern-type", "prefixed"),
        ("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Create", "--topic", prefix + "p"),
    ]
    expected = {
        pattern("TOPIC", prefix + "p"): frozenset(entry("User:alice", op) for op in ("WRITE", "DESCRIBE")),
        pattern("TOPIC", prefix + "c"): frozenset(entry("User:bob", op) for op in ("READ", "DESCRIBE")),
        pattern("GROUP", prefix + "g"): frozenset({entry("User:bob", "READ")}),
        pattern("TOPIC", prefix, "PREFIXED"): frozenset({entry("User:bob", "WRITE", "DENY")}),
    }
    listings = []
    for broker in (acl_bundled, acl_kafka):
        for command in commands:
            kafka_acls(broker, *command)
        settle(broker, prefix, expected)
        listing = blocks(kafka_acls(broker, "--list"), prefix)
        listing.update(blocks(kafka_acls(broker, "--list", "--cluster")))
        listings.append(listing)
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.delete_acls([AclBindingFilter()])
        settle(broker, prefix, {})
    assert listings[0] == listings[1]
    assert listings[0][pattern("TOPIC", prefix, "PREFIXED")] == frozenset({entry("User:bob", "WRITE", "DENY")})


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
        (["--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
        (["--add", "--allow-principal", "User:a", "--cluster", "--operation", "Read"], "ResourceType CLUSTER only supports operations"),
        (["--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"], "--operation 'Fly': not an operation"),
        (["--add", "--allow-principal", "alice", "--topic", "t"], "principalType:principalName"),
        (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"], "'MATCH' is not valid when adding acls"),
        (["--add", "--allow-principal", "User:a", "--producer"], "With --producer you must specify a --topic"),
        (["--add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"], "--idempotent option is only available if --producer"),
        (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "With --consumer you must specify a --topic and a --group"),
        (["--add", "--allow-principal", "User:a", "--producer", "--topic", "t", "--operation", "Read"], "do not take --operation"),
        (["--remove", "--principal", "User:a", "--topic", "t"], "--principal option is only available if --list"),
        (["--list", "--allow-principal", "User:a"], "--list does not take"),
    ],
)
def test_bad_arguments_exit_2_before_connecting(args, message, caplog):
    assert main(["acls", "--bootstrap-server", "127.0.0.1:1", *args]) == 2
    [record] = [r for r in caplog.records if r.name == "kclient.cli"]
    assert message in record.getMessage()


@pytest.mark.unit
def test_two_actions_are_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["acls", "--bootstrap-server", "127.0.0.1:1", "--add", "--list"])
    assert exc.value.code == 2


def test_a_broker_without_an_authorizer_is_one_error_line(zk_broker):
    result = kclient_acls(zk_broker, "--list", check=False)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("kclient acls: error: SecurityDisabledError") and result.stderr.count("\n") == 1, result.stderr
