"""A thin ZooKeeper client on kazoo, and its bridge into trio.

`ZkClient` is blocking (kazoo's own threads do the I/O); every call
maps kazoo's errors onto `kclient.errors.ZooKeeperError` except the
ones the callers act on (a missing node is ``None`` / ``[]``, an existing
node is ``False`` from the ``create_*_if_absent`` calls).

`TrioZk` makes it usable from trio code without blocking the event
loop: each call runs in a worker thread (``trio.to_thread.run_sync``), and
watch callbacks, which kazoo runs on its event thread, are handed to the
trio loop with ``TrioToken.run_sync_soon`` (never blocking kazoo's thread).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, NotEmptyError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch

from kclient.errors import ZkTimeoutError, ZooKeeperError

log = logging.getLogger(__name__)


class _KazooLog(logging.LoggerAdapter):  # type: ignore[type-arg]  # generic only in typeshed, not at runtime before 3.11
    """kazoo's own log, under ``kclient.zk.kazoo``, with its WARNINGs made
    INFO: kazoo warns on every dropped connection and reconnect attempt,
    which it then handles itself. What matters to the user (a session
    LOST, a rebalance that failed) kclient logs at WARNING itself."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        super().log(logging.INFO if level == logging.WARNING else level, msg, *args, **kwargs)


_kazoo_log = _KazooLog(logging.getLogger("kclient.zk.kazoo"), {})

_T = TypeVar("_T")


def _zk_errors(fn: Callable[..., _T]) -> Callable[..., _T]:
    @functools.wraps(fn)
    def wrapper(self: ZkClient, *args: Any, **kwargs: Any) -> _T:
        try:
            return fn(self, *args, **kwargs)
        except (KazooException, KazooTimeoutError) as exc:
            if isinstance(exc, (NodeExistsError, NoNodeError)):
                raise
            raise ZooKeeperError(f"ZooKeeper {fn.__name__}{args[:1]!r} on {self.connect} failed: {type(exc).__name__} {exc}") from exc

    return wrapper


def _parents_of(paths: list[str]) -> list[str]:
    """The ancestors of the paths, each once, every parent before its
    children (``/a``, ``/a/b`` for ``/a/b/c``)."""
    parents: dict[str, None] = {}
    for path in paths:
        parts = path.strip("/").split("/")
        parents.update(dict.fromkeys("/" + "/".join(parts[:k]) for k in range(1, len(parts))))
    return list(parents)


class ZkClient:
    """A ZooKeeper session to ``connect`` (``"host:port,host:port/chroot"``,
    Kafka's ``zookeeper.connect``) with a session timeout of
    ``session_timeout_ms`` (ms). `start` waits at most
    ``connection_timeout_ms`` (ms) for a server to answer and raises
    `ZkTimeoutError` otherwise. Blocking calls; use
    `TrioZk` from trio code."""

    def __init__(self, connect: str, *, session_timeout_ms: int = 6000, connection_timeout_ms: int = 6000) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self._kazoo = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000.0, logger=_kazoo_log)
        self._started = False

    @property
    def kazoo(self) -> KazooClient:
        """The underlying `kazoo.client.KazooClient`."""
        return self._kazoo

    @property
    def connected(self) -> bool:
        connected: bool = self._kazoo.connected
        return connected

    def start(self) -> None:
        """Connect to ZooKeeper.

        Raises:
            kclient.errors.ZkTimeoutError: No server of ``connect`` answers
                within ``connection_timeout_ms``.
        """
        try:
            self._kazoo.start(timeout=self.connection_timeout_ms / 1000.0)
        except KazooTimeoutError:
            self._shutdown_kazoo()
            raise ZkTimeoutError(
                f"Unable to connect to ZooKeeper at {self.connect!r} within "
                f"zookeeper.connection.timeout.ms={self.connection_timeout_ms} ms"
            ) from None
        self._started = True
        log.debug("connected to ZooKeeper %s (session 0x%x)", self.connect, self._kazoo.client_id[0] if self._kazoo.client_id else 0)

    def close(self) -> None:
        """End the session (its ephemeral nodes disappear at once) and stop
        kazoo's threads. Idempotent."""
        if self._started:
            self._started = False
            self._shutdown_kazoo()

    def _shutdown_kazoo(self) -> None:
        try:
            self._kazoo.stop()
        finally:
            self._kazoo.close()

    def add_state_listener(self, listener: Callable[[KazooState], Any]) -> None:
        """Call ``listener(state)`` (on kazoo's connection thread; it must not
        block) when the session is SUSPENDED, CONNECTED again or LOST."""
        self._kazoo.add_listener(listener)

    # ------------------------------------------------------------ reads

    @_zk_errors
    def get(self, path: str) -> bytes | None:
        """The node's data, or None if it does not exist."""
        try:
            data: bytes | None = self._kazoo.get(path)[0]
        except NoNodeError:
            return None
        return data

    @_zk_errors
    def get_many(self, paths: list[str]) -> list[bytes | None]:
        """`get` of several nodes, their requests sent together (one round
        trip, not one per node).

        Args:
            paths: The nodes' paths.

        Returns:
            Each node's data, or None where it does not exist, in order.
        """
        pending = [self._kazoo.get_async(path) for path in paths]
        out: list[bytes | None] = []
        for result in pending:
            try:
                out.append(result.get()[0])
            except NoNodeError:
                out.append(None)
        return out

    @_zk_errors
    def get_children(self, path: str) -> list[str]:
        """The node's children (unsorted), ``[]`` if it does not exist."""
        try:
            children: list[str] = self._kazoo.get_children(path)
            return children
        except NoNodeError:
            return []

    @_zk_errors
    def exists(self, path: str) -> bool:
        return self._kazoo.exists(path) is not None

    @_zk_errors
    def created_ms(self, path: str) -> int | None:
        """When the node was created (its stat's ``ctime``, ms since the
        epoch on the ZooKeeper server's clock), or None if it does not exist."""
        stat = self._kazoo.exists(path)
        return int(stat.ctime) if stat is not None else None

    # ------------------------------------------------------------ writes

    @_zk_errors
    def create_ephemeral_if_absent(self, path: str, data: bytes) -> bool:
        """Create an ephemeral node; missing parents are created persistent.

        Args:
            path: The node's path.
            data: Its content.

        Returns:
            ``False`` if the node exists already, else ``True``.
        """
        try:
            self._kazoo.create(path, data, ephemeral=True)
            return True
        except NodeExistsError:
            return False
        except NoNodeError:
            pass
        # Missing parents: their creates and the node's go out together
        # (ZooKeeper applies a session's requests in order), one round trip
        # instead of kazoo's makepath, which checks each level with an
        # exists and then creates them one after another (a consumer of a
        # new group met this on registering and on claiming partitions).
        parts = path.strip("/").split("/")
        parents = ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
        pending = [self._kazoo.create_async(parent, b"") for parent in parents]
        node = self._kazoo.create_async(path, data, ephemeral=True)
        for result in pending:
            try:
                result.get()
            except (NodeExistsError, NoNodeError):
                pass  # there already; or no chroot node (below)
        try:
            node.get()
            return True
        except NodeExistsError:
            return False
        except NoNodeError:
            pass
        try:  # kazoo's makepath also creates a missing chroot node
            self._kazoo.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            return False
        return True

    @_zk_errors
    def create_ephemeral_many(self, nodes: list[tuple[str, bytes]], *, parents: bool = False) -> list[bool]:
        """`create_ephemeral_if_absent` of several nodes, their requests sent
        together (ZooKeeper applies a session's requests in order and
        commits them as a group): one round trip for all of them, instead of
        one or two per node.

        Args:
            nodes: ``(path, data)`` pairs.
            parents: Send the creates of their parents (persistent, empty)
                first, in the same round trip, for nodes whose parents may
                well be missing (a new group's first consumer); else a
                missing parent costs a second round trip.

        Returns:
            For each node, in order: ``False`` if it existed already, else
            ``True``.
        """
        kazoo = self._kazoo
        made = [kazoo.create_async(parent, b"") for parent in _parents_of([path for path, _ in nodes])] if parents else []
        pending = [kazoo.create_async(path, data, ephemeral=True) for path, data in nodes]
        for result in made:
            try:
                result.get()
            except (NodeExistsError, NoNodeError):
                pass  # there already; or no chroot node (below)
        out: list[bool | None] = []
        for result in pending:
            try:
                result.get()
                out.append(True)
            except NodeExistsError:
                out.append(False)
            except NoNodeError:
                out.append(None)  # a parent is missing
        missing = [i for i, created in enumerate(out) if created is None]
        if missing:
            made = [kazoo.create_async(parent, b"") for parent in _parents_of([nodes[i][0] for i in missing])]
            again = [(i, kazoo.create_async(nodes[i][0], nodes[i][1], ephemeral=True)) for i in missing]
            for result in made:
                try:
                    result.get()
                except (NodeExistsError, NoNodeError):
                    pass  # there already; or no chroot node (below)
            for i, result in again:
                try:
                    result.get()
                    out[i] = True
                except NodeExistsError:
                    out[i] = False
                except NoNodeError:  # a missing chroot node: one at a time
                    out[i] = self.create_ephemeral_if_absent(*nodes[i])
        return [bool(created) for created in out]

    @_zk_errors
    def owners_and_data(self, paths: list[str]) -> list[tuple[bytes, int] | None]:
        """The data and owning session of several nodes, their requests sent
        together (one round trip).

        Args:
            paths: The nodes' paths.

        Returns:
            For each path, in order: ``(data, ephemeral owner session id; 0
            for a persistent node)``, or None where it does not exist.
        """
        pending = [self._kazoo.get_async(path) for path in paths]
        out: list[tuple[bytes, int] | None] = []
        for result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                out.append(None)
                continue
            out.append((data, stat.ephemeralOwner))
        return out

    @_zk_errors
    def get_children_many(self, paths: list[str]) -> list[list[str]]:
        """`get_children` of several nodes, their requests sent together
        (one round trip).

        Args:
            paths: The nodes' paths.

        Returns:
            Each node's children (unsorted), ``[]`` where it does not exist.
        """
        pending = [self._kazoo.get_children_async(path) for path in paths]
        out: list[list[str]] = []
        for result in pending:
            try:
                out.append(result.get())
            except NoNodeError:
                out.append([])
        return out

    @_zk_errors
    def create_persistent_if_absent(self, path: str, data: bytes = b"") -> bool:
        """Create a persistent node (and its parents); False if it exists."""
        try:
            self._kazoo.create(path, data, makepath=True)
        except NodeExistsError:
            return False
        return True

    @_zk_errors
    def write_persistent(self, path: str, data: bytes) -> None:
        """Create the persistent node with ``data`` or overwrite its data."""
        try:
            self._kazoo.set(path, data)
        except NoNodeError:
            try:
                self._kazoo.create(path, data, makepath=True)
            except NodeExistsError:
                self._kazoo.set(path, data)

    @_zk_errors
    def write_ephemeral(self, path: str, data: bytes) -> None:
        """Make ``path`` an ephemeral node of this session holding ``data``.

        Created if absent, its data replaced if this session owns it, and
        replaced (deleted and created) if another session or a persistent node
        holds it.

        Args:
            path: The node's path.
            data: Its content.
        """
        try:
            self._kazoo.create(path, data, ephemeral=True, makepath=True)
            return
        except NodeExistsError:
            pass
        stat = self._kazoo.exists(path)
        if stat is not None and stat.ephemeralOwner == self._kazoo.client_id[0]:
            self._kazoo.set(path, data)
            return
        try:
            self._kazoo.delete(path)
        except NoNodeError:
            pass
        self._kazoo.create(path, data, ephemeral=True, makepath=True)

    @_zk_errors
    def get_versioned(self, path: str) -> tuple[bytes, int] | None:
        """The node's data and ZooKeeper data version, or None if absent."""
        try:
            data, stat = self._kazoo.get(path)
        except NoNodeError:
            return None
        return data, stat.version

    @_zk_errors
    def set_versioned(self, path: str, data: bytes, version: int) -> int | None:
        """Replace the node's data only if its version is still ``version``
        (a conditional write).

        Returns:
            The new version; ``None`` if the version moved or the node is gone.
        """
        try:
            stat = self._kazoo.set(path, data, version=version)
        except (BadVersionError, NoNodeError):
            return None
        new_version: int = stat.version
        return new_version

    @_zk_errors
    def create_versioned(self, path: str, data: bytes) -> int | None:
        """Create a persistent node (and parents); its version (0), or
        ``None`` if it exists already."""
        try:
            self._kazoo.create(path, data, makepath=True)
        except NodeExistsError:
            return None
        return 0

    @_zk_errors
    def create_ephemeral_and_increment(self, path: str, data: bytes, counter_path: str) -> int | None:
        """Create an ephemeral node and increment a counter node in one
        ZooKeeper transaction (multi-op): both happen or neither does.

        The counter (a persistent node holding a decimal integer) is created
        with ``0`` if absent; its increment is conditional on the version
        read, so two sessions racing cannot both succeed or count twice.
        A controller uses it so that ``/controller`` never names a broker
        before ``/controller_epoch`` holds that broker's epoch (Kafka does
        the same since 2.2).

        Args:
            path: The ephemeral node's path (its parent must exist).
            data: Its content.
            counter_path: The counter node's path.

        Returns:
            The counter's new value; ``None`` if ``path`` exists already
            (nothing was changed).

        Raises:
            ZooKeeperError: The transaction failed for another reason.
        """
        while True:
            found = self.get_versioned(counter_path)
            if found is None:
                self.create_versioned(counter_path, b"0")  # None if created meanwhile: read it
                continue
            counter = int(found[0] or b"0") + 1
            transaction = self._kazoo.transaction()
            transaction.create(path, data, ephemeral=True)
            transaction.set_data(counter_path, str(counter).encode(), version=found[1])
            created, incremented = transaction.commit()
            if isinstance(created, NodeExistsError):
                return None
            if isinstance(incremented, (BadVersionError, NoNodeError)):
                continue  # the counter moved (or went) between the read and the commit
            for result in (created, incremented):
                if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                    raise result
            return counter

    @_zk_errors
    def create_sequential(self, path_prefix: str, data: bytes) -> str:
        """Create a persistent sequential node ``<path_prefix><10 digits>``
        (parents created); returns its path."""
        created: str = self._kazoo.create(path_prefix, data, sequence=True, makepath=True)
        return created

    @_zk_errors
    def ensure_path(self, path: str) -> None:
        """Create the persistent node and its parents if missing."""
        self._kazoo.ensure_path(path)

    @_zk_errors
    def delete(self, path: str, *, recursive: bool = False) -> bool:
        """Delete the node.

        Args:
            path: The node's path.
            recursive: Delete its children too.

        Returns:
            ``False`` if it did not exist, else ``True``.
        """
        try:
            self._kazoo.delete(path, recursive=recursive)
        except NoNodeError:
            return False
        except NotEmptyError:
            raise
        return True

    @_zk_errors
    def owner_session(self, path: str) -> int | None:
        """The session id owning the ephemeral node ``path``.

        Args:
            path: The node's path.

        Returns:
            The session id; 0 for a persistent node; ``None`` if the node does
                not exist.
        """
        stat = self._kazoo.exists(path)
        return None if stat is None else stat.ephemeralOwner

    @property
    def session_id(self) -> int | None:
        cid = self._kazoo.client_id
        return None if cid is None else cid[0]

    def transaction(self) -> Any:
        """A kazoo transaction (``create``/``set_data``/``delete``, then
        ``commit()``), applied atomically."""
        return self._kazoo.transaction()

    def watch_children(self, path: str, callback: Callable[[list[str]], Any]) -> ChildrenWatch:
        """Call ``callback(children)`` now and after every change of ``path``'s children.

        The callback runs on kazoo's event thread, until the client is closed
        (kazoo's ChildrenWatch re-arms the watch and survives reconnects).
        ``path`` is created first if missing.

        Args:
            path: The parent node.
            callback: Receives the child names (unsorted).

        Returns:
            kazoo's watch object.
        """
        self.ensure_path(path)

        def on_change(children: list[str]) -> None:
            callback(children)

        return ChildrenWatch(self._kazoo, path, on_change)


class TrioZk:
    """`ZkClient` for trio code: ``await zk.call(ZkClient.get, path)``
    style calls in worker threads, and watches delivered on the trio loop.

    Build it inside the trio loop that will use it (it captures that
    loop's `trio.lowlevel.TrioToken`).
    """

    def __init__(self, client: ZkClient) -> None:
        self.client = client
        self._token = trio.lowlevel.current_trio_token()

    async def run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in a worker thread (``fn`` is usually a bound
        `ZkClient` method)."""
        return await trio.to_thread.run_sync(fn, *args)

    def deliver(self, fn: Callable[..., Any], *args: Any) -> None:
        """From any thread: run the plain function ``fn(*args)`` on the trio
        loop soon (never blocks; dropped if the loop has finished)."""
        try:
            self._token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            pass

    async def watch_children(self, path: str, on_change: Callable[[list[str]], Any]) -> ChildrenWatch:
        """Watch ``path``'s children from trio.

        Args:
            path: The parent node (created first if missing).
            on_change: Called with the child names on the trio loop, now and
                after each change; a plain function (set an event,
                ``send_nowait`` ...).

        Returns:
            kazoo's watch object.
        """
        return await self.run(self.client.watch_children, path, lambda children: self.deliver(on_change, children))


__all__ = ["TrioZk", "ZkClient"]
