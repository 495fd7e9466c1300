"""SaslHandshake (key 17), versions 0-1. Source: `SaslHandshakeRequest.json` /
`SaslHandshakeResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_SaslHandshake) and KIP-43.

The client names a SASL mechanism; the broker answers with an error code
and the mechanisms it enables. After a v0 handshake the SASL tokens
follow as raw size-prefixed frames; after v1 they travel in
SaslAuthenticate requests (KIP-152). No version is flexible."""

from kclient.protocol.schema import Api, Field

#: SaslHandshake has no flexible version (`flexibleVersions` "none").
NEVER_FLEXIBLE = 0x7FFF + 1

SASL_HANDSHAKE = Api(
    key=17,
    name="SaslHandshake",
    min_version=0,
    max_version=1,
    flexible_from=NEVER_FLEXIBLE,
    request_fields=(Field("mechanism", "string"),),
    response_fields=(
        Field("error_code", "int16"),
        Field("mechanisms", ("array", "string")),
    ),
)
