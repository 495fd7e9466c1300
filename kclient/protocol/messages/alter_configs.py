"""AlterConfigs (key 33, versions 0-2) and IncrementalAlterConfigs (key 44,
versions 0-1). Source: `AlterConfigsRequest.json` / `AlterConfigsResponse.json`
and `IncrementalAlterConfigsRequest.json` / `IncrementalAlterConfigsResponse.json`;
see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_AlterConfigs,
https://kafka.apache.org/protocol#The_Messages_IncrementalAlterConfigs),
KIP-133 (AlterConfigs) and KIP-339 (IncrementalAlterConfigs).

AlterConfigs replaces a resource's whole set of dynamic configs;
IncrementalAlterConfigs changes single configs, each with an operation
(`OP_SET`, `OP_DELETE`, `OP_APPEND`, `OP_SUBTRACT`). AlterConfigs v1 has
the v0 layout; v2 and IncrementalAlterConfigs v1 are the first flexible
versions (KIP-482). Both answer per resource."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int8, Int16, Int32, NullableString, String

#: IncrementalAlterConfigs ``config_operation`` values (``AlterConfigOp.OpType``).
OP_SET = 0

OP_DELETE = 1

OP_APPEND = 2

OP_SUBTRACT = 3


@attrs.define(kw_only=True)
class AlterableConfig:
    """An entry of ``AlterConfigsResource.configs``."""

    name: String = ""
    value: NullableString = None


@attrs.define(kw_only=True)
class AlterConfigsResource:
    """An entry of ``AlterConfigsRequest.resources``."""

    resource_type: Int8 = 0
    resource_name: String = ""
    configs: list[AlterableConfig] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AlterConfigsRequest:
    """The AlterConfigs request body, versions 0-2 (``AlterConfigsRequest.json``)."""

    resources: list[AlterConfigsResource] = attrs.Factory(list)
    validate_only: Bool = False


@attrs.define(kw_only=True)
class AlterConfigsResourceResponse:
    """An entry of ``AlterConfigsResponse.responses``."""

    error_code: Int16 = 0
    error_message: NullableString = None
    resource_type: Int8 = 0
    resource_name: String = ""


@attrs.define(kw_only=True)
class AlterConfigsResponse:
    """The AlterConfigs response body, versions 0-2 (``AlterConfigsResponse.json``)."""

    throttle_time_ms: Int32 = 0
    responses: list[AlterConfigsResourceResponse] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AlterableConfigOperation:
    """An entry of ``AlterConfigsResource.configs``."""

    name: String = ""
    config_operation: Int8 = 0
    value: NullableString = None


@attrs.define(kw_only=True)
class IncrementalAlterConfigsResource:
    """An entry of ``IncrementalAlterConfigsRequest.resources``."""

    resource_type: Int8 = 0
    resource_name: String = ""
    configs: list[AlterableConfigOperation] = attrs.Factory(list)


@attrs.define(kw_only=True)
class IncrementalAlterConfigsRequest:
    """The IncrementalAlterConfigs request body, versions 0-1 (``IncrementalAlterConfigsRequest.json``)."""

    resources: list[IncrementalAlterConfigsResource] = attrs.Factory(list)
    validate_only: Bool = False


@attrs.define(kw_only=True)
class IncrementalAlterConfigsResponse:
    """The IncrementalAlterConfigs response body, versions 0-1 (``IncrementalAlterConfigsResponse.json``)."""

    throttle_time_ms: Int32 = 0
    responses: list[AlterConfigsResourceResponse] = attrs.Factory(list)


ALTER_CONFIGS = Api(
    key=33,
    name="AlterConfigs",
    min_version=0,
    max_version=2,
    flexible_from=2,
    request_type=AlterConfigsRequest,
    response_type=AlterConfigsResponse,
)


INCREMENTAL_ALTER_CONFIGS = Api(
    key=44,
    name="IncrementalAlterConfigs",
    min_version=0,
    max_version=1,
    flexible_from=1,
    request_type=IncrementalAlterConfigsRequest,
    response_type=IncrementalAlterConfigsResponse,
)
