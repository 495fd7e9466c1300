"""A broker's authorization, built from its config (``authorizer.class.name``,
``super.users``, ``allow.everyone.if.no.acl.found``): the request handlers
hand every request to `Authorization.handle`, which runs the API's checks
around the handler (`kclient.broker.authz.guards_data`,
`kclient.broker.authz.guards_admin`) and answers the ACL APIs itself.

With ``authorizer.class.name`` empty (the default) nothing is checked, as
in Kafka; the ACL APIs answer SECURITY_DISABLED. The brokers of a cluster
talk to each other as clients too (replica fetches, controller requests,
transaction markers): with an authorizer, the principal they use (the
inter-broker listener's) must be in ``super.users`` or be allowed
CLUSTER_ACTION, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from kclient.broker.authz.acl_apis import AclApis
from kclient.broker.authz.authorizer import AUTHORIZER_NAMES, AclAuthorizer, parse_super_users
from kclient.broker.authz.check import Call, Check, Guard
from kclient.broker.authz.guards_admin import ADMIN_GUARDS
from kclient.broker.authz.guards_data import DATA_GUARDS, metadata_guard
from kclient.broker.authz.principal import RequestContext
from kclient.broker.authz.service import AclService
from kclient.broker.quotas.guards import QUOTA_GUARDS
from kclient.broker.scram.guards import SCRAM_GUARDS
from kclient.errors import ConfigError
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages import ALL_APIS

if TYPE_CHECKING:
    from kclient.config import BrokerConfig
    from kclient.zk.client import ZkClient

__all__ = ["ACL_API_KEYS", "Authorization"]

#: DescribeAcls, CreateAcls, DeleteAcls.
ACL_API_KEYS = (29, 30, 31)


class Authorization:
    """The checks of one broker (see the module docstring).

    Args:
        config: The broker's config.
        zk: Its ZooKeeper session (None: ACLs kept in memory).
        topic_exists: Whether the broker knows a topic (Metadata's
            auto-creation check).

    Raises:
        ConfigError: An ``authorizer.class.name`` kclient does not have.
    """

    def __init__(self, config: BrokerConfig, zk: ZkClient | None, topic_exists: Callable[[str], bool]) -> None:
        name = config.authorizer_class_name
        self.authorizer: AclAuthorizer | None = None
        self.service: AclService | None = None
        if name:
            if name not in AUTHORIZER_NAMES:
                raise ConfigError(f"Invalid value {name} for configuration authorizer.class.name: kclient has {', '.join(AUTHORIZER_NAMES)}")
            self.authorizer = AclAuthorizer(
                parse_super_users(config.super_users), allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found
            )
            self.service = AclService(self.authorizer, zk, change_expiration_ms=config.change_notification_expiration_ms)
        self.acl_apis = AclApis(self.service)
        self.guards: dict[int, Guard] = {
            **DATA_GUARDS,
            **ADMIN_GUARDS,
            **QUOTA_GUARDS,
            **SCRAM_GUARDS,
            3: metadata_guard(topic_exists, config.auto_create_topics_enable),
        }

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load and follow the ACLs (with an authorizer) until cancelled;
        report the denials the log's rate limit held back once per interval."""
        if self.service is None or self.authorizer is None:
            task_status.started()
            return
        async with trio.open_nursery() as nursery:
            await nursery.start(self.service.run)
            nursery.start_soon(self._flush_denials, self.authorizer)
            task_status.started()

    @staticmethod
    async def _flush_denials(authorizer: AclAuthorizer) -> None:
        while True:
            await trio.sleep(authorizer.log_interval)
            authorizer.flush_log()

    async def handle(self, header: RequestHeader, body: Any, context: RequestContext | None, call: Call) -> Any:
        """Answer one request through its checks.

        Args:
            header: The request header.
            body: The request message.
            context: Who sent it (None: a request from inside the broker,
                not checked).
            call: The API's handler (the request in, the response out).

        Returns:
            The response (None: no response).
        """
        check = None
        if self.authorizer is not None and context is not None:
            api = ALL_APIS.get(header.api_key)
            check = Check(self.authorizer, context, api.name if api is not None else str(header.api_key))
        key = header.api_key
        if key == 29:
            return await self.acl_apis.describe_acls(check, header, body)
        if key == 30:
            return await self.acl_apis.create_acls(check, header, body)
        if key == 31:
            return await self.acl_apis.delete_acls(check, header, body)
        guard = self.guards.get(key)
        if check is None or guard is None:
            return await call(body)
        return await guard(check, header, body, call)
