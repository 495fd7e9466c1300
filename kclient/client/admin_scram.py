"""Users' SCRAM credentials through the admin client:
DescribeUserScramCredentials (key 50) and AlterUserScramCredentials
(key 51), as Kafka's ``Admin.describeUserScramCredentials`` and
``Admin.alterUserScramCredentials`` (KIP-554).

The password never leaves the client: an upsertion sends a random salt and
the salted password ``Hi(password, salt, iterations)`` (RFC 5802, PBKDF2 as
Kafka's ``ScramFormatter`` computes it from the UTF-8 password), from which
the broker derives what it stores. Both calls go to any broker. Kafka
protocol guide:
https://kafka.apache.org/protocol#The_Messages_DescribeUserScramCredentials
and https://kafka.apache.org/protocol#The_Messages_AlterUserScramCredentials.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import attrs

from kclient.client.cluster import Cluster
from kclient.errors import NONE, RESOURCE_NOT_FOUND, BrokerResponseError, UnsupportedSaslMechanismError, error_for_code
from kclient.protocol.messages import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS
from kclient.protocol.messages.user_scram_credentials import (
    MECHANISM_NAMES,
    MECHANISM_UNKNOWN,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    UserName,
)
from kclient.security.credentials import SCRAM_MIN_ITERATIONS, salted_password

__all__ = [
    "DescribeUserScramCredentialsResult",
    "ScramCredentialInfo",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
    "alter_user_scram_credentials",
    "describe_user_scram_credentials",
]

_MECHANISM_TYPES = {name: kind for kind, name in MECHANISM_NAMES.items()}

#: Salt length of an upsertion, bytes (RFC 5802 asks for a random salt;
#: Kafka's brokers accept any length).
SALT_BYTES = 32


def _mechanism_type(mechanism: str) -> int:
    """The KIP-554 type byte of a mechanism name (0: unknown, which the broker refuses)."""
    return _MECHANISM_TYPES.get(mechanism, MECHANISM_UNKNOWN)


@attrs.frozen
class ScramCredentialInfo:
    """A credential's mechanism and iteration count (Kafka's ``ScramCredentialInfo``).

    Attributes:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` (``UNKNOWN`` for a
            type byte kclient does not know).
        iterations: The iteration count.
    """

    mechanism: str
    iterations: int


@attrs.frozen
class UserScramCredentialsDescription:
    """A user's SCRAM credentials (Kafka's ``UserScramCredentialsDescription``).

    Attributes:
        name: The user.
        credential_infos: One per mechanism, SHA-256 first.
    """

    name: str
    credential_infos: tuple[ScramCredentialInfo, ...]


@attrs.frozen
class DescribeUserScramCredentialsResult:
    """What DescribeUserScramCredentials answered, per user (Kafka's
    ``DescribeUserScramCredentialsResult``).

    Attributes:
        descriptions: User -> credentials, for users answered without error.
        errors: User -> its error (`kclient.errors.ResourceNotFoundError`:
            no credential; `kclient.errors.DuplicateResourceError`: named
            twice).
    """

    descriptions: dict[str, UserScramCredentialsDescription]
    errors: dict[str, BrokerResponseError]

    def users(self) -> list[str]:
        """The users described, as Kafka's ``users()``: every user but those
        without credentials (RESOURCE_NOT_FOUND)."""
        return [*self.descriptions, *(u for u, e in self.errors.items() if e.code != RESOURCE_NOT_FOUND)]

    def description(self, user: str) -> UserScramCredentialsDescription:
        """``user``'s credentials.

        Raises:
            BrokerResponseError: The user's error.
            KeyError: The user was not in the answer.
        """
        if user in self.errors:
            raise self.errors[user]
        return self.descriptions[user]


@attrs.frozen
class UserScramCredentialUpsertion:
    """Add or replace a user's credential for one mechanism (Kafka's
    ``UserScramCredentialUpsertion``).

    Attributes:
        user: The user.
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        password: The password (sent salted, never as is).
        iterations: Iteration count (the broker allows 4096..16384).
        salt: The salt; random (`SALT_BYTES`) by default.
    """

    user: str
    mechanism: str
    password: str = attrs.field(repr=False)
    iterations: int = SCRAM_MIN_ITERATIONS
    salt: bytes | None = None


@attrs.frozen
class UserScramCredentialDeletion:
    """Remove a user's credential for one mechanism (Kafka's ``UserScramCredentialDeletion``).

    Attributes:
        user: The user.
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
    """

    user: str
    mechanism: str


def _error(code: int, message: str | None) -> BrokerResponseError:
    cls = error_for_code(code)
    return cls(message or cls.name)


async def describe_user_scram_credentials(cluster: Cluster, users: Sequence[str] | None = None) -> DescribeUserScramCredentialsResult:
    """Users' SCRAM mechanisms and iteration counts (never the credentials).

    Args:
        cluster: The client's cluster view.
        users: The users; None or empty: every user with a credential.

    Returns:
        The descriptions and per-user errors.

    Raises:
        ClusterAuthorizationFailedError: 31, no DESCRIBE on the cluster.
        KafkaConnectionError: No broker could be reached.
    """
    conn = await cluster.any_connection()
    body = DescribeUserScramCredentialsRequest(users=[UserName(name=u) for u in users] if users else None)
    response: DescribeUserScramCredentialsResponse = await conn.request(DESCRIBE_USER_SCRAM_CREDENTIALS, body)
    if response.error_code != NONE:
        raise _error(response.error_code, f"DescribeUserScramCredentials: {response.error_message or error_for_code(response.error_code).name}")
    descriptions: dict[str, UserScramCredentialsDescription] = {}
    errors: dict[str, BrokerResponseError] = {}
    for result in response.results:
        if result.error_code != NONE:
            errors[result.user] = _error(result.error_code, result.error_message)
            continue
        infos = tuple(ScramCredentialInfo(MECHANISM_NAMES.get(i.mechanism, "UNKNOWN"), i.iterations) for i in result.credential_infos)
        descriptions[result.user] = UserScramCredentialsDescription(result.user, infos)
    return DescribeUserScramCredentialsResult(descriptions, errors)


def _upsertion(alteration: UserScramCredentialUpsertion) -> ScramCredentialUpsertion:
    kind = _mechanism_type(alteration.mechanism)
    if kind == MECHANISM_UNKNOWN:
        raise UnsupportedSaslMechanismError(f"Unknown SCRAM mechanism {alteration.mechanism!r}: expected {', '.join(_MECHANISM_TYPES)}")
    salt = alteration.salt if alteration.salt is not None else secrets.token_bytes(SALT_BYTES)
    salted = salted_password(alteration.mechanism, alteration.password, salt, alteration.iterations)
    return ScramCredentialUpsertion(name=alteration.user, mechanism=kind, iterations=alteration.iterations, salt=salt, salted_password=salted)


async def alter_user_scram_credentials(
    cluster: Cluster, alterations: Sequence[UserScramCredentialUpsertion | UserScramCredentialDeletion]
) -> dict[str, BrokerResponseError | None]:
    """Add, replace or remove users' SCRAM credentials; all of a user's
    alterations succeed or none does.

    Args:
        cluster: The client's cluster view.
        alterations: Upsertions and deletions.

    Returns:
        User -> None (done) or its error: `kclient.errors.UnacceptableCredentialError`
            (93: empty name, iterations outside 4096..16384),
            `kclient.errors.DuplicateResourceError` (92),
            `kclient.errors.ResourceNotFoundError` (91: deleting a missing
            credential), `kclient.errors.UnsupportedSaslMechanismError` (33),
            `kclient.errors.ClusterAuthorizationFailedError` (31: no ALTER
            on the cluster).

    Raises:
        UnsupportedSaslMechanismError: An upsertion names an unknown
            mechanism (its password cannot be salted); nothing is sent.
        KafkaConnectionError: No broker could be reached.
    """
    body = AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name=a.user, mechanism=_mechanism_type(a.mechanism)) for a in alterations if isinstance(a, UserScramCredentialDeletion)],
        upsertions=[_upsertion(a) for a in alterations if isinstance(a, UserScramCredentialUpsertion)],
    )
    conn = await cluster.any_connection()
    response: AlterUserScramCredentialsResponse = await conn.request(ALTER_USER_SCRAM_CREDENTIALS, body)
    return {r.user: None if r.error_code == NONE else _error(r.error_code, r.error_message) for r in response.results}
