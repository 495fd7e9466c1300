"""``kclient configs --entity-type users|clients|ips``: client quotas
through a broker (AlterClientQuotas, DescribeClientQuotas; KIP-546), with
``kafka-configs.sh``'s flags and output::

    kclient configs --bootstrap-server 127.0.0.1:9092 --entity-type users --entity-name alice \\
        --alter --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    kclient configs --bootstrap-server 127.0.0.1:9092 --entity-type users --entity-name alice \\
        --entity-type clients --entity-name app --alter --add-config producer_byte_rate=1024
    kclient configs --bootstrap-server 127.0.0.1:9092 --entity-type clients --entity-default --describe

As in ``kafka-configs.sh``, ``--entity-type`` may be given twice (a user's
client id); each ``--entity-name`` or ``--entity-default`` belongs to the
``--entity-type`` before it. A type given without a name describes every
named entity of that type.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kclient.errors import ConfigError

__all__ = ["QUOTA_ENTITY_TYPES", "EntityOrder", "QuotaArguments", "entity_pairs", "quota_configs"]

#: ``--entity-type`` of quota entities -> (entity type, the word Kafka
#: prints in ``--describe``, the word it prints after ``--alter``).
QUOTA_ENTITY_TYPES = {"users": ("user", "user-principal", "user"), "clients": ("client-id", "client-id", "client"), "ips": ("ip", "ip", "ip")}

_WORDS = {kind: word for kind, word, _ in QUOTA_ENTITY_TYPES.values()}

#: Not given: a type with neither ``--entity-name`` nor ``--entity-default``.
_ANY = ""


class EntityOrder(argparse.Action):
    """Stores ``--entity-type`` / ``--entity-name`` / ``--entity-default``
    as usual (the last one given) and also their order in
    ``entity_order``, to pair each name with its type."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        value = True if self.nargs == 0 else values
        setattr(namespace, self.dest, value)
        order = list(getattr(namespace, "entity_order", None) or [])
        order.append((self.dest, value))
        namespace.entity_order = order


class QuotaArguments(Protocol):
    """The ``configs`` arguments quota commands read."""

    bootstrap_server: str | None
    alter: bool
    command_config: str | None


def entity_pairs(order: Sequence[tuple[str, Any]]) -> list[tuple[str, str | None]]:
    """``[(--entity-type, name, None for the default, or "" for none given)]``.

    Raises:
        ConfigError: a name before any type, a type that is not a quota
            entity type, two names for one type.
    """
    pairs: list[list[Any]] = []
    for dest, value in order:
        if dest == "entity_type":
            if value not in QUOTA_ENTITY_TYPES:
                raise ConfigError(f"Invalid --entity-type {value!r} with another entity type: expected users, clients or ips")
            pairs.append([value, _ANY])
            continue
        if not pairs:
            raise ConfigError("--entity-name and --entity-default must follow an --entity-type")
        if pairs[-1][1] != _ANY:
            raise ConfigError(f"only one --entity-name or --entity-default per --entity-type ({pairs[-1][0]})")
        pairs[-1][1] = None if dest == "entity_default" else value
    return [(kind, name) for kind, name in pairs]


def _value(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"Invalid quota value {value!r}: expected a number") from None


def _format(value: float) -> str:
    return repr(float(value))


def _alter(admin: Any, args: Any, pairs: list[tuple[str, str | None]], entity: dict[str, str | None], changes: Callable[[Any], tuple[dict[str, str], dict[str, int], list[str]]]) -> None:
    from kclient.client.admin_quotas import ClientQuotaAlteration
    from kclient.tools.configs_scram import alter_scram_credentials, scram_keys

    if any(name == _ANY for name in entity.values()):
        raise ConfigError("--alter needs --entity-name or --entity-default for each --entity-type")
    added, iterations, deleted = changes(args)
    scram = scram_keys(added) + scram_keys(deleted)
    if scram and (set(entity) != {"user"} or entity["user"] is None):
        raise ConfigError("SCRAM credentials are altered for one named user only (--entity-type users --entity-name ...)")
    ops: dict[str, float | None] = {k: _value(v) for k, v in added.items() if k not in scram}
    ops.update(dict.fromkeys(k for k in deleted if k not in scram))
    if ops or not scram:
        admin.alter_client_quotas([ClientQuotaAlteration(entity, ops)])
    if scram:
        alter_scram_credentials(admin, str(entity["user"]), {k: v for k, v in added.items() if k in scram}, iterations, scram_keys(deleted))
    first_type, first_name = pairs[0]
    short = QUOTA_ENTITY_TYPES[first_type][2]
    print(f"Completed updating default config for {short}s in the cluster." if first_name is None else f"Completed updating config for {short} {first_name}.")


def _describe(admin: Any, pairs: list[tuple[str, str | None]], entity: dict[str, str | None]) -> None:
    from kclient.client.admin_quotas import ClientQuotaFilterComponent
    from kclient.tools.configs_scram import describe_scram_credentials

    components = [
        ClientQuotaFilterComponent.of_entity_type(kind)
        if name == _ANY
        else ClientQuotaFilterComponent.of_default_entity(kind)
        if name is None
        else ClientQuotaFilterComponent.of_entity(kind, name)
        for kind, name in entity.items()
    ]
    for found, values in admin.describe_client_quotas(components, strict=True).items():
        order = {QUOTA_ENTITY_TYPES[t][0]: i for i, (t, _) in enumerate(pairs)}
        parts = sorted(found, key=lambda part: order.get(part[0], 99))
        who = ", ".join(f"the default {_WORDS.get(t, t)}" if n is None else f"{_WORDS.get(t, t)} '{n}'" for t, n in parts)
        shown = ", ".join(f"{k}={_format(v)}" for k, v in sorted(values.items()))
        print(f"Quota configs for {who} are {shown}")
    # Kafka's ConfigCommand: SCRAM credentials of users only, never of a default user.
    user = entity.get("user")
    if set(entity) == {"user"} and user is not None:
        for line in describe_scram_credentials(admin, [] if user == _ANY else [user]):
            print(line)


def quota_configs(args: Any, changes: Callable[[Any], tuple[dict[str, str], dict[str, int], list[str]]]) -> int:
    """Run ``--alter`` or ``--describe`` on quota entities, and on users'
    SCRAM credentials (KIP-554, `kclient.tools.configs_scram`).

    Args:
        args: The parsed ``configs`` arguments.
        changes: Reads ``--add-config`` / ``--delete-config``
            (`kclient.tools.configs`).

    Returns:
        The exit status (0).

    Raises:
        ConfigError: bad entity arguments or values.
        kclient.errors.BrokerResponseError: a SCRAM alteration refused.
    """
    from kclient.client.admin import AdminClient
    from kclient.config.admin import AdminConfig
    from kclient.tools.common import client_properties

    pairs = entity_pairs(getattr(args, "entity_order", None) or [("entity_type", args.entity_type)])
    entity = {QUOTA_ENTITY_TYPES[t][0]: name for t, name in pairs}
    props = client_properties(args.command_config, [], "--command-config", keep=AdminConfig.select_known)
    with AdminClient({**props, "bootstrap.servers": args.bootstrap_server, "client.id": "kclient-configs"}) as admin:
        if args.alter:
            _alter(admin, args, pairs, entity, changes)
        else:
            _describe(admin, pairs, entity)
    return 0
