"""`kclient.sync.LoopThread.call`: the hand-off from a blocking caller to
the client's trio loop thread and back (results, errors, contextvars,
concurrency, Ctrl-C, closing)."""

from __future__ import annotations

import collections.abc
import contextvars
import os
import signal
import sys
import threading

import pytest
import trio
from helpers.wait import wait_for

from kclient.errors import LoopClosedError
from kclient.sync import LoopThread, _Call, _Dispatcher, _Waiter

pytestmark = pytest.mark.unit


@pytest.fixture
def loop():
    lt = LoopThread(name="test-loop")
    try:
        yield lt
    finally:
        lt.close()


async def _add(a, b):
    await trio.lowlevel.checkpoint()
    return a + b


def test_call_returns_the_result_and_runs_on_the_loop_thread(loop):
    assert loop.call(_add, 2, 3) == 5

    async def where():
        return threading.get_ident()

    assert loop.call(where) == loop.ident != threading.get_ident()


def test_call_raises_the_functions_exception_with_its_traceback(loop):
    class Boom(Exception):
        pass

    async def fail():
        await trio.lowlevel.checkpoint()
        raise Boom("no")

    with pytest.raises(Boom, match="no") as info:
        loop.call(fail)
    assert any(entry.name == "fail" for entry in info.traceback)
    # the next call is not disturbed
    assert loop.call(_add, 1, 1) == 2


def test_call_through_pipe_waiters(monkeypatch):
    monkeypatch.setattr("kclient.sync._EVENTFD", False)
    with LoopThread(name="test-loop-pipe") as lt:
        assert [lt.call(_add, i, i) for i in range(10)] == [2 * i for i in range(10)]
        assert lt._waiters[0]._r != lt._waiters[0]._w  # a pipe
        assert lt._dispatcher.wakeup._r is not None  # a socket pair


def test_call_many_times_reuses_waiters(loop):
    for i in range(200):
        assert loop.call(_add, i, 1) == i + 1
    assert len(loop._waiters) == 1


def test_call_sees_the_callers_contextvars(loop):
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    async def read():
        return var.get()

    token = var.set("caller's value")
    try:
        assert loop.call(read) == "caller's value"
    finally:
        var.reset(token)
    assert loop.call(read) == "unset"


def test_concurrent_callers_each_get_their_own_result(loop):
    started = threading.Barrier(8)
    results: dict[int, list] = {}

    async def slow_echo(i, j):
        await trio.sleep(0.001 * (i % 3))  # kept: calls of different lengths interleave (the thing under test)
        return (i, j)

    def worker(i):
        started.wait()
        results[i] = [loop.call(slow_echo, i, j) for j in range(30)]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == {i: [(i, j) for j in range(30)] for i in range(8)}


def test_a_call_that_blocks_does_not_hold_up_other_callers(loop):
    release = None
    entered = threading.Event()

    async def wait_for_release():
        nonlocal release
        release = trio.Event()
        entered.set()
        await release.wait()
        return "released"

    out = []
    t = threading.Thread(target=lambda: out.append(loop.call(wait_for_release)))
    t.start()
    assert entered.wait(10)
    assert loop.call(_add, 20, 22) == 42  # not queued behind the blocked call
    loop.call_sync(release.set)
    t.join(10)
    assert out == ["released"]


def test_call_from_a_trio_task_raises_runtime_error(loop):
    async def reenter():
        loop.call(_add, 1, 2)

    with pytest.raises(RuntimeError, match="blocking function"):
        loop.call(reenter)  # on the loop thread itself: would deadlock
    with pytest.raises(RuntimeError, match="blocking function"):
        trio.run(reenter)  # from another trio run's task


def test_call_after_close_raises_loop_closed(loop):
    loop.close()
    with pytest.raises(LoopClosedError):
        loop.call(_add, 1, 2)
    assert loop._waiters == []


def test_close_during_a_call_cancels_it(loop):
    entered = threading.Event()

    async def forever():
        entered.set()
        await trio.sleep_forever()  # kept: a call that never returns (cancelled by the close)

    errors = []

    def run():
        try:
            loop.call(forever)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    assert entered.wait(10)
    loop.close()
    t.join(10)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], (trio.Cancelled, LoopClosedError))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_while_waiting_leaves_the_next_call_correct(loop):
    """KeyboardInterrupt in the waiting caller: the interrupted call goes on
    on the loop and its late wake-up must not be taken for a later call's."""
    entered = threading.Event()
    go = threading.Event()

    async def slow():
        entered.set()
        await trio.to_thread.run_sync(go.wait)
        return "slow"

    main = threading.get_ident()

    def interrupt():
        entered.wait(10)
        signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=interrupt)
    t.start()
    with pytest.raises(KeyboardInterrupt):
        loop.call(slow)
    t.join(10)
    idle = list(loop._waiters)
    go.set()  # the interrupted call now finishes and fires its waiter
    for i in range(20):
        assert loop.call(_add, i, 100) == i + 100
    assert all(w not in idle for w in loop._waiters) or not idle


@pytest.mark.parametrize("eventfd", [True, False], ids=["eventfd", "pipe"])
def test_waiter_wakes_once_per_fire_and_closes_its_descriptors(monkeypatch, eventfd):
    if eventfd and not hasattr(os, "eventfd"):
        pytest.skip("no os.eventfd on this platform")
    monkeypatch.setattr("kclient.sync._EVENTFD", eventfd)
    w = _Waiter()
    fds = {w._r, w._w}
    t = threading.Timer(0.01, w.fire)
    t.start()
    w.wait()
    t.join()
    del t
    w.fire()
    w.wait()  # a fire before the wait is not lost
    del w
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_call_of_a_plain_function_raises_type_error(loop):
    def not_async():
        return 1

    with pytest.raises(TypeError, match="async function"):
        loop.call(not_async)
    assert loop.call(_add, 1, 2) == 3


def test_calls_queued_when_the_run_ends_fail_with_loop_closed():
    d = _Dispatcher()
    waiter = _Waiter()
    queued = _Call(_add, (1, 2), waiter)
    d.calls.append(queued)
    d.finish()  # what LoopThread does once trio.run returned
    waiter.wait()  # fired
    assert isinstance(queued.error, trio.RunFinishedError)
    late = _Call(_add, (1, 2), _Waiter())
    assert d.submit(late) is False  # not taken: the caller raises LoopClosedError
    assert not d.calls


def test_many_threads_many_calls_while_the_loop_closes():
    """Every call either returns its result or raises LoopClosedError /
    trio.Cancelled; none hangs."""
    lt = LoopThread(name="test-loop-closing")
    outcomes: list = []
    lock = threading.Lock()

    async def echo(i):
        await trio.sleep(0.0005)  # kept: each call lasts a moment, so the close lands mid-call
        return i

    def worker():
        for i in range(200):
            try:
                r = lt.call(echo, i)
                assert r == i
                what = "ok"
            except (LoopClosedError, trio.Cancelled) as exc:
                what = type(exc).__name__
            with lock:
                outcomes.append(what)
            if what != "ok":
                return

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    wait_for(lambda: len(outcomes) >= 6, "calls under way before the close")
    lt.close()
    for t in threads:
        t.join(20)
        assert not t.is_alive()
    assert set(outcomes) <= {"ok", "LoopClosedError", "Cancelled"}


def test_call_accepts_any_coroutine_object(loop):
    """Not only native coroutines: any collections.abc.Coroutine (e.g. one
    compiled by Cython), as trio.from_thread.run accepts."""

    class Wrapper(collections.abc.Coroutine):
        def __init__(self, coro):
            self._coro = coro

        def send(self, value):
            return self._coro.send(value)

        def throw(self, *exc):
            return self._coro.throw(*exc)

        def close(self):
            self._coro.close()

        def __await__(self):
            return self._coro.__await__()

    def fn(a, b):
        return Wrapper(_add(a, b))

    assert loop.call(fn, 3, 4) == 7
