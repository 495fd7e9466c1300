"""Topic ids (KIP-516) of the bundled broker.

Kafka gives each topic a random UUID when it is created and keeps it with
the topic (in ZooKeeper's ``/brokers/topics/<topic>`` from 2.8, in the
KRaft metadata log since); Metadata v10+ and the consumer group protocol
(KIP-848, whose assignments name topics by id) use it. The bundled broker
keeps no id with its topics, so it derives one from the topic's name: the
same on every broker and across restarts, never the all-zero UUID. Unlike
Kafka's, a topic deleted and created again gets its old id back.

Pure: no I/O.
"""

from __future__ import annotations

import functools
import uuid

#: The namespace of the name-based (version 5) UUIDs.
TOPIC_ID_NAMESPACE = uuid.UUID("a3f1c6de-5b0e-4c8a-9a7e-6b2d1f0c4e58")


@functools.lru_cache(maxsize=4096)
def topic_id(name: str) -> uuid.UUID:
    """The id of topic ``name``.

    Args:
        name: The topic name.

    Returns:
        Its id (a version 5 UUID of the name).
    """
    return uuid.uuid5(TOPIC_ID_NAMESPACE, name)


__all__ = ["TOPIC_ID_NAMESPACE", "topic_id"]
