"""The partition states of a controller request, whatever its version.

LeaderAndIsr and UpdateMetadata carry one state per partition: in a flat
``ungrouped_partition_states`` list, each naming its topic, up to
LeaderAndIsr v1 and UpdateMetadata v4; grouped by topic in
``topic_states`` from LeaderAndIsr v2 and UpdateMetadata v5 on (KIP-380,
where a grouped state's ``topic_name`` is not on the wire). Kafka's
``LeaderAndIsrRequest.partitionStates()`` and
``UpdateMetadataRequest.partitionStates()`` flatten both shapes; so does
`partition_states`.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

_State_co = TypeVar("_State_co", covariant=True)


class NamedState(Protocol):
    """A partition state as the ungrouped list holds it."""

    @property
    def topic_name(self) -> str: ...


_Named_co = TypeVar("_Named_co", bound=NamedState, covariant=True)


class TopicStates(Protocol[_State_co]):
    """An entry of a request's ``topic_states``."""

    @property
    def topic_name(self) -> str: ...

    @property
    def partition_states(self) -> Sequence[_State_co]: ...


class GroupedStates(Protocol[_Named_co]):
    """A LeaderAndIsr or UpdateMetadata request: both shapes of its
    partition states."""

    @property
    def ungrouped_partition_states(self) -> Sequence[_Named_co]: ...

    @property
    def topic_states(self) -> Sequence[TopicStates[_Named_co]]: ...


_Named = TypeVar("_Named", bound=NamedState)


def partition_states(request: GroupedStates[_Named]) -> list[tuple[str, _Named]]:
    """``(topic, state)`` of each partition state of ``request``, ungrouped
    ones first, then grouped ones in topic order.

    Args:
        request: A `kclient.protocol.messages.leader_and_isr.LeaderAndIsrRequest`
            or `kclient.protocol.messages.update_metadata.UpdateMetadataRequest`
            (any version).

    Returns:
        One ``(topic name, partition state)`` pair per partition.
    """
    states = [(s.topic_name, s) for s in request.ungrouped_partition_states]
    for topic in request.topic_states:
        states.extend((topic.topic_name, s) for s in topic.partition_states)
    return states


__all__ = ["GroupedStates", "NamedState", "TopicStates", "partition_states"]
