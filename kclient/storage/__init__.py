"""The broker's log engine: plain file I/O, no sockets, no trio.

* `OffsetIndex` (``index.py``): sparse ``.index`` file.
* `TimeIndex` (``timeindex.py``): sparse ``.timeindex`` file.
* `LogSegment` (``segment.py``): one ``.log`` + indexes triple.
* `FileSlice` (``fileslice.py``): a byte range of a segment file
  for ``os.sendfile``, holding a reference on the segment.
* ``handles.py``: segment and index files opened lazily, with a bounded
  cache of idle descriptors (KAFKA-7283), so thousands of partitions fit
  in ``ulimit -n 1024``.
* `Log` (``log.py``, Kafka's ``UnifiedLog``): one partition's log:
  appends, replication state, truncation, retention. It holds a
  `LocalLog` (``local_log.py``: segments, offsets, roll, flush, reads),
  whose members it serves as its own (``delegation.py``), and is built from what `LogLoader` (``loader.py``: leftovers, recovery,
  index and producer state rebuild) loaded; ``log_segments.py`` is the
  immutable segment list readers search, ``append_info.py`` the checks and
  offset assignment of an append, ``retention.py`` which segments retention
  deletes, `LogConfig` (``log_config.py``) the per-log settings.
* ``log_files.py``: file names and directory fsync; ``batch_walk.py``: walks
  over a segment file's batches.
* `LogManager` (``manager.py``): every partition under the log
  dirs, recovery point and high watermark checkpoints, clean-shutdown
  marker.
* `LeaderEpochCache` (``leader_epoch.py``): ``leader-epoch-checkpoint``,
  the (leader epoch, start offset) entries of KIP-101 / KIP-279.
* `ProducerStateManager` (``producer_state.py``): idempotent producer
  state and its ``.snapshot`` files (KIP-98).
* ``checkpoint.py``: the checkpoint file format and the marker.
* `LogCleaner` / `clean_log` (``cleaner.py``): log compaction
  (``cleanup.policy=compact``) with its ``cleaner-offset-checkpoint``;
  ``offset_map.py`` (key -> latest offset), ``batch_filter.py`` (batches
  rebuilt without removed records, offsets kept), ``swap.py`` (crash-safe
  swap of cleaned segments, settled when a log is opened).

Layout and semantics follow the "Log" section of the Kafka documentation
(https://kafka.apache.org/documentation/#log: writes, reads, deletes,
recovery guarantees) and Kafka's ``Log`` / ``LogSegment`` / ``LogManager``.
"""

from kclient.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    read_checkpoint,
    write_checkpoint,
)
from kclient.storage.cleaner import CLEANER_OFFSET_CHECKPOINT, CleanResult, LogCleaner, clean_log
from kclient.storage.fileslice import FileSlice
from kclient.storage.index import OffsetIndex
from kclient.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from kclient.storage.loader import LogLoader
from kclient.storage.local_log import LocalLog
from kclient.storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendResult,
    Log,
    LogConfig,
    ReadResult,
)
from kclient.storage.manager import LogManager, parse_partition_dir, validate_topic_name
from kclient.storage.producer_state import ProducerStateManager
from kclient.storage.segment import LogSegment
from kclient.storage.timeindex import TimeIndex

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "LEADER_EPOCH_CHECKPOINT",
    "MAX_TIMESTAMP",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "AppendResult",
    "CleanResult",
    "LogCleaner",
    "clean_log",
    "CheckpointError",
    "FileSlice",
    "LeaderEpochCache",
    "LocalLog",
    "Log",
    "LogConfig",
    "LogLoader",
    "LogManager",
    "LogSegment",
    "OffsetIndex",
    "ProducerStateManager",
    "ReadResult",
    "TimeIndex",
    "parse_partition_dir",
    "read_checkpoint",
    "validate_topic_name",
    "write_checkpoint",
]
