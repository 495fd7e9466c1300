"""Client quotas through the admin client: DescribeClientQuotas (key 48)
and AlterClientQuotas (key 49), as Kafka's ``Admin.describeClientQuotas``
and ``Admin.alterClientQuotas`` (KIP-546).

An entity is ``{entity type: name}`` with types ``user``, ``client-id``
and ``ip``; a name of ``None`` is the type's default entity
(``<default>``). Quota keys: ``producer_byte_rate`` and
``consumer_byte_rate`` (bytes/s, KIP-13/KIP-55), ``request_percentage``
(KIP-124), ``connection_creation_rate`` (ip entities, KIP-612). Both calls
go to any broker (a ZooKeeper-mode broker writes ``/config/...`` and
notifies every broker). Kafka protocol guide:
https://kafka.apache.org/protocol#The_Messages_DescribeClientQuotas and
https://kafka.apache.org/protocol#The_Messages_AlterClientQuotas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from kclient.client.cluster import Cluster
from kclient.errors import NONE, error_for_code
from kclient.protocol.messages import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS
from kclient.protocol.messages.client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    AlterClientQuotasEntry,
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    ComponentData,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    OpData,
)

__all__ = ["ClientQuotaAlteration", "ClientQuotaEntity", "ClientQuotaFilterComponent", "alter_client_quotas", "describe_client_quotas"]

#: A quota entity as returned by `describe_client_quotas`: its sorted
#: ``(entity type, name or None)`` components (hashable).
ClientQuotaEntity = tuple[tuple[str, str | None], ...]


def entity_key(entity: Mapping[str, str | None]) -> ClientQuotaEntity:
    """``{"user": "alice"}`` -> ``(("user", "alice"),)``."""
    return tuple(sorted(entity.items()))


@attrs.frozen
class ClientQuotaFilterComponent:
    """One component of a DescribeClientQuotas filter (Kafka's
    ``ClientQuotaFilterComponent``).

    Attributes:
        entity_type: ``user``, ``client-id`` or ``ip``.
        match: The name (``match_type`` exact).
        match_type: ``exact`` (the name), ``default`` (the default
            entity) or ``specified`` (any name but the default).
    """

    entity_type: str
    match: str | None = None
    match_type: str = "exact"

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        """Entities whose ``entity_type`` component is ``name``."""
        return cls(entity_type, name, "exact")

    @classmethod
    def of_default_entity(cls, entity_type: str) -> ClientQuotaFilterComponent:
        """Entities whose ``entity_type`` component is the default."""
        return cls(entity_type, None, "default")

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        """Entities with any named (not default) ``entity_type`` component."""
        return cls(entity_type, None, "specified")


@attrs.frozen
class ClientQuotaAlteration:
    """The changes to one entity's quotas (Kafka's ``ClientQuotaAlteration``).

    Attributes:
        entity: ``{entity type: name or None (default)}``.
        ops: Quota key -> new value, or None to remove it.
    """

    entity: Mapping[str, str | None]
    ops: Mapping[str, float | None]


_MATCH_TYPES = {"exact": MATCH_EXACT, "default": MATCH_DEFAULT, "specified": MATCH_SPECIFIED}


async def describe_client_quotas(
    cluster: Cluster, components: Sequence[ClientQuotaFilterComponent] = (), *, strict: bool = False
) -> dict[ClientQuotaEntity, dict[str, float]]:
    """The quotas of the entities matching every component.

    Args:
        cluster: The client's cluster view.
        components: The filter (none: every entity, with ``strict`` False).
        strict: Only entities with no component other than those filtered.

    Returns:
        ``{(("user", "alice"),): {"producer_byte_rate": 1024.0}}``.

    Raises:
        InvalidRequestError: 42, a malformed filter.
        KafkaConnectionError: No broker could be reached.
    """
    conn = await cluster.any_connection()
    body = DescribeClientQuotasRequest(
        components=[ComponentData(entity_type=c.entity_type, match_type=_MATCH_TYPES[c.match_type], match=c.match) for c in components],
        strict=strict,
    )
    response: DescribeClientQuotasResponse = await conn.request(DESCRIBE_CLIENT_QUOTAS, body)
    if response.error_code != NONE:
        raise error_for_code(response.error_code)(f"DescribeClientQuotas: {response.error_message or error_for_code(response.error_code).name}")
    return {
        entity_key({e.entity_type: e.entity_name for e in entry.entity}): {v.key: v.value for v in entry.values}
        for entry in response.entries or []
    }


async def alter_client_quotas(cluster: Cluster, alterations: Sequence[ClientQuotaAlteration], *, validate_only: bool = False) -> None:
    """Set or remove quotas of entities.

    Args:
        cluster: The client's cluster view.
        alterations: The changes, one per entity.
        validate_only: Only check them.

    Raises:
        InvalidRequestError: 42, an unknown entity type or key, a value <= 0
            (the first failed entity's error).
        KafkaConnectionError: No broker could be reached.
    """
    conn = await cluster.any_connection()
    body = AlterClientQuotasRequest(
        entries=[
            AlterClientQuotasEntry(
                entity=[EntityData(entity_type=k, entity_name=v) for k, v in a.entity.items()],
                ops=[OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in a.ops.items()],
            )
            for a in alterations
        ],
        validate_only=validate_only,
    )
    response: AlterClientQuotasResponse = await conn.request(ALTER_CLIENT_QUOTAS, body)
    for entry in response.entries:
        if entry.error_code != NONE:
            entity = {e.entity_type: e.entity_name for e in entry.entity}
            raise error_for_code(entry.error_code)(f"AlterClientQuotas of {entity}: {entry.error_message or error_for_code(entry.error_code).name}")
