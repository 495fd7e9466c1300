"""The option groups the ``topics``, ``configs`` and ``consumer-groups``
subcommands share (`kclient.tools.arguments`): exactly one of
``--bootstrap-server`` / ``--zookeeper`` and exactly one action."""

from __future__ import annotations

import argparse

import pytest

from kclient.tools.arguments import add_actions, add_cluster_choice

pytestmark = pytest.mark.unit


def _parser(**choice):
    p = argparse.ArgumentParser(prog="t")
    add_cluster_choice(p, bootstrap_help="a broker", zookeeper_help="zookeeper.connect", **choice)
    add_actions(p, {"list": "list them", "describe": "describe one"})
    return p


def test_one_place_and_one_action():
    args = _parser().parse_args(["--bootstrap-server", "h:1", "--describe"])
    assert (args.bootstrap_server, args.zookeeper, args.list, args.describe) == ("h:1", None, False, True)
    args = _parser().parse_args(["--zookeeper", "z:2/c", "--list"])
    assert (args.bootstrap_server, args.zookeeper, args.list, args.describe) == (None, "z:2/c", True, False)


@pytest.mark.parametrize(
    "argv",
    [
        ["--list"],
        ["--bootstrap-server", "h:1"],
        ["--bootstrap-server", "h:1", "--zookeeper", "z:2", "--list"],
        ["--bootstrap-server", "h:1", "--list", "--describe"],
    ],
)
def test_exactly_one_of_each_group(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(argv)
    assert exc.value.code == 2
    assert "t: error:" in capsys.readouterr().err


def test_alias_and_order():
    p = _parser(bootstrap_flags=("--bootstrap-server", "--broker-list"), bootstrap_metavar="HOST:PORT")
    assert p.parse_args(["--broker-list", "h:1", "--list"]).bootstrap_server == "h:1"
    assert "(--bootstrap-server HOST:PORT | --zookeeper HOST:PORT[/CHROOT])" in p.format_usage()
    zk_first = _parser(zookeeper_first=True).format_usage()
    assert "(--zookeeper HOST:PORT[/CHROOT] | --bootstrap-server HOST:PORT[,...])" in zk_first
    assert "(--list | --describe)" in zk_first
