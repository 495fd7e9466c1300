"""The Fetch handler (v0-11) with its long poll.

Semantics (``FetchRequest.json``, KIP-74, KIP-227 and Kafka's
``ReplicaManager.fetchMessages``):

- partitions are read in request order; each gets at most
  ``min(partition_max_bytes, bytes left of the request's max_bytes)``; the
  first batch of the first partition that has data is returned whole even
  if it is larger (KIP-74), so a consumer always makes progress; a read may
  end with a partial batch, which clients drop;
- if fewer than ``min_bytes`` bytes are available and no partition has an
  error, the request waits up to ``max_wait_ms``, woken early by any append
  to a requested partition, and is then read again;
- an offset outside ``[log_start_offset, log_end_offset]`` gets
  OFFSET_OUT_OF_RANGE, an unknown topic or partition
  UNKNOWN_TOPIC_OR_PARTITION; high watermark and last stable offset are the
  log end offset (one replica, no transactions); aborted transactions are
  always empty;
- fetch sessions (v7+) are not kept: the answer's session id is 0, so
  clients keep sending full fetch requests; an incremental request (epoch
  > 0) gets FETCH_SESSION_ID_NOT_FOUND;
- message formats (``KafkaApis`` down-conversion): v4+ gets the stored
  bytes as they are; v2-3 can carry message sets up to v1 and v0-1 only v0,
  so newer batches are down-converted for them with exact offsets
  (:func:`kclient.broker.convert.down_convert`); zstd batches have no v0/v1
  form, so a v0-3 read that meets one gets UNSUPPORTED_COMPRESSION_TYPE.
  Fetch v4-9 get zstd batches as stored, as Kafka does for a topic whose
  ``compression.type`` is ``producer`` (KIP-110 refuses v4-9 only for
  topics configured as zstd, a setting this broker does not have).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from kclient.broker.convert import down_convert, fetch_magic, has_zstd
from kclient.errors import BrokerResponseError, CorruptRecordError
from kclient.protocol.connection import RequestHeader
from kclient.protocol.records.codecs import CodecError

if TYPE_CHECKING:
    from kclient.broker.handlers import BrokerState

log = logging.getLogger("kclient.broker")

NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
FETCH_SESSION_ID_NOT_FOUND = 70
UNSUPPORTED_COMPRESSION_TYPE = 76
_NO_LIMIT = 0x7FFFFFFF


def _partition_error(index: int, error: int, hw: int = -1, start: int = -1) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": error,
        "high_watermark": hw,
        "last_stable_offset": hw,
        "log_start_offset": start,
        "aborted_transactions": [],
        "preferred_read_replica": -1,
        "records": b"",
    }


def read_fetch(state: BrokerState, body: dict, version: int) -> tuple[list[dict], int, bool]:
    """Read every requested partition once.

    Returns ``(responses, total_record_bytes, any_error)`` where
    ``responses`` is the Fetch response's ``responses`` array; records are
    down-converted for ``version`` < 4 (module docstring).
    """
    remaining = body.get("max_bytes", _NO_LIMIT) if version >= 3 else _NO_LIMIT
    to_magic = fetch_magic(version)
    min_one = True
    total = 0
    any_error = False
    responses = []
    for topic in body["topics"]:
        name = topic["topic"]
        parts = []
        for p in topic["partitions"]:
            index = p["partition"]
            plog = state.logs.get(name, index)
            if plog is None:
                parts.append(_partition_error(index, UNKNOWN_TOPIC_OR_PARTITION))
                any_error = True
                continue
            limit = min(p["partition_max_bytes"], remaining)
            try:
                result = plog.read(p["fetch_offset"], max(limit, 0), min_one_batch=min_one)
            except BrokerResponseError as exc:
                code = exc.code if exc.code is not None else UNKNOWN_SERVER_ERROR
                if code != OFFSET_OUT_OF_RANGE:
                    log.warning("fetch from %s-%d failed: %s", name, index, exc)
                parts.append(_partition_error(index, code, plog.high_watermark, plog.log_start_offset))
                any_error = True
                continue
            except Exception:
                log.exception("fetch from %s-%d failed", name, index)
                parts.append(_partition_error(index, UNKNOWN_SERVER_ERROR, plog.high_watermark, plog.log_start_offset))
                any_error = True
                continue
            records = result.records
            if records and to_magic < 2:
                try:
                    if has_zstd(records):
                        log.info("fetch v%d from %s-%d: zstd batches have no v%d form", version, name, index, to_magic)
                        parts.append(_partition_error(index, UNSUPPORTED_COMPRESSION_TYPE, result.high_watermark, result.log_start_offset))
                        any_error = True
                        continue
                    records = down_convert(records, to_magic, fetch_offset=p["fetch_offset"], max_bytes=max(limit, 0))
                except (CorruptRecordError, CodecError) as exc:
                    log.warning("fetch v%d from %s-%d: cannot down-convert the stored data: %s", version, name, index, exc)
                    parts.append(_partition_error(index, UNKNOWN_SERVER_ERROR, result.high_watermark, result.log_start_offset))
                    any_error = True
                    continue
            if records:
                min_one = False
                remaining -= len(records)
                total += len(records)
            parts.append(
                {
                    "partition_index": index,
                    "error_code": NONE,
                    "high_watermark": result.high_watermark,
                    "last_stable_offset": result.high_watermark,
                    "log_start_offset": result.log_start_offset,
                    "aborted_transactions": [],
                    "preferred_read_replica": -1,
                    "records": records,
                }
            )
        responses.append({"topic": name, "partitions": parts})
    return responses, total, any_error


async def handle_fetch(state: BrokerState, header: RequestHeader, body: dict) -> dict:
    """Answer a Fetch request v0-11 (see the module docstring), waiting up to
    ``max_wait_ms`` (ms) for ``min_bytes`` (bytes) of records."""
    version = header.api_version
    if version >= 7 and body.get("session_epoch", -1) not in (-1, 0):
        log.info("incremental fetch (session %s epoch %s) from %s: no such session", body.get("session_id"), body.get("session_epoch"), header.client_id)
        return {"throttle_time_ms": 0, "error_code": FETCH_SESSION_ID_NOT_FOUND, "session_id": 0, "responses": []}
    keys = [(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]]
    min_bytes = body.get("min_bytes", 0)
    deadline = trio.current_time() + max(0, body.get("max_wait_ms", 0)) / 1000.0
    while True:
        event = state.appends.register(keys)
        try:
            responses, total, any_error = read_fetch(state, body, version)
            if total >= min_bytes or any_error or not keys or trio.current_time() >= deadline:
                break
            with trio.move_on_at(deadline):
                await event.wait()
        finally:
            state.appends.unregister(keys, event)
    return {"throttle_time_ms": 0, "error_code": NONE, "session_id": 0, "responses": responses}
