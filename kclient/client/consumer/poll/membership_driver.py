"""What the poll consumer (`kclient.client.consumer.poll.core`) asks of
its group membership, whichever protocol the member speaks: the classic
one (`kclient.client.consumer.poll.group.GroupDriver`: JoinGroup,
SyncGroup, Heartbeat) or Kafka 4.0's (`kclient.client.consumer.poll.
consumer_protocol_driver.ConsumerProtocolDriver`: ConsumerGroupHeartbeat,
KIP-848). Kafka's ``AsyncKafkaConsumer`` and ``ClassicKafkaConsumer`` sit
behind one ``Consumer`` interface the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import trio

from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.client.consumer.poll.group import ListenerCall, Phase
from kclient.client.consumer.poll.types import OffsetAndMetadata, TopicPartition


class MemberGeneration(Protocol):
    """The member's generation (classic) or member epoch (KIP-848); -1
    (or below) when it is not in the group."""

    @property
    def generation(self) -> int: ...

    @property
    def group_id(self) -> str:
        """``group.id``."""
        ...

    @property
    def group_instance_id(self) -> str | None:
        """``group.instance.id``, or None."""
        ...

    def current(self) -> tuple[int, str]:
        """``(generation or member epoch, member id)``."""
        ...


class MembershipDriver(Protocol):
    """A member's side of a consumer group, on the consumer's trio loop."""

    @property
    def coordinator(self) -> GroupCoordinator:
        """The group coordinator client (commits and committed offsets)."""
        ...

    @property
    def member(self) -> MemberGeneration:
        """The membership (its generation or epoch)."""
        ...

    @property
    def phase(self) -> Phase:
        """Where the member is; `Phase.JOINED` / `Phase.FAILED`: a `step`
        is due."""
        ...

    @property
    def rejoin_needed(self) -> bool:
        """A `step` must (re)join the group."""
        ...

    @property
    def joined(self) -> bool:
        """The member joined (or is joining) the group."""
        ...

    def poll_started(self) -> None:
        """A ``poll`` step began (``max.poll.interval.ms`` timer stops)."""

    def poll_ended(self) -> None:
        """A ``poll`` step ended (the timer starts again)."""

    def poll_expired(self) -> bool:
        """Whether the application went more than ``max.poll.interval.ms``
        without polling."""
        ...

    def request_rejoin(self, why: str) -> None:
        """The subscription changed, or the member must rejoin.

        Args:
            why: Logged.
        """

    async def step(self, nursery: trio.Nursery) -> ListenerCall | None:
        """The next rebalance step, run inside ``poll``.

        Args:
            nursery: Runs background work of the step.

        Returns:
            A listener call to run before the next step, or None.
        """
        ...

    async def run(self) -> None:
        """The background tasks (heartbeats), until cancelled."""

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit offsets as this member.

        Args:
            offsets: ``{partition: OffsetAndMetadata}``.
        """

    def revoke_for_leave(self) -> ListenerCall | None:
        """The listener call due before leaving, if any."""
        ...

    async def leave(self) -> None:
        """Leave the group."""


__all__ = ["MemberGeneration", "MembershipDriver"]
