"""Topic names by topic id, for a member of a consumer group with Kafka
4.0's protocol (KIP-848 assignments name topics by id, KIP-516).

Looked up with Metadata v10+ (every topic, with its id); a broker
without those versions is asked with ConsumerGroupDescribe instead (the
member's current and target assignments name each topic both ways).
Names once found are kept: a topic revoked after its deletion is still
named.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping

from kclient.client.cluster import Cluster
from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.errors import NONE, UnsupportedVersionError, error_for_code
from kclient.protocol.messages.consumer_group_describe import CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from kclient.protocol.messages.metadata import METADATA_FULL, MetadataRequest, MetadataResponse

log = logging.getLogger("kclient.consumer")

#: The all-zero topic id Metadata gives a topic it does not know.
ZERO_ID = uuid.UUID(int=0)
#: The first Metadata version with topic ids (KIP-516).
TOPIC_ID_VERSION = 10


def names_from_metadata(response: MetadataResponse) -> dict[uuid.UUID, str]:
    """``{topic id: name}`` of the topics a Metadata v10+ response
    describes without error.

    Args:
        response: The response.

    Returns:
        The names.
    """
    return {t.topic_id: t.name for t in response.topics if t.error_code == NONE and t.name and t.topic_id is not None and t.topic_id != ZERO_ID}


def names_from_describe(response: ConsumerGroupDescribeResponse) -> dict[uuid.UUID, str]:
    """``{topic id: name}`` of every topic in the members' current and
    target assignments of a ConsumerGroupDescribe response.

    Args:
        response: The response.

    Returns:
        The names.

    Raises:
        BrokerResponseError: a group's error.
    """
    found: dict[uuid.UUID, str] = {}
    for group in response.groups:
        if group.error_code != NONE:
            raise error_for_code(group.error_code)(f"ConsumerGroupDescribe of group {group.group_id!r}: {group.error_message or ''}".rstrip(": "))
        for member in group.members:
            for assignment in (member.assignment, member.target_assignment):
                for tps in assignment.topic_partitions:
                    if tps.topic_id is not None and tps.topic_name:
                        found[tps.topic_id] = tps.topic_name
    return found


class TopicNames:
    """The names of the topics a member is assigned (use on a trio loop).

    Args:
        cluster: Metadata and connections.
        coordinator: The group's coordinator (for ConsumerGroupDescribe).
    """

    def __init__(self, cluster: Cluster, coordinator: GroupCoordinator) -> None:
        self.cluster = cluster
        self.coordinator = coordinator
        self._names: dict[uuid.UUID, str] = {}
        self._describe_only = False

    @property
    def names(self) -> Mapping[uuid.UUID, str]:
        """``{topic id: name}`` found so far."""
        return self._names

    async def resolve(self, topic_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
        """Look up the names of the ids not known yet.

        Args:
            topic_ids: Topic ids.

        Returns:
            The ids still without a name (a topic just created may not be
            in the metadata yet: ask again later).

        Raises:
            KafkaError: the lookup failed.
        """
        missing = {tid for tid in topic_ids if tid not in self._names}
        if not missing:
            return set()
        if not self._describe_only:
            try:
                self._names.update(await self._from_metadata())
            except UnsupportedVersionError:
                log.info("group %s: no Metadata v10+ on this cluster; topic ids are named with ConsumerGroupDescribe", self.coordinator.group_id)
                self._describe_only = True
        missing -= self._names.keys()
        if missing and self._describe_only:
            self._names.update(await self._from_describe())
            missing -= self._names.keys()
        return missing

    async def _from_metadata(self) -> dict[uuid.UUID, str]:
        conn = await self.cluster.any_connection()
        version = conn.version_for(METADATA_FULL, floor=TOPIC_ID_VERSION)
        body = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        response: MetadataResponse = await conn.request(METADATA_FULL, body, version=version)
        return names_from_metadata(response)

    async def _from_describe(self) -> dict[uuid.UUID, str]:
        body = ConsumerGroupDescribeRequest(group_ids=[self.coordinator.group_id])
        return await self.coordinator.call(CONSUMER_GROUP_DESCRIBE, body, names_from_describe)


__all__ = ["TOPIC_ID_VERSION", "ZERO_ID", "TopicNames", "names_from_describe", "names_from_metadata"]
