"""The authorization checks of DescribeUserScramCredentials and
AlterUserScramCredentials, as Kafka's ``KafkaApis`` makes them (see
`kclient.broker.authz.guards_data` for how a guard works): DESCRIBE on the
cluster, else the response's error is CLUSTER_AUTHORIZATION_FAILED; ALTER
on the cluster, else every user's result is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kclient.acl import AclOperation
from kclient.broker.authz.check import Call, Check, Guard
from kclient.errors import CLUSTER_AUTHORIZATION_FAILED
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.user_scram_credentials import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    DescribeUserScramCredentialsResponse,
)

__all__ = ["SCRAM_GUARDS"]


async def describe_user_scram_credentials(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """DESCRIBE on the cluster."""
    if check.cluster(AclOperation.DESCRIBE):
        return await call(body)
    return DescribeUserScramCredentialsResponse(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.")


async def alter_user_scram_credentials(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """ALTER on the cluster."""
    if check.cluster(AclOperation.ALTER):
        return await call(body)
    users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
    return AlterUserScramCredentialsResponse(
        results=[AlterUserScramCredentialsResult(user=user, error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=None) for user in users]
    )


SCRAM_GUARDS: dict[int, Guard] = {50: describe_user_scram_credentials, 51: alter_user_scram_credentials}
