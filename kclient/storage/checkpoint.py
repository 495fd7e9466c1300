"""Per-log-dir bookkeeping files: the recovery point checkpoint and the
clean-shutdown marker.

``recovery-point-offset-checkpoint`` (Kafka's ``OffsetCheckpointFile``
text format): a version line ``0``, a count line, then one
``<topic> <partition> <offset>`` line per partition. The offset is the
partition's recovery point: every offset below it was fsync-ed, so after
a crash only the segments from the one holding it onwards are scanned.
It is written atomically (temp file, fsync, rename, fsync of the dir).

``replication-offset-checkpoint`` has the same format and holds each
partition's high watermark.

``.kafka_cleanshutdown``: an empty file written after every log of the
dir was flushed and closed; its presence at startup means no recovery is
needed. The log manager removes it once the logs are loaded.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from kclient.storage.log_files import fsync_dir

logger = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
#: Kafka's high watermark checkpoint of a log dir: the same format, each
#: partition's high watermark.
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: The log cleaner's checkpoint of a log dir: the same format, each
#: compacted partition's first dirty offset (`kclient.storage.cleaner`).
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CHECKPOINT_VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file exists but cannot be parsed (path and line in the
    message)."""


def read_checkpoint(path: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
    """Read a checkpoint file.

    Args:
        path: The checkpoint file.

    Returns:
        ``{(topic, partition): offset}``; ``{}`` if the file does not exist.

    Raises:
        CheckpointError: A bad version, a count that does not match the
            lines, or a malformed line.
        OSError: The file exists but cannot be read.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: expected a version and a count line, got {len(lines)} line(s)")
    try:
        version = int(lines[0].strip())
        count = int(lines[1].strip())
    except ValueError:
        raise CheckpointError(f"{path}: malformed header {lines[:2]!r}") from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unknown version {version}")
    body = [line for line in lines[2:] if line.strip()]
    if count != len(body):
        raise CheckpointError(f"{path}: count line says {count} entries but {len(body)} follow")
    out: dict[tuple[str, int], int] = {}
    for n, line in enumerate(body, start=3):
        parts = line.split()
        if len(parts) != 3:
            raise CheckpointError(f"{path}: line {n} {line!r} is not 'topic partition offset'")
        try:
            partition, offset = int(parts[1]), int(parts[2])
        except ValueError:
            raise CheckpointError(f"{path}: line {n} {line!r} has a non-integer partition or offset") from None
        if partition < 0 or offset < 0:
            raise CheckpointError(f"{path}: line {n} {line!r} has a negative partition or offset")
        out[(parts[0], partition)] = offset
    return out


def write_checkpoint(path: str | os.PathLike[str], entries: Mapping[tuple[str, int], int]) -> None:
    """Atomically replace the checkpoint file at ``path`` with ``entries``.

    Entries are written sorted by topic and partition: write ``<path>.tmp``,
    fsync it, rename it over ``path``, fsync the directory.

    Args:
        path: The checkpoint file.
        entries: ``{(topic, partition): offset}``.

    Raises:
        OSError: Writing failed; the old file is then intact.
    """
    path = Path(path)
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(entries.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode("utf-8"))


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the file at ``path`` with ``data`` so that a crash leaves
    either the old or the new content.

    Write ``<path>.tmp``, fsync it, rename it over ``path``, fsync the
    directory (what Kafka's checkpoint files do).

    Args:
        path: The file.
        data: Its new content.

    Raises:
        OSError: Writing failed; the old file is then intact.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_clean_shutdown_marker(log_dir: str | os.PathLike[str]) -> None:
    """Create ``<log_dir>/.kafka_cleanshutdown`` durably (file and dir fsync-ed).

    Args:
        log_dir: The log directory.

    Raises:
        OSError: The marker could not be written.
    """
    path = Path(log_dir) / CLEAN_SHUTDOWN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(log_dir)


def remove_clean_shutdown_marker(log_dir: str | os.PathLike[str]) -> bool:
    """Remove ``<log_dir>/.kafka_cleanshutdown`` durably.

    Args:
        log_dir: The log directory.

    Returns:
        Whether the marker existed.
    """
    path = Path(log_dir) / CLEAN_SHUTDOWN_FILE
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(log_dir)
    return True
