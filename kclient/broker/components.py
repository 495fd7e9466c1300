"""The broker's components, built and wired once (Kafka's ``BrokerServer``).

Each component gets the collaborators it uses, not the whole broker:

- `kclient.broker.metadata_cache.MetadataCache`: the cluster as the
  controller last described it;
- `kclient.broker.replica_manager.ReplicaManager`: this broker's replicas
  (the log manager, the metadata cache, the topic overrides, the
  append notifier's wake-up, the ZooKeeper session);
- `kclient.broker.controller.Controller` (ZooKeeper mode only): the
  controller election and, when elected, the cluster's decisions (the
  replica manager takes its requests to this broker);
- `kclient.broker.topic_admin.TopicAdmin`: topic creation and deletion
  (the replica manager leads a standalone broker's new partitions);
- `kclient.broker.group.metadata_manager.GroupMetadataManager` and
  `kclient.broker.group.coordinator.GroupCoordinator`: the consumer
  groups (told by the replica manager when an offsets partition changes
  leader);
- `kclient.broker.txn.service.TransactionService`: the transaction
  coordinator (KIP-98; told by the replica manager when a
  ``__transaction_state`` partition changes leader);
- `kclient.broker.config_changes.ConfigChangeListener` (ZooKeeper mode
  only): topic config changes, applied by the replica manager;
- `kclient.broker.authz.authorization.Authorization`: the ACLs (followed in
  ZooKeeper) and the checks every API makes.

The request handlers (`kclient.broker.handlers.RequestHandlers`, Kafka's
``KafkaApis``) are built over these components; no component knows them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from kclient.broker.authz.authorization import Authorization
from kclient.broker.config_changes import ConfigChangeListener
from kclient.broker.controller import Controller
from kclient.broker.group.coordinator import GroupCoordinator
from kclient.broker.group.metadata_manager import GroupMetadataManager
from kclient.broker.metadata_cache import MetadataCache
from kclient.broker.quotas.manager import QuotaManager
from kclient.broker.replica_manager import ReplicaManager
from kclient.broker.state import BrokerState
from kclient.broker.topic_admin import TopicAdmin
from kclient.broker.txn.service import TransactionService

if TYPE_CHECKING:
    from kclient.config import BrokerConfig
    from kclient.zk.client import ZkClient

__all__ = ["BrokerComponents"]


class BrokerComponents:
    """The components of one broker over its `BrokerState` (see the module
    docstring). Start them with ``await nursery.start(components.run)``;
    `close` flushes and closes the logs.

    Args:
        state: The broker's state (opened logs, identity).
        zk: The broker's ZooKeeper session (registered), or None for a
            standalone broker.
    """

    def __init__(self, state: BrokerState, *, zk: ZkClient | None = None) -> None:
        config = state.config
        self.state = state
        self.zk = zk
        self.metadata_cache = MetadataCache()
        self.replica_manager = ReplicaManager(
            config,
            state.broker_id,
            state.logs,
            self.metadata_cache,
            state.topic_overrides,
            notify=state.appends.notify,
            advertised_address=state.advertised_address,
            zk=zk,
            clock=state.clock,
        )
        #: The controller (ZooKeeper mode), else None.
        self.controller = (
            Controller(config, state.broker_id, zk, self.replica_manager, clock=state.clock) if zk is not None else None
        )
        self.topic_admin = TopicAdmin(
            config,
            state.broker_id,
            state.logs,
            self.metadata_cache,
            self.replica_manager,
            state.topic_overrides,
            zk=zk,
            controller=self.controller,
        )
        self.group_metadata_manager = GroupMetadataManager(
            config, self.metadata_cache, self.topic_admin, state.topic_overrides, clock=state.clock
        )
        self.group_coordinator = GroupCoordinator(config, self.group_metadata_manager, clock=state.clock)
        self.replica_manager.leadership_listeners.append(self.group_metadata_manager.leadership_changed)
        #: The transaction coordinator.
        self.transactions = TransactionService(
            config,
            state.broker_id,
            self.metadata_cache,
            self.topic_admin,
            state.topic_overrides,
            state.producer_ids.allocate,
            clock=state.clock,
        )
        self.replica_manager.leadership_listeners.append(self.transactions.state_log.leadership_changed)
        #: Topic config change notifications (ZooKeeper mode), else None.
        #: Client quotas (KIP-13, KIP-55, KIP-612; `kclient.broker.quotas`).
        self.quotas = QuotaManager(config.quota_window_num, config.quota_window_size_seconds, zk, trio.current_time)
        self.config_changes = (
            ConfigChangeListener(
                zk, self.replica_manager.topic_config_changed, self.quotas.entity_changed, change_expiration_ms=config.change_notification_expiration_ms
            )
            if zk is not None
            else None
        )
        #: Authorization (`kclient.broker.authz`): the ACLs and each API's checks.
        self.authorization = Authorization(config, zk, self.metadata_cache.has_topic)

    @classmethod
    def open(
        cls, config: BrokerConfig, *, advertised_host: str, advertised_port: int, zk: ZkClient | None = None
    ) -> BrokerComponents:
        """Open the broker's state (`kclient.broker.state.BrokerState.open`)
        and build its components.

        Args:
            config: The broker's configuration.
            advertised_host: The host given to clients in Metadata.
            advertised_port: The port given to clients in Metadata.
            zk: The ZooKeeper session, or None for a standalone broker.

        Returns:
            The components.

        Raises:
            kclient.errors.ConfigError: Inconsistent metadata.
            OSError: An unusable directory.
        """
        return cls(BrokerState.open(config, advertised_host=advertised_host, advertised_port=advertised_port), zk=zk)

    async def lead_local_logs(self) -> None:
        """A standalone broker leads every partition whose log it holds."""
        for topic, count in sorted(self.state.logs.topics().items()):
            await self.replica_manager.lead_locally(topic, range(count))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the replica manager, the config change listener, the group
        and transaction coordinators and the controller until cancelled; started once each
        of them is."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.authorization.run)
            await nursery.start(self.replica_manager.run)
            if self.config_changes is not None:
                nursery.start_soon(self.config_changes.run)
            await self.quotas.load()
            await nursery.start(self.group_coordinator.run)
            await nursery.start(self.transactions.run)
            if self.controller is not None:
                await nursery.start(self.controller.run)
            task_status.started()

    def close(self) -> None:
        """Flush and close every log (idempotent)."""
        self.state.close()
