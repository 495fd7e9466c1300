"""CreateAcls, DescribeAcls and DeleteAcls on the broker (Kafka's
``AclApis``; KIP-11, KIP-290).

DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls
ALTER (else CLUSTER_AUTHORIZATION_FAILED: the top-level error of
DescribeAcls, every result of the others). Without an authorizer every
answer is SECURITY_DISABLED. CreateAcls answers per binding: a binding
with an ANY / MATCH / UNKNOWN field, an empty name, or a CLUSTER resource
not named ``kafka-cluster`` is INVALID_REQUEST (so is a DescribeAcls or
DeleteAcls filter with an UNKNOWN code); v0 (before KIP-290)
creates literal patterns only. DeleteAcls answers per filter with the
bindings it deleted.
"""

from __future__ import annotations

import logging
from typing import Any

from kclient.acl import (
    CLUSTER_NAME,
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
)
from kclient.broker.authz.check import Check
from kclient.broker.authz.service import AclService
from kclient.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REQUEST,
    SECURITY_DISABLED,
    UNKNOWN_SERVER_ERROR,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse
from kclient.protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from kclient.protocol.messages.describe_acls import AclDescription, DescribeAclsRequest, DescribeAclsResource, DescribeAclsResponse

__all__ = ["AclApis", "binding_of", "filter_of"]

log = logging.getLogger("kclient.broker.authorizer")

_NO_AUTHORIZER = "No Authorizer is configured on the broker"
_CLUSTER_DENIED = "Cluster authorization failed."


def _code(enum_type: Any, value: int) -> Any:
    try:
        return enum_type(value)
    except ValueError:
        return enum_type(0)  # UNKNOWN


def binding_of(creation: Any) -> AclBinding:
    """The binding of a CreateAcls ``AclCreation`` (unknown codes: UNKNOWN)."""
    return AclBinding(
        ResourcePattern(_code(ResourceType, creation.resource_type), creation.resource_name, _code(PatternType, creation.resource_pattern_type)),
        AccessControlEntry(creation.principal, creation.host, _code(AclOperation, creation.operation), _code(AclPermissionType, creation.permission_type)),
    )


def filter_of(item: Any) -> AclBindingFilter:
    """The filter of a DescribeAcls request or a DeleteAcls ``DeleteAclsFilter``."""
    return AclBindingFilter(
        ResourcePatternFilter(_code(ResourceType, item.resource_type_filter), item.resource_name_filter, _code(PatternType, item.pattern_type_filter)),
        AccessControlEntryFilter(item.principal_filter, item.host_filter, _code(AclOperation, item.operation), _code(AclPermissionType, item.permission_type)),
    )


def _has_unknown(flt: AclBindingFilter) -> bool:
    """Whether a filter has a code this broker does not know (Kafka answers
    INVALID_REQUEST: "filter contains UNKNOWN elements")."""
    p, e = flt.pattern_filter, flt.entry_filter
    return 0 in (p.resource_type, p.pattern_type, e.operation, e.permission_type)


def _invalid(binding: AclBinding, version: int) -> str | None:
    """Why a binding cannot be created, or None."""
    indefinite = binding.indefinite_field()
    if indefinite is not None:
        return f"Invalid {indefinite} in ACL binding {binding}"
    if version == 0 and binding.pattern.pattern_type != PatternType.LITERAL:
        return "CreateAcls v0 creates literal resource patterns only"
    if binding.pattern.resource_type == ResourceType.CLUSTER and binding.pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not binding.pattern.name:
        return "Invalid empty resource name"
    if not binding.entry.principal or ":" not in binding.entry.principal:
        return f"Invalid principal {binding.entry.principal!r}: expected <type>:<name>"
    if not binding.entry.host:
        return "Host pattern cannot be null or empty"
    return None


class AclApis:
    """The three ACL APIs (see the module docstring).

    Args:
        service: The broker's ACLs, or None without an authorizer.
    """

    def __init__(self, service: AclService | None) -> None:
        self.service = service

    async def describe_acls(self, check: Check | None, header: RequestHeader, body: DescribeAclsRequest) -> DescribeAclsResponse:
        """DescribeAcls v0-3."""
        if self.service is None:
            return DescribeAclsResponse(error_code=SECURITY_DISABLED, error_message=_NO_AUTHORIZER)
        if check is not None and not check.cluster(AclOperation.DESCRIBE):
            return DescribeAclsResponse(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=_CLUSTER_DENIED)
        flt = filter_of(body)
        if _has_unknown(flt):
            return DescribeAclsResponse(error_code=INVALID_REQUEST, error_message="The filter contains UNKNOWN elements")
        if header.api_version == 0 and flt.pattern_filter.pattern_type != PatternType.LITERAL:
            flt = AclBindingFilter(ResourcePatternFilter(flt.pattern_filter.resource_type, flt.pattern_filter.name, PatternType.LITERAL), flt.entry_filter)
        resources: dict[ResourcePattern, list[AclDescription]] = {}
        for binding in self.service.authorizer.acls(flt):
            e = binding.entry
            resources.setdefault(binding.pattern, []).append(
                AclDescription(principal=e.principal, host=e.host, operation=int(e.operation), permission_type=int(e.permission_type))
            )
        return DescribeAclsResponse(
            resources=[
                DescribeAclsResource(resource_type=int(p.resource_type), resource_name=p.name, pattern_type=int(p.pattern_type), acls=acls)
                for p, acls in resources.items()
            ]
        )

    async def create_acls(self, check: Check | None, header: RequestHeader, body: CreateAclsRequest) -> CreateAclsResponse:
        """CreateAcls v0-3."""
        if self.service is None:
            return CreateAclsResponse(results=[AclCreationResult(error_code=SECURITY_DISABLED, error_message=_NO_AUTHORIZER) for _ in body.creations])
        if check is not None and not check.cluster(AclOperation.ALTER):
            return CreateAclsResponse(results=[AclCreationResult(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=_CLUSTER_DENIED) for _ in body.creations])
        bindings = [binding_of(c) for c in body.creations]
        results = [AclCreationResult() for _ in bindings]
        valid: list[int] = []
        for i, binding in enumerate(bindings):
            why = _invalid(binding, header.api_version)
            if why is None:
                valid.append(i)
            else:
                results[i] = AclCreationResult(error_code=INVALID_REQUEST, error_message=why)
        errors = await self.service.create([bindings[i] for i in valid])
        for i, error in zip(valid, errors, strict=True):
            if error is not None:
                results[i] = AclCreationResult(error_code=UNKNOWN_SERVER_ERROR, error_message=str(error))
        return CreateAclsResponse(results=results)

    async def delete_acls(self, check: Check | None, header: RequestHeader, body: DeleteAclsRequest) -> DeleteAclsResponse:
        """DeleteAcls v0-3."""
        if self.service is None:
            return DeleteAclsResponse(filter_results=[DeleteAclsFilterResult(error_code=SECURITY_DISABLED, error_message=_NO_AUTHORIZER) for _ in body.filters])
        if check is not None and not check.cluster(AclOperation.ALTER):
            return DeleteAclsResponse(
                filter_results=[DeleteAclsFilterResult(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=_CLUSTER_DENIED) for _ in body.filters]
            )
        filters = [filter_of(f) for f in body.filters]
        if header.api_version == 0:
            filters = [AclBindingFilter(ResourcePatternFilter(f.pattern_filter.resource_type, f.pattern_filter.name, PatternType.LITERAL), f.entry_filter) for f in filters]
        known = [f for f in filters if not _has_unknown(f)]
        deleted = iter(await self.service.delete(known))
        return DeleteAclsResponse(
            filter_results=[
                DeleteAclsFilterResult(error_code=INVALID_REQUEST, error_message="The filter contains UNKNOWN elements")
                if _has_unknown(f)
                else DeleteAclsFilterResult(matching_acls=[_matching(b, e) for b, e in next(deleted)])
                for f in filters
            ]
        )


def _matching(binding: AclBinding, error: Exception | None) -> DeleteAclsMatchingAcl:
    p, e = binding.pattern, binding.entry
    return DeleteAclsMatchingAcl(
        error_code=UNKNOWN_SERVER_ERROR if error is not None else 0,
        error_message=str(error) if error is not None else None,
        resource_type=int(p.resource_type),
        resource_name=p.name,
        pattern_type=int(p.pattern_type),
        principal=e.principal,
        host=e.host,
        operation=int(e.operation),
        permission_type=int(e.permission_type),
    )
