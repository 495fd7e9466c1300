"""The `kclient.sync.ExitCloser` of a blocking client that runs a trio core
on a `kclient.sync.LoopThread`: the consumers' and the admin client's
(the producer, which also flushes a queue, has its own). Closing runs the
core's asynchronous close on the loop, then ends the loop; the closer holds
the loop and the core, never the client, so that it can close them after
the client was garbage collected or at interpreter exit.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kclient.sync import ExitCloser, LoopThread

log = logging.getLogger("kclient")


class Stoppable(Protocol):
    """A background helper stopped before the core closes (a
    `kclient.client.consumer.statistics.StatisticsReporter`)."""

    def stop(self) -> None:
        """Stop it (idempotent)."""


class LoopClientCloser(ExitCloser):
    """Closes one blocking client's trio core and its loop thread.

    Args:
        description: ``repr`` of the client, for log messages.
        exit_timeout: The longest `close_at_exit` waits (seconds).
        loop: The client's loop thread.
        aclose: The core's close (run on the loop): ``aclose`` of a
            connection-holding core, ``shutdown`` of a consumer connector's.
        reporter: Stopped first (a statistics reporter), or None.
        ignore: Exceptions of ``aclose`` that do not fail the close (the
            loop may be gone already); the loop is ended in any case.
        abort_note: What an abort leaves undone, for its ERROR log line.
        logger: Where the abort is logged (the client's logger).
    """

    def __init__(
        self,
        description: str,
        exit_timeout: float,
        loop: LoopThread,
        aclose: Callable[[], Awaitable[Any]],
        *,
        reporter: Stoppable | None = None,
        ignore: tuple[type[BaseException], ...] = (),
        abort_note: str = "closed without waiting",
        logger: logging.Logger = log,
    ) -> None:
        super().__init__(description, exit_timeout)
        self._loop = loop
        self._aclose = aclose
        self._reporter = reporter
        self._ignore = ignore
        self._abort_note = abort_note
        self._log = logger

    def _close(self) -> None:
        if self._reporter is not None:
            self._reporter.stop()
        try:
            self._loop.call(self._aclose)
        except self._ignore:
            pass
        finally:
            self._loop.close()

    def _abort(self, why: str) -> int:
        self._log.error("%s %s: %s", self.description, self._abort_note, why)
        try:
            self._loop.close(timeout=1.0)
        except Exception as exc:
            self._log.debug("%s: loop ended with %r", self.description, exc)
        return 0


__all__ = ["LoopClientCloser", "Stoppable"]
