"""Hooks into the async producer's queue pipeline (``callback.handler``).

Source: the Kafka 0.8 documentation, section 5.1 "API Design", "Producer
APIs" (https://kafka.apache.org/08/documentation.html#apidesign): users plug in logging,
tracing or monitoring code "by implementing the
kafka.producer.async.CallbackHandler interface and setting the
callback.handler config parameter to that class". The hooks are the ones of
Kafka 0.7's ``kafka.producer.async.CallbackHandler`` with Python names, plus
`CallbackHandler.on_send_error` so that errors in async sends are never
silent.

The default implementation is the identity / a no-op for every hook, and the
pipeline skips calling hooks a subclass does not override (so an unused
handler costs nothing per record).

Which thread calls each hook (blocking `kclient.Producer`):

| hook | called on |
|---|---|
| ``before_enqueue`` | the thread calling ``Producer.send`` (async) |
| ``after_enqueue`` | the thread calling ``Producer.send`` (async) |
| ``after_dequeuing_existing_data`` | the ProducerSendThread (async) |
| ``before_sending_data`` | the ProducerSendThread (async); the thread calling ``Producer.send`` (sync); the trio task calling ``TrioProducer.send`` |
| ``last_batch_before_close`` | the ProducerSendThread, during ``close()``, after the queue is drained (async) |
| ``on_send_error`` | the ProducerSendThread (async, see below); the thread calling ``Producer.send`` (sync), just before the error is raised; the trio task calling ``TrioProducer.send`` |
| ``close`` | the thread calling ``Producer.close()``, after the send thread has stopped |

An async ``on_send_error`` runs on the producer's trio thread instead when
``max.in.flight.requests.per.connection`` > 1 pipelines batches.

Otherwise hooks never run on the producer's trio loop thread when the
blocking ``Producer`` is used, so a slow hook delays only its own caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kclient.client.producer.data import ProducerData


class CallbackHandler:
    """Base class and default (pass-through) implementation of the hooks.

    Subclass it, override the hooks you need, and pass an instance or the
    dotted class path (``"mypkg.mod.MyHandler"``, built with no arguments) as
    ``callback.handler``. An exception raised by a hook on the send thread
    fails that batch like a send error (logged, counted, reported to
    `on_send_error`, raised by ``close()``); one raised on the caller's
    thread propagates out of ``send``.
    """

    def before_enqueue(self, data: ProducerData) -> ProducerData | None:
        """Called with each item before it is put on the async queue, on the
        thread calling ``send``.

        Args:
            data: The item ``send`` was given (its timestamp not yet set).

        Returns:
            The item to enqueue (possibly a changed copy), or ``None`` to
            drop it silently.
        """
        return data

    def after_enqueue(self, data: ProducerData, added: bool) -> None:
        """Called after each attempt to enqueue an item, on the thread
        calling ``send``.

        Args:
            data: The item (as `before_enqueue` returned it).
            added: False when the queue was full (``queue.enqueue.timeout.ms``
                ran out) and `QueueFullError` is about to be raised.
        """

    def after_dequeuing_existing_data(self, data: ProducerData) -> list[ProducerData]:
        """Called by the ProducerSendThread with each item taken off the
        queue.

        Args:
            data: The dequeued item.

        Returns:
            The items to add to the batch in its place: ``[data]`` keeps it,
            ``[]`` drops it, more items add some.
        """
        return [data]

    def before_sending_data(self, batch: list[ProducerData]) -> list[ProducerData]:
        """Called with each batch before it is serialized and sent.

        Args:
            batch: The batch's ProducerData, in queue order.

        Returns:
            The batch to send (the same list, a changed one, or ``[]`` to
            send nothing).
        """
        return batch

    def last_batch_before_close(self) -> list[ProducerData]:
        """Called by the ProducerSendThread once during ``close()``, after the
        queue has been drained.

        Returns:
            Extra items to send as a last batch (default: none).
        """
        return []

    def on_send_error(self, events: Sequence[ProducerData], exc: BaseException) -> None:
        """Called when sending a batch failed for good (retries exhausted or
        a non-retriable error). The default does nothing: the producer logs
        and counts the failure itself.

        Args:
            events: The ProducerData of the failed batch.
            exc: Usually a `FailedToSendMessageError` (``lost_messages``,
                ``failed_partitions``) whose ``__cause__`` is the broker or
                connection error. Its ``possibly_written`` /
                ``possibly_written_partitions`` count the messages that may
                be in the log anyway (written, then no answer: a timeout or
                a connection lost after the write); ``not_sent`` the ones
                that are not. Re-sending a possibly-written message may
                duplicate it (the producer's own retries do not when
                ``enable.idempotence=true``, KIP-98). ``failed_records``
                lists the failed ``(key, value)`` pairs per partition.
        """

    def close(self) -> None:
        """Called once by ``Producer.close()`` after the last batch was sent
        and the send thread stopped."""


def overrides(handler: object, name: str) -> bool:
    """Whether the pipeline must call a hook.

    Args:
        handler: The callback handler (a `CallbackHandler` or any object
            with hook methods).
        name: The hook's name, e.g. ``"before_sending_data"``.

    Returns:
        True when ``handler``'s class overrides `CallbackHandler`'s hook
        ``name``, or when ``handler`` is not a CallbackHandler and has an
        attribute ``name`` (duck-typed).
    """
    if not isinstance(handler, CallbackHandler):
        return hasattr(handler, name)
    return getattr(type(handler), name, None) is not getattr(CallbackHandler, name)
