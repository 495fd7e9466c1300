"""``kclient configs``: SCRAM users (and other user configs) in ZooKeeper,
the way Kafka's ``kafka-configs.sh --zookeeper`` does (KIP-84)::

    kclient configs --zookeeper 127.0.0.1:2181 --alter \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]' \\
        --entity-type users --entity-name alice
    kclient configs --zookeeper 127.0.0.1:2181 --alter --delete-config 'SCRAM-SHA-512' \\
        --entity-type users --entity-name alice
    kclient configs --zookeeper 127.0.0.1:2181 --describe --entity-type users --entity-name alice

Only ``--entity-type users`` is supported. Passwords are stored as salted
credentials (never in clear); ``--describe`` prints each SCRAM mechanism
with its iteration count only. Errors are one line, status 2 for bad
arguments.
"""

from __future__ import annotations

import argparse

from kclient.errors import ConfigError
from kclient.security.sasl import SCRAM_MECHANISMS, SCRAM_MIN_ITERATIONS, ScramCredential

__all__ = ["parse_add_config", "register"]


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


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``configs`` subcommand."""
    p = subparsers.add_parser(
        "configs",
        help="add, delete or describe SCRAM users in ZooKeeper (like kafka-configs.sh)",
        description="Alter or describe user configs (SCRAM credentials, KIP-84) in ZooKeeper, as kafka-configs.sh does.",
    )
    p.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]", help="the broker's zookeeper.connect")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="add or delete configs")
    action.add_argument("--describe", action="store_true", help="show a user's configs")
    p.add_argument("--add-config", metavar="K=V,...", help="e.g. 'SCRAM-SHA-256=[password=alice-secret]'")
    p.add_argument("--delete-config", metavar="K,...", help="e.g. 'SCRAM-SHA-512'")
    p.add_argument("--entity-type", required=True, help="users (the only type kclient supports)")
    p.add_argument("--entity-name", help="the user name")
    p.set_defaults(func=_cmd_configs)


def _describe_value(key: str, value: str) -> str:
    if key in SCRAM_MECHANISMS:
        try:
            return f"iterations={ScramCredential.from_string(value).iterations}"
        except ConfigError:
            return "<malformed credential>"
    return value


def _cmd_configs(args: argparse.Namespace) -> int:
    from kclient.zk.users import alter_user_config, describe_user_config

    if args.entity_type != "users":
        raise ConfigError(f"Invalid --entity-type {args.entity_type!r}: kclient configs supports users only")
    if not args.entity_name:
        raise ConfigError("Missing required argument --entity-name")
    name = args.entity_name
    if args.describe:
        config = describe_user_config(args.zookeeper, name)
        shown = ",".join(f"{k}={_describe_value(k, v)}" for k, v in sorted(config.items()))
        print(f"Configs for user-principal '{name}' are {shown}")
        return 0
    if not args.add_config and not args.delete_config:
        raise ConfigError("--alter needs --add-config or --delete-config")
    added, iterations = parse_add_config(args.add_config) if args.add_config else ({}, {})
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    alter_user_config(args.zookeeper, name, added, deleted, iterations=iterations)
    print(f"Completed updating config for user {name}.")
    return 0
