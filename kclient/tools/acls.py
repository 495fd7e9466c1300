"""``kclient acls``: add, remove and list ACLs with the flags of Kafka's
``kafka-acls.sh`` (``AclCommand``; KIP-11, prefixed patterns KIP-290)::

    kclient acls --bootstrap-server 127.0.0.1:9092 --add \
        --allow-principal User:alice --operation Read --operation Write --topic events
    kclient acls --bootstrap-server 127.0.0.1:9092 --add \
        --allow-principal User:alice --producer --idempotent --topic events-
        --resource-pattern-type prefixed
    kclient acls --bootstrap-server 127.0.0.1:9092 --add \
        --allow-principal User:bob --consumer --topic events --group readers
    kclient acls --bootstrap-server 127.0.0.1:9092 --list --topic events
    kclient acls --bootstrap-server 127.0.0.1:9092 --remove --force --topic events

Resources: ``--topic``, ``--group``, ``--transactional-id``,
``--delegation-token``, ``--user-principal`` (each repeatable; ``*`` is
every resource of the type) and ``--cluster``, named with
``--resource-pattern-type`` ``literal`` (the default) or ``prefixed``;
``--list`` and ``--remove`` also take ``any`` (any pattern type, exactly
that name) and ``match`` (every pattern that applies to the name).
Entries: ``--allow-principal`` / ``--deny-principal`` (``User:alice``,
``User:*``) with ``--allow-host`` / ``--deny-host`` (default ``*``) and
``--operation`` (repeatable, Kafka's names in any case: ``Read``,
``IdempotentWrite``, ``DESCRIBE_CONFIGS``; default ``All``). ``--producer``
stands for WRITE, DESCRIBE and CREATE on the topics and WRITE, DESCRIBE on
the transactional ids (``--idempotent`` adds IDEMPOTENT_WRITE on the
cluster); ``--consumer`` for READ, DESCRIBE on the topics and READ on the
groups, as ``kafka-acls.sh`` expands them.

The output is ``kafka-acls.sh``'s: ``Adding ACLs for resource `...`:``,
``Current ACLs for resource `...`:`` and each entry as
``(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)``,
resources and entries sorted (Kafka prints them in hash order).
``--remove`` asks for confirmation on stdin unless ``--force``.

Bad arguments give status 2, a broker's error (no authorizer:
SECURITY_DISABLED; not allowed: CLUSTER_AUTHORIZATION_FAILED) status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from kclient.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_name,
)
from kclient.errors import ConfigError
from kclient.tools.arguments import add_actions
from kclient.tools.common import add_bootstrap_argument, client_properties, parse_bootstrap

if TYPE_CHECKING:
    from kclient.client.admin import AdminClient

__all__ = [
    "SUPPORTED_OPERATIONS",
    "AclsArguments",
    "acls_by_resource",
    "format_binding",
    "format_entry",
    "format_pattern",
    "register",
    "run",
]

_O = AclOperation

#: The operations each resource type has (Kafka's
#: ``AclEntry.supportedOperations``), ALL aside.
SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset(
        {_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}

#: ``--producer``: on topics, on transactional ids.
PRODUCER_TOPIC_OPERATIONS = (_O.WRITE, _O.DESCRIBE, _O.CREATE)
PRODUCER_TRANSACTIONAL_ID_OPERATIONS = (_O.WRITE, _O.DESCRIBE)
#: ``--consumer``: on topics, on groups.
CONSUMER_TOPIC_OPERATIONS = (_O.READ, _O.DESCRIBE)
CONSUMER_GROUP_OPERATIONS = (_O.READ,)

_CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)

#: ``--resource-pattern-type`` values.
PATTERN_TYPES = ("literal", "prefixed", "match", "any")

_RESOURCE_OPTIONS = (
    ("topic", ResourceType.TOPIC),
    ("group", ResourceType.GROUP),
    ("transactional_id", ResourceType.TRANSACTIONAL_ID),
    ("delegation_token", ResourceType.DELEGATION_TOKEN),
    ("user_principal", ResourceType.USER),
)


class AclsArguments(Protocol):
    """The ``acls`` arguments `register` defines (an `argparse.Namespace`
    has them)."""

    bootstrap_server: str
    command_config: str | None
    add: bool
    remove: bool
    topic: list[str] | None
    group: list[str] | None
    cluster: bool
    transactional_id: list[str] | None
    delegation_token: list[str] | None
    user_principal: list[str] | None
    resource_pattern_type: str
    allow_principal: list[str] | None
    deny_principal: list[str] | None
    allow_host: list[str] | None
    deny_host: list[str] | None
    operation: list[str] | None
    principal: list[str] | None
    producer: bool
    consumer: bool
    idempotent: bool
    force: bool
    list: bool  # last: the name hides the builtin in the rest of the class


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``acls`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "acls",
        help="add, remove and list ACLs (kafka-acls.sh)",
        description="Add, remove or list ACL bindings through a broker (CreateAcls, DeleteAcls, DescribeAcls), "
        "with the flags of kafka-acls.sh.",
    )
    add_bootstrap_argument(p)
    p.add_argument("--command-config", metavar="FILE", help="a client .properties file (security settings)")
    add_actions(p, {"add": "add ACLs", "remove": "remove ACLs", "list": "list ACLs (of the resources given, else all)"})
    many = {"action": "append", "default": None}
    p.add_argument("--topic", metavar="TOPIC", help="a topic ('*' for every topic; repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument("--group", metavar="GROUP", help="a consumer group ('*' for every group; repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--transactional-id", metavar="ID", help="a transactional id ('*' for all; repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument("--delegation-token", metavar="TOKEN", help="a delegation token id (repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument("--user-principal", metavar="PRINCIPAL", help="a user principal as the resource (repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument(
        "--resource-pattern-type",
        type=str.lower,
        choices=PATTERN_TYPES,
        default="literal",
        help="literal (default) or prefixed; --list and --remove also take any and match",
    )
    p.add_argument("--allow-principal", metavar="TYPE:NAME", help="principal to allow (User:alice, User:*; repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument("--deny-principal", metavar="TYPE:NAME", help="principal to deny (repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument("--allow-host", metavar="HOST", help="host the allowed principals may come from (default *; repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument("--deny-host", metavar="HOST", help="host the denied principals are denied from (default *; repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument("--operation", metavar="OP", help="Read, Write, Create, Delete, Alter, Describe, ... (default All; repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument("--principal", metavar="TYPE:NAME", help="(--list) only this principal's ACLs (repeatable)", **many)  # type: ignore[arg-type]
    p.add_argument("--producer", action="store_true", help="the producer's ACLs: WRITE, DESCRIBE, CREATE on the topics")
    p.add_argument("--consumer", action="store_true", help="the consumer's ACLs: READ, DESCRIBE on the topics, READ on the groups")
    p.add_argument("--idempotent", action="store_true", help="(--producer) also IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--force", action="store_true", help="(--remove) do not ask for confirmation")
    p.set_defaults(func=run)


# ------------------------------------------------------------------ parsing


def _check(args: AclsArguments) -> None:
    """``kafka-acls.sh``'s combinations.

    Raises:
        ConfigError: A flag with an action or another flag it does not go with.
    """
    entry_flags = (args.allow_principal, args.deny_principal, args.allow_host, args.deny_host)
    if args.list and (args.producer or args.consumer or any(entry_flags)):
        raise ConfigError("--list does not take --producer, --consumer, --allow-*, --deny-* (use --principal)")
    if args.add and args.resource_pattern_type not in ("literal", "prefixed"):
        raise ConfigError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type.upper()}' is not valid when adding acls.")
    if args.principal and not args.list:
        raise ConfigError("The --principal option is only available if --list is set")
    _check_roles(args)


def _check_roles(args: AclsArguments) -> None:
    """The combinations of ``--producer``, ``--consumer`` and ``--idempotent``.

    Raises:
        ConfigError: A role without its resources, or with flags it does not take.
    """
    if (args.producer or args.consumer) and (args.operation or args.deny_principal or args.deny_host):
        raise ConfigError("--producer and --consumer do not take --operation, --deny-principal or --deny-host")
    if args.producer and not args.topic:
        raise ConfigError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise ConfigError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or (not args.producer and (args.cluster or args.transactional_id))):
        raise ConfigError("With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id option should be specified.")


def parse_principal(text: str) -> str:
    """A principal as ``kafka-acls.sh`` takes it: ``Type:name``.

    Args:
        text: The option's value.

    Returns:
        The principal, trimmed.

    Raises:
        ConfigError: No ``:`` or an empty type or name.
    """
    value = text.strip()
    kind, sep, name = value.partition(":")
    if not sep or not kind or not name:
        raise ConfigError(f"expected a string in format principalType:principalName but got {text!r}")
    return value


def parse_operation(text: str) -> AclOperation:
    """An ``--operation`` value in any of Kafka's spellings.

    Args:
        text: ``Read``, ``IdempotentWrite``, ``describe_configs``, ...

    Returns:
        The operation.

    Raises:
        ConfigError: Not a concrete operation.
    """
    try:
        operation = parse_name(AclOperation, text.strip())
    except ValueError:
        operation = AclOperation.UNKNOWN
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        names = ", ".join(o.name for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY))
        raise ConfigError(f"--operation {text!r}: not an operation ({names})")
    return operation


def resource_filters(args: AclsArguments, *, required: bool) -> list[ResourcePatternFilter]:
    """The resources the options name, with ``--resource-pattern-type``
    (the cluster only with ``literal``, as in ``kafka-acls.sh``).

    Args:
        args: The parsed arguments.
        required: Fail when no resource is named (``--add``, ``--remove``).

    Returns:
        The filters, without repeats, in option order.

    Raises:
        ConfigError: No resource and ``required``.
    """
    pattern_type = PatternType[args.resource_pattern_type.upper()]
    found: dict[ResourcePatternFilter, None] = {}
    for option, resource_type in _RESOURCE_OPTIONS:
        for name in getattr(args, option) or ():
            found[ResourcePatternFilter(resource_type, name.strip(), pattern_type)] = None
    if pattern_type == PatternType.LITERAL and (args.cluster or args.idempotent):
        found[_CLUSTER_FILTER] = None
    if required and not found:
        raise ConfigError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or --delegation-token <Delegation Token ID>")
    return list(found)


def _entries(args: AclsArguments, operations: Iterable[AclOperation]) -> set[AccessControlEntry]:
    """Every (principal, host, operation) the allow and deny options give."""
    ops = list(operations)
    out: set[AccessControlEntry] = set()
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        if not principals:
            continue
        for principal in map(parse_principal, principals):
            for host in [h.strip() for h in hosts] if hosts else [WILDCARD_HOST]:
                out.update(AccessControlEntry(principal, host, op, permission) for op in ops)
    return out


def _add_role(acls: dict[ResourcePatternFilter, set[AccessControlEntry]], filters: Iterable[ResourcePatternFilter], entries: set[AccessControlEntry]) -> None:
    for f in filters:
        acls.setdefault(f, set()).update(entries)


def acls_by_resource(args: AclsArguments) -> dict[ResourcePatternFilter, set[AccessControlEntry]]:
    """The entries each resource gets (``--add``) or loses (``--remove``):
    the ``--operation`` values, or the ``--producer`` / ``--consumer``
    roles expanded as ``kafka-acls.sh`` expands them.

    Args:
        args: The parsed arguments.

    Returns:
        ``{resource filter: entries}``; empty entries for a resource named
        without a principal (``--remove`` then removes all its ACLs).

    Raises:
        ConfigError: No resource, a bad principal or operation, or an
            operation the resource type does not have.
    """
    filters = resource_filters(args, required=True)
    acls: dict[ResourcePatternFilter, set[AccessControlEntry]] = {}
    if not (args.producer or args.consumer):
        operations = {parse_operation(o) for o in args.operation or ["All"]}
        _add_role(acls, filters, _entries(args, operations))
    by_type = {t: [f for f in filters if f.resource_type == t] for t in ResourceType}
    if args.producer:
        _add_role(acls, by_type[ResourceType.TOPIC], _entries(args, PRODUCER_TOPIC_OPERATIONS))
        _add_role(acls, by_type[ResourceType.TRANSACTIONAL_ID], _entries(args, PRODUCER_TRANSACTIONAL_ID_OPERATIONS))
        if args.idempotent:
            _add_role(acls, [_CLUSTER_FILTER], _entries(args, [AclOperation.IDEMPOTENT_WRITE]))
    if args.consumer:
        _add_role(acls, by_type[ResourceType.TOPIC], _entries(args, CONSUMER_TOPIC_OPERATIONS))
        _add_role(acls, by_type[ResourceType.GROUP], _entries(args, CONSUMER_GROUP_OPERATIONS))
    for f, entries in acls.items():
        valid = SUPPORTED_OPERATIONS.get(f.resource_type, frozenset()) | {AclOperation.ALL}
        if any(e.operation not in valid for e in entries):
            names = ", ".join(sorted(o.name for o in valid))
            raise ConfigError(f"ResourceType {f.resource_type.name} only supports operations {names}")
    return acls


# ------------------------------------------------------------------ output


def format_pattern(pattern: ResourcePattern | ResourcePatternFilter) -> str:
    """A resource pattern (or filter) as Kafka's ``toString`` writes it.

    Args:
        pattern: The pattern.

    Returns:
        ``ResourcePattern(resourceType=TOPIC, name=events, patternType=LITERAL)``
        (``name=<any>`` for a filter without a name).
    """
    name = "<any>" if pattern.name is None else pattern.name
    return f"ResourcePattern(resourceType={pattern.resource_type.name}, name={name}, patternType={pattern.pattern_type.name})"


def format_entry(entry: AccessControlEntry) -> str:
    """An access control entry as Kafka's ``toString`` writes it.

    Args:
        entry: The entry.

    Returns:
        ``(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)``.
    """
    return f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, permissionType={entry.permission_type.name})"


def format_binding(binding: AclBinding) -> str:
    """A binding as Kafka's ``AclBinding.toString`` writes it.

    Args:
        binding: The binding.

    Returns:
        ``(pattern=ResourcePattern(...), entry=(principal=..., ...))``.
    """
    return f"(pattern={format_pattern(binding.pattern)}, entry={format_entry(binding.entry)})"


def _pattern_key(p: ResourcePattern | ResourcePatternFilter) -> tuple[int, str, int]:
    return (int(p.resource_type), p.name or "", int(p.pattern_type))


def _entry_key(e: AccessControlEntry) -> tuple[str, str, int, int]:
    return (e.principal, e.host, int(e.operation), int(e.permission_type))


def _entry_lines(entries: Iterable[AccessControlEntry]) -> str:
    return "\n".join("\t" + format_entry(e) for e in sorted(entries, key=_entry_key))


def listing(bindings: Iterable[AclBinding], principal: str | None = None) -> str:
    """``kafka-acls.sh --list``'s text: per resource pattern a
    ``Current ACLs for resource `...`:`` line, its entries (one per line,
    tab-indented) and an empty line.

    Args:
        bindings: The bindings.
        principal: Only this principal's entries.

    Returns:
        The text.
    """
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        if principal is None or b.entry.principal == principal:
            grouped.setdefault(b.pattern, []).append(b.entry)
    return "".join(f"Current ACLs for resource `{format_pattern(p)}`:\n{_entry_lines(grouped[p])}\n\n" for p in sorted(grouped, key=_pattern_key))


# ------------------------------------------------------------------ actions


def _raise_first(errors: Iterable[BaseException | None]) -> None:
    for error in errors:
        if error is not None:
            raise error


def _add(admin: AdminClient, args: AclsArguments) -> None:
    acls = acls_by_resource(args)
    for f in sorted(acls, key=_pattern_key):
        pattern = ResourcePattern(f.resource_type, str(f.name), f.pattern_type)
        existing = set(admin.describe_acls(AclBindingFilter(f, AccessControlEntryFilter())))
        new = []
        for entry in sorted(acls[f], key=_entry_key):
            binding = AclBinding(pattern, entry)
            if binding in existing:
                sys.stdout.write(f"Acl {format_binding(binding)} already exists.\n")
            else:
                new.append(binding)
        if new:
            sys.stdout.write(f"Adding ACLs for resource `{format_pattern(pattern)}`: \n {_entry_lines(b.entry for b in new)} \n\n")
            sys.stdout.flush()
            _raise_first(admin.create_acls(new).values())


def _confirmed(args: AclsArguments, question: str) -> bool:
    if args.force:
        return True
    sys.stdout.write(question + "\n")
    sys.stdout.flush()
    return sys.stdin.readline().strip().lower() == "y"


def _remove(admin: AdminClient, args: AclsArguments) -> None:
    acls = acls_by_resource(args)
    for f in sorted(acls, key=_pattern_key):
        entries = acls[f]
        if not entries:
            if _confirmed(args, f"Are you sure you want to delete all ACLs for resource filter `{format_pattern(f)}`? (y/n)"):
                filters = [AclBindingFilter(f, AccessControlEntryFilter())]
            else:
                continue
        elif _confirmed(args, f"Are you sure you want to remove ACLs: \n {_entry_lines(entries)} \n from resource filter `{format_pattern(f)}`? (y/n)"):
            filters = [AclBindingFilter(f, AccessControlEntryFilter(e.principal, e.host, e.operation, e.permission_type)) for e in entries]
        else:
            continue
        _raise_first(d.error for d in admin.delete_acls(filters).values())


def _list(admin: AdminClient, args: AclsArguments) -> None:
    filters = resource_filters(args, required=False)
    if filters:
        bindings = {b for f in filters for b in admin.describe_acls(AclBindingFilter(f, AccessControlEntryFilter()))}
    else:
        bindings = set(admin.describe_acls(AclBindingFilter()))
    if not args.principal:
        sys.stdout.write(listing(bindings))
        return
    for principal in dict.fromkeys(map(parse_principal, args.principal)):
        sys.stdout.write(f"ACLs for principal `{principal}`\n{listing(bindings, principal)}")


def run(args: AclsArguments) -> int:
    """Run ``kclient acls``.

    Args:
        args: The parsed arguments.

    Returns:
        0.

    Raises:
        ConfigError: Bad arguments (status 2).
        KafkaError: A broker's error (SECURITY_DISABLED,
            CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST, ...), or no
            broker reachable.
    """
    _check(args)
    parse_bootstrap(args.bootstrap_server)
    if not args.list:
        # Bad arguments fail before a connection is made.
        if any(not entries for entries in acls_by_resource(args).values()) and args.add:
            raise ConfigError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    from kclient.client.admin import AdminClient
    from kclient.config.admin import AdminConfig

    props = client_properties(args.command_config, [], "--command-config", keep=AdminConfig.select_known)
    with AdminClient({**props, "bootstrap.servers": args.bootstrap_server, "client.id": "kclient-acls"}) as admin:
        action = _add if args.add else _remove if args.remove else _list
        action(admin, args)
    return 0
