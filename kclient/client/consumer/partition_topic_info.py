"""A partition the high-level consumer owns, as its group core and its
fetchers share it (Kafka's ``kafka.consumer.PartitionTopicInfo``): which
stream it feeds, the next offset to fetch and its leader. A leaf module, so
that the fetchers (`kclient.client.consumer.fetcher`) and the group cores
(`kclient.client.consumer.group`) need not import each other for it.
"""

from __future__ import annotations

#: ``(topic, partition)``
TopicPartition = tuple[str, int]
#: ``(broker_id, host, port)``
Leader = tuple[int, str, int]


class PartitionTopicInfo:
    """A partition this consumer owns: which stream it feeds
    (``stream_index``), the next offset to fetch (``fetch_offset``; -1:
    not known yet, start per ``auto.offset.reset``) and its leader
    (``leader``: ``(broker_id, host, port)`` or None).

    Args:
        topic: The topic.
        partition: The partition.
        stream_index: The index of the stream it feeds.
        fetch_offset: The next offset to fetch (-1: per
            ``auto.offset.reset``).
        leader: Its leader ``(broker_id, host, port)``, or None while not
            known.
    """

    __slots__ = ("topic", "partition", "stream_index", "fetch_offset", "leader")

    def __init__(self, topic: str, partition: int, stream_index: int, fetch_offset: int, leader: Leader | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.stream_index = stream_index
        self.fetch_offset = fetch_offset
        self.leader = leader

    @property
    def key(self) -> TopicPartition:
        """``(topic, partition)``."""
        return (self.topic, self.partition)

    def __repr__(self) -> str:
        return f"<PartitionTopicInfo {self.topic}-{self.partition} stream={self.stream_index} fetch_offset={self.fetch_offset} leader={self.leader}>"


__all__ = ["Leader", "PartitionTopicInfo", "TopicPartition"]
