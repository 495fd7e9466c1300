"""The broker's log engine: plain file I/O, no sockets, no trio.

* :class:`OffsetIndex` (``index.py``): sparse ``.index`` file.
* :class:`LogSegment` (``segment.py``): one ``.log`` + ``.index`` pair.
* :class:`Log` (``log.py``): one partition's segments, offsets, reads.
* :class:`LogManager` (``manager.py``): every partition under the log dirs.

Layout and semantics follow seed 001 (log writes, reads, deletes,
recovery) and Kafka's ``Log`` / ``LogSegment`` / ``LogManager``.
"""

from kclient.storage.index import OffsetIndex
from kclient.storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AppendResult,
    Log,
    LogConfig,
    ReadResult,
)
from kclient.storage.manager import LogManager, parse_partition_dir, validate_topic_name
from kclient.storage.segment import LogSegment

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "AppendResult",
    "Log",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetIndex",
    "ReadResult",
    "parse_partition_dir",
    "validate_topic_name",
]
