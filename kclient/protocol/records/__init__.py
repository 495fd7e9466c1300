"""Record formats: v2 record batches (:mod:`.v2`), batch scanning
(:mod:`.scan`) and compression codecs (:mod:`.codecs`).

Dispatch on the magic byte at position 16: every format keeps offset and
size at the same place (PROTOCOL-NOTES "Records"). Message sets v0/v1 are
read by the legacy module of a later issue; :func:`iter_record_set` raises a
clear error for them until then.
"""

from __future__ import annotations

from typing import Iterator

from kclient.errors import CorruptRecordError
from kclient.protocol.records.scan import BatchInfo, read_batch_info, scan_batches
from kclient.protocol.records.v2 import BatchHeader, Header, Record, build_batch, iter_records, validate_batch


def iter_record_set(buf) -> Iterator[Record]:
    """Yield every record of every complete batch in ``buf`` (a Fetch
    response's records), skipping control batches and dropping a partial
    batch at the end. Raises :class:`CorruptRecordError` on a bad batch."""
    view = memoryview(buf)
    for info in scan_batches(view):
        batch = view[info.position : info.position + info.size]
        if info.magic != 2:
            raise CorruptRecordError(f"message format v{info.magic} at offset {info.base_offset} is not supported yet")
        header = validate_batch(batch)
        if header.is_control:
            continue
        yield from iter_records(batch, header, check_crc=False)


__all__ = [
    "BatchHeader",
    "BatchInfo",
    "Header",
    "Record",
    "build_batch",
    "iter_record_set",
    "iter_records",
    "read_batch_info",
    "scan_batches",
    "validate_batch",
]
