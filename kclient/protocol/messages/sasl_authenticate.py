"""SaslAuthenticate (key 36), versions 0-2. Source:
`SaslAuthenticateRequest.json` / `SaslAuthenticateResponse.json`; see the
Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_SaslAuthenticate) and
KIP-152.

One SASL token each way, after a SaslHandshake v1. v1+ answers with the
session lifetime (KIP-368; 0 = no re-authentication required); v2 is the
first flexible version (KIP-482)."""

from kclient.protocol.schema import Api, Field

SASL_AUTHENTICATE = Api(
    key=36,
    name="SaslAuthenticate",
    min_version=0,
    max_version=2,
    flexible_from=2,
    request_fields=(Field("auth_bytes", "bytes"),),
    response_fields=(
        Field("error_code", "int16"),
        Field("error_message", "nullable_string"),
        Field("auth_bytes", "bytes"),
        Field("session_lifetime_ms", "int64", "1+"),
    ),
)
