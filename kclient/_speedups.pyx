# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled versions of kclient's per-record loops (optional).

Each function here has a pure-Python twin that defines its behaviour and
that the test suite compares it with byte for byte (hypothesis tests run
both): `kclient.protocol.records.v2` (encoding and decoding the records of
a v2 record batch, Kafka protocol guide "Record Batch" / "Record") and
`kclient.client.producer.partitioner` (Java's ``Utils.murmur2``).

The compiled functions only take the common shapes (``bytes`` keys and
values, no record headers, well-formed input) and report anything else
back to the caller (``None`` or ``False``), which then runs the pure-Python
twin: the errors a user sees always come from one place.

`kclient._accel` decides whether this module is used (it is not when the
``KCLIENT_PURE_PYTHON`` environment variable is set, or when it was not
built).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_CheckExact, PyLong_FromLongLong
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport INT64_MIN, int32_t, int64_t, uint32_t, uint64_t, uint8_t
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.string cimport memcpy

cdef extern from "Python.h":
    bint PyTuple_CheckExact(object o)
    bint PyList_CheckExact(object o)
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1
    void PyObject_GC_UnTrack(void* op)

# Timestamps further than this from zero are left to the pure-Python path
# (their differences could overflow 64 bits here).
cdef int64_t _TS_BOUND = (<int64_t>1) << 61

cdef tuple _EMPTY = ()

# Offsets further than this from zero are left to the pure-Python path.
cdef int64_t _OFFSET_BOUND = (<int64_t>1) << 62


# -- zigzag varints (Kafka protocol guide, "Record": varint / varlong) ----------

cdef inline uint64_t _zigzag(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef inline Py_ssize_t _varint_size(int64_t v) noexcept nogil:
    cdef uint64_t u = _zigzag(v)
    cdef Py_ssize_t n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


cdef inline char* _write_varint(char* p, int64_t v) noexcept nogil:
    cdef uint64_t u = _zigzag(v)
    while u >= 0x80:
        p[0] = <char>((u & 0x7F) | 0x80)
        p += 1
        u >>= 7
    p[0] = <char>u
    return p + 1


# -- encoding -------------------------------------------------------------------

cdef inline int _record_shape(object rec) except -1:
    """1 when ``rec`` is a record of the fast shape: a ``(key, value,
    timestamp[, ()])`` tuple, key and value ``bytes`` or None, the
    timestamp an int within +-2**61; else 0."""
    cdef Py_ssize_t n
    cdef object t
    cdef int overflow = 0
    cdef int64_t ts
    if not PyTuple_CheckExact(rec):
        return 0
    n = PyTuple_GET_SIZE(rec)
    if n == 4:
        if len(<object>PyTuple_GET_ITEM(rec, 3)):  # headers: the pure path writes them
            return 0
    elif n != 3:
        return 0
    t = <object>PyTuple_GET_ITEM(rec, 0)
    if t is not None and not PyBytes_CheckExact(t):
        return 0
    t = <object>PyTuple_GET_ITEM(rec, 1)
    if t is not None and not PyBytes_CheckExact(t):
        return 0
    t = <object>PyTuple_GET_ITEM(rec, 2)
    if not PyLong_CheckExact(t):
        return 0
    ts = PyLong_AsLongLongAndOverflow(t, &overflow)
    if overflow or ts >= _TS_BOUND or ts <= -_TS_BOUND:
        return 0
    return 1


def encode_records(list records, object base_timestamp):
    """The records section of an uncompressed v2 record batch.

    Args:
        records: ``(key, value, timestamp_ms)`` tuples (or with an empty
            headers sequence as a fourth item), key and value ``bytes`` or
            None; record ``i`` gets offset delta ``i``.
        base_timestamp: The batch's first timestamp (ms).

    Returns:
        ``(body, count, max_timestamp)`` exactly as
        ``kclient.protocol.records.v2._encode_records_py`` returns them, or
        None when a record is not of the fast shape (headers, another
        bytes-like type, a timestamp out of range): the caller then runs
        the pure-Python encoder.
    """
    cdef Py_ssize_t n = PyList_GET_SIZE(records)
    cdef Py_ssize_t i, total = 0, body, klen, vlen
    cdef int64_t base_ts, ts, max_ts = -1, delta
    cdef object rec, key = None, value = None
    cdef int overflow = 0
    cdef bytes out
    cdef char* p
    if not PyLong_CheckExact(base_timestamp):
        return None
    base_ts = PyLong_AsLongLongAndOverflow(base_timestamp, &overflow)
    if overflow or base_ts >= _TS_BOUND or base_ts <= -_TS_BOUND:
        return None
    # Pass 1: check every record and size the section.
    for i in range(n):
        rec = <object>PyList_GET_ITEM(records, i)
        if not _record_shape(rec):
            return None
        key = <object>PyTuple_GET_ITEM(rec, 0)
        value = <object>PyTuple_GET_ITEM(rec, 1)
        ts = PyLong_AsLongLongAndOverflow(<object>PyTuple_GET_ITEM(rec, 2), &overflow)
        if ts > max_ts:
            max_ts = ts
        delta = ts - base_ts
        body = 2 + _varint_size(delta) + _varint_size(i)  # attributes, deltas, header count
        if key is None:
            body += 1
        else:
            klen = PyBytes_GET_SIZE(key)
            body += _varint_size(klen) + klen
        if value is None:
            body += 1
        else:
            vlen = PyBytes_GET_SIZE(value)
            body += _varint_size(vlen) + vlen
        total += _varint_size(body) + body
    # Pass 2: write them.
    out = PyBytes_FromStringAndSize(NULL, total)
    p = PyBytes_AS_STRING(out)
    for i in range(n):
        rec = <object>PyList_GET_ITEM(records, i)
        key = <object>PyTuple_GET_ITEM(rec, 0)
        value = <object>PyTuple_GET_ITEM(rec, 1)
        ts = PyLong_AsLongLongAndOverflow(<object>PyTuple_GET_ITEM(rec, 2), &overflow)
        delta = ts - base_ts
        klen = -1 if key is None else PyBytes_GET_SIZE(key)
        vlen = -1 if value is None else PyBytes_GET_SIZE(value)
        body = 2 + _varint_size(delta) + _varint_size(i)
        body += 1 if klen < 0 else _varint_size(klen) + klen
        body += 1 if vlen < 0 else _varint_size(vlen) + vlen
        p = _write_varint(p, body)
        p[0] = 0  # attributes
        p = _write_varint(p + 1, delta)
        p = _write_varint(p, i)
        p = _write_varint(p, klen)  # -1 (null) is zigzag 0x01
        if klen > 0:
            memcpy(p, PyBytes_AS_STRING(key), klen)
            p += klen
        p = _write_varint(p, vlen)
        if vlen > 0:
            memcpy(p, PyBytes_AS_STRING(value), vlen)
            p += vlen
        p[0] = 0  # header count
        p += 1
    return out, n, max_ts


# -- decoding -------------------------------------------------------------------

cdef inline int _read_varint(const uint8_t* buf, Py_ssize_t* pos, Py_ssize_t end, int64_t* out) noexcept nogil:
    """A zigzag varint of at most 10 bytes inside ``buf[:end]``; 0 if
    truncated or too long for 64 bits."""
    cdef uint64_t raw = 0
    cdef int shift = 0
    cdef Py_ssize_t p = pos[0]
    cdef uint8_t b
    while True:
        if p >= end or shift > 63:
            return 0
        b = buf[p]
        p += 1
        if shift == 63 and (b & 0x7E):
            return 0
        raw |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            break
        shift += 7
    pos[0] = p
    out[0] = <int64_t>(raw >> 1) ^ -(<int64_t>(raw & 1))
    return 1


cdef object _MALFORMED = object()


cdef inline object _read_nullable(const uint8_t* buf, Py_ssize_t* pos, Py_ssize_t end):
    """A record's key or value: a zigzag varint length (-1: null), then that
    many bytes, as new ``bytes``; ``_MALFORMED`` when it runs past
    ``end``."""
    cdef int64_t n
    cdef object out
    if not _read_varint(buf, pos, end, &n):
        return _MALFORMED
    if n < 0:
        return None
    if n > end - pos[0]:
        return _MALFORMED
    out = PyBytes_FromStringAndSize(<const char*>buf + pos[0], <Py_ssize_t>n)
    pos[0] += <Py_ssize_t>n
    return out


def decode_rows(object data, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count, object base_offset,
                object base_timestamp, object fixed_timestamp, list offsets not None, list rows not None):
    """Decode ``count`` records of a v2 batch's uncompressed records
    section ``data[pos:end]`` (``data``: bytes, bytearray or any buffer;
    keys and values are new ``bytes``), appending to ``offsets`` and ``rows`` as
    ``kclient.protocol.records.v2._decode_rows_py`` does.

    Returns:
        True when every record was decoded; False when a record has headers
        or anything is malformed, after removing what this call appended:
        the caller then runs the pure-Python decoder, which raises the
        precise error (or decodes the headers).
    """
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return _decode_rows(<const uint8_t*>view.buf, view.len, pos, end, count, base_offset, base_timestamp, fixed_timestamp, offsets, rows)
    finally:
        PyBuffer_Release(&view)


cdef object _decode_rows(const uint8_t* buf, Py_ssize_t size, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count, object base_offset,
                         object base_timestamp, object fixed_timestamp, list offsets, list rows):
    cdef int64_t b_off, b_ts
    cdef int overflow = 0
    if end > size:
        end = size
    if pos < 0 or count < 0:
        return False
    b_off = PyLong_AsLongLongAndOverflow(base_offset, &overflow)
    if overflow:
        return False
    b_ts = PyLong_AsLongLongAndOverflow(base_timestamp, &overflow)
    if overflow or b_ts >= _TS_BOUND or b_ts <= -_TS_BOUND:
        return False
    if fixed_timestamp is not None:
        PyLong_AsLongLongAndOverflow(fixed_timestamp, &overflow)
        if overflow:
            return False
    return _decode_rows_c(buf, pos, end, count, b_off, b_ts, fixed_timestamp, offsets, rows, None, None, INT64_MIN)


cdef bint _decode_rows_c(const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count, int64_t b_off, int64_t b_ts,
                         object fixed_timestamp, list offsets, list rows, list values, list timestamps, int64_t min_offset) except -1:
    """`_decode_rows` with the batch's numbers checked: ``end`` within the
    buffer, ``b_ts`` within +-2**61, ``fixed_timestamp`` an int (or None).
    With ``values`` and ``timestamps`` (columns), the keys go to ``rows``,
    the values and timestamps to those lists (no tuple per record).
    Records below ``min_offset`` are decoded (checked) but not kept."""
    cdef Py_ssize_t first_offset = PyList_GET_SIZE(offsets)
    cdef Py_ssize_t first_row = PyList_GET_SIZE(rows)
    cdef bint columns = values is not None
    cdef Py_ssize_t i, rec_end
    cdef int64_t length, ts_delta, off_delta
    cdef bint has_fixed = fixed_timestamp is not None
    cdef object key, value, ts_obj
    if has_fixed:
        ts_obj = fixed_timestamp
    for i in range(count):
        if not _read_varint(buf, &pos, end, &length):
            break
        if length < 0 or length > end - pos:
            break
        rec_end = pos + <Py_ssize_t>length
        if pos >= end:
            break
        pos += 1  # attributes (unused, as in Kafka)
        if not _read_varint(buf, &pos, end, &ts_delta) or not _read_varint(buf, &pos, end, &off_delta):
            break
        if ts_delta >= _TS_BOUND or ts_delta <= -_TS_BOUND or off_delta >= _TS_BOUND or off_delta <= -_TS_BOUND:
            break
        key = _read_nullable(buf, &pos, end)
        if key is _MALFORMED:
            break
        value = _read_nullable(buf, &pos, end)
        if value is _MALFORMED:
            break
        # header count: anything but 0 goes to the pure path
        if pos >= end or buf[pos] != 0:
            break
        pos += 1
        if pos != rec_end:
            break
        if not has_fixed:
            ts_obj = PyLong_FromLongLong(b_ts + ts_delta)
        if b_off + off_delta < min_offset:
            continue
        PyList_Append(offsets, PyLong_FromLongLong(b_off + off_delta))
        if columns:
            PyList_Append(rows, key)
            PyList_Append(values, value)
            PyList_Append(timestamps, ts_obj)
        else:
            PyList_Append(rows, (key, value, ts_obj, _EMPTY))
    else:
        return True
    del offsets[first_offset:]
    del rows[first_row:]
    if columns:
        del values[first_row:]
        del timestamps[first_row:]
    return False


cdef inline int64_t _be64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40) | (<uint64_t>p[3] << 32)
                     | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16) | (<uint64_t>p[6] << 8) | <uint64_t>p[7])


cdef inline int32_t _be32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


# v2 record batch header (Kafka protocol guide, "Record Batch"): byte
# positions of its fields, and the attribute bits read here.
DEF _B_LENGTH = 8
DEF _B_MAGIC = 16
DEF _B_CRC = 17
DEF _B_ATTRIBUTES = 21
DEF _B_LAST_DELTA = 23
DEF _B_BASE_TS = 27
DEF _B_MAX_TS = 35
DEF _B_COUNT = 57
DEF _B_HEADER = 61
DEF _ATTR_CODEC = 0x07
DEF _ATTR_TS_TYPE = 0x08
DEF _ATTR_CONTROL = 0x20


def decode_columns(object buf, Py_ssize_t pos, object start_offset, list offsets not None, list keys not None, list values not None, list timestamps not None,
                   object crc32c, Py_ssize_t chunk_rows=PY_SSIZE_T_MAX):
    """`decode_batches` into columns: each record's offset, key, value and
    timestamp appended to ``offsets``, ``keys``, ``values`` and
    ``timestamps`` (no tuple per record: nothing the garbage collector
    tracks), for every plain batch from ``pos`` on, until the columns hold
    ``chunk_rows`` records or more.

    Returns:
        The position it stopped at (see `decode_batches`).
    """
    return _decode_batches(buf, pos, start_offset, offsets, keys, chunk_rows, crc32c, values, timestamps)


def decode_batches(object buf, Py_ssize_t pos, object start_offset, list offsets not None, list rows not None, Py_ssize_t chunk_rows, object crc32c):
    """The fast path of ``kclient.protocol.records.rows.iter_record_rows``,
    compiled: from ``pos`` on, the v2 record batches of ``buf`` (any
    buffer) that are whole and uncompressed: those wholly before
    ``start_offset`` skipped unread, the others' CRC-32C checked
    (``crc32c``, the library's function, over the bytes from the attributes
    on); control batches are then skipped, every other batch's records at
    or after ``start_offset`` decoded as ``decode_rows`` does into
    ``offsets`` / ``rows``. Stops at the first
    batch of any other kind (or the end), and once ``rows`` holds
    ``chunk_rows`` or more.

    Returns:
        The position it stopped at: the caller's general path takes the
        batch there (and raises the precise error for a bad one).
    """
    return _decode_batches(buf, pos, start_offset, offsets, rows, chunk_rows, crc32c, None, None)


cdef object _decode_batches(object buf, Py_ssize_t pos, object start_offset, list offsets, list rows, Py_ssize_t chunk_rows, object crc32c,
                            list values, list timestamps):
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef Py_ssize_t size, end, count
    cdef int64_t base_offset, start, base_ts
    cdef int32_t length, last_delta
    cdef int attributes
    cdef uint32_t crc
    cdef int overflow = 0
    cdef object mv, fixed
    start = PyLong_AsLongLongAndOverflow(start_offset, &overflow)
    if overflow:
        return pos
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const uint8_t*>view.buf
        size = view.len
        mv = memoryview(buf)
        while pos >= 0 and pos + _B_HEADER <= size and p[pos + _B_MAGIC] == 2 and PyList_GET_SIZE(rows) < chunk_rows:
            base_offset = _be64(p + pos)
            length = _be32(p + pos + _B_LENGTH)
            last_delta = _be32(p + pos + _B_LAST_DELTA)
            count = _be32(p + pos + _B_COUNT)
            end = pos + 12 + <Py_ssize_t>length
            if end > size or length < _B_HEADER - 12 or count < 0 or last_delta < 0 or base_offset > _OFFSET_BOUND or base_offset < -_OFFSET_BOUND:
                break
            if base_offset + last_delta < start:  # wholly before the start: skipped unread
                pos = end
                continue
            attributes = (p[pos + _B_ATTRIBUTES] << 8) | p[pos + _B_ATTRIBUTES + 1]
            if attributes & _ATTR_CODEC:
                break
            crc = <uint32_t>_be32(p + pos + _B_CRC)
            if crc32c(mv[pos + _B_ATTRIBUTES : end]) != crc:
                break
            if not (attributes & _ATTR_CONTROL):
                base_ts = _be64(p + pos + _B_BASE_TS)
                if base_ts >= _TS_BOUND or base_ts <= -_TS_BOUND:
                    break
                fixed = PyLong_FromLongLong(_be64(p + pos + _B_MAX_TS)) if attributes & _ATTR_TS_TYPE else None
                if not _decode_rows_c(p, pos + _B_HEADER, end, count, base_offset, base_ts, fixed, offsets, rows, values, timestamps, start):
                    break
            pos = end
        return pos
    finally:
        mv = None
        PyBuffer_Release(&view)


def fetched_position(object buf, object start):
    """``kclient.client.consumer.statistics.fetched_position``, compiled:
    the offset after the last complete batch (v2) or entry (v0/v1) of a
    fetched record set, from the headers only (``start`` if there is none;
    the walk stops at a partial batch or an impossible header).

    Returns:
        The next offset to fetch; None when ``start`` or an offset in the
        headers does not fit 62 bits (the caller then runs the pure-Python
        twin).
    """
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef Py_ssize_t size, pos = 0
    cdef int64_t position, offset
    cdef int32_t length, least
    cdef int overflow = 0
    cdef uint8_t magic
    position = PyLong_AsLongLongAndOverflow(start, &overflow)
    if overflow:
        return None
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const uint8_t*>view.buf
        size = view.len
        while pos + 17 <= size:
            offset = _be64(p + pos)
            length = _be32(p + pos + _B_LENGTH)
            magic = p[pos + _B_MAGIC]
            if magic == 2:
                least = _B_HEADER - 12
            elif magic == 1:
                least = 22
            elif magic == 0:
                least = 14
            else:
                break
            if length < least or pos + 12 + <Py_ssize_t>length > size:
                break
            if offset > _OFFSET_BOUND or offset < -_OFFSET_BOUND:
                return None  # the pure twin does the big-number arithmetic
            if magic == 2:
                position = offset + <int64_t>_be32(p + pos + _B_LAST_DELTA) + 1
            else:
                position = offset + 1
            pos += 12 + <Py_ssize_t>length
        return PyLong_FromLongLong(position)
    finally:
        PyBuffer_Release(&view)


# -- murmur2 (Java org.apache.kafka.common.utils.Utils.murmur2) -------------------

def murmur2(bytes data):
    """32-bit MurmurHash2 of ``data`` as Kafka's Java ``Utils.murmur2``
    (seed 0x9747b28c), as a signed Java ``int``."""
    return _murmur2(<const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


# -- the async producer's queue state (kclient.client.producer.queue) -------------

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec* tp)
    int CLOCK_MONOTONIC


cdef inline double _monotonic() noexcept nogil:
    # time.monotonic()'s clock on Linux and the BSDs.
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


cdef class QueueCore:
    """The state of `kclient.client.producer.queue.MessageQueue`, compiled:
    the twin of ``kclient.client.producer.queue.PyQueueCore`` (same methods,
    same results; see there). Each method runs without releasing the GIL,
    which is what makes it atomic towards other threads: no lock per put."""

    cdef list items, sizes, times
    cdef readonly Py_ssize_t max_messages, count, unfinished, flushing
    cdef readonly Py_ssize_t max_bytes, record_overhead, unfinished_bytes, queued_bytes
    cdef readonly bint closed
    cdef bint consumer_waiting
    cdef Py_ssize_t wake_at, bundles
    cdef object waker, bundle_type

    def __cinit__(self, Py_ssize_t max_messages, bundle_type=None, Py_ssize_t max_bytes=33554432, Py_ssize_t record_overhead=0):
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.record_overhead = record_overhead
        self.items = []
        self.sizes = []
        self.times = []
        self.waker = None
        self.bundle_type = bundle_type

    cdef Py_ssize_t _measure(self, object data, Py_ssize_t* largest) except -1:
        # ``kclient.client.producer.queue.measure``: the item's estimated
        # bytes; ``largest[0]`` raised to its largest record's.
        cdef Py_ssize_t total = 0
        cdef object item
        if type(data) is self.bundle_type:
            for item in data:
                total += self._measure_one(item, largest)
            return total
        return self._measure_one(data, largest)

    cdef Py_ssize_t _measure_one(self, object data, Py_ssize_t* largest) except -1:
        cdef Py_ssize_t total = 0, key_len, b, j, n
        cdef object key, messages, m
        if isinstance(data, tuple):
            if PyTuple_GET_SIZE(data) < 3:
                return 0
            key = <object>PyTuple_GET_ITEM(data, 1)
            messages = <object>PyTuple_GET_ITEM(data, 2)
        else:
            key = getattr(data, "key", None)
            messages = getattr(data, "messages", ())
        key_len = _estimate_len(key) + self.record_overhead
        if type(messages) is tuple:
            n = PyTuple_GET_SIZE(messages)
            for j in range(n):
                b = key_len + _estimate_len(<object>PyTuple_GET_ITEM(messages, j))
                total += b
                if b > largest[0]:
                    largest[0] = b
        else:
            for m in messages:
                b = key_len + _estimate_len(m)
                total += b
                if b > largest[0]:
                    largest[0] = b
        return total

    def measure(self, data):
        cdef Py_ssize_t largest = 0
        cdef Py_ssize_t total = self._measure(data, &largest)
        return total, largest

    @property
    def queued_items(self):
        return PyList_GET_SIZE(self.items)

    @property
    def oldest(self):
        return self.times[0] if PyList_GET_SIZE(self.times) else None

    def put(self, data, Py_ssize_t n):
        cdef Py_ssize_t queued = PyList_GET_SIZE(self.items)
        cdef Py_ssize_t largest = 0
        cdef Py_ssize_t size = self._measure(data, &largest)
        cdef Py_ssize_t held = self.unfinished_bytes
        cdef object waker
        if self.closed or (self.count + n > self.max_messages and queued) or largest > self.max_bytes or (held and held + size > self.max_bytes):
            return False
        PyList_Append(self.items, data)
        PyList_Append(self.sizes, n)
        PyList_Append(self.times, _monotonic())
        self.count += n
        self.unfinished += n
        self.unfinished_bytes = held + size
        self.queued_bytes += size
        if type(data) is self.bundle_type:
            self.bundles += 1
        if self.consumer_waiting and (queued == 0 or self.count >= self.wake_at):
            return self._release_waker()
        return None

    cdef object _release_waker(self):
        cdef object waker = self.waker
        self.waker = None
        self.consumer_waiting = False
        return waker

    cdef tuple _take(self, Py_ssize_t batch_messages):
        cdef Py_ssize_t queued = PyList_GET_SIZE(self.items)
        cdef Py_ssize_t k = 0, taken = 0, size, taken_bytes = 0, largest = 0
        cdef list batch
        cdef object item
        while k < queued:
            size = <Py_ssize_t>(<object>PyList_GET_ITEM(self.sizes, k))
            if taken and taken + size > batch_messages:
                break
            taken += size
            k += 1
        if k == queued:
            batch = self.items
            taken_bytes = self.queued_bytes
            self.items = []
            self.sizes = []
            self.times = []
        else:
            batch = self.items[:k]
            for item in batch:  # measured again (the same estimate): no per-item list on put
                taken_bytes += self._measure(item, &largest)
            del self.items[:k]
            del self.sizes[:k]
            del self.times[:k]
        self.queued_bytes -= taken_bytes
        self.count -= taken
        if self.bundles:
            batch = self._flatten(batch)
        return batch, taken, taken_bytes

    cdef list _flatten(self, list batch):
        # Bundles (several items queued by one call) become their items.
        cdef list out = []
        cdef object item
        for item in batch:
            if type(item) is self.bundle_type:
                out.extend(item)
                self.bundles -= 1
            else:
                PyList_Append(out, item)
        return out

    def poll(self, Py_ssize_t batch_messages, double max_wait_s, waker):
        cdef Py_ssize_t queued = PyList_GET_SIZE(self.items)
        cdef double timeout
        self.consumer_waiting = False
        self.waker = None
        if queued and (self.count >= batch_messages or self.closed or self.flushing):
            return "batch", self._take(batch_messages)
        if not queued:
            if self.closed:
                return "closed", None
            timeout_obj = None
        else:
            timeout = <double>(<object>PyList_GET_ITEM(self.times, 0)) + max_wait_s - _monotonic()
            if timeout <= 0:
                return "batch", self._take(batch_messages)
            timeout_obj = timeout
        self.consumer_waiting = True
        self.wake_at = batch_messages
        self.waker = waker
        return "wait", timeout_obj

    def flush_requested(self, Py_ssize_t delta):
        self.flushing += delta
        if delta > 0 and self.consumer_waiting:
            return self._release_waker()
        return None

    def close(self):
        self.closed = True
        if self.consumer_waiting:
            return self._release_waker()
        return None

    def abandon(self):
        cdef Py_ssize_t dropped = self.count
        self.closed = True
        self.unfinished_bytes -= self.queued_bytes
        self.queued_bytes = 0
        self.items = []
        self.sizes = []
        self.times = []
        self.bundles = 0
        self.count = 0
        self.unfinished -= dropped
        return dropped, (self._release_waker() if self.consumer_waiting else None)

    def task_done(self, Py_ssize_t n, Py_ssize_t n_bytes=0):
        self.unfinished -= n
        self.unfinished_bytes -= n_bytes
        if self.unfinished <= 0:
            self.unfinished_bytes = 0  # nothing held: no estimate drift can outlive it
            return True
        return False


# -- the producer's collate step (kclient.client.producer.collate) ---------------

cdef inline int32_t _murmur2(const uint8_t* p, Py_ssize_t length) noexcept:
    cdef uint32_t m = 0x5BD1E995
    cdef uint32_t h = 0x9747B28C ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i, tail = length & ~3, rest = length & 3
    for i in range(0, tail, 4):
        k = (<uint32_t>p[i]) | (<uint32_t>p[i + 1] << 8) | (<uint32_t>p[i + 2] << 16) | (<uint32_t>p[i + 3] << 24)
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
    if rest == 3:
        h ^= <uint32_t>p[tail + 2] << 16
    if rest >= 2:
        h ^= <uint32_t>p[tail + 1] << 8
    if rest >= 1:
        h ^= <uint32_t>p[tail]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h


def collate_default(list events, object data_type, Py_ssize_t n_parts, object now, object random, bint bytes_values):
    """Group one topic's ProducerData into per-partition record lists, as
    ``kclient.client.producer.collate.Collator.collate_general`` (its pure
    twin) does with pass-through encoders and
    the `DefaultPartitioner` (murmur2 of the key, ``int(random() * n)`` for
    a null key, an explicit partition as given).

    Args:
        events: The topic's ProducerData, in order.
        data_type: The ProducerData class (only exact instances are taken).
        n_parts: The topic's partition count (>= 1).
        now: The timestamp (ms) of records without one.
        random: The partitioner's ``random.Random.random``.
        bytes_values: Values must be ``bytes`` or None (the `DefaultEncoder`,
            which copies other bytes-like values and refuses the rest: those
            go back to the caller); False: values pass as they are.

    Returns:
        ``{partition: [(key, value, timestamp), ...]}`` in order, or None
        when some item is of another shape (another type, headers, a key
        that is not bytes, a partition outside the topic): the caller then
        collates in Python, which raises the precise error.
    """
    cdef dict out = {}
    cdef Py_ssize_t i, j, n = PyList_GET_SIZE(events), n_msgs
    cdef object d, key, messages, ts, fixed, headers, records, p_obj, value, record
    cdef Py_ssize_t p, last_p = -1
    cdef list last_records = None
    cdef double r
    cdef bint plain
    if n_parts < 1:
        return None
    for i in range(n):
        d = <object>PyList_GET_ITEM(events, i)
        if type(d) is not data_type:
            return None
        key = <object>PyTuple_GET_ITEM(d, 1)
        messages = <object>PyTuple_GET_ITEM(d, 2)
        ts = <object>PyTuple_GET_ITEM(d, 3)
        fixed = <object>PyTuple_GET_ITEM(d, 4)
        headers = <object>PyTuple_GET_ITEM(d, 5)
        if not PyTuple_CheckExact(messages) or len(headers):
            return None
        n_msgs = PyTuple_GET_SIZE(messages)
        if n_msgs == 0:
            continue
        if key is not None and not PyBytes_CheckExact(key):
            return None
        if fixed is None:
            if key is None:
                r = random()
                p = <Py_ssize_t>(r * n_parts)
            else:
                p = (_murmur2(<const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) & 0x7FFFFFFF) % n_parts
        else:
            if not PyLong_CheckExact(fixed):
                return None
            p = fixed
            if p < 0 or p >= n_parts:
                return None
        if ts is None:
            ts = now
        if p == last_p:
            records = last_records  # runs of one partition (sticky, routed batches): no lookup
        else:
            p_obj = p
            records = out.get(p_obj)
            if records is None:
                records = out[p_obj] = []
            last_p, last_records = p, records
        # A record of bytes keys and values and an int timestamp holds no
        # container: it cannot be in a reference cycle, so the garbage
        # collector need not track it (as `new_data` leaves ProducerData).
        plain = PyLong_CheckExact(ts)
        for j in range(n_msgs):
            value = <object>PyTuple_GET_ITEM(messages, j)
            if value is not None and not PyBytes_CheckExact(value):
                if bytes_values:
                    return None
                plain = False
            record = (key, value, ts)
            if plain:
                PyObject_GC_UnTrack(<void*>record)
            PyList_Append(records, record)
    return out


def group_by_topic(list events, object data_types):
    """``{topic: [items in order]}`` of the producer's items: the topic of
    an instance of one of ``data_types`` (ProducerData-like tuples) is its
    first field, of anything else its ``topic`` attribute (the twin of
    ``kclient.client.producer.collate.group_by_topic``)."""
    cdef dict out = {}
    cdef Py_ssize_t i, n = PyList_GET_SIZE(events)
    cdef object d, topic, lst
    cdef object last_topic = None
    cdef list last = None
    for i in range(n):
        d = <object>PyList_GET_ITEM(events, i)
        if type(d) in data_types:
            topic = <object>PyTuple_GET_ITEM(d, 0)
        else:
            topic = d.topic
        if last is not None and (topic is last_topic or topic == last_topic):
            PyList_Append(last, d)
            continue
        lst = out.get(topic)
        if lst is None:
            lst = out[topic] = []
        PyList_Append(lst, d)
        last = lst
        last_topic = topic
    return out


# -- ProducerData (kclient.client.producer.data) --------------------------------------

cdef extern from "Python.h":
    ctypedef struct PyTypeObject_alloc "PyTypeObject":
        PyObject* (*tp_alloc)(PyTypeObject_alloc*, Py_ssize_t)
    void PyTuple_SET_ITEM_raw "PyTuple_SET_ITEM"(PyObject* p, Py_ssize_t pos, PyObject* o)
    object PyList_AsTuple(object lst)
    void Py_INCREF_raw "Py_INCREF"(PyObject* o)

cdef extern from "<time.h>" nogil:
    int CLOCK_REALTIME


cdef object _alloc6(object cls, object a, object b, object c, object d, object e, object f):
    """A new instance of the tuple subclass ``cls`` holding the six items
    (what ``tuple.__new__(cls, (a, b, c, d, e, f))`` makes, without the
    argument tuple)."""
    cdef PyTypeObject_alloc* tp = <PyTypeObject_alloc*>cls
    cdef PyObject* raw = tp.tp_alloc(tp, 6)
    if raw == NULL:
        raise MemoryError()
    Py_INCREF_raw(<PyObject*>a)
    PyTuple_SET_ITEM_raw(raw, 0, <PyObject*>a)
    Py_INCREF_raw(<PyObject*>b)
    PyTuple_SET_ITEM_raw(raw, 1, <PyObject*>b)
    Py_INCREF_raw(<PyObject*>c)
    PyTuple_SET_ITEM_raw(raw, 2, <PyObject*>c)
    Py_INCREF_raw(<PyObject*>d)
    PyTuple_SET_ITEM_raw(raw, 3, <PyObject*>d)
    Py_INCREF_raw(<PyObject*>e)
    PyTuple_SET_ITEM_raw(raw, 4, <PyObject*>e)
    Py_INCREF_raw(<PyObject*>f)
    PyTuple_SET_ITEM_raw(raw, 5, <PyObject*>f)
    return _steal(raw)


cdef inline object _steal(PyObject* raw):
    cdef object obj = <object>raw  # a new reference ...
    Py_DECREF_raw(raw)  # ... so drop the one tp_alloc returned
    return obj


cdef extern from "Python.h":
    void Py_DECREF_raw "Py_DECREF"(PyObject* o)


cdef extern from "Python.h":
    bint PyObject_GC_IsTracked(object op)
    bint PyUnicode_CheckExact(object o)


cdef inline void _untrack_plain(object d):
    """Stop the garbage collector from tracking an exact ProducerData that
    cannot be part of a reference cycle: a str topic, a bytes or null key,
    a tuple of bytes or null messages, int or null timestamp and partition,
    no headers. (What CPython does for such tuples itself, lazily.) A queued
    record then costs the collector nothing."""
    cdef object messages = <object>PyTuple_GET_ITEM(d, 2)
    cdef object x
    cdef Py_ssize_t i
    if not PyUnicode_CheckExact(<object>PyTuple_GET_ITEM(d, 0)):
        return
    x = <object>PyTuple_GET_ITEM(d, 1)
    if x is not None and not PyBytes_CheckExact(x):
        return
    x = <object>PyTuple_GET_ITEM(d, 3)
    if x is not None and not PyLong_CheckExact(x):
        return
    x = <object>PyTuple_GET_ITEM(d, 4)
    if x is not None and not PyLong_CheckExact(x):
        return
    if <object>PyTuple_GET_ITEM(d, 5) is not _EMPTY or not PyTuple_CheckExact(messages):
        return
    for i in range(PyTuple_GET_SIZE(messages)):
        x = <object>PyTuple_GET_ITEM(messages, i)
        if x is not None and not PyBytes_CheckExact(x):
            return
    if PyObject_GC_IsTracked(messages):
        PyObject_GC_UnTrack(<void*>messages)
    if PyObject_GC_IsTracked(d):
        PyObject_GC_UnTrack(<void*>d)


cdef object _data_fallback = None
cdef object _data_type = None


def set_data_fallback(fallback, data_type):
    """Register the pure-Python ``ProducerData.__new__`` that `new_data`
    hands the uncommon shapes to, and the ProducerData class (its exact
    instances of plain values are not tracked by the garbage collector)."""
    global _data_fallback, _data_type
    _data_fallback = fallback
    _data_type = data_type


def new_data(cls, topic, key=None, messages=(), timestamp_ms=None, partition=None, headers=()):
    """``ProducerData.__new__``, compiled: the same value as the pure
    ``kclient.client.producer.data.ProducerData.__new__`` (which it calls
    for anything but a list or tuple of messages and tuple or empty
    headers)."""
    cdef object kind = type(messages)
    if kind is list:
        messages = PyList_AsTuple(messages)
    elif kind is not tuple:
        return _data_fallback(cls, topic, key, messages, timestamp_ms, partition, headers)
    if headers is not _EMPTY:
        if not headers:
            headers = _EMPTY
        elif type(headers) is not tuple:
            return _data_fallback(cls, topic, key, messages, timestamp_ms, partition, headers)
    cdef object d = _alloc6(cls, topic, key, messages, timestamp_ms, partition, headers)
    if cls is _data_type:
        _untrack_plain(d)
    return d


cdef inline object _now_ms():
    # time.time_ns() // 1_000_000: CLOCK_REALTIME in whole ms
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return PyLong_FromLongLong(<int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000)


def stamped(data):
    """A copy of the ProducerData-like tuple ``data`` with item 3
    (``timestamp_ms``) set to now (ms since the epoch, as
    ``time.time_ns() // 1_000_000``)."""
    return _stamped(data)


cdef object _stamped(object data):
    cdef object d = _alloc6(type(data), <object>PyTuple_GET_ITEM(data, 0), <object>PyTuple_GET_ITEM(data, 1), <object>PyTuple_GET_ITEM(data, 2),
                            _now_ms(), <object>PyTuple_GET_ITEM(data, 4), <object>PyTuple_GET_ITEM(data, 5))
    if type(data) is _data_type:
        _untrack_plain(d)
    return d


cdef class FastSend:
    """``Producer.send`` for its usual call, compiled: the twin of the
    first branch of ``kclient.client.producer.producer.Producer.send`` (one
    ProducerData, no callback, a producer whose queue has no enqueue hooks).

    An exact ``data_type`` item whose topic is in ``valid_topics`` is stamped
    with the send time when it has no timestamp and handed to ``fast_put``
    (the queue core's ``put``: None when queued, a waker to call when
    queued, False when refused). Anything else, and a refused item, goes to
    ``slow`` (``Producer.send`` itself), which validates, blocks or raises.

    Args:
        data_type: The ProducerData class.
        valid_topics: The producer's set of validated topic names (live).
        fast_put: ``fast_put(item, n_messages)``.
        slow: ``slow(data_or_list, callback=None)``.
    """

    cdef object data_type
    cdef object valid_topics
    cdef object fast_put
    cdef object slow

    def __init__(self, object data_type, object valid_topics, object fast_put, object slow):
        self.data_type = data_type
        self.valid_topics = valid_topics
        self.fast_put = fast_put
        self.slow = slow

    def __call__(self, data_or_list, *, callback=None):
        cdef object d, waker
        if callback is None and type(data_or_list) is self.data_type:
            d = data_or_list
            if <object>PyTuple_GET_ITEM(d, 0) in self.valid_topics:
                if <object>PyTuple_GET_ITEM(d, 3) is None:
                    d = _stamped(d)
                waker = self.fast_put(d, PyTuple_GET_SIZE(<object>PyTuple_GET_ITEM(d, 2)) if PyTuple_CheckExact(<object>PyTuple_GET_ITEM(d, 2)) else len(<object>PyTuple_GET_ITEM(d, 2)))
                if waker is None:
                    return None
                if waker is not False:
                    waker()
                    return None
        return self.slow(data_or_list, callback=callback)


def stamp_all(list events, object data_type, object valid_topics):
    """``send(list)``'s per-record step, compiled: each item an exact
    ``data_type`` (ProducerData) whose topic is in ``valid_topics``, the
    ones without a timestamp copied with the send time (ms since the epoch).

    Returns:
        ``(items, messages)``: the stamped list and how many messages it
        holds; None when an item is of another type or names a topic not
        yet checked (the caller then takes its general path).
    """
    cdef Py_ssize_t i, n = PyList_GET_SIZE(events), messages = 0
    cdef list out = []
    cdef object d, now = None, msgs
    for i in range(n):
        d = <object>PyList_GET_ITEM(events, i)
        if type(d) is not data_type or <object>PyTuple_GET_ITEM(d, 0) not in valid_topics:
            return None
        msgs = <object>PyTuple_GET_ITEM(d, 2)
        messages += len(msgs)
        if <object>PyTuple_GET_ITEM(d, 3) is None:
            if now is None:
                now = _now_ms()
            d = _alloc6(data_type, <object>PyTuple_GET_ITEM(d, 0), <object>PyTuple_GET_ITEM(d, 1), msgs,
                        now, <object>PyTuple_GET_ITEM(d, 4), <object>PyTuple_GET_ITEM(d, 5))
            _untrack_plain(d)
        PyList_Append(out, d)
    return out, messages


# -- the accumulator's router (kclient.client.producer.routing) ----------------------

cdef extern from "Python.h":
    bint PyBytes_Check(object o)
    bint PyByteArray_Check(object o)
    bint PyUnicode_Check(object o)
    Py_ssize_t PyByteArray_GET_SIZE(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)


cdef inline Py_ssize_t _estimate_len(object o):
    # len() of a bytes-like or str value (subclasses too), 0 for anything
    # else: ``kclient.client.producer.accumulator.estimated_size``'s rule
    if PyBytes_Check(o):
        return PyBytes_GET_SIZE(o)
    if PyUnicode_Check(o):
        return PyUnicode_GET_LENGTH(o)
    if PyByteArray_Check(o):
        return PyByteArray_GET_SIZE(o)
    return 0


cdef object _with_partition(object d, object kind, object p):
    # A copy of the item ``d`` with its partition (item 4) set; a plain
    # ProducerData stays untracked by the garbage collector, as `new_data`
    # leaves it.
    cdef object copy
    if PyTuple_GET_SIZE(d) == 6:
        copy = _alloc6(kind, <object>PyTuple_GET_ITEM(d, 0), <object>PyTuple_GET_ITEM(d, 1), <object>PyTuple_GET_ITEM(d, 2),
                       <object>PyTuple_GET_ITEM(d, 3), p, <object>PyTuple_GET_ITEM(d, 5))
        if kind is _data_type:
            _untrack_plain(copy)
        return copy
    return tuple.__new__(kind, (*d[:4], p, *d[5:]))


def route_topic(list items, object data_types, Py_ssize_t n_parts, bint hash_keys, bint sticky_keyless,
                Py_ssize_t sticky_p, Py_ssize_t sticky_bytes, Py_ssize_t batch_size, Py_ssize_t overhead, object next_sticky,
                object open_batches=None, Py_ssize_t batch_messages=0, bint ignore_keys=False):
    """One topic's queued items per partition, with their record counts and
    estimated sizes, compiled: the twin of
    ``kclient.client.producer.routing.route_topic`` (same arguments, same
    result; ``tests/test_speedups.py`` compares them).

    Returns:
        ``(groups, sticky_p, sticky_bytes, in_place)`` with ``groups``
        ``{partition: ([items], [record counts], [sizes])}`` and
        ``in_place`` the records appended to ``open_batches``; or None when
        an item is not an exact instance of ``data_types``, its messages not
        a tuple or its explicit partition not an int (the caller's general
        loop takes them; nothing was appended).
    """
    cdef dict groups = {}
    cdef Py_ssize_t i, j, n = PyList_GET_SIZE(items), n_msgs, key_len, size, p, in_place = 0, b_size, b_count
    cdef object d, key, messages, fixed, p_obj, group, kind, batch
    for i in range(n):  # the shapes first: nothing is appended unless all are taken
        d = <object>PyList_GET_ITEM(items, i)
        if type(d) not in data_types or not PyTuple_CheckExact(<object>PyTuple_GET_ITEM(d, 2)):
            return None
        fixed = <object>PyTuple_GET_ITEM(d, 4)
        if fixed is not None and not PyLong_CheckExact(fixed):
            return None
    for i in range(n):
        d = <object>PyList_GET_ITEM(items, i)
        kind = type(d)
        key = <object>PyTuple_GET_ITEM(d, 1)
        messages = <object>PyTuple_GET_ITEM(d, 2)
        fixed = <object>PyTuple_GET_ITEM(d, 4)
        n_msgs = PyTuple_GET_SIZE(messages)
        key_len = 0 if key is None else _estimate_len(key)
        size = 0
        for j in range(n_msgs):
            size += key_len + overhead + _estimate_len(<object>PyTuple_GET_ITEM(messages, j))
        if fixed is not None:
            p_obj = fixed
        elif n_parts == 1:
            p_obj = 0
        elif n_parts <= 0:
            p_obj = -1
        elif key is None or (ignore_keys and sticky_keyless):
            if sticky_keyless:
                if sticky_p < 0 or sticky_p >= n_parts:
                    sticky_p = next_sticky(-1)
                p = sticky_p
                sticky_bytes += size
                if sticky_bytes >= batch_size:
                    sticky_p = next_sticky(p)
                    sticky_bytes = 0
                p_obj = p
                d = _with_partition(d, kind, p_obj)
            else:
                p_obj = -1
        elif hash_keys and PyBytes_CheckExact(key):
            p_obj = (_murmur2(<const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) & 0x7FFFFFFF) % n_parts
        else:
            p_obj = -1
        group = groups.get(p_obj)
        if group is None:
            if open_batches is not None:
                batch = open_batches.get(p_obj)
                if batch is not None:
                    b_size = batch.size + size
                    b_count = batch.messages + n_msgs
                    if b_size < batch_size and b_count < batch_messages:
                        # Fits the partition's open batch and leaves it open.
                        PyList_Append(batch.items, d)
                        batch.size = b_size
                        batch.messages = b_count
                        in_place += n_msgs
                        continue
            group = groups[p_obj] = ([], [], [])
        PyList_Append(<list>PyTuple_GET_ITEM(group, 0), d)
        PyList_Append(<list>PyTuple_GET_ITEM(group, 1), n_msgs)
        PyList_Append(<list>PyTuple_GET_ITEM(group, 2), size)
    return groups, sticky_p, sticky_bytes, in_place


def batch_cuts(list messages, list sizes, Py_ssize_t count, Py_ssize_t size, bint held, Py_ssize_t most, Py_ssize_t limit):
    """Where a partition's batches close as items of ``messages`` records
    and ``sizes`` bytes are appended to its open batch (``count`` records
    and ``size`` bytes so far, ``held``: it has items), compiled: the twin
    of ``kclient.client.producer.accumulator.batch_cuts``.

    Returns:
        ``(cuts, count, size)``: the item indexes before which a batch
        closes, in order, then the records and bytes of the last, open
        batch.
    """
    cdef list cuts = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(messages), k, b
    for i in range(n):
        k = <Py_ssize_t>(<object>PyList_GET_ITEM(messages, i))
        b = <Py_ssize_t>(<object>PyList_GET_ITEM(sizes, i))
        if held and (size + b > limit or count + k > most):
            PyList_Append(cuts, i)
            size = count = 0
        size += b
        count += k
        held = 1
        if size >= limit or count >= most:
            PyList_Append(cuts, i + 1)
            size = count = 0
            held = 0
    return cuts, count, size


# -- MessageAndMetadata (kclient.client.consumer.group.streams) ---------------------

cdef inline bint _atomic(object o):
    """Whether ``o`` can hold no reference to another object (so a tuple of
    such values cannot be part of a reference cycle)."""
    return o is None or PyBytes_CheckExact(o) or PyLong_CheckExact(o) or PyUnicode_CheckExact(o)


cdef class _Columns:
    """The columns of decoded records (offsets, keys, values, timestamps:
    lists of one length) and how far a reader has handed them out."""

    cdef list offsets, keys, values, timestamps
    cdef Py_ssize_t index, end

    cdef int _set_columns(self, list offsets, list keys, list values, list timestamps) except -1:
        cdef Py_ssize_t n = PyList_GET_SIZE(offsets)
        if PyList_GET_SIZE(keys) != n or PyList_GET_SIZE(values) != n or PyList_GET_SIZE(timestamps) != n:
            raise ValueError("the columns differ in length")
        self.offsets = offsets
        self.keys = keys
        self.values = values
        self.timestamps = timestamps
        self.index = 0
        self.end = n
        return 0

    def __iter__(self):
        return self

    def stop(self):
        """End the iteration where it is (one C call: atomic for the
        threads that iterate and read `handed`)."""
        self.end = self.index

    def remaining(self):
        """How many records are left to hand out."""
        return self.end - self.index

    def handed(self):
        """How many records were handed out."""
        return self.index


cdef class ChunkReader(_Columns):
    """``kclient.client.consumer.group.streams._ChunkReaderPy``, compiled:
    hands out a chunk's messages, one ``cls((key, value, topic, partition,
    offset, timestamp))`` (MessageAndMetadata, a tuple subclass) per
    ``next()``, built from the chunk's columns as it is asked for (so a
    message is made just before the application drops the one before it,
    and queued chunks hold no message objects). A message of plain values
    (bytes, str, int or None) is not tracked by the garbage collector.

    Args:
        cls: The message type.
        topic: The topic.
        partition: The partition.
        offsets, keys, values, timestamps: The columns, lists of one length.

    Raises:
        ValueError: the columns differ in length.
    """

    cdef object cls, topic, partition
    cdef bint plain

    def __cinit__(self, object cls, object topic, object partition, list offsets not None, list keys not None, list values not None, list timestamps not None):
        self._set_columns(offsets, keys, values, timestamps)
        self.cls = cls
        self.topic = topic
        self.partition = partition
        self.plain = _atomic(topic) and _atomic(partition)

    def __next__(self):
        cdef Py_ssize_t i = self.index
        cdef object key, value, ts, offset, m
        if i >= self.end:
            raise StopIteration
        key = <object>PyList_GET_ITEM(self.keys, i)
        value = <object>PyList_GET_ITEM(self.values, i)
        offset = <object>PyList_GET_ITEM(self.offsets, i)
        ts = <object>PyList_GET_ITEM(self.timestamps, i)
        m = _alloc6(self.cls, key, value, self.topic, self.partition, offset, ts)
        if self.plain and _atomic(key) and _atomic(value) and _atomic(offset) and _atomic(ts):
            PyObject_GC_UnTrack(<void*>m)
        self.index = i + 1
        return m


cdef object _alloc_n(object cls, Py_ssize_t n, object a, object b, object c, object d):
    """A new instance of the tuple subclass ``cls`` holding the first ``n``
    (2 or 4) of the items."""
    cdef PyTypeObject_alloc* tp = <PyTypeObject_alloc*>cls
    cdef PyObject* raw = tp.tp_alloc(tp, n)
    if raw == NULL:
        raise MemoryError()
    Py_INCREF_raw(<PyObject*>a)
    PyTuple_SET_ITEM_raw(raw, 0, <PyObject*>a)
    Py_INCREF_raw(<PyObject*>b)
    PyTuple_SET_ITEM_raw(raw, 1, <PyObject*>b)
    if n == 4:
        Py_INCREF_raw(<PyObject*>c)
        PyTuple_SET_ITEM_raw(raw, 2, <PyObject*>c)
        Py_INCREF_raw(<PyObject*>d)
        PyTuple_SET_ITEM_raw(raw, 3, <PyObject*>d)
    return _steal(raw)


cdef class MessageSetReader(_Columns):
    """``kclient.client.consumer.message_set._message_set_reader_py``,
    compiled: hands out ``MessageAndOffset(Message(key, payload,
    timestamp, ()), offset)`` (both tuple subclasses) for each record of
    the columns, built as asked for; those of plain values (bytes or None
    key and value) are not tracked by the garbage collector.

    Args:
        message_cls: The Message type.
        wrapper_cls: The MessageAndOffset type.
        offsets, keys, values, timestamps: The columns, lists of one length.

    Raises:
        ValueError: the columns differ in length.
    """

    cdef object message_cls, wrapper_cls

    def __cinit__(self, object message_cls, object wrapper_cls, list offsets not None, list keys not None, list values not None, list timestamps not None):
        self._set_columns(offsets, keys, values, timestamps)
        self.message_cls = message_cls
        self.wrapper_cls = wrapper_cls

    def __next__(self):
        cdef Py_ssize_t i = self.index
        cdef object key, value, ts, offset, message, wrapper
        if i >= self.end:
            raise StopIteration
        key = <object>PyList_GET_ITEM(self.keys, i)
        value = <object>PyList_GET_ITEM(self.values, i)
        ts = <object>PyList_GET_ITEM(self.timestamps, i)
        offset = <object>PyList_GET_ITEM(self.offsets, i)
        message = _alloc_n(self.message_cls, 4, key, value, ts, _EMPTY)
        wrapper = _alloc_n(self.wrapper_cls, 2, message, offset, None, None)
        if _atomic(key) and _atomic(value) and _atomic(ts) and _atomic(offset):
            PyObject_GC_UnTrack(<void*>message)
            PyObject_GC_UnTrack(<void*>wrapper)
        self.index = i + 1
        return wrapper


# -- receive buffers (kclient.protocol.connection.FrameBuffer) -----------------------

cdef extern from "Python.h":
    object PyByteArray_FromStringAndSize(const char* string, Py_ssize_t length)
    int PyByteArray_Resize(object bytearray, Py_ssize_t length) except -1


def new_buffer(Py_ssize_t size):
    """A ``bytearray`` of ``size`` bytes whose content is not initialized
    (``bytearray(size)`` without the zeroing): for receiving into, where
    every byte is written before it is read."""
    if size < 0:
        raise ValueError("negative size")
    return PyByteArray_FromStringAndSize(NULL, size)


def resize_buffer(bytearray buffer, Py_ssize_t size):
    """Make ``buffer`` ``size`` bytes long; new bytes are not initialized
    (no zeroing, no copy beyond what the allocator's realloc does).

    Raises:
        BufferError: the buffer is exported (a memoryview of it is alive).
    """
    if size < 0:
        raise ValueError("negative size")
    PyByteArray_Resize(buffer, size)
