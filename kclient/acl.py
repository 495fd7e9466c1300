"""ACL bindings: who may do what on which resource (KIP-11, KIP-290).

Kafka's public ACL model (``org.apache.kafka.common.acl`` and
``org.apache.kafka.common.resource``) with its names and wire codes:

- `ResourceType`, `PatternType`, `AclOperation` and `AclPermissionType`,
  the int8 codes of the CreateAcls / DescribeAcls / DeleteAcls requests;
- `ResourcePattern` (a resource type, a name and how the name matches:
  `PatternType.LITERAL`, where ``"*"`` is the wildcard, or
  `PatternType.PREFIXED`) and `AccessControlEntry` (principal, host,
  operation, ALLOW or DENY), joined in an `AclBinding`;
- the filters `ResourcePatternFilter`, `AccessControlEntryFilter` and
  `AclBindingFilter`, which DescribeAcls and DeleteAcls take (``None``
  and the ``ANY`` codes match anything; `PatternType.MATCH` matches every
  pattern that would apply to the named resource).

Pure: no I/O.
"""

from __future__ import annotations

import enum
from typing import TypeVar

import attrs

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "camel_name",
    "parse_name",
]

#: The name of the one CLUSTER resource (Kafka's ``Resource.CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"

#: A literal resource name matching every resource of its type.
WILDCARD_RESOURCE = "*"

#: The principal matching every user (``AclEntry.WILDCARD_PRINCIPAL``).
WILDCARD_PRINCIPAL = "User:*"

#: The host matching every client address.
WILDCARD_HOST = "*"


class ResourceType(enum.IntEnum):
    """What an ACL protects (Kafka's ``ResourceType``; wire codes)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """How a resource pattern's name matches (Kafka's ``PatternType``, KIP-290)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """An operation an ACL allows or denies (Kafka's ``AclOperation``)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    """Whether an ACL allows or denies (Kafka's ``AclPermissionType``)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def camel_name(value: enum.Enum) -> str:
    """Kafka's Pascal-case name of a code, as its ZooKeeper JSON and paths
    write it (``SecurityUtils.resourceTypeName`` / ``operationName`` /
    ``permissionTypeName``): ``TRANSACTIONAL_ID`` -> ``TransactionalId``.

    Args:
        value: A member of one of the enums above.

    Returns:
        The name.
    """
    return "".join(part.capitalize() for part in value.name.split("_"))


_E = TypeVar("_E", bound=enum.Enum)


def parse_name(kind: type[_E], text: str) -> _E:
    """The member of ``kind`` named ``text`` in any of Kafka's spellings
    (``IdempotentWrite``, ``IDEMPOTENT_WRITE``, ``idempotent_write``).

    Args:
        kind: The enum.
        text: The name.

    Returns:
        The member.

    Raises:
        ValueError: No member has that name.
    """
    wanted = text.replace("_", "").replace("-", "").upper()
    for member in kind:
        if member.name.replace("_", "") == wanted:
            return member
    raise ValueError(f"unknown {kind.__name__}: {text!r}")


@attrs.frozen
class ResourcePattern:
    """A resource pattern of an ACL binding (Kafka's ``ResourcePattern``).

    Attributes:
        resource_type: A concrete type (not ANY or UNKNOWN).
        name: The resource name; with `PatternType.LITERAL`, ``"*"`` is
            every resource of the type; the cluster is ``"kafka-cluster"``.
        pattern_type: `PatternType.LITERAL` or `PatternType.PREFIXED`.
    """

    resource_type: ResourceType = attrs.field(converter=ResourceType)
    name: str
    pattern_type: PatternType = attrs.field(default=PatternType.LITERAL, converter=PatternType)

    def is_unknown(self) -> bool:
        """Whether a field is UNKNOWN (a code this version does not know)."""
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def indefinite_field(self) -> str | None:
        """The first field that is not concrete (ANY, MATCH, UNKNOWN), or None."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return "resource type"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return "pattern type"
        return None

    def to_filter(self) -> ResourcePatternFilter:
        """The filter matching exactly this pattern."""
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)


@attrs.frozen
class AccessControlEntry:
    """Who, from where, which operation, allowed or denied (Kafka's
    ``AccessControlEntry``).

    Attributes:
        principal: ``"User:alice"``; ``"User:*"`` is every user.
        host: A client IP address, or ``"*"`` for any.
        operation: A concrete operation (not ANY or UNKNOWN).
        permission_type: ALLOW or DENY.
    """

    principal: str
    host: str
    operation: AclOperation = attrs.field(converter=AclOperation)
    permission_type: AclPermissionType = attrs.field(converter=AclPermissionType)

    def indefinite_field(self) -> str | None:
        """The first field that is not concrete (ANY, UNKNOWN), or None."""
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return "operation"
        if self.permission_type in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
            return "permission type"
        return None


@attrs.frozen
class AclBinding:
    """One ACL: a resource pattern and an access control entry (Kafka's
    ``AclBinding``)."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def indefinite_field(self) -> str | None:
        """The first field that is not concrete, or None: a binding with one
        cannot be created (INVALID_REQUEST)."""
        return self.pattern.indefinite_field() or self.entry.indefinite_field()


@attrs.frozen
class ResourcePatternFilter:
    """Matches resource patterns (Kafka's ``ResourcePatternFilter``).

    Attributes:
        resource_type: A type, or ANY.
        name: A name, or None for any.
        pattern_type: LITERAL / PREFIXED (that pattern with exactly that
            name), ANY (any pattern type, exactly that name), or MATCH
            (every pattern that applies to the resource named ``name``:
            the literal name, the wildcard ``"*"`` and every prefix).
    """

    resource_type: ResourceType = attrs.field(default=ResourceType.ANY, converter=ResourceType)
    name: str | None = None
    pattern_type: PatternType = attrs.field(default=PatternType.ANY, converter=PatternType)

    def matches(self, pattern: ResourcePattern) -> bool:
        """Whether ``pattern`` passes this filter.

        Args:
            pattern: A stored resource pattern.

        Returns:
            True if it matches.
        """
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False


@attrs.frozen
class AccessControlEntryFilter:
    """Matches access control entries (Kafka's ``AccessControlEntryFilter``);
    None and the ANY codes match anything."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = attrs.field(default=AclOperation.ANY, converter=AclOperation)
    permission_type: AclPermissionType = attrs.field(default=AclPermissionType.ANY, converter=AclPermissionType)

    def matches(self, entry: AccessControlEntry) -> bool:
        """Whether ``entry`` passes this filter.

        Args:
            entry: A stored entry.

        Returns:
            True if it matches.
        """
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type


@attrs.frozen
class AclBindingFilter:
    """Matches ACL bindings (Kafka's ``AclBindingFilter``); `AclBindingFilter()`
    matches every binding."""

    pattern_filter: ResourcePatternFilter = attrs.Factory(ResourcePatternFilter)
    entry_filter: AccessControlEntryFilter = attrs.Factory(AccessControlEntryFilter)

    def matches(self, binding: AclBinding) -> bool:
        """Whether ``binding`` passes this filter.

        Args:
            binding: A stored binding.

        Returns:
            True if both its pattern and its entry match.
        """
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)
