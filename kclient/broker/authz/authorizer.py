"""kclient's ACL authorizer: Kafka's ``AclAuthorizer`` (ZooKeeper mode,
KIP-11, KIP-290) semantics over a cache of ACL bindings.

An action (principal, client address, operation, resource) is allowed when

- the principal is in ``super.users``; or
- no ACL applies to the resource and ``allow.everyone.if.no.acl.found``
  is true; or
- no DENY ACL and at least one ALLOW ACL match it.

The ACLs that apply to a resource are the literal ones of its name, the
literal wildcard ``*`` of its type and every prefixed one whose prefix
starts its name. An ACL matches when its principal is the request's or
``User:*``, its host the client's address or ``*``, and its operation the
one asked for or ALL. ALLOW of READ, WRITE, DELETE or ALTER implies
DESCRIBE; ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS. DENY wins.

Decisions are logged on ``kclient.broker.authorizer`` (Kafka's
``kafka.authorizer.logger``) in Kafka's words: denials at INFO (at most
once per ``interval`` for each principal, operation and resource type,
with the count held back; `AclAuthorizer.flush_log` reports a burst that
stopped), allows at DEBUG.

Pure: no I/O (the bindings come from `kclient.broker.authz.zk_store`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kclient.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    camel_name,
)
from kclient.broker.authz.principal import RequestContext
from kclient.broker.security import RateLimitedLog

__all__ = ["AUTHORIZER_NAMES", "KCLIENT_AUTHORIZER", "AclAuthorizer", "implied_operations", "parse_super_users"]

log = logging.getLogger("kclient.broker.authorizer")

#: kclient's name for this authorizer in ``authorizer.class.name``.
KCLIENT_AUTHORIZER = "kclient.broker.authz.AclAuthorizer"

#: The ``authorizer.class.name`` values that select it: kclient's name and
#: Kafka's (ZooKeeper mode, its pre-2.4 name, and KRaft's, whose ACLs
#: kclient keeps in ZooKeeper too), so a Kafka ``server.properties`` works.
AUTHORIZER_NAMES = (
    KCLIENT_AUTHORIZER,
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)


def implied_operations(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW allows ``operation`` (ALL aside).

    Args:
        operation: The operation asked for.

    Returns:
        ``operation`` and the ones implying it.
    """
    if operation == AclOperation.DESCRIBE:
        return frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER})
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
    return frozenset({operation})


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons
    (``User:admin;User:broker``).

    Args:
        value: The property's value.

    Returns:
        The principals.
    """
    return frozenset(p.strip() for p in value.split(";") if p.strip())


def _entry_matches(entry: AccessControlEntry, permission: AclPermissionType, operations: frozenset[AclOperation], context: RequestContext) -> bool:
    return (
        entry.permission_type == permission
        and entry.principal in (context.principal, WILDCARD_PRINCIPAL)
        and (entry.operation in operations or entry.operation == AclOperation.ALL)
        and entry.host in (context.client_address, WILDCARD_HOST)
    )


class AclAuthorizer:
    """Authorizes actions against a cache of ACL bindings (see the module
    docstring). The cache is filled and kept current by the store
    (`replace`); `authorize` never blocks.

    Args:
        super_users: ``super.users``.
        allow_everyone_if_no_acl_found: ``allow.everyone.if.no.acl.found``.
        log_interval: Seconds between two denial lines of one kind.
    """

    def __init__(self, super_users: Iterable[str] = (), *, allow_everyone_if_no_acl_found: bool = False, log_interval: float = 10.0) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        #: Seconds between two denial lines of one kind.
        self.log_interval = log_interval
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._denials = RateLimitedLog(log, interval=log_interval, level=logging.INFO)

    # ---------------------------------------------------------------- the cache

    def replace(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Set the ACLs of one resource pattern (none: forget it).

        Args:
            pattern: The resource pattern.
            entries: Its access control entries.
        """
        found = frozenset(entries)
        if found:
            self._acls[pattern] = found
        else:
            self._acls.pop(pattern, None)

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """The cached ACLs of one resource pattern."""
        return self._acls.get(pattern, frozenset())

    def acls(self, binding_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The cached bindings matching a filter (Kafka's ``Authorizer.acls``).

        Args:
            binding_filter: The filter (None: all).

        Returns:
            The bindings, sorted by resource pattern.
        """
        flt = binding_filter or AclBindingFilter()
        out = []
        for pattern in sorted(self._acls, key=lambda p: (p.resource_type, p.pattern_type, p.name)):
            if not flt.pattern_filter.matches(pattern):
                continue
            for entry in sorted(self._acls[pattern], key=lambda e: (e.principal, e.host, e.operation, e.permission_type)):
                if flt.entry_filter.matches(entry):
                    out.append(AclBinding(pattern, entry))
        return out

    def matching_entries(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The ACLs that apply to one resource: literal, wildcard and prefixed."""
        out = list(self._acls.get(ResourcePattern(resource_type, name, PatternType.LITERAL), ()))
        out.extend(self._acls.get(ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL), ()))
        for pattern, entries in self._acls.items():
            if pattern.pattern_type == PatternType.PREFIXED and pattern.resource_type == resource_type and name.startswith(pattern.name):
                out.extend(entries)
        return out

    # ---------------------------------------------------------------- decisions

    def authorize(
        self,
        context: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        api_name: str = "",
        log_denied: bool = True,
    ) -> bool:
        """Whether the request's principal may do ``operation`` on a resource.

        Args:
            context: The principal and client address.
            operation: The operation.
            resource_type: TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ...
            name: The resource's name (the cluster's is ``kafka-cluster``).
            api_name: The request's API, for the log.
            log_denied: Log a denial at INFO (False: DEBUG, for the
                resources a listing leaves out silently, as Kafka does).

        Returns:
            True if allowed.
        """
        allowed = self._decide(context, operation, resource_type, name)
        resource = f"{camel_name(resource_type)}:LITERAL:{name}"
        message = "Principal = %s is %s Operation = %s from host = %s on resource = %s for request = %s"
        args = (context.principal, "Allowed" if allowed else "Denied", camel_name(operation), context.client_address, resource, api_name)
        if allowed:
            log.debug(message, *args)
        elif log_denied:
            # One limit per principal, operation and resource type (not per
            # name: a client asking for endless new names grows nothing).
            self._denials.log(f"{context.principal} {operation.name} {resource_type.name}", message, *args)
        else:
            log.debug(message, *args)
        return allowed

    def _decide(self, context: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        if context.principal in self.super_users:
            log.debug("principal = %s is a super user, allowing operation without checking acls.", context.principal)
            return True
        entries = self.matching_entries(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        if any(_entry_matches(e, AclPermissionType.DENY, frozenset({operation}), context) for e in entries):
            return False
        allowing = implied_operations(operation)
        return any(_entry_matches(e, AclPermissionType.ALLOW, allowing, context) for e in entries)

    def authorize_by_resource_type(self, context: RequestContext, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on at least one
        resource of a type (Kafka's ``Authorizer.authorizeByResourceType``,
        KIP-679: InitProducerId of an idempotent producer without
        IDEMPOTENT_WRITE on the cluster asks for WRITE on any topic).

        Args:
            context: The principal and client address.
            operation: The operation.
            resource_type: The resource type.

        Returns:
            True if some ALLOW ACL of that type applies and no DENY covers it.
        """
        if context.principal in self.super_users:
            return True
        ops = frozenset({operation})
        allows: list[ResourcePattern] = []
        denies: list[ResourcePattern] = []
        typed = {p: e for p, e in self._acls.items() if p.resource_type == resource_type}
        if not typed:
            return self.allow_everyone_if_no_acl_found
        for pattern, entries in typed.items():
            if any(_entry_matches(e, AclPermissionType.DENY, ops, context) for e in entries):
                denies.append(pattern)
            if any(_entry_matches(e, AclPermissionType.ALLOW, ops, context) for e in entries):
                allows.append(pattern)
        if any(d.pattern_type == PatternType.LITERAL and d.name == WILDCARD_RESOURCE for d in denies):
            return False
        denied_prefixes = [d.name for d in denies if d.pattern_type == PatternType.PREFIXED]
        denied_literals = {d.name for d in denies if d.pattern_type == PatternType.LITERAL}
        for allow in allows:
            if any(allow.name.startswith(prefix) for prefix in denied_prefixes):
                continue
            if allow.pattern_type == PatternType.LITERAL and allow.name in denied_literals:
                continue
            return True
        return False

    def flush_log(self, *, force: bool = False) -> None:
        """Report the denials held back by the rate limit (call periodically).

        Args:
            force: Report them all, however recent the last line (when stopping).
        """
        self._denials.flush(force)
