"""SCRAM credentials as Kafka stores them (KIP-84, RFC 5802 section 3).

A broker keeps, per user and SCRAM mechanism, the string
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` in the
user's ZooKeeper config node ``/config/users/<user>``
(``{"version":1,"config":{"SCRAM-SHA-256":"salt=...",...}}``), written by
``kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]'
--entity-type users``. The key derivation is the ``scramp`` library's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import urllib.parse
from collections.abc import Mapping

import attrs
import scramp

from kclient.errors import ConfigError, UnsupportedSaslMechanismError

__all__ = [
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MECHANISMS",
    "SCRAM_MIN_ITERATIONS",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "ScramCredential",
    "credential_from_salted_password",
    "salted_password",
    "make_scram_credential",
    "parse_scram_user_config",
    "scram_user_config",
    "scram_user_path",
]

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
#: SCRAM mechanisms Kafka knows (KIP-84), with their hash for `hashlib`.
SCRAM_MECHANISMS: dict[str, str] = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
#: Kafka's bounds on a SCRAM credential's iteration count (both hashes).
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384


@attrs.frozen(repr=False)
class ScramCredential:
    """What a broker stores for one user and SCRAM mechanism (RFC 5802 section 3).

    ``stored_key = H(HMAC(salted_password, "Client Key"))`` and
    ``server_key = HMAC(salted_password, "Server Key")`` where
    ``salted_password = Hi(password, salt, iterations)``: enough to check a
    client's proof and prove the server, never enough to log in.
    `str` gives Kafka's form (KIP-84,
    ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``);
    `from_string` reads it.

    Attributes:
        salt: The salt (raw bytes; Kafka's are at least 12 bytes).
        stored_key: StoredKey.
        server_key: ServerKey.
        iterations: The iteration count of Hi.
    """

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __str__(self) -> str:
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode('ascii')},stored_key={b64(self.stored_key).decode('ascii')},"
            f"server_key={b64(self.server_key).decode('ascii')},iterations={self.iterations}"
        )

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations}, salt=<{len(self.salt)} bytes>)"

    @classmethod
    def from_string(cls, text: str, *, what: str = "SCRAM credential") -> ScramCredential:
        """Parse Kafka's credential string (KIP-84).

        Args:
            text: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``,
                the four keys in any order, each exactly once.
            what: How to name the value in an error (e.g. the ZooKeeper
                node and mechanism).

        Returns:
            The credential.

        Raises:
            ConfigError: a key is missing, repeated or unknown, a value is
                not base64 or the iteration count not a positive integer.
        """
        fields: dict[str, str] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ConfigError(f"Invalid {what}: expected key=value pairs separated by commas")
            if key in fields:
                raise ConfigError(f"Invalid {what}: {key} is given twice")
            fields[key] = value
        expected = {"salt", "stored_key", "server_key", "iterations"}
        if set(fields) != expected:
            missing, extra = sorted(expected - set(fields)), sorted(set(fields) - expected)
            why = "; ".join(part for part in (missing and f"missing {', '.join(missing)}", extra and f"unknown {', '.join(extra)}") if isinstance(part, str) and part)
            raise ConfigError(f"Invalid {what}: {why}")
        decoded: dict[str, bytes] = {}
        for key in ("salt", "stored_key", "server_key"):
            try:
                decoded[key] = base64.b64decode(fields[key], validate=True)
            except (binascii.Error, ValueError):
                raise ConfigError(f"Invalid {what}: {key} is not base64") from None
            if not decoded[key]:
                raise ConfigError(f"Invalid {what}: {key} is empty")
        text_iterations = fields["iterations"]
        if not text_iterations.isdigit() or int(text_iterations) <= 0:
            raise ConfigError(f"Invalid {what}: iterations must be a positive integer")
        return cls(decoded["salt"], decoded["stored_key"], decoded["server_key"], int(text_iterations))


def make_scram_credential(
    mechanism: str, password: str, *, iterations: int = SCRAM_MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """Derive the stored credential for ``password`` (RFC 5802, KIP-84), as
    ``kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]'`` does.

    The derivation is `scramp.ScramMechanism.make_auth_info`.

    Args:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        password: The user's password.
        iterations: Iteration count, within Kafka's 4096..16384.
        salt: At least 12 bytes; random by default.

    Returns:
        The credential.

    Raises:
        UnsupportedSaslMechanismError: not a SCRAM mechanism.
        ConfigError: iterations out of range, salt too short, empty password.
    """
    if mechanism not in SCRAM_MECHANISMS:
        raise UnsupportedSaslMechanismError(f"{mechanism!r} is not one of {', '.join(SCRAM_MECHANISMS)}")
    if not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
        raise ConfigError(
            f"Invalid {mechanism} iterations {iterations}: Kafka allows {SCRAM_MIN_ITERATIONS} to {SCRAM_MAX_ITERATIONS}"
        )
    if not password:
        raise ConfigError(f"Invalid {mechanism} credential: the password is empty")
    try:
        salt_, stored_key, server_key, count = scramp.ScramMechanism(mechanism).make_auth_info(
            password, iteration_count=iterations, salt=salt
        )
    except scramp.ScramException as exc:
        raise ConfigError(f"Invalid {mechanism} credential: {exc}") from None
    return ScramCredential(bytes(salt_), bytes(stored_key), bytes(server_key), int(count))




def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """``Hi(password, salt, iterations)`` of RFC 5802 section 2.2: PBKDF2 with
    HMAC of the mechanism's hash (`hashlib.pbkdf2_hmac`), what a KIP-554
    AlterUserScramCredentials upsertion carries instead of the password.

    Args:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        password: The password (UTF-8 encoded).
        salt: The salt.
        iterations: The iteration count.

    Returns:
        The salted password (32 bytes for SHA-256, 64 for SHA-512).

    Raises:
        UnsupportedSaslMechanismError: not a SCRAM mechanism.
    """
    if mechanism not in SCRAM_MECHANISMS:
        raise UnsupportedSaslMechanismError(f"{mechanism!r} is not one of {', '.join(SCRAM_MECHANISMS)}")
    return hashlib.pbkdf2_hmac(SCRAM_MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """The stored credential for a salted password (RFC 5802 section 3), as a
    broker derives it from a KIP-554 upsertion: ``stored_key =
    H(HMAC(salted, "Client Key"))``, ``server_key = HMAC(salted, "Server Key")``.

    Args:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        salt: The salt.
        salted: ``Hi(password, salt, iterations)``.
        iterations: The iteration count.

    Returns:
        The credential.

    Raises:
        UnsupportedSaslMechanismError: not a SCRAM mechanism.
    """
    if mechanism not in SCRAM_MECHANISMS:
        raise UnsupportedSaslMechanismError(f"{mechanism!r} is not one of {', '.join(SCRAM_MECHANISMS)}")
    digest = SCRAM_MECHANISMS[mechanism]
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    return ScramCredential(bytes(salt), hashlib.new(digest, client_key).digest(), server_key, iterations)


def scram_user_path(username: str) -> str:
    """The ZooKeeper node of a user's config: ``/config/users/<sanitized>``.

    Kafka URL-encodes the name (its ``Sanitizer``: Java's URLEncoder, with
    ``*`` as ``%2A`` and space as ``%20``).

    Args:
        username: The SCRAM user name.

    Returns:
        The node path.
    """
    # quote() leaves A-Z a-z 0-9 _ . - ~ alone; Java's URLEncoder also
    # encodes "~", and Kafka then turns "*" into %2A and "+" into %20,
    # which quote() already does.
    return "/config/users/" + urllib.parse.quote(username, safe="").replace("~", "%7E")


def scram_user_config(credentials: Mapping[str, ScramCredential], others: Mapping[str, str] | None = None) -> bytes:
    """The data of ``/config/users/<name>``: ``{"version":1,"config":{...}}``.

    Args:
        credentials: Mechanism name -> credential.
        others: Other entries of the user's config (quotas such as
            ``producer_byte_rate``) to keep.

    Returns:
        UTF-8 JSON bytes, as Kafka writes them.

    Raises:
        UnsupportedSaslMechanismError: a key is not a SCRAM mechanism.
    """
    config = dict(others or {})
    for mechanism, credential in credentials.items():
        if mechanism not in SCRAM_MECHANISMS:
            raise UnsupportedSaslMechanismError(f"{mechanism!r} is not one of {', '.join(SCRAM_MECHANISMS)}")
        config[mechanism] = str(credential)
    return json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode("utf-8")


def parse_scram_user_config(data: bytes | str, *, path: str = "/config/users/<user>") -> dict[str, ScramCredential]:
    """The SCRAM credentials in a ``/config/users/<name>`` node.

    Other entries (quotas) are ignored.

    Args:
        data: The node's data.
        path: The node, to name it in errors.

    Returns:
        Mechanism name -> credential (empty if the user has none).

    Raises:
        ConfigError: not JSON, not version 1 or a malformed credential string.
    """
    try:
        node = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ConfigError(f"Invalid user config at {path}: not JSON") from None
    if not isinstance(node, dict) or node.get("version") != 1 or not isinstance(node.get("config", {}), dict):
        raise ConfigError(f'Invalid user config at {path}: expected {{"version":1,"config":{{...}}}}')
    result: dict[str, ScramCredential] = {}
    for key, value in node.get("config", {}).items():
        if key in SCRAM_MECHANISMS:
            if not isinstance(value, str):
                raise ConfigError(f"Invalid {key} credential at {path}: not a string")
            result[key] = ScramCredential.from_string(value, what=f"{key} credential at {path}")
    return result
