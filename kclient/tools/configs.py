"""``kclient configs``: SCRAM users (and other user configs) in ZooKeeper,
the way Kafka's ``kafka-configs.sh --zookeeper`` does (KIP-84)::

    kclient configs --zookeeper 127.0.0.1:2181 --alter \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]' \\
        --entity-type users --entity-name alice
    kclient configs --zookeeper 127.0.0.1:2181 --alter --delete-config 'SCRAM-SHA-512' \\
        --entity-type users --entity-name alice
    kclient configs --zookeeper 127.0.0.1:2181 --describe --entity-type users --entity-name alice

With ``--zookeeper``, only ``--entity-type users`` is supported.
Passwords are stored as salted credentials (never in clear); ``--describe``
prints each SCRAM mechanism with its iteration count only.

Topic and broker configs go through a broker, as ``kafka-configs.sh
--bootstrap-server`` does (DescribeConfigs, IncrementalAlterConfigs;
KIP-133, KIP-339), and print what it prints::

    kclient configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name events \\
        --alter --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms
    kclient configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name events --describe [--all]
    kclient configs --bootstrap-server 127.0.0.1:9092 --entity-type brokers --entity-name 1 --describe

Client quotas (KIP-13, KIP-55, KIP-612) of users, client ids and IP
addresses go through a broker too (AlterClientQuotas, DescribeClientQuotas;
KIP-546), with ``--entity-default`` for the default entity::

    kclient configs --bootstrap-server 127.0.0.1:9092 --entity-type users --entity-name alice \
        --alter --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    kclient configs --bootstrap-server 127.0.0.1:9092 --entity-type clients --entity-default --describe

Errors are one line, status 2 for bad arguments.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Protocol

from kclient.errors import ConfigError
from kclient.security.sasl import SCRAM_MECHANISMS, SCRAM_MIN_ITERATIONS, ScramCredential
from kclient.tools.arguments import add_actions, add_cluster_choice
from kclient.tools.configs_quotas import QUOTA_ENTITY_TYPES, EntityOrder, quota_configs

if TYPE_CHECKING:
    from kclient.client.admin import AdminClient
    from kclient.client.admin_configs import ConfigEntry

__all__ = ["ConfigsArguments", "parse_add_config", "register"]


class ConfigsArguments(Protocol):
    """The ``configs`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    bootstrap_server: str | None
    zookeeper: str | None
    alter: bool
    describe: bool
    add_config: str | None
    delete_config: str | None
    entity_type: str
    entity_name: str | None
    entity_default: bool
    all: bool
    command_config: str | None


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside ``[...]``."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_add_config(text: str) -> tuple[dict[str, str], dict[str, int]]:
    """Parse ``--add-config`` as kafka-configs.sh does: ``k=v,k2=[a=1,b=2]``.

    Args:
        text: The argument.

    Returns:
        ``(config name -> value, SCRAM mechanism -> iterations)``; a SCRAM
        entry's value is its password.

    Raises:
        ConfigError: an entry without ``=``, a SCRAM entry without
            ``password``, a bad iteration count.
    """
    added: dict[str, str] = {}
    iterations: dict[str, int] = {}
    for entry in _split_top_level(text):
        key, sep, value = entry.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ConfigError(f"Invalid entity config: {entry.split('=')[0]!r} is not key=value (--add-config)")
        if key in SCRAM_MECHANISMS:
            if value.startswith("[") and value.endswith("]"):
                fields = {}
                for item in value[1:-1].split(","):
                    k, s, v = item.partition("=")
                    if not s:
                        raise ConfigError(f"Invalid {key} config: expected [password=...,iterations=...]")
                    fields[k.strip()] = v
            else:
                fields = {"password": value}
            if not fields.get("password"):
                raise ConfigError(f"Invalid {key} config: password is missing")
            if "iterations" in fields:
                if not fields["iterations"].strip().isdigit():
                    raise ConfigError(f"Invalid {key} config: iterations must be a number")
                iterations[key] = int(fields["iterations"])
            else:
                iterations[key] = SCRAM_MIN_ITERATIONS
            added[key] = fields["password"]
        else:
            added[key] = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    return added, iterations


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``configs`` subcommand."""
    p = subparsers.add_parser(
        "configs",
        help="add, delete or describe topic and broker configs, or SCRAM users in ZooKeeper (like kafka-configs.sh)",
        description=(
            "Alter or describe topic and broker configs through a broker (--bootstrap-server), "
            "or user configs (SCRAM credentials, KIP-84) in ZooKeeper (--zookeeper), as kafka-configs.sh does."
        ),
    )
    add_cluster_choice(p, bootstrap_help="a broker (topics, brokers)", zookeeper_help="the broker's zookeeper.connect (users)")
    add_actions(p, {"alter": "add or delete configs", "describe": "show an entity's configs"})
    p.add_argument("--add-config", metavar="K=V,...", help="e.g. 'retention.ms=60000' or 'SCRAM-SHA-256=[password=alice-secret]'")
    p.add_argument("--delete-config", metavar="K,...", help="e.g. 'retention.ms' or 'SCRAM-SHA-512'")
    p.add_argument(
        "--entity-type",
        required=True,
        action=EntityOrder,
        help="topics, brokers, users, clients or ips (--bootstrap-server; users, clients, ips: quotas, "
        "'--entity-type users --entity-name alice --entity-type clients --entity-name app' for a user's client); users (--zookeeper)",
    )
    p.add_argument("--entity-name", action=EntityOrder, help="the topic, the broker id, the user name, the client id or the IP address")
    p.add_argument("--entity-default", action=EntityOrder, nargs=0, default=False, help="(brokers, users, clients, ips) the default entity")
    p.add_argument("--all", action="store_true", help="(--describe) every config, not only the overrides")
    p.add_argument("--command-config", help="a client .properties file (security settings)")
    p.set_defaults(func=_cmd_configs)


def _describe_value(key: str, value: str) -> str:
    if key in SCRAM_MECHANISMS:
        try:
            return f"iterations={ScramCredential.from_string(value).iterations}"
        except ConfigError:
            return "<malformed credential>"
    return value


#: ``--entity-type`` -> (`ConfigResource` type, the word Kafka prints,
#: the source of the overrides ``--describe`` shows without ``--all``).
_ENTITY_TYPES = {"topics": ("topic", "topic", "DYNAMIC_TOPIC_CONFIG"), "brokers": ("broker", "broker", "DYNAMIC_BROKER_CONFIG")}


def _describe_entry(entry: ConfigEntry) -> str:
    """One config as kafka-configs.sh prints it."""
    synonyms = ", ".join(f"{y.source}:{y.name}={y.value}" for y in entry.synonyms)
    return f"  {entry.name}={entry.value} sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"


def _changes(args: ConfigsArguments) -> tuple[dict[str, str], dict[str, int], list[str]]:
    """``--add-config`` and ``--delete-config`` of an ``--alter``.

    Returns:
        The configs to set, the SCRAM iterations asked for, the configs to
        delete.

    Raises:
        ConfigError: neither option, or a malformed one.
    """
    if not args.add_config and not args.delete_config:
        raise ConfigError("--alter needs --add-config or --delete-config")
    added, iterations = parse_add_config(args.add_config) if args.add_config else ({}, {})
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    return added, iterations, deleted


def _broker_entity(args: ConfigsArguments) -> tuple[str, str, str, bool]:
    """What ``--entity-type`` / ``--entity-name`` / ``--entity-default``
    name with ``--bootstrap-server``.

    Returns:
        The `ConfigResource` type, the word Kafka prints, the source of the
        overrides, and whether it is the brokers' cluster-wide default.

    Raises:
        ConfigError: an unknown type or a bad combination.
    """
    if args.entity_type not in _ENTITY_TYPES:
        raise ConfigError(
            f"Invalid --entity-type {args.entity_type!r} with --bootstrap-server: kclient configs supports topics and brokers,"
            " and the quota entities users, clients and ips (SCRAM users with --zookeeper)"
        )
    resource_type, word, dynamic = _ENTITY_TYPES[args.entity_type]
    default = resource_type == "broker" and args.entity_default
    if default and args.entity_name:
        raise ConfigError("--entity-name and --entity-default cannot be given together")
    if args.entity_default and resource_type != "broker":
        raise ConfigError("--entity-default is for --entity-type brokers")
    if args.alter and not (args.entity_name or default):
        raise ConfigError("--alter needs --entity-name (or --entity-default for brokers)")
    return resource_type, word, dynamic, default


def _alter_broker_configs(admin: AdminClient, args: ConfigsArguments, resource_type: str, word: str, default: bool) -> None:
    """``--alter`` with ``--bootstrap-server`` (IncrementalAlterConfigs, KIP-339)."""
    from kclient.client.admin import AlterConfigOp, ConfigResource

    added, _, deleted = _changes(args)
    ops = [AlterConfigOp(k, v) for k, v in added.items()] + [AlterConfigOp(k, op="delete") for k in deleted]
    resource = ConfigResource(resource_type, "" if default else args.entity_name)
    admin.incremental_alter_configs({resource: ops})
    print("Completed updating default config for brokers in the cluster." if default else f"Completed updating config for {word} {args.entity_name}.")


def _entity_names(admin: AdminClient, args: ConfigsArguments, resource_type: str, default: bool) -> list[str]:
    """The entities ``--describe`` shows: the one named, the brokers'
    default (``""``), else every topic or broker."""
    if default:
        return [""]
    if args.entity_name:
        return [args.entity_name]
    if resource_type == "topic":
        return list(admin.list_topics())
    return [str(b.node_id) for b in admin.describe_cluster().brokers]


def _describe_broker_configs(admin: AdminClient, args: ConfigsArguments, resource_type: str, word: str, dynamic: str, default: bool) -> None:
    """``--describe`` with ``--bootstrap-server`` (DescribeConfigs with
    synonyms, KIP-226): the overrides, or every config with ``--all``."""
    from kclient.client.admin import ConfigResource

    resources = [ConfigResource(resource_type, n) for n in _entity_names(admin, args, resource_type, default)]
    described = admin.describe_configs(resources, include_synonyms=True)
    shown = "DYNAMIC_DEFAULT_BROKER_CONFIG" if default else dynamic
    header = "All configs" if args.all else "Dynamic configs"
    for resource in resources:
        entries = [e for e in described[resource].values() if args.all or e.source == shown]
        print("Default configs for brokers in the cluster are:" if default else f"{header} for {word} {resource.name} are:")
        for entry in sorted(entries, key=lambda e: e.name):
            print(_describe_entry(entry))


def _cmd_broker_configs(args: ConfigsArguments) -> int:
    from kclient.client.admin import AdminClient
    from kclient.config.admin import AdminConfig
    from kclient.tools.common import client_properties

    resource_type, word, dynamic, default = _broker_entity(args)
    props = client_properties(args.command_config, [], "--command-config", keep=AdminConfig.select_known)
    with AdminClient({**props, "bootstrap.servers": args.bootstrap_server, "client.id": "kclient-configs"}) as admin:
        if args.alter:
            _alter_broker_configs(admin, args, resource_type, word, default)
        else:
            _describe_broker_configs(admin, args, resource_type, word, dynamic, default)
    return 0


def _cmd_configs(args: ConfigsArguments) -> int:
    from kclient.zk.users import alter_user_config, describe_user_config

    if args.bootstrap_server and args.entity_type in QUOTA_ENTITY_TYPES:
        return quota_configs(args, _changes)
    if args.bootstrap_server:
        return _cmd_broker_configs(args)
    if args.zookeeper is None:  # argparse requires one of them: an empty --bootstrap-server
        raise ConfigError("--bootstrap-server: no broker given")
    if args.entity_type != "users":
        raise ConfigError(f"Invalid --entity-type {args.entity_type!r} with --zookeeper: kclient configs supports users only (topics and brokers with --bootstrap-server)")
    if not args.entity_name:
        raise ConfigError("Missing required argument --entity-name")
    name = args.entity_name
    if args.describe:
        config = describe_user_config(args.zookeeper, name)
        shown = ",".join(f"{k}={_describe_value(k, v)}" for k, v in sorted(config.items()))
        print(f"Configs for user-principal '{name}' are {shown}")
        return 0
    added, iterations, deleted = _changes(args)
    alter_user_config(args.zookeeper, name, added, deleted, iterations=iterations)
    print(f"Completed updating config for user {name}.")
    return 0
