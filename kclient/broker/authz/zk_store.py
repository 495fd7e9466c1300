"""ACLs in ZooKeeper where Kafka's ZooKeeper mode keeps them (Kafka's
``ZkAclStore``, ``ResourceZNode``, ``AclEntry``; KIP-11, KIP-290):

- literal patterns: ``/kafka-acl/<ResourceType>/<name>``;
- prefixed patterns: ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``;
- each node holds ``{"version":1,"acls":[{"principal":"User:alice",
  "permissionType":"Allow","operation":"Read","host":"*"}]}``
  (``ResourceType`` as ``Topic``, ``Group``, ``Cluster``,
  ``TransactionalId``, ...; operations as ``Read``, ``IdempotentWrite``,
  ``DescribeConfigs``, ...);
- after a change, a persistent sequential node
  ``/kafka-acl-changes/acl_changes_<10 digits>`` holding
  ``<RESOURCE_TYPE>:<name>`` (literal) or
  ``/kafka-acl-extended-changes/acl_changes_<10 digits>`` holding
  ``{"version":1,"resourceType":"TOPIC","name":...,"patternType":"PREFIXED"}``;
  every broker watches both and rereads the named resource.

Writes are conditional on the node's version (create if absent, set or
delete at the version read) and retried on a conflict, as Kafka's
``AclAuthorizer.updateResourceAcls`` does, so that two brokers changing
the ACLs of one resource at once lose neither change. `MemoryAclStore`
keeps them in memory for a broker without ZooKeeper.

The codec functions are pure; `ZkAclStore` blocks (call it from a worker
thread).
"""

from __future__ import annotations

import abc
import json
import logging
from collections.abc import Callable, Iterable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kclient.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    camel_name,
    parse_name,
)
from kclient.zk.client import ZkClient

__all__ = [
    "ACL_CHANGE_PREFIX",
    "EXTENDED_CHANGES_PATH",
    "LITERAL_CHANGES_PATH",
    "AclStore",
    "MemoryAclStore",
    "ZkAclStore",
    "decode_acls",
    "decode_change",
    "encode_acls",
    "encode_change",
    "resource_path",
]

log = logging.getLogger("kclient.broker.authorizer")

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"

#: The resource types an ACL can name (``AclEntry.RESOURCE_TYPES``).
RESOURCE_TYPES = tuple(t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY))

#: What `AclStore.update` is given: the current entries in, the new ones out.
Change = Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]


def _root(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ROOT
    return f"{EXTENDED_ROOT}/{pattern_type.name.lower()}"


def resource_path(pattern: ResourcePattern) -> str:
    """The node of a resource pattern's ACLs.

    Args:
        pattern: A literal or prefixed pattern.

    Returns:
        ``/kafka-acl/Topic/orders``, ``/kafka-acl-extended/prefixed/Group/app-``.
    """
    return f"{_root(pattern.pattern_type)}/{camel_name(pattern.resource_type)}/{pattern.name}"


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A resource node's JSON (``AclEntry.toJsonCompatibleMap``)."""
    acls = [
        {"principal": e.principal, "permissionType": camel_name(e.permission_type), "operation": camel_name(e.operation), "host": e.host}
        for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type))
    ]
    return json.dumps({"version": 1, "acls": acls}).encode()


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """The entries of a resource node (``AclEntry.fromBytes``).

    Args:
        data: The node's data (empty: no ACLs).

    Returns:
        The entries.

    Raises:
        ValueError: Not Kafka's ACL JSON (version 1).
    """
    if not data:
        return frozenset()
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise ValueError(f"unsupported ACL node: {data[:100]!r}")
    return frozenset(
        AccessControlEntry(
            str(item["principal"]),
            str(item["host"]),
            parse_name(AclOperation, str(item["operation"])),
            parse_name(AclPermissionType, str(item["permissionType"])),
        )
        for item in doc.get("acls", [])
    )


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The change notification for a pattern: its path prefix and data."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{LITERAL_CHANGES_PATH}/{ACL_CHANGE_PREFIX}", f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name, "patternType": pattern.pattern_type.name}
    return f"{EXTENDED_CHANGES_PATH}/{ACL_CHANGE_PREFIX}", json.dumps(event).encode()


def decode_change(changes_path: str, data: bytes | None) -> ResourcePattern:
    """The resource pattern a change notification names.

    Args:
        changes_path: `LITERAL_CHANGES_PATH` or `EXTENDED_CHANGES_PATH`.
        data: The notification's data.

    Returns:
        The pattern.

    Raises:
        ValueError: An unreadable notification.
    """
    text = (data or b"").decode()
    if changes_path == LITERAL_CHANGES_PATH:
        kind, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {text!r}")
        return ResourcePattern(parse_name(ResourceType, kind), name, PatternType.LITERAL)
    event = json.loads(text)
    if event.get("version", 1) > 1:
        raise ValueError(f"unsupported ACL change event version: {event.get('version')}")
    return ResourcePattern(parse_name(ResourceType, event["resourceType"]), event["name"], parse_name(PatternType, event["patternType"]))


class AclStore(abc.ABC):
    """Where ACLs live (the interface; `MemoryAclStore` is the standalone
    broker's, `ZkAclStore` the ZooKeeper one)."""

    @abc.abstractmethod
    def load_all(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every pattern's ACLs (blocking)."""

    @abc.abstractmethod
    def read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """One pattern's ACLs (blocking)."""

    @abc.abstractmethod
    def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        """Apply ``change`` to one pattern's ACLs (blocking).

        Args:
            pattern: The resource pattern.
            change: The current entries in, the new ones out.

        Returns:
            The entries stored.
        """


class MemoryAclStore(AclStore):
    """ACLs in this process only (a broker without ZooKeeper)."""

    def __init__(self) -> None:
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}

    def load_all(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every pattern's ACLs."""
        return dict(self._acls)

    def read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """One pattern's ACLs."""
        return self._acls.get(pattern, frozenset())

    def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        """Apply ``change`` to one pattern's ACLs (see `AclStore.update`)."""
        new = change(self.read(pattern))
        if new:
            self._acls[pattern] = new
        else:
            self._acls.pop(pattern, None)
        return new


class ZkAclStore(AclStore):
    """ACLs in ZooKeeper (see the module docstring); blocking calls.

    Args:
        zk: The broker's ZooKeeper session.
    """

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    def load_all(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every pattern's ACLs (Kafka's ``loadCache``); unreadable nodes are
        logged and skipped."""
        out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for resource_type in RESOURCE_TYPES:
                base = f"{_root(pattern_type)}/{camel_name(resource_type)}"
                if not self.zk.exists(base):
                    continue
                for name in self.zk.get_children(base):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries = self.read(pattern)
                    if entries:
                        out[pattern] = entries
        return out

    def _read_versioned(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int | None]:
        found = self.zk.get_versioned(resource_path(pattern))
        if found is None:
            return frozenset(), None
        try:
            return decode_acls(found[0]), found[1]
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the unreadable ACLs of %s: %s", resource_path(pattern), exc)
            return frozenset(), found[1]

    def read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """One pattern's ACLs (none if its node is absent or unreadable)."""
        return self._read_versioned(pattern)[0]

    def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        """Apply ``change`` with a conditional write, retried on conflict,
        then write a change notification if anything changed (see
        `AclStore.update`)."""
        while True:
            current, version = self._read_versioned(pattern)
            new = change(current)
            if new == current and version is not None:
                return current
            if self._write(pattern, new, version):
                break
        if new != current:
            path_prefix, data = encode_change(pattern)
            self.zk.create_sequential(path_prefix, data)
        return new

    def _write(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry], version: int | None) -> bool:
        """One conditional write; False on a conflict (reread and retry)."""
        path = resource_path(pattern)
        kazoo = self.zk.kazoo
        try:
            if not entries:
                if version is not None:
                    kazoo.delete(path, version=version)
                return True
            if version is None:
                kazoo.create(path, encode_acls(entries), makepath=True)
            else:
                kazoo.set(path, encode_acls(entries), version=version)
        except (BadVersionError, NoNodeError, NodeExistsError):
            return False
        return True
