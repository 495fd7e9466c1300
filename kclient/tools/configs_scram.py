"""``kclient configs --bootstrap-server ... --entity-type users``: SCRAM
credentials through the broker (KIP-554), as ``kafka-configs`` handles
them::

    kclient configs --bootstrap-server 127.0.0.1:9092 --alter \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]' \\
        --entity-type users --entity-name alice
    kclient configs --bootstrap-server 127.0.0.1:9092 --describe --entity-type users

``--describe`` prints ``SCRAM credential configs for user-principal
'alice' are SCRAM-SHA-256=iterations=8192`` after the user's quotas, for
the named user or every user with a credential (not for a default user, nor
with ``--entity-type clients``), as Kafka's ``ConfigCommand`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kclient.client.admin import AdminClient
from kclient.client.admin_scram import UserScramCredentialDeletion, UserScramCredentialUpsertion
from kclient.errors import BrokerResponseError
from kclient.security.credentials import SCRAM_MECHANISMS

__all__ = ["alter_scram_credentials", "describe_scram_credentials", "scram_keys"]


def scram_keys(keys: Sequence[str] | Mapping[str, str]) -> list[str]:
    """The SCRAM mechanism names among config keys."""
    return [key for key in keys if key in SCRAM_MECHANISMS]


def alter_scram_credentials(admin: AdminClient, user: str, passwords: Mapping[str, str], iterations: Mapping[str, int], deleted: Sequence[str]) -> None:
    """Add (``passwords``: mechanism -> password) and delete SCRAM credentials of a user.

    Raises:
        kclient.errors.BrokerResponseError: the user's error
            (UnacceptableCredentialError, ResourceNotFoundError, ...).
    """
    alterations: list[UserScramCredentialUpsertion | UserScramCredentialDeletion] = [
        UserScramCredentialUpsertion(user, mechanism, password, iterations=iterations[mechanism]) for mechanism, password in passwords.items()
    ]
    alterations.extend(UserScramCredentialDeletion(user, mechanism) for mechanism in deleted)
    if not alterations:
        return
    for error in admin.alter_user_scram_credentials(alterations).values():
        if error is not None:
            raise error


def describe_scram_credentials(admin: AdminClient, users: Sequence[str]) -> list[str]:
    """The ``--describe`` lines of the users' SCRAM credentials (all users with one when ``users`` is empty)."""
    result = admin.describe_user_scram_credentials(list(users))
    lines = []
    for user in result.users():
        try:
            infos = result.description(user).credential_infos
        except BrokerResponseError as exc:
            lines.append(f"Error retrieving SCRAM credential configs for user-principal '{user}': {type(exc).__name__}: {exc}")
            continue
        shown = ", ".join(f"{info.mechanism}=iterations={info.iterations}" for info in infos)
        lines.append(f"SCRAM credential configs for user-principal '{user}' are {shown}")
    return lines
