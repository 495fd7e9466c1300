"""The names of a log's files, and making changes to a directory durable.

A segment's files are named by its base offset zero-padded to 20 digits
(``00000000000000000000.log`` / ``.index`` / ``.timeindex``), as Kafka
names them (Kafka's ``LogFileUtils``); a deleted segment's files are
renamed ``*.deleted`` until no reader holds them.
"""

from __future__ import annotations

import os

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # the aborted-transaction index (KIP-98)
DELETED_SUFFIX = ".deleted"


def file_stem(base_offset: int) -> str:
    """The 20-digit zero-padded file name stem for ``base_offset``.

    Args:
        base_offset: A segment's base offset.

    Returns:
        The stem, such as ``00000000000000000042``.

    Raises:
        ValueError: A negative offset.
    """
    if base_offset < 0:
        raise ValueError(f"negative base offset {base_offset}")
    return f"{base_offset:020d}"


def parse_base_offset(name: str) -> int | None:
    """Base offset from a segment file name such as
    ``00000000000000000042.log``; ``None`` if the name is not one."""
    stem, dot, _ = name.partition(".")
    if not dot or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """``os.fsync`` a directory so creations, renames and deletions in it survive a crash.

    Args:
        path: The directory.

    Raises:
        OSError: The directory could not be opened or synced.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["DELETED_SUFFIX", "INDEX_SUFFIX", "LOG_SUFFIX", "TIMEINDEX_SUFFIX", "TXN_INDEX_SUFFIX", "file_stem", "fsync_dir", "parse_base_offset"]
