"""ACLs through the admin client: CreateAcls (key 30), DescribeAcls (key
29) and DeleteAcls (key 31), as Kafka's ``Admin.createAcls``,
``Admin.describeAcls`` and ``Admin.deleteAcls`` (KIP-11; prefixed
patterns KIP-290).

The bindings and filters are `kclient.acl`'s (`AclBinding`,
`AclBindingFilter`). Every request goes to any one broker, as Kafka's
admin client sends it to the least loaded node: a ZooKeeper-mode broker
writes the change to ``/kafka-acl`` itself, a KRaft broker forwards it to
its controller. A broker without an authorizer answers
SECURITY_DISABLED (54); a principal without ALTER (create, delete) or
DESCRIBE (describe) on the cluster gets CLUSTER_AUTHORIZATION_FAILED (31).

Kafka protocol guide:
https://kafka.apache.org/protocol#The_Messages_CreateAcls,
https://kafka.apache.org/protocol#The_Messages_DescribeAcls and
https://kafka.apache.org/protocol#The_Messages_DeleteAcls.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kclient.acl import AccessControlEntry, AclBinding, AclBindingFilter, PatternType, ResourcePattern
from kclient.client.cluster import Cluster
from kclient.errors import NONE, KafkaError, UnsupportedVersionError, error_for_code
from kclient.net.connection import BrokerConnection
from kclient.protocol.messages import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from kclient.protocol.messages.create_acls import AclCreation, CreateAclsRequest, CreateAclsResponse
from kclient.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsMatchingAcl, DeleteAclsRequest, DeleteAclsResponse
from kclient.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse

__all__ = ["AclDeletion", "create_acls", "delete_acls", "describe_acls"]

#: The first version of each ACL request with a pattern type (KIP-290):
#: version 0 knows literal names only.
PATTERN_TYPE_VERSION = 1


@attrs.frozen
class AclDeletion:
    """What one DeleteAcls filter deleted (Kafka's
    ``DeleteAclsResult.FilterResults``).

    Attributes:
        deleted: The bindings the filter matched and the broker deleted.
        failed: Bindings it matched but could not delete, each with its
            error.
        error: The filter's own error (then nothing was deleted), or None.
    """

    deleted: tuple[AclBinding, ...] = ()
    failed: tuple[tuple[AclBinding, KafkaError], ...] = ()
    error: KafkaError | None = None


def _error(code: int, message: str | None, what: str) -> KafkaError:
    cls = error_for_code(code)
    return cls(f"{what}: {message or cls.name}")


def _version(conn: BrokerConnection, api: object, needs_pattern_type: bool) -> int:
    """The highest version of ``api`` both sides speak; at least
    `PATTERN_TYPE_VERSION` when a pattern type other than LITERAL (or ANY,
    for filters) is asked for.

    Raises:
        UnsupportedVersionError: A broker older than KIP-290 asked for a
            prefixed pattern, or no ACL API at all.
    """
    version = conn.version_for(api)  # type: ignore[arg-type]
    if needs_pattern_type and version < PATTERN_TYPE_VERSION:
        raise UnsupportedVersionError(f"{conn} speaks only version 0 of the ACL requests: no prefixed patterns (KIP-290)")
    return version


def _describe(binding: AclBinding) -> str:
    p, e = binding.pattern, binding.entry
    return f"{p.pattern_type.name.lower()} {p.resource_type.name} {p.name!r}, {e.permission_type.name} {e.principal} {e.operation.name} from {e.host!r}"


def _describe_filter(acl_filter: AclBindingFilter) -> str:
    p, e = acl_filter.pattern_filter, acl_filter.entry_filter
    return f"{p.pattern_type.name} {p.resource_type.name} {p.name!r}, {e.permission_type.name} {e.principal} {e.operation.name} from {e.host!r}"


def _binding(resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int, permission: int) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type), AccessControlEntry(principal, host, operation, permission))


def _creation(binding: AclBinding) -> AclCreation:
    p, e = binding.pattern, binding.entry
    return AclCreation(
        resource_type=p.resource_type,
        resource_name=p.name,
        resource_pattern_type=p.pattern_type,
        principal=e.principal,
        host=e.host,
        operation=e.operation,
        permission_type=e.permission_type,
    )


def _filter_fields(acl_filter: AclBindingFilter) -> dict[str, object]:
    p, e = acl_filter.pattern_filter, acl_filter.entry_filter
    return {
        "resource_type_filter": p.resource_type,
        "resource_name_filter": p.name,
        "pattern_type_filter": p.pattern_type,
        "principal_filter": e.principal,
        "host_filter": e.host,
        "operation": e.operation,
        "permission_type": e.permission_type,
    }


def _needs_pattern_type(acl_filter: AclBindingFilter) -> bool:
    return acl_filter.pattern_filter.pattern_type not in (PatternType.LITERAL, PatternType.ANY)


async def create_acls(cluster: Cluster, bindings: Sequence[AclBinding]) -> dict[AclBinding, KafkaError | None]:
    """CreateAcls for ``bindings``, in one request to any broker.

    A binding that already exists is created again without an error
    (Kafka's authorizers keep one copy).

    Args:
        cluster: The client's cluster view.
        bindings: The bindings; each concrete (no ANY, MATCH or UNKNOWN).

    Returns:
        ``{binding: None}`` per created binding, else its error:
        `InvalidRequestError` (42, e.g. an operation the resource type
        does not have, or a wildcard prefixed name),
        `ClusterAuthorizationFailedError` (31),
        `SecurityDisabledError` (54, no authorizer).

    Raises:
        ValueError: A binding that is not concrete.
        UnsupportedVersionError: A prefixed pattern and a broker older
            than KIP-290.
        KafkaConnectionError: No broker could be reached.
    """
    unique = list(dict.fromkeys(bindings))
    for binding in unique:
        field = binding.indefinite_field()
        if field is not None:
            raise ValueError(f"cannot create {_describe(binding)}: its {field} is not concrete")
    if not unique:
        return {}
    conn = await cluster.any_connection()
    version = _version(conn, CREATE_ACLS, any(b.pattern.pattern_type != PatternType.LITERAL for b in unique))
    response: CreateAclsResponse = await conn.request(CREATE_ACLS, CreateAclsRequest(creations=[_creation(b) for b in unique]), version=version)
    out: dict[AclBinding, KafkaError | None] = {}
    for binding, result in zip(unique, response.results, strict=True):
        out[binding] = None if result.error_code == NONE else _error(result.error_code, result.error_message, f"CreateAcls of {_describe(binding)}")
    return out


async def describe_acls(cluster: Cluster, acl_filter: AclBindingFilter) -> list[AclBinding]:
    """DescribeAcls: the bindings matching ``acl_filter``, from any broker.

    Args:
        cluster: The client's cluster view.
        acl_filter: The filter (`AclBindingFilter()` matches every binding).

    Returns:
        The matching bindings, sorted (resource type, name, pattern type,
        principal, host, operation, permission type).

    Raises:
        SecurityDisabledError: 54, the broker has no authorizer.
        ClusterAuthorizationFailedError: 31, the principal may not
            describe the cluster.
        InvalidRequestError: 42, e.g. a filter with an UNKNOWN code.
        UnsupportedVersionError: A prefixed or MATCH filter and a broker
            older than KIP-290.
        KafkaConnectionError: No broker could be reached.
    """
    conn = await cluster.any_connection()
    version = _version(conn, DESCRIBE_ACLS, _needs_pattern_type(acl_filter))
    response: DescribeAclsResponse = await conn.request(DESCRIBE_ACLS, DescribeAclsRequest(**_filter_fields(acl_filter)), version=version)  # type: ignore[arg-type]
    if response.error_code != NONE:
        raise _error(response.error_code, response.error_message, "DescribeAcls")
    found = [
        _binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type) for r in response.resources for a in r.acls
    ]
    return sorted(found, key=sort_key)


def sort_key(binding: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    """The order kclient lists bindings in: resource type, name, pattern
    type, principal, host, operation, permission type (codes).

    Args:
        binding: A binding.

    Returns:
        The key.
    """
    p, e = binding.pattern, binding.entry
    return (int(p.resource_type), p.name, int(p.pattern_type), e.principal, e.host, int(e.operation), int(e.permission_type))


def _deleted(match: DeleteAclsMatchingAcl) -> AclBinding:
    m = match
    return _binding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation, m.permission_type)


async def delete_acls(cluster: Cluster, filters: Sequence[AclBindingFilter]) -> dict[AclBindingFilter, AclDeletion]:
    """DeleteAcls: delete every binding matching one of ``filters``, in one
    request to any broker.

    Args:
        cluster: The client's cluster view.
        filters: The filters (`AclBindingFilter()` deletes every binding).

    Returns:
        ``{filter: AclDeletion}``: the bindings each filter deleted, and
        its error (`SecurityDisabledError` 54,
        `ClusterAuthorizationFailedError` 31, `InvalidRequestError` 42)
        if it failed.

    Raises:
        UnsupportedVersionError: A prefixed or MATCH filter and a broker
            older than KIP-290.
        KafkaConnectionError: No broker could be reached.
    """
    unique = list(dict.fromkeys(filters))
    if not unique:
        return {}
    conn = await cluster.any_connection()
    version = _version(conn, DELETE_ACLS, any(_needs_pattern_type(f) for f in unique))
    request = DeleteAclsRequest(filters=[DeleteAclsFilter(**_filter_fields(f)) for f in unique])  # type: ignore[arg-type]
    response: DeleteAclsResponse = await conn.request(DELETE_ACLS, request, version=version)
    out: dict[AclBindingFilter, AclDeletion] = {}
    for acl_filter, result in zip(unique, response.filter_results, strict=True):
        if result.error_code != NONE:
            out[acl_filter] = AclDeletion(error=_error(result.error_code, result.error_message, f"DeleteAcls of {_describe_filter(acl_filter)}"))
            continue
        deleted = [_deleted(m) for m in result.matching_acls if m.error_code == NONE]
        failed = [(_deleted(m), _error(m.error_code, m.error_message, "DeleteAcls")) for m in result.matching_acls if m.error_code != NONE]
        out[acl_filter] = AclDeletion(tuple(sorted(deleted, key=sort_key)), tuple(failed))
    return out
