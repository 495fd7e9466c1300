"""``kclient dump-log``: print log segment and index files the way Kafka's
``kafka.tools.DumpLogSegments`` does (``kafka-dump-log.sh``), so that people
who know that tool read kclient's files the same way.

Usage:

```text
kclient dump-log FILE... [--deep-iteration] [--print-data-log]
kclient dump-log --files a.log,a.index        # Kafka's spelling also works
```

Output (stdout), per file, modelled on Kafka 2.x's DumpLogSegments (field
names and order as Kafka prints them; compression codecs by Kafka's
``CompressionType`` enum names NONE/GZIP/SNAPPY/LZ4/ZSTD, as
``kafka-dump-log.sh`` prints them; the per-record line uses the newer
``keySize``/``valueSize``; Kafka 3.x and 4.x print ``Log starting
offset:``, add ``deleteHorizonMs`` and write codecs in lower case, the
other fields agree):

```text
Dumping 00000000000000000000.log
Starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1
  producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0
  CreateTime: 1524709879130 size: 76 magic: 2 compresscodec: NONE crc: 2857248333 isvalid: true
| offset: 0 CreateTime: 1524709879130 keySize: 3 valueSize: 5 sequence: -1 headerKeys: [] key: key payload: value
```

(each of those is one line). A v0/v1 entry prints ``offset: O position: P
CreateTime: T size: S magic: M compresscodec: C crc: C isvalid: B`` (v0:
``NoTimestampType: -1``), and with ``--deep-iteration`` one ``| offset: ..
keySize: .. valueSize: .. isValid: .. crc: ..`` line per (inner) message.
Transactions (KIP-98) show as Kafka shows them: every v2 batch line
carries ``producerId``, ``producerEpoch``, ``isTransactional`` and
``isControl``; with ``--deep-iteration`` (or ``--print-data-log``) the
record of a control batch prints ``endTxnMarker: COMMIT coordinatorEpoch:
N`` (or ``ABORT``) instead of a key and payload. An ``.index`` file prints
``offset: X position: Y`` per entry (offset absolute), a ``.timeindex``
file ``timestamp: T offset: O``, and a ``.txnindex`` file (the
aborted-transaction index) ``version: V producerId: P firstOffset: F
lastOffset: L lastStableOffset: S`` per aborted transaction.

Damage never raises: a damaged or truncated tail is reported as Kafka does,
``Found N invalid bytes at the end of NAME``, followed here by ``(from
position P: reason)``; a batch whose CRC fails prints ``isvalid: false`` and
the dump goes on with the next batch; records that cannot be decoded print
one ``| cannot read the records ...`` line; a control record that cannot be
decoded ends its line with ``cannot read the control record: reason``; a
``.txnindex`` ending in a partial entry or holding an entry of an unknown
version prints the entries before it, then ``Found N invalid bytes``
as for a segment. Problems Kafka sends to stderr
(non-consecutive offsets, index entries that do not match the log) go to
``err`` after all files. The exit code is 0 when everything was readable and
valid, 1 otherwise (Kafka always exits 0).
"""

from __future__ import annotations

import argparse
import mmap
import os
import struct
import sys
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol, TextIO

import attrs

from kclient.errors import CorruptRecordError, KafkaError
from kclient.protocol.records import codecs, control, legacy, v2
from kclient.protocol.records.scan import LOG_OVERHEAD, MAGIC_AT, BatchInfo, read_batch_info
from kclient.storage.txn_index import ABORTED_TXN_SIZE, ABORTED_TXN_VERSION, TXN_INDEX_SUFFIX, AbortedTxn

RECORD_INDENT = "|"

_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_INT32_MAX = 2**31 - 1

#: Kafka's ``ControlRecordType`` ids and names.
CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


@attrs.define
class _Report:
    """Problems collected while dumping, printed to ``err`` at the end."""

    non_consecutive: dict[str, list[tuple[int, int]]] = attrs.Factory(dict)  # path -> [(last, next)]
    index_mismatches: dict[str, list[tuple[int, int]]] = attrs.Factory(dict)  # path -> [(index offset, log offset)]
    failed: bool = False

    def print(self, err: TextIO) -> None:
        for path, pairs in self.index_mismatches.items():
            print(f"Mismatches in :{path}", file=err)
            for index_offset, log_offset in pairs:
                print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)
        for path, pairs in self.non_consecutive.items():
            print(f"Non-consecutive offsets in {path}", file=err)
            for first, second in pairs:
                print(f"  {first} is followed by {second}", file=err)


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _reason(exc: BaseException) -> str:
    """An exception's message without kclient's ``[Error 2] NAME: `` prefix."""
    text = str(exc)
    if isinstance(exc, KafkaError) and text.startswith("[Error "):
        _, sep, rest = text.partition(": ")
        if sep:
            return rest
    return text or type(exc).__name__


def _codec_name(codec: int) -> str:
    return codecs.JAVA_NAMES.get(codec, f"UNKNOWN({codec})")


def _increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: int32 sequences
    wrap from Integer.MAX_VALUE to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _base_offset_of(path: Path) -> int | None:
    stem = path.name.split(".")[0]
    return int(stem) if stem.isdigit() else None


class _FileBytes:
    """A read-only whole file: an ``mmap`` (``b""`` when empty). Slicing it
    copies, so no buffer outlives `close`."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self.data: mmap.mmap | bytes = b""
        try:
            size = os.fstat(self._fd).st_size
            if size:
                self.data = mmap.mmap(self._fd, size, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(self._fd)
            raise

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()
        os.close(self._fd)

    def __enter__(self) -> mmap.mmap | bytes:
        return self.data

    def __exit__(self, *exc: object) -> None:
        self.close()


def _batch_info(data: mmap.mmap | bytes, position: int) -> BatchInfo | None:
    """`read_batch_info` over a file's bytes, through a view released at
    once (an ``mmap`` cannot close while a view of it lives)."""
    with memoryview(data) as view:
        return read_batch_info(view, position)


def _text(data: bytes) -> str:
    """Kafka's StringDecoder: UTF-8 with replacement characters."""
    return data.decode("utf-8", errors="replace")


class _LogDumper:
    """Dumps one ``.log`` file (state: offsets seen, for non-consecutive checks)."""

    def __init__(self, path: Path, deep: bool, print_data: bool, out: TextIO, report: _Report) -> None:
        self.path = path
        self.deep = deep
        self.print_data = print_data
        self.out = out
        self.report = report
        self.last_offset: int | None = None

    def _p(self, line: str) -> None:
        print(line, file=self.out)

    def _seen(self, offset: int) -> None:
        if self.last_offset is not None and offset != self.last_offset + 1:
            self.report.non_consecutive.setdefault(str(self.path.resolve()), []).append((self.last_offset, offset))
        self.last_offset = offset

    def run(self) -> None:
        base = _base_offset_of(self.path)
        if base is not None:
            self._p(f"Starting offset: {base}")
        with _FileBytes(self.path) as data:
            size = len(data)
            pos = 0
            problem = ""
            while pos < size:
                try:
                    info = _batch_info(data, pos)
                except KafkaError as exc:
                    problem = _reason(exc)
                    break
                if info is None:
                    remaining = size - pos
                    if remaining >= LOG_OVERHEAD:
                        need = _I32.unpack_from(data, pos + 8)[0] + LOG_OVERHEAD
                        problem = f"a batch of {need} bytes starts here but the file ends after {remaining}"
                    else:
                        problem = f"{remaining} bytes are too few for a batch header"
                    break
                batch = data[pos : pos + info.size]
                if info.magic == 2:
                    self._v2(batch, pos)
                else:
                    self._legacy(batch, pos, info.magic)
                pos += info.size
            trailing = size - pos
            if trailing > 0:
                self.report.failed = True
                self._p(f"Found {trailing} invalid bytes at the end of {self.path.name} (from position {pos}: {problem})")

    # ---------------------------------------------------------------- v2

    def _v2(self, batch: bytes, position: int) -> None:
        h = v2.read_header(batch)
        valid = v2.compute_crc(batch) == h.crc
        if not valid:
            self.report.failed = True
        ts_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
        last_seq = -1 if h.base_sequence < 0 else _increment_sequence(h.base_sequence, h.last_offset_delta)
        self._p(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {last_seq} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_b(h.is_transactional)} isControl: {_b(h.is_control)} position: {position} "
            f"{ts_type}: {h.max_timestamp} size: {len(batch)} magic: 2 compresscodec: {_codec_name(h.codec)} "
            f"crc: {h.crc} isvalid: {_b(valid)}"
        )
        if not self.deep:
            return
        try:
            for rec in v2.iter_records(batch, h, check_crc=False):
                self._seen(rec.offset)
                self._p(self._v2_record_line(h, rec, ts_type))
        except Exception as exc:  # damaged records must not stop the dump
            self.report.failed = True
            self._p(f"{RECORD_INDENT} cannot read the records of the batch at position {position}: {_reason(exc)}")

    def _v2_record_line(self, h: v2.BatchHeader, rec: v2.Record, ts_type: str) -> str:
        """One record's line: its metadata, then a control record's marker
        (always, as Kafka prints it) or, with ``--print-data-log``, the key
        and payload of a data record. A control record that cannot be
        decoded says so on its line and marks the dump failed."""
        seq = -1 if h.base_sequence < 0 else _increment_sequence(h.base_sequence, rec.offset - h.base_offset)
        keys = ",".join(hd.key for hd in rec.headers)
        line = (
            f"{RECORD_INDENT} offset: {rec.offset} {ts_type}: {rec.timestamp} "
            f"keySize: {_size(rec.key)} valueSize: {_size(rec.value)} sequence: {seq} headerKeys: [{keys}]"
        )
        if h.is_control:
            try:
                line += control_record_text(rec.key, rec.value)
            except CorruptRecordError as exc:
                self.report.failed = True
                line += f" cannot read the control record: {_reason(exc)}"
        elif self.print_data:
            line += _data_text(rec.key, rec.value)
        return line

    # ---------------------------------------------------------------- v0 / v1

    def _legacy(self, batch: bytes, position: int, magic: int) -> None:
        offset = _I64.unpack_from(batch, 0)[0]
        crc = _U32.unpack_from(batch, LOG_OVERHEAD)[0]
        attributes = batch[legacy.ATTRIBUTES_AT]
        valid = (zlib.crc32(batch[MAGIC_AT:]) & 0xFFFFFFFF) == crc
        if not valid:
            self.report.failed = True
        if magic == 0:
            ts_type, timestamp = "NoTimestampType", -1
        else:
            ts_type = "LogAppendTime" if attributes & legacy.ATTR_TIMESTAMP_TYPE else "CreateTime"
            timestamp = _I64.unpack_from(batch, 18)[0]
        codec = attributes & legacy.ATTR_CODEC_MASK
        self._p(
            f"offset: {offset} position: {position} {ts_type}: {timestamp} size: {len(batch)} magic: {magic} "
            f"compresscodec: {_codec_name(codec)} crc: {crc} isvalid: {_b(valid)}"
        )
        if not self.deep:
            return
        try:
            msg = legacy.read_message(batch, 0)
            if msg.codec == codecs.NONE:
                items = [(msg.offset, msg.timestamp, msg)]
            else:
                items = legacy.absolute_inner(msg, legacy.decompress_inner(msg, check_crc=False))
        except Exception as exc:
            self.report.failed = True
            self._p(f"{RECORD_INDENT} cannot read the records of the message at position {position}: {_reason(exc)}")
            return
        for rec_offset, rec_ts, m in items:
            self._seen(rec_offset)
            if not m.is_valid:
                self.report.failed = True
            line = (
                f"{RECORD_INDENT} offset: {rec_offset} {ts_type}: {rec_ts} keySize: {m.key_size} "
                f"valueSize: {m.value_size} isValid: {_b(m.is_valid)} crc: {m.crc}"
            )
            if self.print_data:
                line += _data_text(m.key, m.value)
            self._p(line)


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _data_text(key: bytes | None, value: bytes | None) -> str:
    text = ""
    if key is not None:
        text += f" key: {_text(key)}"
    if value is not None:
        text += f" payload: {_text(value)}"
    return text


def control_record_text(key: bytes | None, value: bytes | None) -> str:
    """Kafka's rendering of a control record (DumpLogSegments): ``
    endTxnMarker: COMMIT coordinatorEpoch: N`` for a transaction marker
    (KIP-98; decoded with `kclient.protocol.records.control`), ``
    controlType: NAME(id)`` for the other types (KRaft's).

    Args:
        key: The control record's key.
        value: Its value.

    Returns:
        The text to append to the record's line, with a leading space.

    Raises:
        kclient.errors.CorruptRecordError: The key is null, too short or of a
            negative version, or a marker's value is (see
            `kclient.protocol.records.control.decode_end_txn_marker`).
    """
    control_key = control.decode_control_key(key)
    if control_key.is_transaction_marker:
        marker = control.decode_end_txn_marker(key, value)
        return f" endTxnMarker: {CONTROL_TYPES[marker.control_type]} coordinatorEpoch: {marker.coordinator_epoch}"
    return f" controlType: {CONTROL_TYPES.get(control_key.type, 'UNKNOWN')}({control_key.type})"


# -------------------------------------------------------------------- indexes


def _dump_index(path: Path, out: TextIO, report: _Report) -> None:
    """Kafka's ``dumpIndex``: one ``offset: X position: Y`` line per entry,
    stopping at the first zero entry after the first (a preallocated sparse
    file); each entry is checked against the ``.log`` file beside it (the
    batch at ``position`` must hold ``offset``)."""
    base = _base_offset_of(path) or 0
    data = path.read_bytes()
    count = len(data) // _INDEX_ENTRY.size
    if count == 0 and not data:
        print(f"{path} is empty.", file=out)
        return
    log_path = path.with_suffix(".log")
    log_file = _FileBytes(log_path) if log_path.exists() else None
    mismatches: list[tuple[int, int]] = []
    try:
        for i in range(count):
            rel, position = _INDEX_ENTRY.unpack_from(data, i * _INDEX_ENTRY.size)
            offset = base + rel
            if rel == 0 and i > 0:
                break
            if log_file is not None:
                found = -1
                try:
                    info = _batch_info(log_file.data, position) if 0 <= position < len(log_file.data) else None
                    if info is not None:
                        found = info.last_offset
                        if info.base_offset <= offset <= info.last_offset:
                            found = offset
                except KafkaError:
                    found = -1
                if found != offset:
                    mismatches.append((offset, found))
            print(f"offset: {offset} position: {position}", file=out)
    finally:
        if log_file is not None:
            log_file.close()
    if mismatches:
        report.failed = True
        report.index_mismatches[str(path.resolve())] = mismatches
    trailing = len(data) % _INDEX_ENTRY.size
    if trailing:
        report.failed = True
        print(f"Found {trailing} invalid bytes at the end of {path.name} (a partial index entry)", file=out)


def _dump_time_index(path: Path, out: TextIO, report: _Report) -> None:
    """Kafka's ``dumpTimeIndex`` output: ``timestamp: T offset: O`` per
    12-byte entry (int64 timestamp, int32 relative offset), stopping at the
    first zero entry after the first."""
    base = _base_offset_of(path) or 0
    data = path.read_bytes()
    count = len(data) // _TIME_INDEX_ENTRY.size
    if not data:
        print(f"{path} is empty.", file=out)
        return
    for i in range(count):
        ts, rel = _TIME_INDEX_ENTRY.unpack_from(data, i * _TIME_INDEX_ENTRY.size)
        if rel == 0 and i > 0:
            break
        print(f"timestamp: {ts} offset: {base + rel}", file=out)
    trailing = len(data) % _TIME_INDEX_ENTRY.size
    if trailing:
        report.failed = True
        print(f"Found {trailing} invalid bytes at the end of {path.name} (a partial time index entry)", file=out)


def _dump_txn_index(path: Path, out: TextIO, report: _Report) -> None:
    """Kafka's ``dumpTxnIndex``: one ``version: V producerId: P firstOffset:
    F lastOffset: L lastStableOffset: S`` line per aborted transaction of a
    ``.txnindex`` file (34-byte entries, `kclient.storage.txn_index`),
    offsets absolute; an empty file prints nothing, as in Kafka.

    The file is only read (a `kclient.storage.txn_index.TransactionIndex`
    would cut a partial entry off). Where Kafka skips a trailing partial
    entry silently and fails on an entry of an unknown version, this
    prints the entries before either and then ``Found N invalid bytes at
    the end of NAME (from position P: reason)``, and marks the dump failed.
    """
    data = path.read_bytes()
    pos = 0
    problem = ""
    while pos < len(data):
        if len(data) - pos < ABORTED_TXN_SIZE:
            problem = f"a partial aborted transaction entry of {len(data) - pos} bytes, an entry has {ABORTED_TXN_SIZE}"
            break
        txn = AbortedTxn.decode(data, pos)
        if not 0 <= txn.version <= ABORTED_TXN_VERSION:
            problem = f"aborted transaction version {txn.version} is unknown (the current version is {ABORTED_TXN_VERSION})"
            break
        print(
            f"version: {txn.version} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
            f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}",
            file=out,
        )
        pos += ABORTED_TXN_SIZE
    if pos < len(data):
        report.failed = True
        print(f"Found {len(data) - pos} invalid bytes at the end of {path.name} (from position {pos}: {problem})", file=out)


# -------------------------------------------------------------------- entry points

#: The dumper of each index file suffix.
_INDEX_DUMPERS: dict[str, Callable[[Path, TextIO, _Report], None]] = {
    ".index": _dump_index,
    ".timeindex": _dump_time_index,
    TXN_INDEX_SUFFIX: _dump_txn_index,
}



def dump_files(
    paths: Iterable[str | os.PathLike[str]],
    deep_iteration: bool = False,
    print_data_log: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Dump files the way Kafka's DumpLogSegments does.

    See the module docstring for the format. Files are recognised by suffix:
    ``.log`` (segments), ``.index`` (offset index), ``.timeindex`` and
    ``.txnindex`` (aborted transactions); others are skipped with
    ``Ignoring unknown file`` on ``err``. Never raises for damaged or
    unreadable files: they are reported on ``err``.

    Args:
        paths: The files to dump.
        deep_iteration: One line per record as well as per batch.
        print_data_log: Also print keys and values as UTF-8 text (implies
            ``deep_iteration``, as in Kafka).
        out: Where the dump goes (default ``sys.stdout``).
        err: Where problems go (default ``sys.stderr``).

    Returns:
        0 if every file was read and valid; 1 if any had invalid bytes, a
            CRC mismatch, records (control records included) that could not
            be decoded, a partial or unknown ``.txnindex`` entry, index entries
            that do not match the log, or could not be opened.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    deep = deep_iteration or print_data_log
    report = _Report()
    for raw in paths:
        path = Path(raw)
        print(f"Dumping {raw}", file=out)
        try:
            index_dumper = _INDEX_DUMPERS.get(path.suffix)
            if path.suffix == ".log":
                _LogDumper(path, deep, print_data_log, out, report).run()
            elif index_dumper is not None:
                index_dumper(path, out, report)
            else:
                print(f"Ignoring unknown file {raw}", file=err)
        except BrokenPipeError:  # the reader went away (``| head``): not a file problem
            raise
        except OSError as exc:
            report.failed = True
            print(f"Cannot read {raw}: {exc.strerror or exc}", file=err)
    out.flush()
    report.print(err)
    return 1 if report.failed else 0


class DumpLogArguments(Protocol):
    """The ``dump-log`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    paths: list[str]
    files: list[str]
    deep_iteration: bool
    print_data_log: bool


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the ``dump-log`` subcommand.

    The subcommand sets ``func`` to `run`, which returns the exit code.

    Args:
        subparsers: From ``ArgumentParser.add_subparsers``.

    Returns:
        The new sub-parser.
    """
    p = subparsers.add_parser(
        "dump-log",
        help="print log segment and index files like Kafka's DumpLogSegments",
        description="Print the batches of .log segment files (transaction markers included) and the entries of "
        ".index/.timeindex/.txnindex files, "
        "in the format of Kafka's kafka.tools.DumpLogSegments. Exit status 1 if any file is damaged.",
    )
    p.add_argument("paths", nargs="*", metavar="FILE", help="a .log, .index, .timeindex or .txnindex file")
    p.add_argument(
        "--files",
        action="append",
        default=[],
        metavar="FILE1,FILE2",
        help="comma-separated files, as DumpLogSegments --files takes them (repeatable)",
    )
    p.add_argument("--deep-iteration", action="store_true", help="one line per record, not only per batch")
    p.add_argument(
        "--print-data-log",
        action="store_true",
        help="print each record's key and payload as text (implies --deep-iteration)",
    )
    p.set_defaults(func=run)
    return p


def run(args: DumpLogArguments) -> int:
    """Run ``dump-log`` for parsed arguments.

    Args:
        args: Parsed by the parser `register` set up.

    Returns:
        The exit code (2 when no file was given).
    """
    paths = list(args.paths) + [f for csv in args.files for f in csv.split(",") if f]
    if not paths:
        print("dump-log: give at least one FILE (or --files a,b)", file=sys.stderr)
        return 2
    try:
        return dump_files(paths, deep_iteration=args.deep_iteration, print_data_log=args.print_data_log)
    except BrokenPipeError:
        # ``kclient dump-log ... | head``: stop quietly; point stdout at
        # /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1


def main(argv: list[str] | None = None) -> int:
    """``python -m kclient.tools.dump_log FILE...``: the subcommand on its own."""
    parser = argparse.ArgumentParser(prog="kclient")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["dump-log", *(sys.argv[1:] if argv is None else argv)])
    return run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
