"""The authorization checks of DescribeClientQuotas and AlterClientQuotas,
as Kafka's ``KafkaApis`` makes them (see `kclient.broker.authz.guards_data`
for how a guard works): DESCRIBE_CONFIGS on the cluster, else the response
is CLUSTER_AUTHORIZATION_FAILED; ALTER_CONFIGS on the cluster, else every
entry is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kclient.acl import AclOperation
from kclient.broker.authz.check import Call, Check, Guard
from kclient.errors import CLUSTER_AUTHORIZATION_FAILED
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.client_quotas import AlterClientQuotasResponse, AlterClientQuotasResult, DescribeClientQuotasResponse

__all__ = ["QUOTA_GUARDS"]


async def describe_client_quotas(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """DESCRIBE_CONFIGS on the cluster."""
    if check.cluster(AclOperation.DESCRIBE_CONFIGS):
        return await call(body)
    return DescribeClientQuotasResponse(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.", entries=None)


async def alter_client_quotas(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """ALTER_CONFIGS on the cluster."""
    if check.cluster(AclOperation.ALTER_CONFIGS):
        return await call(body)
    return AlterClientQuotasResponse(
        entries=[AlterClientQuotasResult(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=None, entity=list(e.entity)) for e in body.entries]
    )


QUOTA_GUARDS: dict[int, Guard] = {48: describe_client_quotas, 49: alter_client_quotas}
