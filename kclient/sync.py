"""The blocking facade: one trio event loop in a background thread per client,
and what happens to clients that are still open when the interpreter exits.

`LoopThread` starts ``trio.run`` in a thread, keeps a nursery open
there for the client's background tasks (connection readers, the async
producer's send loop), and runs coroutines on it from the caller's thread with
`LoopThread.call`. Calls cross threads once per call, so the blocking
API's hot paths are built to make one call per batch, not per record.

How a call crosses (the round trip of a sync ``Producer.send``): the caller
appends the call to the loop's queue and writes to the loop's wake-up file
descriptor; a worker task of the loop, waiting on that descriptor, takes the
call and runs it at once (in a copy of the caller's contextvars context, as
``trio.from_thread.run`` does), after handing the waiting role to an idle
worker so that concurrent calls still run concurrently; the caller sleeps on
a `_Waiter`, a file descriptor the worker writes to when the call is done.
Compared with ``trio.from_thread.run`` (``TrioToken.run_sync_soon``, a new
system task per call, a ``queue.SimpleQueue``) this spares each call a task
spawn and a pass of the scheduler on the way in, and on the way out it wakes
the caller with the GIL already released: writing to a file descriptor
releases the GIL *before* the wake-up, so the woken caller runs at once,
whereas a ``threading`` lock or queue wakes it while the loop thread still
holds the GIL (the caller then blocks on the GIL, the loop thread is switched
back in, and the caller runs only once the loop thread next blocks: three
wake-ups instead of one when both threads share a core). Waiters are pooled
per LoopThread, so a call allocates no file descriptor.

Shutdown is explicit (`LoopThread.close`, or leaving a ``with`` block), with
two safety nets for an application that forgets it:

- **Exit.** Loop threads are *daemon* threads, so none of them keeps the
  interpreter alive. Each blocking client registers a small *closer* (an
  `ExitCloser`: the client's loop, queue and connections, never the client
  object itself) with `track` while it is open. One hook, registered with
  ``threading._register_atexit``, closes every closer still registered when
  the interpreter exits, newest first: an async Producer flushes for at most
  ``close.timeout.ms`` and logs at ERROR what it could not deliver, a
  ConsumerConnector commits and leaves its group, the others just close.

  Why ``threading._register_atexit`` and not ``atexit``: at exit the
  interpreter first calls ``threading._shutdown``, which runs the
  ``_register_atexit`` hooks and *then* joins every non-daemon thread; only
  after that do ``atexit`` handlers run. An ``atexit`` flush would therefore
  never run while an application's own non-daemon thread is blocked on the
  client (in ``send`` on a full queue, iterating a stream): the interpreter
  would wait for that thread forever. Run first, the hook closes the client,
  which releases such threads (they get `ProducerClosedError` or their stream
  ends), and the interpreter is still whole (new threads can start, as trio's
  worker threads and ZooKeeper's need). Daemon threads are still needed: a
  hook that gives up after its timeout must not leave a thread that keeps
  the process alive. Where ``threading._register_atexit`` is missing (not
  CPython >= 3.9) ``atexit`` is used instead.

  Ctrl-C (KeyboardInterrupt) during that exit flush abandons what is left:
  the closer logs at ERROR how many records were abandoned, the remaining
  clients are closed without waiting, and the process then ends as an
  interrupted Python program does (killed by SIGINT: status 130 in a shell,
  -2 from ``subprocess``) instead of with status 0, right after the
  ``atexit`` handlers registered after kclient was imported (logging's
  handlers are flushed first).

- **Garbage collection.** A client collected while still open emits
  ``ResourceWarning: unclosed <...>`` (as sockets and files do) and its
  closer is closed in a background thread (bounded as at exit). The loop
  thread holds no reference to the client object, so an unreferenced client
  is collected.

**Fork.** A client's loop thread and connections belong to the process
that created it: after ``os.fork()`` (``multiprocessing``'s fork start
method, a pre-forking server) the child has none of its threads. A hook
registered with ``os.register_at_fork`` counts forks (`fork_generation`)
and, in the child, forgets the parent's open clients: the child's exit
hook does not try to close them (it would wait forever for threads that
do not exist), ``close()`` returns at once without touching the parent's
loop, queue or sockets, and any other call (`LoopThread.call`, an async
``send``) raises `kclient.errors.ClientForkedError` at once: create
clients after the fork (issue 30).
"""

from __future__ import annotations

import abc
import atexit
import collections
import collections.abc
import contextlib
import contextvars
import logging
import os
import signal
import socket
import sys
import threading
import types
from collections.abc import Awaitable, Callable, Generator, Iterator
from typing import Any, TypeVar

import trio

from kclient.errors import ClientForkedError, LoopClosedError

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- the hand-off


_EVENTFD = hasattr(os, "eventfd")


class _Waiter:
    """What a thread blocked in `LoopThread.call` sleeps on until the loop
    thread fires it (`fire`): an eventfd (Linux) or a pipe. One call at a time uses
    a waiter, and each call fires it exactly once, so `wait` returns exactly
    once per call. Its file descriptors are closed when it is garbage
    collected (never while the loop thread may still fire it)."""

    __slots__ = ("_r", "_w")

    def __init__(self) -> None:
        self._r = self._w = -1
        if _EVENTFD:
            self._r = self._w = os.eventfd(0, os.EFD_CLOEXEC)
        else:
            self._r, self._w = os.pipe()

    def wait(self) -> None:
        """Block until fired (interruptible: Ctrl-C raises KeyboardInterrupt).

        A signal whose Python handler returns (does not raise) does not end
        the wait: it goes on, as PEP 475 has system calls do. (``os.read``
        retries by itself; ``os.eventfd_read`` raises InterruptedError
        instead, which a tool that takes SIGINT as a request to stop got
        from any blocking call.)
        """
        while True:
            try:
                if self._r == self._w:  # an eventfd
                    os.eventfd_read(self._r)
                else:
                    os.read(self._r, 1)
                return
            except InterruptedError:
                continue

    def fire(self) -> None:
        """Wake the waiting thread (or the next `wait`). Releases the GIL
        before the write wakes it."""
        if self._r == self._w:
            os.eventfd_write(self._w, 1)
        else:
            os.write(self._w, b"\0")

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        for fd in {self._r, self._w}:
            if fd >= 0:
                try:
                    _close(fd)
                except OSError:
                    pass


class _Wakeup:
    """The loop's wake-up file descriptor: any thread calls `wake`, the
    loop's leading worker waits until it is readable and calls `drain`. A
    non-blocking eventfd (Linux), else a socket pair (what trio's own
    wake-up uses: the only kind every trio backend can wait on). Closed when
    garbage collected (never while a thread may still write to it)."""

    __slots__ = ("_fd", "_r", "_w")

    def __init__(self) -> None:
        self._fd = -1
        self._r = self._w = None
        if _EVENTFD:
            self._fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        else:
            self._r, self._w = socket.socketpair()
            self._r.setblocking(False)
            self._w.setblocking(False)

    def fileno(self) -> int:
        return self._fd if self._r is None else self._r.fileno()

    def wake(self) -> None:
        """Make the descriptor readable (releases the GIL first)."""
        try:
            if self._w is None:
                os.eventfd_write(self._fd, 1)
            else:
                self._w.send(b"\0")
        except BlockingIOError:  # a full socket buffer is readable already
            pass

    def drain(self) -> None:
        try:
            if self._r is None:
                os.eventfd_read(self._fd)
            else:
                while self._r.recv(4096):
                    pass
        except BlockingIOError:
            pass

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        if self._fd >= 0:
            try:
                _close(self._fd)
            except OSError:
                pass


class _Call:
    """One `LoopThread.call` in flight: the function, its arguments and a
    copy of the caller's contextvars context, then its result or exception."""

    __slots__ = ("args", "context", "error", "fn", "result", "waiter")

    def __init__(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...], waiter: _Waiter) -> None:
        self.fn = fn
        self.args = args
        self.context = contextvars.copy_context()
        self.waiter = waiter
        self.result: Any = None
        self.error: BaseException | None = None


@types.coroutine
def _in_context(coro: Any, context: contextvars.Context) -> Generator[Any, Any, Any]:
    """Await ``coro`` with each of its steps run in ``context``: how a trio
    task runs its coroutine, for a call run inside a worker task (trio's
    scheduler sends the outcome of each trap back through here)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            if error is None:
                trap = context.run(coro.send, value)
            else:
                trap = context.run(coro.throw, error)
        except StopIteration as stop:
            return stop.value
        try:
            value = yield trap
            error = None
        except BaseException as exc:
            value, error = None, exc


class _Dispatcher:
    """Runs the calls of `LoopThread.call` on the loop (see the module
    docstring).

    Worker tasks (system tasks, so cancelled only when the run ends, as
    ``trio.from_thread.run``'s calls are) take turns: one, the leader, waits
    for the wake-up descriptor; when a call arrives it takes it, makes an
    idle worker (or a new one) the leader, and runs the call itself; done,
    it becomes the leader again or goes idle. So a call starts in the
    scheduler pass that notices it, and as many calls run at once as callers
    are waiting.
    """

    def __init__(self) -> None:
        self.calls: collections.deque[_Call] = collections.deque()
        self.wakeup = _Wakeup()
        #: Set once the run ended: no call is taken any more.
        self.finished = False
        self._idle: list[Any] = []  # parked worker tasks
        self._leading = False

    def submit(self, call: _Call) -> bool:
        """Queue ``call`` (any thread). False if the run has ended and the
        call was not taken."""
        self.calls.append(call)
        self.wakeup.wake()
        if self.finished:
            # finish() may have emptied the queue before the append: take the
            # call back unless it did take it (and then fired its waiter).
            try:
                self.calls.remove(call)
            except ValueError:
                return True
            return False
        return True

    def start(self) -> None:
        """Start the first worker (on the loop)."""
        trio.lowlevel.spawn_system_task(self._worker)

    def finish(self) -> None:
        """After the run ended (on the loop thread): fail what is queued."""
        self.finished = True
        while True:
            try:
                call = self.calls.popleft()
            except IndexError:
                return
            call.error = trio.RunFinishedError("the run has finished")
            call.waiter.fire()

    async def _worker(self) -> None:
        calls = self.calls
        while True:
            if self._leading:
                await self._park()
                continue
            self._leading = True
            while not calls:
                await trio.lowlevel.wait_readable(self.wakeup)
                self.wakeup.drain()
            call = calls.popleft()
            self._leading = False
            if self._idle:
                trio.lowlevel.reschedule(self._idle.pop())
            else:
                try:
                    trio.lowlevel.spawn_system_task(self._worker)
                except RuntimeError:  # the run is ending; finish() fails the rest
                    pass
            try:
                coro = call.fn(*call.args)
                if type(coro) is not types.CoroutineType and not isinstance(coro, collections.abc.Coroutine):
                    raise TypeError(f"LoopThread.call expects an async function, {call.fn!r} returned {type(coro).__name__}")
                call.result = await _in_context(coro, call.context)
            except BaseException as exc:
                call.error = exc
            call.waiter.fire()
            call = coro = None  # type: ignore[assignment]  # hold nothing while idle

    async def _park(self) -> None:
        task = trio.lowlevel.current_task()
        idle = self._idle
        idle.append(task)

        def abort(_: Any) -> trio.lowlevel.Abort:
            idle.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)


#: True when called inside a trio task (where a blocking call would stall
#: that task's loop; on the LoopThread's own loop it would deadlock).
_in_trio_task: Callable[[], bool] = getattr(trio.lowlevel, "in_trio_task", None) or (lambda: _current_task_or_none() is not None)


def _current_task_or_none() -> Any:
    try:
        return trio.lowlevel.current_task()
    except RuntimeError:
        return None


class LoopThread:
    """A trio loop running in a background thread named ``name``.

    ``call(async_fn, *args)`` runs ``async_fn(*args)`` on the loop and returns
    its result (exceptions propagate to the caller). ``nursery`` is a nursery
    on that loop for long-lived tasks; it is cancelled by `close`.

    The thread is a daemon thread: it never keeps the interpreter alive (the
    exit hook of this module closes the clients still open, see the module
    docstring).
    """

    def __init__(self, name: str = "kclient-trio") -> None:
        self._generation = _fork_generation
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None
        self._closed = False
        # Idle `_Waiter`s for `call` (list.pop/append are atomic).
        self._waiters: list[_Waiter] = []
        self._dispatcher = _Dispatcher()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
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
        finally:
            self._dispatcher.finish()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        self._dispatcher.start()
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

        As ``trio.from_thread.run(async_fn, *args, trio_token=...)``: it runs
        in a system task of the loop, in a copy of the caller's contextvars
        context; if the loop ends meanwhile it is cancelled (the caller gets
        `trio.Cancelled`). The hand-off is cheaper (see the module
        docstring). Ctrl-C in the caller raises KeyboardInterrupt there; the
        call goes on running on the loop.

        Args:
            async_fn: The async function to run.
            *args: Its positional arguments.

        Returns:
            Its result (its exception is raised here).

        Raises:
            kclient.errors.LoopClosedError: The loop is closed.
            kclient.errors.ClientForkedError: Called in a process forked
                after the loop started (the loop runs in the parent).
            RuntimeError: Called from a trio task (on the loop itself it
                would deadlock).
        """
        if self._generation != _fork_generation:
            raise forked_error(self._thread.name)
        if self._closed or self._token is None:
            raise LoopClosedError("the client's event loop is closed")
        if _in_trio_task():
            raise RuntimeError("this is a blocking function; call it from a thread")
        waiters = self._waiters
        try:
            waiter = waiters.pop()
        except IndexError:
            waiter = _Waiter()
        call = _Call(async_fn, args, waiter)
        if not self._dispatcher.submit(call):
            waiters.append(waiter)
            raise LoopClosedError("the client's event loop is closed")
        # Interrupted (Ctrl-C), the waiter is dropped: the loop fires it
        # later, and it is closed once neither side holds it.
        waiter.wait()
        if not self._closed:
            waiters.append(waiter)
        error = call.error
        if error is not None:
            call.error = None  # no reference cycle through the traceback
            if isinstance(error, trio.RunFinishedError):
                raise LoopClosedError("the client's event loop is closed") from None
            raise error
        return call.result

    def call_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run the plain function ``fn(*args)`` on the loop thread. Raises
        `LoopClosedError` if the loop is closed, `ClientForkedError` in a
        forked child."""
        if self._generation != _fork_generation:
            raise forked_error(self._thread.name)
        if self._closed or self._token is None:
            raise LoopClosedError("the client's event loop is closed")
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def run_bounded(self, async_fn: Callable[..., Awaitable[Any]], *args: Any, timeout: float | None) -> bool:
        """Run ``async_fn(*args)`` on the loop and wait at most ``timeout``
        seconds for it; it keeps running if the wait ends first. Its
        exceptions are logged, not raised.

        Args:
            async_fn: The async function to run.
            *args: Its positional arguments.
            timeout: The longest to wait (seconds), None for no limit.

        Returns:
            True if it finished (or the loop is gone, or runs in the
                parent of this forked process), False on timeout.
        """
        if self._generation != _fork_generation:
            return True
        if self._closed or self._token is None or self._nursery is None:
            return True
        done = threading.Event()

        async def run() -> None:
            try:
                await async_fn(*args)
            except Exception:
                log.exception("%s failed", getattr(async_fn, "__qualname__", async_fn))
            finally:
                done.set()

        nursery = self._nursery

        def start() -> None:  # on the loop: never raise into trio's scheduler
            try:
                nursery.start_soon(run)
            except RuntimeError:  # the nursery is closing
                done.set()

        try:
            self._token.run_sync_soon(start)
        except trio.RunFinishedError:
            return True
        return done.wait(timeout)

    @contextlib.contextmanager
    def closing_on_error(self) -> Iterator[LoopThread]:
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
        self._waiters.clear()  # their file descriptors close when collected
        if self._generation != _fork_generation:
            return  # a forked child: the loop thread is the parent's
        if self._stop is not None and self._token is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout)
        if self._error is not None and not isinstance(self._error, trio.Cancelled):
            raise self._error

    def __enter__(self) -> LoopThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- exit and garbage collection


class ExitCloser(abc.ABC):
    """What it takes to close one blocking client, without the client object.

    A client creates one in its constructor, calls `track` on it, and
    delegates its ``close`` to it. Holding the loop, queue and connections
    but not the client, it can close them after the client was garbage
    collected, and the module's exit hook can hold it without keeping the
    client alive. Subclasses implement `_close` (the client's ordinary close,
    may raise) and may override `close_at_exit` / `abort`.

    Args:
        description: ``repr`` of the client, for log messages.
        exit_timeout: The longest `close_at_exit` waits (seconds).
    """

    def __init__(self, description: str, exit_timeout: float) -> None:
        self._generation = _fork_generation
        self.description = description
        self.exit_timeout = exit_timeout
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once a close started."""
        return self._closed

    @property
    def forked(self) -> bool:
        """True in a process forked after the client was created: its loop,
        queue and connections are the parent's, and it cannot be used."""
        return self._generation != _fork_generation

    def check_not_forked(self) -> None:
        """Raise `kclient.errors.ClientForkedError` in a forked child.

        Raises:
            kclient.errors.ClientForkedError: The process was forked after
                the client was created.
        """
        if self._generation != _fork_generation:
            raise forked_error(self.description)

    def after_fork_in_child(self) -> None:
        """Called in a forked child for a client open at the fork (in the
        only thread there is): make the client's own blocking calls fail at
        once instead of waiting for the parent's threads. Nothing by
        default (calls through `LoopThread` fail already); the async
        producer closes its copy of the queue."""
        return None

    def _begin(self) -> bool:
        # True for the one caller that gets to close. In a forked child
        # nobody does: the resources are the parent's (its lock, too, may
        # have been held by a thread the child does not have).
        if self._generation != _fork_generation:
            self._closed = True
            return False
        with self._lock:
            if self._closed:
                return False
            self._closed = True
        return True

    def close(self) -> None:
        """Close (the client's ``close``): once, later calls return at once.
        Untracks the closer even when closing raises."""
        if not self._begin():
            return
        try:
            self._close()
        except KeyboardInterrupt:
            self._abort("close() interrupted by KeyboardInterrupt")
            raise
        finally:
            untrack(self)

    @abc.abstractmethod
    def _close(self) -> None:
        """Close the client (the subclass knows how)."""

    def close_at_exit(self) -> None:
        """Close within `exit_timeout` seconds, logging (not raising)
        failures. KeyboardInterrupt propagates after `abort` ran.
        Called by the exit hook and for a garbage-collected client."""
        if not self._begin():
            return
        try:
            done = run_with_timeout(self._close, self.exit_timeout, f"close {self.description}")
            if not done:
                log.error("%s did not close within %.1f s at exit; abandoned", self.description, self.exit_timeout)
        except KeyboardInterrupt:
            self._abort("interrupted by KeyboardInterrupt")
            raise
        finally:
            untrack(self)

    def abort(self, why: str = "interrupted by KeyboardInterrupt") -> int:
        """Stop at once if still open, abandoning pending work, and log at
        ERROR what was abandoned.

        Returns:
            How many records were abandoned.
        """
        if not self._begin():
            return 0
        try:
            return self._abort(why)
        finally:
            untrack(self)

    def _abort(self, why: str) -> int:
        # Called once the close began; subclasses with pending records count them.
        log.error("%s closed without waiting: %s", self.description, why)
        return 0


def run_with_timeout(fn: Callable[[], Any], timeout: float | None, what: str) -> bool:
    """Run ``fn()`` in a daemon thread and wait at most ``timeout`` seconds
    (interruptible by Ctrl-C). Its exception is logged at ERROR.

    Returns:
        True if it finished in time.
    """
    done = threading.Event()

    def run() -> None:
        try:
            fn()
        except Exception as exc:
            log.error("%s failed: %s", what, exc, exc_info=exc)
        finally:
            done.set()

    threading.Thread(target=run, name="kclient-closer", daemon=True).start()
    return done.wait(timeout)


_registry: dict[int, ExitCloser] = {}
_registry_lock = threading.Lock()
_hook_installed = False
_interrupted = False
_fork_generation = 0


def fork_generation() -> int:
    """How many times this process's ancestors forked since kclient was
    imported (0 in the process that imported it; each ``os.fork`` child
    counts one more). A client remembers it at creation."""
    return _fork_generation


def forked_error(what: str) -> ClientForkedError:
    """The error of a client used in a forked child.

    Args:
        what: The client (its ``repr``) or its loop thread's name.

    Returns:
        The error to raise.
    """
    return ClientForkedError(
        f"{what} was created before this process (pid {os.getpid()}) was forked and cannot be used in the child: "
        "its event loop thread and connections belong to the parent. Create kclient clients after fork, "
        "in the process that uses them (for multiprocessing: in the worker, or use the spawn start method)"
    )


def _after_fork_in_child() -> None:
    """``os.register_at_fork(after_in_child=...)``: a new fork generation
    (the parent's clients fail at once here) and an empty registry, so
    that the child's exit hook closes none of the parent's clients. The
    lock is new: a parent thread may have held it at the fork."""
    global _fork_generation, _registry_lock
    _fork_generation += 1
    _registry_lock = threading.Lock()
    for closer in _registry.values():
        closer._closed = True  # nothing to close here; close() returns at once
        try:
            closer.after_fork_in_child()
        except Exception:  # never fail the fork
            pass
    _registry.clear()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)


def track(closer: ExitCloser) -> None:
    """Register an open client's closer for the exit hook (installing the
    hook on first use)."""
    global _hook_installed
    with _registry_lock:
        _registry[id(closer)] = closer
        if _hook_installed:
            return
        _hook_installed = True
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is None:
            raise RuntimeError("threading._register_atexit is missing")
        register(_close_open_clients)
    except RuntimeError:  # missing, or the interpreter is already shutting down
        atexit.register(_close_open_clients)


def untrack(closer: ExitCloser) -> None:
    """Forget a closed client's closer."""
    with _registry_lock:
        _registry.pop(id(closer), None)


def open_closers() -> list[ExitCloser]:
    """The closers of the clients open now, oldest first."""
    with _registry_lock:
        return list(_registry.values())


def close_unclosed(closer: ExitCloser, obj: object) -> None:
    """For a client's ``__del__``: if it is still open, warn
    ``ResourceWarning: unclosed <client>`` and close it in a background
    thread (bounded as at exit)."""
    if closer.closed or closer.forked:
        return
    import warnings

    warnings.warn(f"unclosed {obj!r}", ResourceWarning, source=obj, stacklevel=1)
    if sys.is_finalizing():
        return
    try:
        threading.Thread(target=_close_quietly, args=(closer,), name="kclient-close-unclosed", daemon=True).start()
    except RuntimeError:  # no new threads at interpreter shutdown
        pass


def _close_quietly(closer: ExitCloser) -> None:
    try:
        closer.close_at_exit()
    except BaseException:
        log.exception("closing %s failed", closer.description)


def _close_open_clients() -> None:
    """The exit hook: close every client still open, newest first. Never
    raises (an exception here would stop ``threading._shutdown`` from joining
    the application's threads)."""
    global _interrupted
    for closer in reversed(open_closers()):
        try:
            if _interrupted:
                closer.abort()
            else:
                closer.close_at_exit()
        except KeyboardInterrupt:
            _interrupted = True
        except BaseException:
            try:
                log.exception("closing %s at exit failed", closer.description)
            except BaseException:
                pass


def _exit_interrupted() -> None:
    """An ``atexit`` handler registered when this module is imported, so it
    runs after the ones registered later (the application's): if Ctrl-C
    interrupted the exit hook, end the process as Python ends one
    interrupted by Ctrl-C (killed by SIGINT), after flushing the logging
    handlers and standard streams. Otherwise the exit status would be 0."""
    if not _interrupted:
        return
    for handler in list(logging.getLogger().handlers) + [h for lg in list(logging.Logger.manager.loggerDict.values()) for h in getattr(lg, "handlers", [])]:
        try:
            handler.flush()
        except Exception:
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    finally:
        os._exit(128 + signal.SIGINT)


atexit.register(_exit_interrupted)


_Client = TypeVar("_Client", bound="ClosingClient")


class ClosingClient(abc.ABC):
    """What the blocking clients share about their lifetime: ``closed``,
    use as a context manager (``close`` on exit), and the ``__del__`` that
    warns ``ResourceWarning`` for a client collected while open and closes
    it through its `ExitCloser` (stored as ``_closer``). A subclass defines
    ``close``."""

    _closer: ExitCloser

    @property
    def closed(self) -> bool:
        """True once the client was closed (by you or the exit hook)."""
        return self._closer.closed

    def _state(self) -> str:
        # For __repr__; safe on a half-constructed client.
        closer = getattr(self, "_closer", None)
        return "closed" if closer is None or closer.closed else "open"

    def __enter__(self: _Client) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def close(self) -> None:
        """Close the client (each client defines it)."""

    def __del__(self) -> None:
        closer = getattr(self, "_closer", None)
        if closer is not None:
            close_unclosed(closer, self)
