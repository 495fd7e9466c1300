"""The settings each group protocol refuses (Kafka's ``ConsumerConfig``
does the same since 4.0): with ``group.protocol=consumer`` (KIP-848) the
coordinator assigns partitions and the broker's
``group.consumer.session.timeout.ms`` / ``group.consumer.heartbeat.interval.ms``
rule the session, so ``partition.assignment.strategy``,
``session.timeout.ms`` and ``heartbeat.interval.ms`` cannot be set; with
``group.protocol=classic``, ``group.remote.assignor`` cannot.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kclient.config import ConsumerConfig
from kclient.errors import ConfigError

#: Properties refused with each ``group.protocol``, by canonical name.
UNSUPPORTED_BY_PROTOCOL: dict[str, tuple[str, ...]] = {
    "classic": ("group.remote.assignor",),
    "consumer": ("partition.assignment.strategy", "heartbeat.interval.ms", "session.timeout.ms"),
}


def check_group_protocol_settings(props: Mapping[str, Any]) -> None:
    """Refuse the properties the chosen ``group.protocol`` does not take.

    Args:
        props: The properties the application gave (names as given:
            canonical or aliases), before defaults are merged in.

    Raises:
        ConfigError: such a property is set (not blank).
    """
    given = {ConsumerConfig.canonical_name(str(k)): v for k, v in props.items()}
    protocol = str(given.get("group.protocol") or "classic").strip().lower()
    refused = [name for name in UNSUPPORTED_BY_PROTOCOL.get(protocol, ()) if str(given.get(name) or "").strip()]
    if refused:
        hint = (
            " (the group coordinator assigns partitions and the broker's group.consumer.* settings rule the session, KIP-848)"
            if protocol == "consumer"
            else " (only the consumer group protocol, group.protocol=consumer, has server-side assignors)"
        )
        raise ConfigError(f"{', '.join(refused)} cannot be set when group.protocol={protocol}{hint}")


__all__ = ["UNSUPPORTED_BY_PROTOCOL", "check_group_protocol_settings"]
