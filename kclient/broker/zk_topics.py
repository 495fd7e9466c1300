"""The ZooKeeper nodes of topic configs and topic deletion, as ZooKeeper-mode
Kafka lays them out (``ConfigEntityZNode``, ``DeleteTopicsZNode``).

- ``/config/topics/<topic>``: the topic's config overrides,
  ``{"version":1,"config":{"retention.ms":"1000",...}}`` (written by
  CreateTopics and AlterConfigs, read by every broker and the controller);
- ``/admin/delete_topics/<topic>``: the topic is marked for deletion (the
  controller deletes it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

__all__ = ["DELETE_TOPICS_PATH", "TOPIC_CONFIG_PATH", "decode_topic_config", "encode_topic_config", "topic_config_path"]

DELETE_TOPICS_PATH = "/admin/delete_topics"
TOPIC_CONFIG_PATH = "/config/topics"


def topic_config_path(topic: str) -> str:
    """``/config/topics/<topic>``."""
    return f"{TOPIC_CONFIG_PATH}/{topic}"


def encode_topic_config(configs: Mapping[str, str]) -> bytes:
    """The data of a ``/config/topics/<topic>`` node holding ``configs``."""
    return json.dumps({"version": 1, "config": dict(configs)}).encode()


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    """The configs of a ``/config/topics/<topic>`` node's data.

    Args:
        data: The node's data; None or empty for no node.

    Returns:
        Config name -> value (both as strings).

    Raises:
        ValueError: Not JSON, or not an object with a ``config`` object.
    """
    try:
        return {str(k): str(v) for k, v in json.loads(data or b"{}").get("config", {}).items()}
    except AttributeError:
        raise ValueError("not a topic config node") from None
