"""The `kclient` PySpark data source: batch and streaming reads and writes
of kclient topics, with the options and schema of Spark's Kafka source.

Spark's own Kafka connector is a JVM package; this is a PySpark Python Data
Source (`pyspark.sql.datasource`, Spark 4.x), registered under the name
`kclient` because Spark reserves `kafka`. Readers hand rows to Spark as
Arrow record batches; writers take Arrow record batches and send them with
the kclient `Producer`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from kclient.config.producer import ProducerConfig
from kclient.errors import ConfigError
from kclient.spark.admin import ClusterView
from kclient.spark.offsets import OffsetJson, TopicPartition, cap_offsets, describe, offsets_from_json, offsets_to_json, plan_ranges
from kclient.spark.options import ReadOptions, WriteOptions, read_options, write_options
from kclient.spark.planning import resolve_offsets
from kclient.spark.reader import DataLossError, read_range, spark_schema
from kclient.spark.writer import WriteCommit, check_write_schema, write_batches

log = logging.getLogger(__name__)

__all__ = ["KClientDataSource"]


class KClientDataSource(DataSource):
    """`spark.read.format("kclient")` and friends.

    Options are Spark's Kafka source options (see the Spark page of the
    docs); every read and write needs `kafka.bootstrap.servers`.
    """

    @classmethod
    def name(cls) -> str:
        """The format name, `kclient`."""
        return "kclient"

    def schema(self) -> str:
        """Spark's Kafka source schema (`headers` with `includeHeaders`)."""
        include = str(self.options.get("includeHeaders", self.options.get("includeheaders", "false"))).strip().lower() == "true"
        return spark_schema(include)

    def reader(self, schema: StructType) -> BatchReader:
        """A batch reader.

        Raises:
            kclient.errors.ConfigError: Bad options or a user-specified schema.
        """
        return BatchReader(_checked_read_options(self.options, schema, streaming=False))

    def streamReader(self, schema: StructType) -> StreamReader:
        """A micro-batch stream reader.

        Raises:
            kclient.errors.ConfigError: Bad options or a user-specified schema.
        """
        return StreamReader(_checked_read_options(self.options, schema, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        """A batch writer.

        Raises:
            kclient.errors.ConfigError: Bad options or columns.
        """
        if overwrite:
            raise ConfigError("save mode Overwrite is not allowed for kclient topics; use mode('append')")
        opts = _checked_write_options(self.options, schema)
        return BatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        """A streaming writer.

        Raises:
            kclient.errors.ConfigError: Bad options or columns.
        """
        return StreamWriter(_checked_write_options(self.options, schema))


def _checked_read_options(options: Mapping[str, str], schema: StructType, *, streaming: bool) -> ReadOptions:
    """The read options, parsed, with the user's schema (if any) checked."""
    opts = read_options(options, streaming=streaming)
    _check_read_schema(schema, opts)
    return opts


def _check_read_schema(schema: StructType, opts: ReadOptions) -> None:
    """The schema is fixed, as in Spark's Kafka source: `.schema(...)` on a
    read is refused."""
    fixed = [part.strip().split(" ", 1) for part in spark_schema(opts.include_headers).split(", ")]
    given = [[f.name, f.dataType.simpleString()] for f in schema.fields]
    aliases = {"long": "bigint"}
    if given != [[name, aliases.get(kind, kind)] for name, kind in fixed]:
        raise ConfigError(f"the kclient source has a fixed schema ({spark_schema(opts.include_headers)}); do not set one with .schema()")


def _checked_write_options(options: Mapping[str, str], schema: StructType) -> WriteOptions:
    """Write options, columns and producer settings checked on the driver,
    so a bad value fails at planning, not in every task."""
    opts = write_options(options)
    check_write_schema(schema, opts)
    ProducerConfig.from_properties(dict(opts.producer_config))
    return opts


def _leaders(view: ClusterView, opts: ReadOptions) -> dict[TopicPartition, tuple[str, int] | None]:
    return view.partitions(opts.subscription)


def _read(partition: InputPartition, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    # Spark runs one task with an empty partition when planning found no
    # range at all.
    if getattr(partition, "value", None) is None:
        return iter(())
    return read_range(partition.value, opts)


class BatchReader(DataSourceReader):
    """Plans one task per topic-partition offset range (more with
    `minPartitions` / `maxRecordsPerPartition`) and reads each on an
    executor."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        """Resolve the starting and ending offsets and split the ranges."""
        opts = self.opts
        view = ClusterView(opts)
        leaders = _leaders(view, opts)
        tps = sorted(leaders)
        start = resolve_offsets(view, opts.starting, tps, starting=True, strategy=opts.starting_timestamp_strategy)
        end = resolve_offsets(view, opts.ending, tps, starting=False)
        backwards = [tp for tp in tps if start[tp] > end[tp]]
        if backwards:
            raise ConfigError(
                f"the starting offset is after the ending offset for {describe(backwards)} "
                f"({', '.join(f'{start[tp]} > {end[tp]}' for tp in backwards[:5])}): check startingOffsets / endingOffsets"
            )
        ranges = plan_ranges(start, end, {tp: leader for tp, leader in leaders.items() if leader}, min_partitions=opts.min_partitions, max_records_per_partition=opts.max_records_per_partition)
        log.info("batch read of %s: %d offset ranges", opts.subscription.describe(), len(ranges))
        return [InputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The records of one offset range, as Arrow record batches."""
        return _read(partition, self.opts)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over the subscription's partitions.

    Offsets are JSON `{"topic": {"0": 23}}`: for each partition the offset
    the next micro-batch starts at. Partitions that appear later start at
    their earliest offset; `maxOffsetsPerTrigger` caps the offsets of one
    micro-batch (`ReadMaxRows`); `Trigger.AvailableNow` reads up to the
    latest offsets seen when the query started.
    """

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._view = ClusterView(opts)
        self._target: dict[TopicPartition, int] | None = None
        self._new_begin: dict[TopicPartition, int] = {}

    def initialOffset(self) -> OffsetJson:
        """Where a new query starts (`startingOffsets` and the timestamp
        options, resolved now)."""
        opts = self.opts
        tps = sorted(_leaders(self._view, opts))
        start = resolve_offsets(self._view, opts.starting, tps, starting=True, strategy=opts.starting_timestamp_strategy)
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        """`ReadMaxRows(maxOffsetsPerTrigger)`, or read everything."""
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Remember the latest offsets now: an AvailableNow query reads up
        to them and no further."""
        tps = sorted(_leaders(self._view, self.opts))
        self._target = self._view.latest(tps)

    def _begin(self, start: dict[TopicPartition, int], tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Start offsets for `tps`: from `start`, else (a new partition)
        its earliest offset, remembered so planning agrees."""
        new = [tp for tp in tps if tp not in start and tp not in self._new_begin]
        if new:
            earliest = self._view.earliest(new)
            log.info("new partitions %s start at their earliest offsets", describe(new))
            trimmed = sorted(tp for tp, offset in earliest.items() if offset > 0)
            if trimmed:
                # As in Spark's source: records of a new partition that were
                # deleted before the query saw it are possible data loss.
                self._lost(f"new partitions {describe(trimmed)} start after offset 0 (records were deleted before the query saw them)")
            self._new_begin.update(earliest)
        return {tp: start[tp] if tp in start else self._new_begin[tp] for tp in tps}

    def latestOffset(self, start: OffsetJson, limit: ReadLimit) -> OffsetJson:
        """The end of the next micro-batch (at most `limit`)."""
        begin_all = offsets_from_json(start)
        tps = sorted(_leaders(self._view, self.opts))
        gone = sorted(set(begin_all) - set(tps))
        if gone:
            self._lost(f"partitions {describe(gone)} no longer exist")
        begin = self._begin(begin_all, tps)
        latest = self._view.latest(tps)
        if self._target is not None:
            latest = {tp: min(latest[tp], self._target.get(tp, begin[tp])) for tp in tps}
        truncated = [tp for tp in tps if latest[tp] < begin[tp]]
        if truncated:
            self._lost(f"{describe(truncated)} end before the offsets already read (the log was truncated)")
        latest = {tp: max(latest[tp], begin[tp]) for tp in tps}
        if isinstance(limit, ReadMaxRows):
            end = cap_offsets(begin, latest, limit.max_rows)
        else:
            end = latest
        return offsets_to_json(end)

    def reportLatestOffset(self) -> OffsetJson | None:
        """The partitions' latest offsets, for the query's progress."""
        tps = sorted(_leaders(self._view, self.opts))
        return offsets_to_json(self._view.latest(tps)) if tps else None

    def partitions(self, start: OffsetJson, end: OffsetJson) -> Sequence[InputPartition]:
        """The offset ranges of the micro-batch `(start, end]`."""
        begin_all = offsets_from_json(start)
        until = offsets_from_json(end)
        tps = sorted(until)
        if not tps:
            return []
        begin = self._begin(begin_all, tps)
        earliest = self._view.earliest(tps)
        for tp in tps:
            if begin[tp] < earliest[tp] and begin[tp] < until[tp]:
                self._lost(f"{tp[0]}-{tp[1]}: offsets {begin[tp]}..{min(earliest[tp], until[tp]) - 1} were deleted before they were read")
                begin[tp] = min(earliest[tp], until[tp])
        leaders = {tp: leader for tp, leader in _leaders(self._view, self.opts).items() if leader}
        ranges = plan_ranges(begin, until, leaders, min_partitions=self.opts.min_partitions, max_records_per_partition=self.opts.max_records_per_partition)
        return [InputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The records of one offset range, as Arrow record batches."""
        return _read(partition, self.opts)

    def commit(self, end: OffsetJson) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint."""

    def _lost(self, message: str) -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(message + ". Some data may have been lost; set failOnDataLoss=false to go on without it.")
        log.warning("%s; going on (failOnDataLoss=false)", message)


class BatchWriter(DataSourceArrowWriter):
    """Writes each task's rows with a kclient `Producer` (at least once)."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        """Send every row of the task.

        Args:
            iterator: The task's rows as Arrow record batches.

        Returns:
            The task's commit message.

        Raises:
            kclient.errors.KafkaError: The producer's error if any record could
                not be written (the task, and so the job, fails).
        """
        return write_batches(iterator, self.opts)


class StreamWriter(DataSourceStreamArrowWriter):
    """Writes each micro-batch's rows with a kclient `Producer`."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        """Send every row of this task's part of the micro-batch."""
        return write_batches(iterator, self.opts)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every row was acknowledged already (each task waited)."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Rows a failed micro-batch wrote stay written (at least once)."""
