"""The options of the `kclient` Spark data source, parsed and checked.

Pure: no pyspark, no sockets. Spark hands a data source its options as
strings under case-insensitive names; `read_options` and `write_options`
turn them into frozen values and raise `ConfigError` naming the option for a
bad value or a bad combination, so a mistake fails when Spark plans the
query, before any task runs.

The names and meanings are those of Spark's Kafka source and sink
("Structured Streaming + Kafka Integration Guide" in Spark's docs), so code
written for `format("kafka")` runs with `format("kclient")`.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Collection, Mapping
from typing import Any, overload

import attrs

from kclient.config.consumer import ConsumerConfig
from kclient.config.producer import ProducerConfig
from kclient.errors import ConfigError
from kclient.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kclient.protocol.records.read_committed import isolation_level_code
from kclient.security.settings import ClientSecurity

log = logging.getLogger(__name__)

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "ReadOptions",
    "Subscription",
    "WriteOptions",
    "read_options",
    "write_options",
]

#: In an offsets JSON, -2 means the partition's earliest offset and -1 its
#: latest (the log end offset), as in Spark's Kafka source and in Kafka's
#: ListOffsets request (whose module owns the numbers).
EARLIEST = EARLIEST_TIMESTAMP
LATEST = LATEST_TIMESTAMP

#: `kafka.*` options that Spark's Kafka source refuses, with the reason; the
#: same keys are refused here so that a ported job behaves the same.
_REFUSED_READ = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always read as bytes; cast or decode the 'key' column",
    "value.deserializer": "values are always read as bytes; cast or decode the 'value' column",
    "enable.auto.commit": "the source commits nothing to Kafka; Spark's checkpoint holds the offsets",
    "interceptor.classes": "consumer interceptors are not supported",
}
_REFUSED_WRITE = {
    "key.serializer": "keys are always written as bytes (a string column is encoded as UTF-8)",
    "value.serializer": "values are always written as bytes (a string column is encoded as UTF-8)",
}

#: `kafka.*` options the reader uses (other `ConsumerConfig` names are
#: logged and ignored: the reader is not a KafkaConsumer, so most consumer
#: settings mean nothing; a name no config knows is an error, see
#: `STRICT_OPTION`).
_READ_KAFKA_KEYS = {
    "bootstrap.servers",
    "client.id",
    "request.timeout.ms",
    "socket.timeout.ms",
    "max.partition.fetch.bytes",
    "fetch.message.max.bytes",
    "retry.backoff.ms",
    "security.protocol",
    "isolation.level",
}

#: The `kafka.*` security options both the reader and the writer pass on
#: (the client names of `kclient.config.security`).
_SECURITY_KEYS = {
    "security.protocol",
    "ssl.ca.location",
    "ssl.cafile",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
}
#: Java keystore options Spark jobs often carry, with what to use instead.
_JAVA_STORES = {
    "ssl.truststore.location": "kafka.ssl.ca.location (a PEM file of CA certificates)",
    "ssl.keystore.location": "kafka.ssl.certificate.location and kafka.ssl.key.location (PEM files)",
}

#: Options Spark itself adds or that belong to Spark, not to the source.
_SPARK_OWN = {"path", "checkpointlocation", "queryname"}

_READ_KEYS = {
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "maxoffsetspertrigger",
    "minpartitions",
    "maxrecordsperpartition",
    "failondataloss",
    "includeheaders",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
    "kafkaconsumer.polltimeoutms",
    "groupidprefix",
    # Spark's streaming-only options kclient refuses (see read_options): known, not typos.
    "minoffsetspertrigger",
    "maxtriggerdelay",
}
_WRITE_KEYS = {"topic", "includeheaders"}

#: The option (``failOnUnknownOptions``, default ``true``) that makes an
#: unknown option an error: a `kafka.*` name the client's config
#: (`ConsumerConfig` for a read, `ProducerConfig` for a write) does not
#: know, or a source option the reader or writer does not know. ``false``
#: logs a warning and ignores it instead, as ``strict=False`` does for the
#: configs (`kclient.config`).
STRICT_OPTION = "failOnUnknownOptions"
_STRICT_KEY = STRICT_OPTION.lower()


@attrs.frozen
class Subscription:
    """Which topic-partitions a query reads: exactly one of `topics`
    (option `subscribe`), `pattern` (`subscribePattern`, a Python regex
    matched against the whole topic name) or `assign` (topic -> partitions,
    from the `assign` JSON)."""

    topics: tuple[str, ...] | None = None
    pattern: str | None = None
    assign: Mapping[str, tuple[int, ...]] | None = None

    def describe(self) -> str:
        """A short text for error messages."""
        if self.topics is not None:
            return f"subscribe={','.join(self.topics)}"
        if self.pattern is not None:
            return f"subscribePattern={self.pattern}"
        return f"assign={json.dumps({t: list(p) for t, p in (self.assign or {}).items()})}"


@attrs.frozen
class OffsetSpec:
    """Where a read starts or ends, before it is resolved against a broker.

    `kind` is one of:

    - `"earliest"` / `"latest"`: every partition's log start / log end offset;
    - `"offsets"`: `offsets` maps `(topic, partition)` to an offset, or to
      `EARLIEST` (-2) / `LATEST` (-1);
    - `"timestamp"`: every partition at `timestamp` (ms since the epoch);
    - `"timestamps"`: `offsets` maps `(topic, partition)` to a timestamp (ms).

    For a timestamp the offset is the earliest one whose record timestamp is
    at or after it (ListOffsets v1+, KIP-79).
    """

    kind: str
    offsets: Mapping[tuple[str, int], int] = attrs.field(factory=dict)
    timestamp: int | None = None
    option: str = ""


@attrs.frozen
class ReadOptions:
    """Everything a batch or streaming read needs, checked.

    Sizes are in bytes, times in ms.
    """

    bootstrap: tuple[tuple[str, int], ...]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    starting_timestamp_strategy: str = "error"
    client_id: str = "kclient-spark"
    request_timeout_ms: int = 30_000
    poll_timeout_ms: int = 120_000
    fetch_max_bytes: int = 1 << 20
    retry_backoff_ms: int = 100
    offset_retries: int = 3
    offset_retry_interval_ms: int = 10
    security: ClientSecurity = attrs.field(factory=ClientSecurity)
    """`kafka.security.protocol`, `kafka.ssl.*`, `kafka.sasl.*`, parsed."""
    isolation_level: str = "read_uncommitted"
    """`kafka.isolation.level` (KIP-98): `read_committed` reads only
    committed transactions' records (and non-transactional ones), up to
    the last stable offset, which is then the `latest` offset."""


@attrs.frozen
class WriteOptions:
    """Everything a batch or streaming write needs, checked.

    `producer_config` holds the `kafka.*` options (prefix removed) laid over
    the sink's defaults, for `kclient.ProducerConfig`.
    """

    bootstrap: tuple[tuple[str, int], ...]
    topic: str | None
    producer_config: Mapping[str, str]


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in options.items():
        out[str(key).lower()] = "" if value is None else str(value)
    return out


def parse_bootstrap(value: str, option: str = "kafka.bootstrap.servers") -> tuple[tuple[str, int], ...]:
    """`"host:port,host:port"` -> tuple of `(host, port)`.

    Raises:
        ConfigError: the list is empty or an entry has no valid port.
    """
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"option {option!r}: {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ConfigError(f"option {option!r} must list at least one broker as host:port")
    return tuple(out)


@overload
def _int(opts: dict[str, str], key: str, name: str, default: int, minimum: int) -> int: ...


@overload
def _int(opts: dict[str, str], key: str, name: str, default: None, minimum: int) -> int | None: ...


def _int(opts: dict[str, str], key: str, name: str, default: int | None, minimum: int) -> int | None:
    raw = opts.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"option {name!r}: {raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"option {name!r} must be at least {minimum}, got {value}")
    return value


def _bool(opts: dict[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise ConfigError(f"option {name!r}: {raw!r} is not 'true' or 'false'")


def _json_object(raw: str, name: str) -> dict[str, object]:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"option {name!r}: not valid JSON ({exc}): {raw!r}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"option {name!r}: expected a JSON object, got {raw!r}")
    return value


def _partition_map(raw: str, name: str) -> dict[tuple[str, int], int]:
    """`{"topic": {"0": 23, "1": -1}}` -> `{("topic", 0): 23, ...}`."""
    out: dict[tuple[str, int], int] = {}
    for topic, parts in _json_object(raw, name).items():
        if not isinstance(parts, dict):
            raise ConfigError(f"option {name!r}: topic {topic!r} must map partition numbers to numbers, got {parts!r}")
        for partition, value in parts.items():
            try:
                p = int(partition)
            except (TypeError, ValueError):
                raise ConfigError(f"option {name!r}: {partition!r} of topic {topic!r} is not a partition number") from None
            if p < 0:
                raise ConfigError(f"option {name!r}: partition {p} of topic {topic!r} is negative")
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"option {name!r}: {topic}-{p} must be an integer, got {value!r}")
            out[(str(topic), p)] = value
    return out


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k, "").strip()]
    names = {"subscribe": "subscribe", "subscribepattern": "subscribePattern", "assign": "assign"}
    if len(given) != 1:
        listed = ", ".join(names[k] for k in given) or "none"
        raise ConfigError(f"exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be set (given: {listed})")
    key = given[0]
    raw = opts[key].strip()
    if key == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise ConfigError("option 'subscribe' must list at least one topic")
        return Subscription(topics=topics)
    if key == "subscribepattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise ConfigError(f"option 'subscribePattern': {raw!r} is not a valid regular expression ({exc})") from None
        return Subscription(pattern=raw)
    assign: dict[str, tuple[int, ...]] = {}
    for topic, parts in _json_object(raw, "assign").items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
            raise ConfigError(f"option 'assign': topic {topic!r} must map to a list of partition numbers, got {parts!r}")
        assign[str(topic)] = tuple(sorted(set(parts)))
    if not any(assign.values()):
        raise ConfigError("option 'assign' names no partition")
    return Subscription(assign=assign)


def _offset_spec(opts: dict[str, str], which: str, streaming: bool) -> OffsetSpec:
    """Resolve the `starting*` or `ending*` options (`which`), applying
    Spark's precedence: `*Timestamp`, then `*OffsetsByTimestamp`, then
    `*Offsets`."""
    ts_key, by_ts_key, off_key = f"{which}timestamp", f"{which}offsetsbytimestamp", f"{which}offsets"
    if opts.get(ts_key, "").strip():
        name = f"{which}Timestamp"
        ts = _int(opts, ts_key, name, None, 0)
        return OffsetSpec("timestamp", timestamp=ts, option=name)
    if opts.get(by_ts_key, "").strip():
        name = f"{which}OffsetsByTimestamp"
        stamps = _partition_map(opts[by_ts_key], name)
        for tp, ts in stamps.items():
            if ts < 0:
                raise ConfigError(f"option {name!r}: {tp[0]}-{tp[1]} has a negative timestamp {ts}")
        return OffsetSpec("timestamps", offsets=stamps, option=name)
    name = f"{which}Offsets"
    raw = opts.get(off_key, "").strip()
    if not raw:
        default = "latest" if (which == "ending" or streaming) else "earliest"
        return OffsetSpec(default, option=name)
    if raw.lower() in ("earliest", "latest"):
        kind = raw.lower()
        if which == "starting" and kind == "latest" and not streaming:
            raise ConfigError("option 'startingOffsets' cannot be 'latest' for a batch query")
        if which == "ending" and kind == "earliest":
            raise ConfigError("option 'endingOffsets' cannot be 'earliest'")
        return OffsetSpec(kind, option=name)
    offsets = _partition_map(raw, name)
    for (topic, p), off in offsets.items():
        if off < EARLIEST:
            raise ConfigError(f"option {name!r}: {topic}-{p} has offset {off}; use an offset >= 0, -2 (earliest) or -1 (latest)")
        if which == "starting" and off == LATEST and not streaming:
            raise ConfigError(f"option 'startingOffsets': {topic}-{p} is -1 (latest), which a batch query cannot start at")
        if which == "ending" and off == EARLIEST:
            raise ConfigError(f"option 'endingOffsets': {topic}-{p} is -2 (earliest), which a query cannot end at")
    return OffsetSpec("offsets", offsets=offsets, option=name)


def _kafka_options(opts: dict[str, str], refused: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name in refused:
            raise ConfigError(f"option 'kafka.{name}' is not supported: {refused[name]}")
        out[name] = value
    return out


def _pem_stores(kafka: dict[str, str]) -> None:
    """Java client PEM stores (KIP-651) -> kclient's names, in place.

    `ssl.truststore.location` with `ssl.truststore.type=PEM` becomes
    `ssl.ca.location`; `ssl.keystore.location` with `ssl.keystore.type=PEM`
    (one file with the key and the chain) becomes `ssl.certificate.location`
    and `ssl.key.password` comes from it or `ssl.keystore.password`. The
    Java names are removed.

    Raises:
        ConfigError: a JKS or PKCS12 store, which kclient does not read.
    """
    for name, instead in _JAVA_STORES.items():
        kind = name.replace("location", "type")
        location = kafka.get(name, "").strip()
        if location and kafka.get(kind, "JKS").strip().upper() != "PEM":
            raise ConfigError(f"option 'kafka.{name}': Java key stores are not supported by kclient; use {instead}")
        kafka.pop(name, None)
        kafka.pop(kind, None)
        if not location:
            continue
        if name == "ssl.truststore.location":
            kafka.setdefault("ssl.ca.location", location)
        else:
            kafka.setdefault("ssl.certificate.location", location)
    password = kafka.pop("ssl.keystore.password", "")
    if password and not kafka.get("ssl.key.password"):
        kafka["ssl.key.password"] = password
    kafka.pop("ssl.truststore.password", None)


_CONFIGURATION_NAME = re.compile(r"configurations? ((?:security|ssl|sasl)\.[a-z.]+)")


def _security(kafka: dict[str, str]) -> ClientSecurity:
    """Parse the `kafka.security.protocol`, `kafka.ssl.*` and `kafka.sasl.*`
    options (TLS; SASL PLAIN / SCRAM: KIP-43, KIP-84, KIP-152).

    Args:
        kafka: the `kafka.*` options without their prefix (Java PEM store
            options are renamed in place, see `_pem_stores`).

    Returns:
        The client's security settings.

    Raises:
        ConfigError: naming the option (``kafka.<name>``) for a bad value, a
            missing one (SASL without `kafka.sasl.mechanism`, ...) or a Java
            keystore option kclient does not read.
    """
    _pem_stores(kafka)
    try:
        return ClientSecurity.from_properties({k: v for k, v in kafka.items() if k in _SECURITY_KEYS})
    except ConfigError as exc:
        message = _CONFIGURATION_NAME.sub(lambda m: f"option 'kafka.{m[1]}'", str(exc))
        raise type(exc)(message) from None


def _unknown(name: str, known: Collection[str], text: str, strict: bool, reason: str | None = None) -> None:
    """Report option ``name``, which is not in ``known``: raise (``strict``)
    or log a warning; ``text`` says what does not know it, ``reason`` (if
    given) why it is not mapped."""
    if reason is not None:
        hint = f": {reason}"
    else:
        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
    if strict:
        raise ConfigError(f"{text} does not know the option {name!r}{hint} (set option '{STRICT_OPTION}' to false to ignore it)")
    log.warning("%s does not know the option %r%s; ignored", text, name, hint)


def _check_unknown(opts: dict[str, str], known: set[str], what: str, strict: bool) -> None:
    """Source options (not `kafka.*`) the reader or writer does not know.

    Raises:
        ConfigError: naming the first unknown option, when ``strict``.
    """
    for key in sorted(opts):
        if key.startswith("kafka.") or key in known or key in _SPARK_OWN or key == _STRICT_KEY:
            continue
        _unknown(key, known, f"the kclient Spark {what}", strict)


def _check_kafka_names(
    kafka: dict[str, str], known: Collection[str], config: str, strict: bool, reasons: Mapping[str, str] | None = None
) -> None:
    """`kafka.*` options (prefix removed) whose names ``config`` does not
    know; removed from ``kafka`` when not ``strict``. ``reasons``: names
    deliberately not mapped, with why (a config's ``NOT_MAPPED``).

    Raises:
        ConfigError: naming the first unknown `kafka.*` option, when ``strict``.
    """
    prefixed = {f"kafka.{name}" for name in known}
    for name in sorted(set(kafka) - set(known)):
        _unknown(f"kafka.{name}", prefixed, config, strict, (reasons or {}).get(name))
        del kafka[name]


def _strict(opts: dict[str, str]) -> bool:
    return _bool(opts, _STRICT_KEY, STRICT_OPTION, True)


def read_options(options: Mapping[str, Any], *, streaming: bool) -> ReadOptions:
    """Parse and check a read's options.

    Args:
        options: the options as Spark passes them (names in any case,
            values strings).
        streaming: True for `readStream`, False for `read`.

    Returns:
        The checked `ReadOptions`.

    Raises:
        ConfigError: an option is missing, malformed, out of range, or not
            allowed with the others (its name is in the message).
    """
    opts = _lower(options)
    strict = _strict(opts)
    kafka = _kafka_options(opts, _REFUSED_READ)
    _pem_stores(kafka)
    consumer_names = {*ConsumerConfig.known_names(), *ConsumerConfig.NOT_MAPPED, *_READ_KAFKA_KEYS, *_SECURITY_KEYS}
    _check_kafka_names(kafka, consumer_names, "the kclient Spark reader (ConsumerConfig)", strict)
    if not kafka.get("bootstrap.servers", "").strip():
        raise ConfigError("option 'kafka.bootstrap.servers' is required (host:port[,host:port...])")
    bootstrap = parse_bootstrap(kafka["bootstrap.servers"])
    security = _security(kafka)
    isolation = kafka.get("isolation.level", "").strip().lower() or "read_uncommitted"
    isolation_level_code(isolation, "kafka.isolation.level")  # ConfigError naming the option and its values
    for name in sorted(set(kafka) - _READ_KAFKA_KEYS - _SECURITY_KEYS):
        log.warning("option 'kafka.%s' is not used by the kclient Spark reader; ignored", name)
    _check_unknown(opts, _READ_KEYS, "reader", strict)
    subscription = _subscription(opts)
    starting = _offset_spec(opts, "starting", streaming)
    if streaming:
        for key, name in (("endingoffsets", "endingOffsets"), ("endingtimestamp", "endingTimestamp"), ("endingoffsetsbytimestamp", "endingOffsetsByTimestamp")):
            if opts.get(key, "").strip():
                raise ConfigError(f"option {name!r} is not valid for a streaming query")
        ending = OffsetSpec("latest", option="endingOffsets")
    else:
        if opts.get("maxoffsetspertrigger", "").strip():
            log.warning("option 'maxOffsetsPerTrigger' applies to streaming queries only; ignored by a batch read")
        ending = _offset_spec(opts, "ending", streaming)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower() or "error"
    if strategy not in ("error", "latest"):
        raise ConfigError(f"option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy!r}")
    if streaming and (opts.get("minoffsetspertrigger", "").strip() or opts.get("maxtriggerdelay", "").strip()):
        raise ConfigError("options 'minOffsetsPerTrigger' / 'maxTriggerDelay' are not supported by the kclient source")
    timeout = _int(kafka, "request.timeout.ms", "kafka.request.timeout.ms", None, 1)
    if timeout is None:
        timeout = _int(kafka, "socket.timeout.ms", "kafka.socket.timeout.ms", 30_000, 1)
    fetch_bytes = _int(kafka, "max.partition.fetch.bytes", "kafka.max.partition.fetch.bytes", None, 1)
    if fetch_bytes is None:
        fetch_bytes = _int(kafka, "fetch.message.max.bytes", "kafka.fetch.message.max.bytes", 1 << 20, 1)
    client_id = kafka.get("client.id", "").strip() or (opts.get("groupidprefix", "").strip() or "kclient-spark")
    return ReadOptions(
        bootstrap=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger", None, 1) if streaming else None,
        min_partitions=_int(opts, "minpartitions", "minPartitions", None, 1),
        max_records_per_partition=_int(opts, "maxrecordsperpartition", "maxRecordsPerPartition", None, 1),
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        starting_timestamp_strategy=strategy,
        client_id=client_id,
        request_timeout_ms=timeout,
        poll_timeout_ms=_int(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs", 120_000, 1),
        fetch_max_bytes=fetch_bytes,
        retry_backoff_ms=_int(kafka, "retry.backoff.ms", "kafka.retry.backoff.ms", 100, 0),
        offset_retries=_int(opts, "fetchoffset.numretries", "fetchOffset.numRetries", 3, 0),
        offset_retry_interval_ms=_int(opts, "fetchoffset.retryintervalms", "fetchOffset.retryIntervalMs", 10, 0),
        security=security,
        isolation_level=isolation,
    )


#: The sink's producer settings unless `kafka.*` options say otherwise:
#: async sends in large batches, acknowledged by every in-sync replica
#: (the default of Kafka's own producer since Kafka 3.0, which Spark's sink
#: uses). The linger is the producer's own default, Kafka 4.0's 5 ms.
SINK_PRODUCER_DEFAULTS = {
    "producer.type": "async",
    "request.required.acks": "-1",
    "queue.buffering.max.messages": "100000",
    "batch.num.messages": "10000",
    "client.id": "kclient-spark-writer",
}


def write_options(options: Mapping[str, Any]) -> WriteOptions:
    """Parse and check a write's options.

    Args:
        options: the options as Spark passes them.

    Returns:
        The checked `WriteOptions`.

    Raises:
        ConfigError: `kafka.bootstrap.servers` is missing, or an option is
            refused or malformed (its name is in the message).
    """
    opts = _lower(options)
    strict = _strict(opts)
    kafka = _kafka_options(opts, _REFUSED_WRITE)
    if not kafka.get("bootstrap.servers", "").strip():
        raise ConfigError("option 'kafka.bootstrap.servers' is required (host:port[,host:port...])")
    bootstrap = parse_bootstrap(kafka.pop("bootstrap.servers"))
    _security(kafka)  # checked here, at planning; the producer parses the same options again
    _check_unknown(opts, _WRITE_KEYS, "writer", strict)
    if "acks" in kafka:  # the modern name of request.required.acks
        acks = kafka.pop("acks").strip().lower()
        kafka["request.required.acks"] = "-1" if acks == "all" else acks
    _check_kafka_names(kafka, ProducerConfig.known_names(), "the kclient Spark writer (ProducerConfig)", strict, ProducerConfig.NOT_MAPPED)
    # A user's option replaces the sink default it stands for, whichever
    # name it is given by (kafka.linger.ms replaces queue.buffering.max.ms).
    given = {ProducerConfig.canonical_name(key) or key for key in kafka}
    defaults = {key: value for key, value in SINK_PRODUCER_DEFAULTS.items() if key not in given}
    config = {**defaults, **kafka, "metadata.broker.list": ",".join(f"{h}:{p}" for h, p in bootstrap)}
    topic = opts.get("topic", "").strip() or None
    return WriteOptions(bootstrap=bootstrap, topic=topic, producer_config=config)
