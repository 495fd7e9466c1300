"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49) on the
bundled broker (KIP-546), over `kclient.broker.quotas.manager.QuotaManager`.

AlterClientQuotas writes each entity's node under ``/config`` and a change
notification (every broker applies it; a standalone broker keeps the
quotas in memory); each entry is answered on its own: INVALID_REQUEST for
an unknown entity type, an unsupported combination, a key the entity type
does not have or a value <= 0 (Kafka's ``InvalidRequestException``).
DescribeClientQuotas answers from the broker's view, which is ZooKeeper's
once the notification arrived.
"""

from __future__ import annotations

import logging

from kclient.broker.quotas.entities import make_entity
from kclient.broker.quotas.manager import QuotaManager
from kclient.errors import INVALID_REQUEST, NONE, UNKNOWN_SERVER_ERROR, ConfigError, KafkaError
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterClientQuotasResult,
    DescribeClientQuotasEntry,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    ValueData,
)

__all__ = ["ClientQuotaApis"]

log = logging.getLogger("kclient.broker")


class ClientQuotaApis:
    """The two KIP-546 handlers.

    Args:
        quotas: The broker's quota manager.
    """

    def __init__(self, quotas: QuotaManager) -> None:
        self.quotas = quotas

    async def describe_client_quotas(self, header: RequestHeader, body: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
        """DescribeClientQuotas v0: the entities matching every component."""
        matches = [(c.entity_type, c.match_type, c.match) for c in body.components]
        if any(m[1] not in (0, 1, 2) for m in matches) or len({m[0] for m in matches}) != len(matches):
            return DescribeClientQuotasResponse(error_code=INVALID_REQUEST, error_message="invalid match type or repeated entity type", entries=None)
        found = self.quotas.describe(matches, body.strict)
        entries = [
            DescribeClientQuotasEntry(
                entity=[EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
                values=[ValueData(key=k, value=v) for k, v in sorted(values.items())],
            )
            for entity, values in sorted(found.items(), key=lambda item: repr(item[0]))
        ]
        return DescribeClientQuotasResponse(entries=entries)

    async def alter_client_quotas(self, header: RequestHeader, body: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
        """AlterClientQuotas v0: each entry set or removed on its own."""
        results = []
        for entry in body.entries:
            code, message = NONE, None
            try:
                components = {c.entity_type: c.entity_name for c in entry.entity}
                if len(components) != len(entry.entity):
                    raise ConfigError("repeated entity type")
                entity = make_entity(components)
                set_ = {op.key: op.value for op in entry.ops if not op.remove}
                remove = [op.key for op in entry.ops if op.remove]
                await self.quotas.alter(entity, set_, remove, body.validate_only)
            except ConfigError as exc:
                code, message = INVALID_REQUEST, str(exc)
            except KafkaError as exc:
                log.warning("AlterClientQuotas failed: %s", exc)
                code, message = UNKNOWN_SERVER_ERROR, str(exc)
            results.append(AlterClientQuotasResult(error_code=code, error_message=message, entity=list(entry.entity)))
        return AlterClientQuotasResponse(entries=results)
