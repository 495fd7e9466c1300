"""SaslHandshake (key 17), versions 0-1. Source: `SaslHandshakeRequest.json` /
`SaslHandshakeResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_SaslHandshake) and KIP-43.

The client names a SASL mechanism; the broker answers with an error code
and the mechanisms it enables. After a v0 handshake the SASL tokens
follow as raw size-prefixed frames; after v1 they travel in
SaslAuthenticate requests (KIP-152). No version is flexible."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, String

#: SaslHandshake has no flexible version (`flexibleVersions` "none").
NEVER_FLEXIBLE = 0x7FFF + 1


@attrs.define(kw_only=True)
class SaslHandshakeRequest:
    """The SaslHandshake request body, versions 0-1 (``SaslHandshakeRequest.json``)."""

    mechanism: String = ""


@attrs.define(kw_only=True)
class SaslHandshakeResponse:
    """The SaslHandshake response body, versions 0-1 (``SaslHandshakeResponse.json``)."""

    error_code: Int16 = 0
    mechanisms: list[String] = attrs.Factory(list)


SASL_HANDSHAKE = Api(
    key=17,
    name="SaslHandshake",
    min_version=0,
    max_version=1,
    flexible_from=32768,
    request_type=SaslHandshakeRequest,
    response_type=SaslHandshakeResponse,
)
