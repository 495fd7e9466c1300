"""Creation of an internal topic on first use (``__consumer_offsets``,
``__transaction_state``), as Kafka's coordinators create theirs: with the
configured partition count and replication factor, lowered to the live
brokers (logged) when fewer are up, and one creation at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kclient.errors import COORDINATOR_NOT_AVAILABLE, NONE, TOPIC_ALREADY_EXISTS

if TYPE_CHECKING:
    from kclient.broker.metadata_cache import MetadataCache
    from kclient.broker.topic_admin import TopicAdmin

log = logging.getLogger(__name__)


class InternalTopic:
    """One internal topic, created the first time a coordinator needs it.

    Args:
        name: The topic.
        metadata_cache: Tells whether the topic exists.
        topic_admin: Creates it.
        replication_config: The broker config naming its replication
            factor (for the log line when it is lowered).
    """

    def __init__(self, name: str, metadata_cache: MetadataCache, topic_admin: TopicAdmin, replication_config: str) -> None:
        self.name = name
        self.metadata_cache = metadata_cache
        self.topic_admin = topic_admin
        self.replication_config = replication_config
        self._creating = False

    async def ensure(self, partitions: int, replication_factor: int, topic_configs: Callable[[int], dict[str, str]]) -> int:
        """Create the topic if it is missing.

        Args:
            partitions: Its partition count.
            replication_factor: The configured replication factor (at most
                the live brokers are used).
            topic_configs: The topic configs for the replication factor it
                gets.

        Returns:
            NONE when it exists, COORDINATOR_NOT_AVAILABLE while its
                creation goes on (or failed).
        """
        if self.metadata_cache.has_topic(self.name):
            return NONE
        if self._creating:
            return COORDINATOR_NOT_AVAILABLE
        self._creating = True
        try:
            live = await self.topic_admin.live_brokers()
            rf = replication_factor
            if len(live) < rf:
                log.warning(
                    "creating %s with replication factor %d: only %d live broker(s) (%s=%d)",
                    self.name, max(1, len(live)), len(live), self.replication_config, rf,
                )
                rf = max(1, len(live))
            code, message = await self.topic_admin.create(self.name, partitions, rf, topic_configs(rf))
        finally:
            self._creating = False
        if code == TOPIC_ALREADY_EXISTS or (code == NONE and self.topic_admin.zk is not None):
            return NONE if self.metadata_cache.has_topic(self.name) else COORDINATOR_NOT_AVAILABLE
        if code != NONE:
            log.warning("cannot create %s: %s", self.name, message)
            return COORDINATOR_NOT_AVAILABLE
        log.info("created %s with %d partition(s), replication factor %d", self.name, partitions, rf)
        return NONE
