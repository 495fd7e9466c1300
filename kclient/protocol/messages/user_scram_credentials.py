"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials
(key 51), version 0, flexible from v0 (KIP-554, KIP-482). Source:
`DescribeUserScramCredentialsRequest.json` /
`DescribeUserScramCredentialsResponse.json` and
`AlterUserScramCredentialsRequest.json` /
`AlterUserScramCredentialsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DescribeUserScramCredentials).

A mechanism is Kafka's ``ScramMechanism`` type byte: 0 unknown,
1 ``SCRAM-SHA-256``, 2 ``SCRAM-SHA-512``. An upsertion carries the salt and
the salted password (``Hi(password, salt, iterations)``, RFC 5802), never
the password; the broker derives the stored and server keys from it.
"""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bytes, Int8, Int16, Int32, NullableString, String

#: ``ScramMechanism`` type bytes (KIP-554).
MECHANISM_UNKNOWN = 0

MECHANISM_SCRAM_SHA_256 = 1

MECHANISM_SCRAM_SHA_512 = 2

#: Mechanism type byte -> SASL mechanism name.
MECHANISM_NAMES: dict[int, str] = {MECHANISM_SCRAM_SHA_256: "SCRAM-SHA-256", MECHANISM_SCRAM_SHA_512: "SCRAM-SHA-512"}


@attrs.define(kw_only=True)
class UserName:
    """An entry of ``DescribeUserScramCredentialsRequest.users``."""

    name: String = ""


@attrs.define(kw_only=True)
class DescribeUserScramCredentialsRequest:
    """The DescribeUserScramCredentials request body, v0; ``users`` None or empty: every user."""

    users: list[UserName] | None = None


@attrs.define(kw_only=True)
class CredentialInfo:
    """A credential of a user: its mechanism and iteration count."""

    mechanism: Int8 = 0
    iterations: Int32 = 0


@attrs.define(kw_only=True)
class DescribeUserScramCredentialsResult:
    """An entry of ``DescribeUserScramCredentialsResponse.results``."""

    user: String = ""
    error_code: Int16 = 0
    error_message: NullableString = None
    credential_infos: list[CredentialInfo] = attrs.Factory(list)


@attrs.define(kw_only=True)
class DescribeUserScramCredentialsResponse:
    """The DescribeUserScramCredentials response body, v0."""

    throttle_time_ms: Int32 = 0
    error_code: Int16 = 0
    error_message: NullableString = None
    results: list[DescribeUserScramCredentialsResult] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ScramCredentialDeletion:
    """An entry of ``AlterUserScramCredentialsRequest.deletions``."""

    name: String = ""
    mechanism: Int8 = 0


@attrs.define(kw_only=True)
class ScramCredentialUpsertion:
    """An entry of ``AlterUserScramCredentialsRequest.upsertions``."""

    name: String = ""
    mechanism: Int8 = 0
    iterations: Int32 = 0
    salt: Bytes = b""
    salted_password: Bytes = b""


@attrs.define(kw_only=True)
class AlterUserScramCredentialsRequest:
    """The AlterUserScramCredentials request body, v0."""

    deletions: list[ScramCredentialDeletion] = attrs.Factory(list)
    upsertions: list[ScramCredentialUpsertion] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AlterUserScramCredentialsResult:
    """An entry of ``AlterUserScramCredentialsResponse.results``: one per user."""

    user: String = ""
    error_code: Int16 = 0
    error_message: NullableString = None


@attrs.define(kw_only=True)
class AlterUserScramCredentialsResponse:
    """The AlterUserScramCredentials response body, v0."""

    throttle_time_ms: Int32 = 0
    results: list[AlterUserScramCredentialsResult] = attrs.Factory(list)


DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    key=50,
    name="DescribeUserScramCredentials",
    min_version=0,
    max_version=0,
    flexible_from=0,
    request_type=DescribeUserScramCredentialsRequest,
    response_type=DescribeUserScramCredentialsResponse,
)

ALTER_USER_SCRAM_CREDENTIALS = Api(
    key=51,
    name="AlterUserScramCredentials",
    min_version=0,
    max_version=0,
    flexible_from=0,
    request_type=AlterUserScramCredentialsRequest,
    response_type=AlterUserScramCredentialsResponse,
)
