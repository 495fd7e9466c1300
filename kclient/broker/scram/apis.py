"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials
(key 51) on the bundled broker (KIP-554), answered as Kafka's ZooKeeper
mode answers them (its ``ZkAdminManager``):

- Describe: no users (null or empty) describes every user that has a SCRAM
  credential, sorted by name; a named user without one is
  RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE (one result
  per distinct name, in request order).
- Alter: one result per user; all of a user's alterations succeed or none
  does. An empty name or an iteration count outside 4096..16384 is
  UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM,
  the same user and mechanism twice DUPLICATE_RESOURCE, deleting a
  credential the user lacks RESOURCE_NOT_FOUND. The broker derives the
  stored and server keys from the salted password
  (`kclient.security.credentials.credential_from_salted_password`), writes
  the user's node keeping its quotas, and announces the change
  (`kclient.broker.scram.store`); every broker's SCRAM logins read the
  node afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import trio

from kclient.broker.scram.store import ZkScramStore
from kclient.errors import (
    DUPLICATE_RESOURCE,
    NONE,
    RESOURCE_NOT_FOUND,
    UNACCEPTABLE_CREDENTIAL,
    UNKNOWN_SERVER_ERROR,
    UNSUPPORTED_SASL_MECHANISM,
    ConfigError,
    KafkaError,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.user_scram_credentials import (
    MECHANISM_NAMES,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kclient.security.credentials import SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS, ScramCredential, credential_from_salted_password

__all__ = ["UserScramApis"]

log = logging.getLogger("kclient.broker")

#: Kafka's messages (``ZkAdminManager``).
EMPTY_USER = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
DELETE_MISSING = "Attempt to delete a user credential that does not exist"
DESCRIBE_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
NO_ZOOKEEPER = "SCRAM credentials are kept in ZooKeeper: this broker has no zookeeper.connect"


def credential_infos(config: dict[str, str]) -> list[CredentialInfo]:
    """The mechanisms and iteration counts of a user's config, SHA-256 first.

    Raises:
        ConfigError: a stored credential is malformed.
    """
    return [
        CredentialInfo(mechanism=kind, iterations=ScramCredential.from_string(config[name], what=f"{name} credential").iterations)
        for kind, name in MECHANISM_NAMES.items()
        if name in config
    ]


def _describe_one(user: str, config: dict[str, str], *, named: bool) -> DescribeUserScramCredentialsResult | None:
    result = DescribeUserScramCredentialsResult(user=user)
    try:
        result.credential_infos = credential_infos(config)
    except ConfigError as exc:
        result.error_code, result.error_message = UNKNOWN_SERVER_ERROR, f"Error describing SCRAM credentials for user {user}: {exc}"
        return result
    if not result.credential_infos:
        if not named:
            return None
        result.error_code, result.error_message = RESOURCE_NOT_FOUND, DESCRIBE_MISSING + user
    return result


def _upsertion_error(upsertion: ScramCredentialUpsertion) -> str | None:
    if not upsertion.name:
        return EMPTY_USER
    if upsertion.mechanism not in MECHANISM_NAMES:
        return UNKNOWN_MECHANISM
    if upsertion.iterations < SCRAM_MIN_ITERATIONS:
        return TOO_FEW_ITERATIONS
    if upsertion.iterations > SCRAM_MAX_ITERATIONS:
        return TOO_MANY_ITERATIONS
    return None


def _deletion_error(deletion: ScramCredentialDeletion) -> str | None:
    if not deletion.name:
        return EMPTY_USER
    return None if deletion.mechanism in MECHANISM_NAMES else UNKNOWN_MECHANISM


def _result(user: str, code: int, message: str | None) -> AlterUserScramCredentialsResult:
    return AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)


class _AlterPlan:
    """One AlterUserScramCredentials request checked step by step; each
    user is answered by the first step that fails it."""

    def __init__(self, body: AlterUserScramCredentialsRequest) -> None:
        self.body = body
        self.results: list[AlterUserScramCredentialsResult] = []
        self.failed: set[str] = set()
        illegal: dict[str, str] = {}
        for deletion in body.deletions:
            if (why := _deletion_error(deletion)) is not None:
                illegal[deletion.name] = why
        for upsertion in body.upsertions:
            if (why := _upsertion_error(upsertion)) is not None:
                illegal[upsertion.name] = why
        for user, why in illegal.items():
            self.fail(user, UNSUPPORTED_SASL_MECHANISM if why == UNKNOWN_MECHANISM else UNACCEPTABLE_CREDENTIAL, why)
        pairs = [(u.name, u.mechanism) for u in body.upsertions] + [(d.name, d.mechanism) for d in body.deletions]
        seen: set[tuple[str, int]] = set()
        for pair in pairs:
            if pair[0] not in self.failed and pair in seen:
                self.fail(pair[0], DUPLICATE_RESOURCE, ALTERED_TWICE)
            seen.add(pair)
        self.users = [user for user in dict.fromkeys(p[0] for p in pairs) if user not in self.failed]

    def fail(self, user: str, code: int, message: str) -> None:
        """Answer ``user`` with an error; its alterations are not made."""
        if user not in self.failed:
            self.failed.add(user)
            self.results.append(_result(user, code, message))

    def apply(self, configs: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        """The new configs of the users still valid, given their current
        ``configs``; users deleting a credential they lack fail."""
        for deletion in self.body.deletions:
            if deletion.name in self.users and MECHANISM_NAMES[deletion.mechanism] not in configs[deletion.name]:
                self.fail(deletion.name, RESOURCE_NOT_FOUND, DELETE_MISSING)
        changed = {user: dict(configs[user]) for user in self.users if user not in self.failed}
        for deletion in self.body.deletions:
            if deletion.name in changed:
                changed[deletion.name].pop(MECHANISM_NAMES[deletion.mechanism], None)
        for up in self.body.upsertions:
            if up.name in changed:
                name = MECHANISM_NAMES[up.mechanism]
                changed[up.name][name] = str(credential_from_salted_password(name, bytes(up.salt), bytes(up.salted_password), up.iterations))
        return changed

    def succeed(self, users: Iterable[str]) -> None:
        """Answer ``users`` with success."""
        self.results.extend(_result(user, NONE, None) for user in users)


class UserScramApis:
    """The two KIP-554 handlers.

    Args:
        store: Where credentials are kept; None on a broker without
            ZooKeeper (describe finds no user, alter fails every user).
    """

    def __init__(self, store: ZkScramStore | None) -> None:
        self.store = store


    async def describe_user_scram_credentials(self, header: RequestHeader, body: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
        """DescribeUserScramCredentials v0: the named users, or every user with a credential."""
        names = [u.name for u in body.users or []]
        results: list[DescribeUserScramCredentialsResult] = []
        if not names:
            configs = await trio.to_thread.run_sync(self.store.read_all) if self.store is not None else {}
            found = (_describe_one(user, configs[user], named=False) for user in sorted(configs))
            return DescribeUserScramCredentialsResponse(results=[r for r in found if r is not None])
        for user in dict.fromkeys(names):
            if names.count(user) > 1:
                results.append(DescribeUserScramCredentialsResult(user=user, error_code=DUPLICATE_RESOURCE, error_message=DESCRIBE_TWICE + user))
                continue
            config = await trio.to_thread.run_sync(self.store.read, user) if self.store is not None and user else {}
            results.append(_describe_one(user, config, named=True) or DescribeUserScramCredentialsResult(user=user))
        return DescribeUserScramCredentialsResponse(results=results)

    async def alter_user_scram_credentials(self, header: RequestHeader, body: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
        """AlterUserScramCredentials v0: each user's alterations, all or none."""
        plan = _AlterPlan(body)
        if self.store is None:
            for user in plan.users:
                plan.fail(user, UNKNOWN_SERVER_ERROR, NO_ZOOKEEPER)
            return AlterUserScramCredentialsResponse(results=plan.results)
        store = self.store
        try:
            configs = {user: await trio.to_thread.run_sync(store.read, user) for user in plan.users}
            changed = plan.apply(configs)
            await trio.to_thread.run_sync(store.write, changed)
        except KafkaError as exc:
            log.warning("AlterUserScramCredentials failed: %s", exc)
            for user in plan.users:
                plan.fail(user, UNKNOWN_SERVER_ERROR, str(exc))
            return AlterUserScramCredentialsResponse(results=plan.results)
        plan.succeed(changed)
        return AlterUserScramCredentialsResponse(results=plan.results)
