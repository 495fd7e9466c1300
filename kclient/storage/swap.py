"""Settling a log cleaning cut by a crash, before a log is loaded.

The cleaner (`kclient.storage.cleaner`) writes each cleaned segment as
``<base>.log.cleaned`` (with ``.index.cleaned`` / ``.timeindex.cleaned``),
fsyncs it, renames the three files to ``*.swap`` (the commit point), then
deletes the segments it replaces and renames the swap files to their final
names (Kafka's ``LogCleaner`` and ``Log.replaceSegments``; Kafka
documentation, "Log Compaction"). `recover_swaps` finishes or undoes that
sequence wherever a crash stopped it, as Kafka's ``LogLoader`` does:

* ``*.cleaned`` files (and the cleaner's scratch directory) are deleted:
  the cleaning had not committed, the old segments are all still there;
* a ``<base>.log.swap`` file had committed: every segment whose base offset
  lies in ``[base, last offset of the swap file]`` is deleted (those not
  deleted yet), then the swap files take their final names. Old segments of
  the group above the swap's last offset may remain: they hold only
  records later ones supersede, so the log stays valid, just less compact,
  until the next cleaning.

Plain blocking file I/O.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from kclient.errors import CorruptRecordError
from kclient.protocol.records.scan import read_batch_info
from kclient.storage.log_files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX, file_stem, fsync_dir, parse_base_offset

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
#: The cleaner's scratch directory inside a partition directory.
SCRATCH_DIR = "cleaner.tmp"
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX)


def last_offset_of(path: Path, base: int) -> int:
    """The last offset held by the complete batches of segment file ``path``
    (``base - 1`` when it holds none).

    Args:
        path: A ``.log`` (or ``.log.swap``) file.
        base: Its base offset.

    Returns:
        The last offset.
    """
    data = path.read_bytes()
    last = base - 1
    pos = 0
    while True:
        try:
            info = read_batch_info(data, pos)
        except CorruptRecordError:
            break
        if info is None:
            break
        last = max(last, info.last_offset)
        pos += info.size
    return last


def recover_swaps(directory: str | os.PathLike[str]) -> bool:
    """Settle an interrupted cleaning in one partition directory (see the
    module docstring).

    Args:
        directory: The partition directory.

    Returns:
        Whether anything was changed (the directory is then fsync-ed).

    Raises:
        OSError: An I/O failure.
    """
    directory = Path(directory)
    changed = False
    scratch = directory / SCRATCH_DIR
    if scratch.exists():
        shutil.rmtree(scratch, ignore_errors=True)
        changed = True
    names = os.listdir(directory)
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            logger.info("log %s: deleting %s left by a cleaning cut short", directory, name)
            (directory / name).unlink(missing_ok=True)
            changed = True
    swaps = sorted(
        b for name in names if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and (b := parse_base_offset(name[: -len(SWAP_SUFFIX)])) is not None
    )
    for base in swaps:
        stem = file_stem(base)
        swap_log = directory / (stem + LOG_SUFFIX + SWAP_SUFFIX)
        last = max(base, last_offset_of(swap_log, base))
        replaced = []
        for name in os.listdir(directory):
            if not name.endswith(_SEGMENT_SUFFIXES):
                continue
            other = parse_base_offset(name)
            if other is not None and base <= other <= last:
                (directory / name).unlink(missing_ok=True)
                if name.endswith(LOG_SUFFIX):
                    replaced.append(other)
        for suffix in _SEGMENT_SUFFIXES:
            path = directory / (stem + suffix + SWAP_SUFFIX)
            if path.exists():
                os.replace(path, directory / (stem + suffix))
        logger.warning(
            "log %s: completed the swap of cleaned segment %d left by a crash (replaced segment(s) %s)",
            directory,
            base,
            ", ".join(map(str, sorted(replaced))) or "none left",
        )
        changed = True
    for name in os.listdir(directory):
        if name.endswith(SWAP_SUFFIX):  # an index swap without its log
            (directory / name).unlink(missing_ok=True)
            changed = True
    if changed:
        fsync_dir(directory)
    return changed


__all__ = ["CLEANED_SUFFIX", "SCRATCH_DIR", "SWAP_SUFFIX", "last_offset_of", "recover_swaps"]
