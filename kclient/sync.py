"""The blocking facade: one trio event loop in a background thread per client.

`LoopThread` starts ``trio.run`` in a thread, keeps a nursery open
there for the client's background tasks (connection readers, the async
producer's send loop), and runs coroutines on it from the caller's thread with
`LoopThread.call`. Calls cross threads once per call, so the blocking
API's hot paths are built to make one call per batch, not per record.

Shutdown is explicit (`LoopThread.close`, or leaving a ``with`` block):
no daemon-thread ``atexit`` or ``__del__`` tricks.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Awaitable, Callable, Iterator

import trio

from kclient.errors import LoopClosedError


class LoopThread:
    """A trio loop running in a background thread named ``name``.

    ``call(async_fn, *args)`` runs ``async_fn(*args)`` on the loop and returns
    its result (exceptions propagate to the caller). ``nursery`` is a nursery
    on that loop for long-lived tasks; it is cancelled by `close`.
    """

    def __init__(self, name: str = "kclient-trio") -> None:
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=False)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # surfaced through close()/call()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    @property
    def nursery(self) -> trio.Nursery:
        """The loop's nursery (use only from code running on the loop)."""
        assert self._nursery is not None
        return self._nursery

    @property
    def ident(self) -> int | None:
        """The loop thread's ``threading.get_ident()``."""
        return self._thread.ident

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def call(self, async_fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Run ``async_fn(*args)`` on the loop and block until it is done.

        Args:
            async_fn: The async function to run.
            *args: Its positional arguments.

        Returns:
            Its result (its exception is raised here).

        Raises:
            kclient.errors.LoopClosedError: The loop is closed.
        """
        if self._closed or self._token is None:
            raise LoopClosedError("the client's event loop is closed")
        try:
            return trio.from_thread.run(async_fn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise LoopClosedError("the client's event loop is closed") from None

    def call_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run the plain function ``fn(*args)`` on the loop thread. Raises
        `LoopClosedError` if the loop is closed."""
        if self._closed or self._token is None:
            raise LoopClosedError("the client's event loop is closed")
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    @contextlib.contextmanager
    def closing_on_error(self) -> Iterator["LoopThread"]:
        """Close the loop if the ``with`` block raises, then re-raise.

        For a client constructor that starts a LoopThread and then opens its
        trio core on it: if opening fails, no thread is left behind.

        Yields:
            This LoopThread.
        """
        try:
            yield self
        except BaseException:
            self.close()
            raise

    def close(self, timeout: float | None = 30.0) -> None:
        """Cancel the loop's background tasks and join the thread.

        Args:
            timeout: The most seconds to wait for the thread, ``None`` for no
                limit.

        Raises:
            Exception: The error that ended the loop thread, if any (re-raised
                here; cancellation is not an error).
        """
        if self._closed:
            return
        self._closed = True
        if self._stop is not None and self._token is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout)
        if self._error is not None and not isinstance(self._error, trio.Cancelled):
            raise self._error

    def __enter__(self) -> "LoopThread":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
