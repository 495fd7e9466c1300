"""One request's authorization checks: the authorizer, who asks and for
which API (Kafka's ``AuthHelper``). The guards of
`kclient.broker.authz.guards_data` and `kclient.broker.authz.guards_admin`
ask through it.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import attrs

from kclient.acl import CLUSTER_NAME, AclOperation, ResourceType
from kclient.broker.authz.authorizer import AclAuthorizer
from kclient.broker.authz.principal import RequestContext
from kclient.protocol.connection import RequestHeader

__all__ = ["OMITTED_OPERATIONS", "SUPPORTED_OPERATIONS", "Call", "Check", "Guard"]

_T = TypeVar("_T")

#: The handler behind a guard: the (possibly narrowed) request in, the
#: response out (None: no response).
Call = Callable[[Any], Awaitable[Any]]

#: A guard: the checks of one API around its handler.
Guard = Callable[["Check", RequestHeader, Any, Call], Awaitable[Any]]

#: ``authorized_operations`` when not asked for (Kafka's ``Integer.MIN_VALUE``).
OMITTED_OPERATIONS = -2147483648

#: The operations an ACL of each resource type can name
#: (``AclEntry.supportedOperations``); the bits of ``authorized_operations``.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}


@attrs.frozen
class Check:
    """The checks of one request.

    Attributes:
        authorizer: The broker's authorizer.
        context: Who sent the request, from where.
        api_name: The request's API (for the log).
    """

    authorizer: AclAuthorizer
    context: RequestContext
    api_name: str = ""

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str, *, log_denied: bool = True) -> bool:
        """Whether the sender may do ``operation`` on the resource.

        Args:
            operation: The operation.
            resource_type: The resource's type.
            name: Its name.
            log_denied: Log a denial at INFO (False for silent filtering).

        Returns:
            True if allowed.
        """
        return self.authorizer.authorize(self.context, operation, resource_type, name, api_name=self.api_name, log_denied=log_denied)

    def topic(self, operation: AclOperation, name: str, *, log_denied: bool = True) -> bool:
        """`allowed` on a topic."""
        return self.allowed(operation, ResourceType.TOPIC, name, log_denied=log_denied)

    def group(self, operation: AclOperation, name: str, *, log_denied: bool = True) -> bool:
        """`allowed` on a consumer group."""
        return self.allowed(operation, ResourceType.GROUP, name, log_denied=log_denied)

    def cluster(self, operation: AclOperation, *, log_denied: bool = True) -> bool:
        """`allowed` on the cluster (``kafka-cluster``)."""
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied)

    def transactional_id(self, operation: AclOperation, name: str) -> bool:
        """`allowed` on a transactional id."""
        return self.allowed(operation, ResourceType.TRANSACTIONAL_ID, name)

    def split(self, items: Iterable[_T], name_of: Callable[[_T], str], operation: AclOperation, resource_type: ResourceType = ResourceType.TOPIC) -> tuple[list[_T], list[_T]]:
        """``(allowed, denied)`` items, each resource name asked once
        (Kafka's ``partitionSeqByAuthorized``)."""
        seen: dict[str, bool] = {}
        allowed: list[_T] = []
        denied: list[_T] = []
        for item in items:
            name = name_of(item)
            if name not in seen:
                seen[name] = self.allowed(operation, resource_type, name)
            (allowed if seen[name] else denied).append(item)
        return allowed, denied

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The ``authorized_operations`` bit field of a resource (KIP-430):
        bit ``n`` set when operation code ``n`` is allowed."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorizer.authorize(self.context, operation, resource_type, name, api_name=self.api_name, log_denied=False):
                bits |= 1 << operation
        return bits
