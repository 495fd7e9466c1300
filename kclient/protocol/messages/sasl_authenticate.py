"""SaslAuthenticate (key 36), versions 0-2. Source:
`SaslAuthenticateRequest.json` / `SaslAuthenticateResponse.json`; see the
Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_SaslAuthenticate) and
KIP-152.

One SASL token each way, after a SaslHandshake v1. v1+ answers with the
session lifetime (KIP-368; 0 = no re-authentication required); v2 is the
first flexible version (KIP-482)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bytes, Int16, Int64, NullableString, Versions


@attrs.define(kw_only=True)
class SaslAuthenticateRequest:
    """The SaslAuthenticate request body, versions 0-2 (``SaslAuthenticateRequest.json``)."""

    auth_bytes: Bytes = b""


@attrs.define(kw_only=True)
class SaslAuthenticateResponse:
    """The SaslAuthenticate response body, versions 0-2 (``SaslAuthenticateResponse.json``)."""

    error_code: Int16 = 0
    error_message: NullableString = None
    auth_bytes: Bytes = b""
    session_lifetime_ms: Annotated[Int64, Versions("1+")] = 0


SASL_AUTHENTICATE = Api(
    key=36,
    name="SaslAuthenticate",
    min_version=0,
    max_version=2,
    flexible_from=2,
    request_type=SaslAuthenticateRequest,
    response_type=SaslAuthenticateResponse,
)
