"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), versions
0-1 (v1 is the first flexible version, KIP-482). Source:
`DescribeClientQuotasRequest.json` / `DescribeClientQuotasResponse.json`
and `AlterClientQuotasRequest.json` / `AlterClientQuotasResponse.json`;
see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DescribeClientQuotas) and
KIP-546.

An entity is a list of ``(entity_type, entity_name)`` components
(``user``, ``client-id``, ``ip``; a null name is the type's default
entity). DescribeClientQuotas filters entities by components (match type
0: the name exactly, 1: the default entity, 2: any specified name;
``strict``: no other components); quota values are float64
(``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``connection_creation_rate``)."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Float64, Int8, Int16, Int32, NullableString, String

#: ``ComponentData.match_type`` values (Kafka's ``ClientQuotaFilterComponent``).
MATCH_EXACT = 0

MATCH_DEFAULT = 1

MATCH_SPECIFIED = 2


@attrs.define(kw_only=True)
class ComponentData:
    """An entry of ``DescribeClientQuotasRequest.components``."""

    entity_type: String = ""
    match_type: Int8 = 0
    match: NullableString = None


@attrs.define(kw_only=True)
class DescribeClientQuotasRequest:
    """The DescribeClientQuotas request body, versions 0-1 (``DescribeClientQuotasRequest.json``)."""

    components: list[ComponentData] = attrs.Factory(list)
    strict: Bool = False


@attrs.define(kw_only=True)
class EntityData:
    """A component of a quota entity (``EntryData.entity``)."""

    entity_type: String = ""
    entity_name: NullableString = None


@attrs.define(kw_only=True)
class ValueData:
    """An entry of ``DescribeClientQuotasEntry.values``."""

    key: String = ""
    value: Float64 = 0.0


@attrs.define(kw_only=True)
class DescribeClientQuotasEntry:
    """An entry of ``DescribeClientQuotasResponse.entries``."""

    entity: list[EntityData] = attrs.Factory(list)
    values: list[ValueData] = attrs.Factory(list)


@attrs.define(kw_only=True)
class DescribeClientQuotasResponse:
    """The DescribeClientQuotas response body, versions 0-1 (``DescribeClientQuotasResponse.json``)."""

    throttle_time_ms: Int32 = 0
    error_code: Int16 = 0
    error_message: NullableString = None
    entries: list[DescribeClientQuotasEntry] | None = attrs.Factory(list)


@attrs.define(kw_only=True)
class OpData:
    """An entry of ``AlterClientQuotasEntry.ops``: set ``key`` to ``value``,
    or remove it."""

    key: String = ""
    value: Float64 = 0.0
    remove: Bool = False


@attrs.define(kw_only=True)
class AlterClientQuotasEntry:
    """An entry of ``AlterClientQuotasRequest.entries``."""

    entity: list[EntityData] = attrs.Factory(list)
    ops: list[OpData] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AlterClientQuotasRequest:
    """The AlterClientQuotas request body, versions 0-1 (``AlterClientQuotasRequest.json``)."""

    entries: list[AlterClientQuotasEntry] = attrs.Factory(list)
    validate_only: Bool = False


@attrs.define(kw_only=True)
class AlterClientQuotasResult:
    """An entry of ``AlterClientQuotasResponse.entries``."""

    error_code: Int16 = 0
    error_message: NullableString = None
    entity: list[EntityData] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AlterClientQuotasResponse:
    """The AlterClientQuotas response body, versions 0-1 (``AlterClientQuotasResponse.json``)."""

    throttle_time_ms: Int32 = 0
    entries: list[AlterClientQuotasResult] = attrs.Factory(list)


DESCRIBE_CLIENT_QUOTAS = Api(
    key=48,
    name="DescribeClientQuotas",
    min_version=0,
    max_version=1,
    flexible_from=1,
    request_type=DescribeClientQuotasRequest,
    response_type=DescribeClientQuotasResponse,
)

ALTER_CLIENT_QUOTAS = Api(
    key=49,
    name="AlterClientQuotas",
    min_version=0,
    max_version=1,
    flexible_from=1,
    request_type=AlterClientQuotasRequest,
    response_type=AlterClientQuotasResponse,
)
