"""Spark rows to kclient records: the columns a write accepts, and the loop
that sends one task's Arrow record batches with the kclient `Producer`.

The columns are those of Spark's Kafka sink: `value` (required), `key`,
`topic` (unless the `topic` option is set, which then wins), `partition`
and `headers`; other columns are ignored. `key` and `value` may be binary or
string (sent as UTF-8).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, TypedDict

import attrs
import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from kclient.errors import ConfigError, KafkaError
from kclient.spark.options import WriteOptions

log = logging.getLogger(__name__)

__all__ = ["WriteCommit", "check_write_schema", "write_batches"]


class HeaderValue(TypedDict):
    """One element of a `headers` column (`struct<key:string,value:binary>`)
    as Arrow hands it over."""

    key: str
    value: bytes | None


@attrs.frozen
class WriteCommit(WriterCommitMessage):
    """What one write task reports to the driver: rows sent (all
    acknowledged per the producer's `request.required.acks`)."""

    rows: int


def check_write_schema(schema: StructType, opts: WriteOptions) -> None:
    """Check the DataFrame's columns before any task runs.

    Args:
        schema: the DataFrame's columns.
        opts: the write's options (a `topic` option makes the column
            optional).

    Raises:
        ConfigError: a column is missing or has the wrong type (named in
            the message).
    """
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType

    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ConfigError("a kclient write needs a 'value' column (binary or string)")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], (BinaryType, StringType)):
            raise ConfigError(f"column {name!r} must be binary or string, not {fields[name].simpleString()}")
    if opts.topic is None:
        if "topic" not in fields:
            raise ConfigError("a kclient write needs the 'topic' option or a 'topic' column")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise ConfigError(f"column 'topic' must be string, not {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ConfigError(f"column 'partition' must be int, not {fields['partition'].simpleString()}")
    if "headers" in fields:
        h = fields["headers"]
        element = h.elementType if isinstance(h, ArrayType) else None
        ok = False
        if isinstance(element, StructType):
            inner = {f.name: f.dataType for f in element.fields}
            ok = set(inner) == {"key", "value"} and isinstance(inner["key"], StringType) and isinstance(inner["value"], BinaryType)
        if not ok:
            raise ConfigError(f"column 'headers' must be array<struct<key:string,value:binary>>, not {h.simpleString()}")


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    """The values of a column (string columns as UTF-8 bytes), found by
    name in any case; None when the batch has no such column. The values'
    type is the column's: the caller knows it (`check_write_schema`)."""
    index = batch.schema.get_field_index(name)
    if index < 0:
        for i, field in enumerate(batch.schema):
            if field.name.lower() == name:
                index = i
                break
        else:
            return None
    column = batch.column(index)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    values: list[Any] = column.to_pylist()
    return values


def write_batches(batches: Iterator[pa.RecordBatch], opts: WriteOptions) -> WriteCommit:
    """Send every row of `batches` and wait until each is acknowledged.

    Args:
        batches: one task's rows.
        opts: the write's options (`producer_config` configures the
            Producer).

    Returns:
        The number of rows sent.

    Raises:
        KafkaError: a row has no topic, or the producer could not write a
            record (the broker's error is in the message and chained).
    """
    from kclient.client.producer.data import ProducerData
    from kclient.client.producer.producer import Producer

    rows = 0
    producer = Producer(dict(opts.producer_config))
    try:
        for batch in batches:
            n = batch.num_rows
            if not n:
                continue
            values: list[bytes | None] | None = _column(batch, "value")
            if values is None:
                raise ConfigError("a kclient write needs a 'value' column (binary or string)")
            keys: list[bytes | None] = _column(batch, "key") or [None] * n
            topics: list[str | None]
            if opts.topic is not None:
                topics = [opts.topic] * n
            else:
                raw_topics: list[bytes | None] = _column(batch, "topic") or [None] * n
                topics = [t.decode("utf-8") if t is not None else None for t in raw_topics]
            partitions: list[int | None] = _column(batch, "partition") or [None] * n
            headers: list[list[HeaderValue] | None] | None = _column(batch, "headers")
            events = []
            for i in range(n):
                topic = topics[i]
                if topic is None:
                    raise KafkaError("a row has a null 'topic' and no 'topic' option is set")
                row_headers = headers[i] if headers is not None else None
                hs = tuple((h["key"], h["value"]) for h in row_headers) if row_headers else ()
                events.append(ProducerData(topic, keys[i], [values[i]], None, partitions[i], hs))
            producer.send(events)
            rows += n
    except BaseException:
        try:
            producer.close()
        except Exception as exc:  # the first error is the one to report
            log.warning("closing the producer after a failed write: %s", exc)
        raise
    producer.close()  # flushes; raises if any record could not be written
    return WriteCommit(rows)
