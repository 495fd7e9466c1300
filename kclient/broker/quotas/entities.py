"""Client quota entities and their configs, where Kafka's ZooKeeper mode
keeps them (KIP-55, KIP-546, KIP-612).

An entity is a set of ``(entity type, name)`` components (Kafka's
``ClientQuotaEntity``): types ``user``, ``client-id`` and ``ip``; a name of
``None`` is the type's default entity (``<default>`` in ZooKeeper). Each
entity's configs are the ``config`` object of one node::

    /config/users/<user>                      {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/users/<user>/clients/<client-id>
    /config/users/<default>                   (the default user)
    /config/clients/<client-id>  /config/clients/<default>
    /config/ips/<ip>  /config/ips/<default>   (connection_creation_rate, KIP-612)

Names are URL-encoded as Kafka's ``Sanitizer`` does. A user's node also
holds its SCRAM credentials (KIP-84): writing quotas keeps them. Each
change is announced by a ``/config/changes/config_change_<n>`` node naming
``users/<user>[/clients/<client-id>]``, ``clients/<client-id>`` or
``ips/<ip>`` (`kclient.broker.config_changes`), which every broker
applies.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping

from kclient.broker.config_changes import notify_entity_change
from kclient.errors import ConfigError
from kclient.zk.client import ZkClient

__all__ = [
    "CLIENT_ID",
    "CONNECTION_CREATION_RATE",
    "CONSUMER_BYTE_RATE",
    "DEFAULT",
    "IP",
    "PRODUCER_BYTE_RATE",
    "QUOTA_KEYS",
    "REQUEST_PERCENTAGE",
    "USER",
    "QuotaEntity",
    "ZkQuotaStore",
    "entity_from_path",
    "entity_path",
    "make_entity",
    "sanitize",
]

#: Entity types (Kafka's ``ClientQuotaEntity.USER`` / ``CLIENT_ID`` / ``IP``).
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

#: The default entity's name in ZooKeeper.
DEFAULT = "<default>"

#: Quota keys (Kafka's ``QuotaConfigs``): bytes/s produced, bytes/s
#: fetched, % of a request handler thread (KIP-124), new connections/s from
#: an IP (KIP-612).
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONNECTION_CREATION_RATE = "connection_creation_rate"

#: The keys each entity type may have.
QUOTA_KEYS = {
    USER: (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE),
    CLIENT_ID: (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE),
    IP: (CONNECTION_CREATION_RATE,),
}

#: A quota entity: its ``(type, name or None for default)`` components,
#: sorted by type.
QuotaEntity = tuple[tuple[str, str | None], ...]

_DIRS = {USER: "users", CLIENT_ID: "clients", IP: "ips"}
_TYPES = {v: k for k, v in _DIRS.items()}


def make_entity(components: Mapping[str, str | None]) -> QuotaEntity:
    """A `QuotaEntity` from ``{type: name}``.

    Raises:
        ConfigError: an unknown type, an empty name, or a combination
            Kafka does not store (only user, client-id, user + client-id and
            ip are).
    """
    for kind, name in components.items():
        if kind not in _DIRS:
            raise ConfigError(f"Invalid quota entity type {kind!r}: expected user, client-id or ip")
        if name == "":
            raise ConfigError(f"Invalid quota entity: empty {kind} name")
    kinds = set(components)
    if kinds not in ({USER}, {CLIENT_ID}, {USER, CLIENT_ID}, {IP}):
        raise ConfigError(f"Invalid quota entity {sorted(kinds)}: expected user, client-id, user and client-id, or ip")
    return tuple(sorted(components.items()))


def sanitize(name: str | None) -> str:
    """A name as Kafka's ``Sanitizer`` writes it in a path; ``<default>`` for None."""
    if name is None:
        return DEFAULT
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def _desanitize(part: str) -> str | None:
    return None if part == DEFAULT else urllib.parse.unquote(part)


def entity_path(entity: QuotaEntity) -> str:
    """The entity's path under ``/config`` (``users/alice/clients/app``)."""
    parts = dict(entity)
    if USER in parts and CLIENT_ID in parts:
        return f"users/{sanitize(parts[USER])}/clients/{sanitize(parts[CLIENT_ID])}"
    ((kind, name),) = entity
    return f"{_DIRS[kind]}/{sanitize(name)}"


def entity_from_path(path: str) -> QuotaEntity | None:
    """The entity a path under ``/config`` names (None: not a quota entity)."""
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] in _TYPES:
        return ((_TYPES[parts[0]], _desanitize(parts[1])),)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return make_entity({USER: _desanitize(parts[1]), CLIENT_ID: _desanitize(parts[3])})
    return None


def _config_of(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    try:
        config = json.loads(data).get("config", {})
    except (ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in config.items()} if isinstance(config, dict) else {}


class ZkQuotaStore:
    """Reads and writes quota entities in ZooKeeper (blocking; call from
    a worker thread in trio code).

    Args:
        zk: A started `ZkClient`.
    """

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    def read(self, entity: QuotaEntity) -> dict[str, float]:
        """The entity's quotas (its non-quota configs, SCRAM credentials, left out)."""
        config = _config_of(self.zk.get("/config/" + entity_path(entity)))
        keys = {k for kind, _ in entity for k in QUOTA_KEYS[kind]}
        out = {}
        for key, value in config.items():
            if key in keys:
                try:
                    out[key] = float(value)
                except ValueError:
                    continue
        return out

    def read_all(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every entity that has quotas."""
        paths: list[str] = []
        for top in ("users", "clients", "ips"):
            for child in self.zk.get_children(f"/config/{top}"):
                paths.append(f"{top}/{child}")
                if top == "users":
                    paths.extend(f"users/{child}/clients/{c}" for c in self.zk.get_children(f"/config/users/{child}/clients"))
        found = {}
        for path in paths:
            entity = entity_from_path(path)
            if entity is not None and (quotas := self.read(entity)):
                found[entity] = quotas
        return found

    def alter(self, entity: QuotaEntity, set_: Mapping[str, float], remove: list[str]) -> None:
        """Set and remove quotas of an entity, keep its other configs, and
        announce the change to every broker."""
        path = "/config/" + entity_path(entity)
        config = _config_of(self.zk.get(path))
        for key in remove:
            config.pop(key, None)
        for key, value in set_.items():
            config[key] = _format(value)
        data = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
        self.zk.write_persistent(path, data)
        notify_entity_change(self.zk, entity_path(entity))


def _format(value: float) -> str:
    """A quota as Kafka writes it: ``1024`` for whole numbers, else ``0.5``."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
