"""Helpers shared by the console tools (``console-producer``,
``console-consumer``, ``get-offsets``, ``topics``): Kafka-style
``--property`` / ``--*-property`` / ``--*.config`` parsing, the bootstrap
address, and one Metadata round trip.
"""

from __future__ import annotations

import argparse
import base64
import logging
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, Protocol, TypeVar

import trio

from kclient.errors import ConfigError, UnsupportedVersionError

if TYPE_CHECKING:
    from kclient.client.cluster import ClusterMetadata, PartitionInfo
    from kclient.security.settings import ClientSecurity

__all__ = [
    "serve_in_foreground",
    "add_bootstrap_argument",
    "client_properties",
    "fetch_metadata",
    "parse_bootstrap",
    "progress_bar",
    "ProgressBar",
    "parse_key_values",
    "property_bool",
]

#: Connect and request timeout of the tools' Metadata and ListOffsets calls (ms).
TOOL_TIMEOUT_MS = 10000

T = TypeVar("T")
P = ParamSpec("P")


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--bootstrap-server HOST:PORT[,HOST:PORT...]`` (required; the
    old tools' ``--broker-list`` is accepted as an alias).

    Args:
        parser: The subcommand's parser.
    """
    parser.add_argument(
        "--bootstrap-server",
        "--broker-list",
        dest="bootstrap_server",
        required=True,
        metavar="HOST:PORT",
        help="the broker(s) to connect to, comma-separated",
    )


def parse_bootstrap(text: str) -> tuple[tuple[str, int], ...]:
    """Parse ``host:port[,host:port...]``.

    Args:
        text: The ``--bootstrap-server`` value.

    Returns:
        The ``(host, port)`` pairs.

    Raises:
        ConfigError: An empty list or an entry that is not ``host:port``.
    """
    from kclient.config.convert import to_host_ports

    try:
        brokers = to_host_ports(text)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"--bootstrap-server {text!r}: {exc}") from exc
    if not brokers:
        raise ConfigError(f"--bootstrap-server {text!r}: no broker given")
    return brokers


def parse_key_values(items: Iterable[str], option: str) -> dict[str, str]:
    """Parse repeated ``key=value`` options (``--property``,
    ``--producer-property``, ...); later entries win.

    Args:
        items: The option's values.
        option: The option's name, for the error message.

    Returns:
        ``{key: value}``.

    Raises:
        ConfigError: An entry without ``=`` or with an empty key.
    """
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} {item!r}: expected key=value")
        result[key.strip()] = value
    return result


def property_bool(props: Mapping[str, str], key: str, default: bool = False) -> bool:
    """A ``true``/``false`` formatter or reader property.

    Args:
        props: The ``--property`` values.
        key: The property.
        default: Its value when absent.

    Returns:
        The boolean.

    Raises:
        ConfigError: Neither ``true`` nor ``false``.
    """
    if key not in props:
        return default
    value = props[key].strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"--property {key}={props[key]!r}: expected true or false")
    return value == "true"


def client_properties(
    config_file: str | None,
    overrides: Sequence[str],
    option: str,
    *,
    keep: Callable[..., dict[str, Any]] | None = None,
) -> dict[str, str]:
    """The client properties of ``--producer.config FILE`` /
    ``--consumer.config FILE``, then each ``--producer-property k=v`` /
    ``--consumer-property k=v`` on top (Kafka's precedence).

    Args:
        config_file: The properties file, or None.
        overrides: The ``k=v`` options.
        option: The ``k=v`` option's name, for error messages.
        keep: Filters the file's entries to those the tool's client
            takes, e.g. ``AdminConfig.select_known`` (called with the
            entries and ``origin=``): a file shared by several clients
            (``client.properties``) has keys the tool's config does not
            know, which are logged and left out, as Kafka's tools do. The
            ``k=v`` options are not filtered: a typo there fails.

    Returns:
        The properties, Kafka's names.

    Raises:
        ConfigError: The file cannot be read, or an entry is not ``k=v``.
    """
    from kclient.config.files import load_properties

    props: dict[str, str] = dict(load_properties(config_file)) if config_file else {}
    if keep is not None and props:
        props = keep(props, origin=config_file or "")
    props.update(parse_key_values(overrides, option))
    return props


def _security(props: Mapping[str, Any]) -> ClientSecurity:
    from kclient.security.settings import ClientSecurity

    return ClientSecurity.from_properties(props)


def fetch_metadata(
    bootstrap: Sequence[tuple[str, int]],
    topics: Sequence[str] | None = None,
    *,
    properties: Mapping[str, Any] | None = None,
    allow_auto_create: bool = False,
    timeout_ms: int = TOOL_TIMEOUT_MS,
) -> ClusterMetadata:
    """One Metadata request, blocking.

    Args:
        bootstrap: The brokers to try, in order.
        topics: The topics to describe; None for every topic.
        properties: Client properties (the security ones are used).
        allow_auto_create: Let the broker create missing listed topics (if
            it is configured to).
        timeout_ms: Connect and request timeout (ms).

    Returns:
        The snapshot.

    Raises:
        NoBrokersAvailableError: No broker answered.
        AuthenticationError: The TLS handshake or SASL exchange failed.
        ConfigError: A bad security property.
    """
    from kclient.client.cluster import Cluster, request_metadata
    from kclient.net.settings import ConnectionSettings

    security = _security(properties or {})

    async def run() -> ClusterMetadata:
        async with trio.open_nursery() as nursery:
            cluster = Cluster.open(nursery, bootstrap, ConnectionSettings.with_timeout(timeout_ms, client_id="kclient-tools", security=security))
            try:
                if topics is not None:
                    return await cluster.refresh_metadata(topics, allow_auto_create=allow_auto_create)
                return await request_metadata(await cluster.any_connection())
            finally:
                await cluster.aclose()

    return unwrap_group(trio.run, run)


def fetch_topic_ids(
    bootstrap: Sequence[tuple[str, int]],
    *,
    properties: Mapping[str, Any] | None = None,
    timeout_ms: int = TOOL_TIMEOUT_MS,
) -> dict[str, uuid.UUID]:
    """Every topic's id (Metadata v10+, KIP-516), blocking; empty when the
    broker asked has no topic ids (Metadata below v10).

    Args:
        bootstrap: The brokers to try, in order.
        properties: Client properties (the security ones are used).
        timeout_ms: Connect and request timeout (ms).

    Returns:
        ``{topic name: topic id}``.

    Raises:
        NoBrokersAvailableError: No broker answered.
        AuthenticationError: The TLS handshake or SASL exchange failed.
        ConfigError: A bad security property.
    """
    from kclient.client.cluster import Cluster
    from kclient.client.consumer.poll.topic_names import TOPIC_ID_VERSION, names_from_metadata
    from kclient.net.settings import ConnectionSettings
    from kclient.protocol.messages.metadata import METADATA_FULL, MetadataRequest

    security = _security(properties or {})

    async def run() -> dict[str, uuid.UUID]:
        async with trio.open_nursery() as nursery:
            cluster = Cluster.open(nursery, bootstrap, ConnectionSettings.with_timeout(timeout_ms, client_id="kclient-tools", security=security))
            try:
                conn = await cluster.any_connection()
                try:
                    version = conn.version_for(METADATA_FULL, floor=TOPIC_ID_VERSION)
                except UnsupportedVersionError:
                    return {}
                response = await conn.request(METADATA_FULL, MetadataRequest(topics=None, allow_auto_topic_creation=False), version=version)
                return {name: topic_id for topic_id, name in names_from_metadata(response).items()}
            finally:
                await cluster.aclose()

    return unwrap_group(trio.run, run)


def kafka_uuid(value: uuid.UUID) -> str:
    """A UUID as Kafka prints it (``Uuid.toString``): its 16 bytes in
    URL-safe base64 without padding, 22 characters.

    Args:
        value: The UUID.

    Returns:
        The text.
    """
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def unwrap_group(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Call ``fn(*args, **kwargs)``; an exception group holding a single
    exception (trio's nurseries wrap errors) is replaced by that exception.

    Args:
        fn: The callable.
        *args: Its positional arguments.
        **kwargs: Its keyword arguments.

    Returns:
        What ``fn`` returns.
    """
    try:
        return fn(*args, **kwargs)
    except BaseException as exc:
        inner: BaseException = exc
        while isinstance(group := getattr(inner, "exceptions", None), (list, tuple)) and len(group) == 1:
            inner = group[0]
        if inner is exc:
            raise
        raise inner from None


def leader_address(metadata: ClusterMetadata, partition_info: PartitionInfo) -> tuple[str, int]:
    """The host and port of a partition's leader.

    Args:
        metadata: The snapshot.
        partition_info: The partition.

    Returns:
        ``(host, port)``.

    Raises:
        LeaderNotAvailableError: The partition has no leader, or its leader
            is not among the brokers.
    """
    from kclient.errors import LeaderNotAvailableError

    broker = metadata.brokers.get(partition_info.leader)
    if broker is None:
        raise LeaderNotAvailableError(f"{partition_info.topic}-{partition_info.partition} has no leader")
    return broker.host, broker.port


def serve_in_foreground(
    name: str,
    start: Callable[[], object],
    ready_line: Callable[[], str],
    exited: Callable[[], str | None],
    cleanup: Callable[[], object],
    log: logging.Logger,
) -> int:
    """Run a development server started by ``start()`` until SIGINT or
    SIGTERM (``kclient zookeeper``, ``kclient cluster``).

    Ctrl-C stops it even when started in the background of a shell (which
    ignores SIGINT there).

    Args:
        name: What is served, for the log ("ZooKeeper", "the cluster").
        start: Starts it; raises `kclient.testing.BrokerProcessError`.
        ready_line: Gives the line printed on stdout once it serves.
        exited: Called every 0.2 s: None while serving, else the last log
            line of what exited on its own.
        cleanup: Stops it and removes its files.
        log: The command's logger.

    Returns:
        0 once stopped by a signal; 1 if it cannot start or exits on its own.
    """
    import signal
    import time

    from kclient.testing.process import BrokerProcessError

    def terminate(signum: int, frame: FrameType | None) -> NoReturn:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        try:
            start()
        except BrokerProcessError as exc:
            log.error("cannot start %s: %s", name, (str(exc).strip().splitlines() or [type(exc).__name__])[0])
            return 1
        sys.stdout.write(ready_line() + "\n")
        sys.stdout.flush()
        while (last := exited()) is None:
            time.sleep(0.2)
        log.error("%s", last)
        return 1
    except KeyboardInterrupt:
        log.info("stopping %s", name)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        cleanup()


class ProgressBar(Protocol):
    """What the tools use of a ``tqdm`` progress bar."""

    def update(self, n: int = 1) -> object:
        """Count ``n`` more items."""

    def close(self) -> None:
        """Remove the bar from the terminal."""


def progress_bar(desc: str, unit: str) -> ProgressBar | None:
    """A ``tqdm`` counter on stderr when stderr is a terminal, else None.

    Args:
        desc: The bar's label.
        unit: What it counts, with a leading space (``" records"``).

    Returns:
        The bar (left off the screen once closed), or None.
    """
    if not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm  # type: ignore[import-untyped]  # tqdm ships no type hints; ProgressBar types the bar
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    bar: ProgressBar = tqdm(desc=desc, unit=unit, file=sys.stderr, leave=False)
    return bar
