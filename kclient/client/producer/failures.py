"""What the event handler reports when partitions finally fail: a
`PartitionFailure` per topic-partition, turned into one
`FailedToSendMessageError` for the batch (`failure_error`) and one per
partition for the records sent with a delivery callback or future
(`fail_tracked`).

``possibly_written`` counts the records some attempt may have written (a
request written and not answered, or answered with REQUEST_TIMED_OUT /
NOT_ENOUGH_REPLICAS_AFTER_APPEND; see
`kclient.client.producer.event_handler`); the rest were not sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from kclient.errors import AuthenticationError, FailedToSendMessageError

__all__ = ["Failed", "PartitionFailure", "fail_tracked", "failure_error", "raise_failure", "raiser"]


class PartitionFailure(NamedTuple):
    """One topic-partition given up on (partition -1: the whole topic, e.g.
    no metadata)."""

    #: How many records were lost.
    messages: int
    #: The broker or connection error (None if not known).
    error: BaseException | None
    #: How many of them may be in the log anyway.
    possibly_written: int
    #: The lost ``(key, value)`` pairs, serialized when they got that far.
    records: list[tuple[Any, Any]]
    #: ``(DeliveryReport, index)`` of the lost records sent with a callback
    #: or future.
    tracked: list[tuple[Any, int]]


#: The failures of one send: ``{(topic, partition): PartitionFailure}``.
Failed = dict[tuple[str, int], PartitionFailure]


def failure_error(failed: Failed, retries: int) -> FailedToSendMessageError:
    """The error for the failed partitions of a send.

    Args:
        failed: The failures per topic-partition.
        retries: How many retries were made (named in the message).

    Returns:
        A `FailedToSendMessageError` with ``lost_messages``,
        ``failed_partitions``, ``possibly_written`` (and per partition),
        ``failed_records``; its ``__cause__`` is the first known cause.
    """
    lost = sum(v.messages for v in failed.values())
    names = ", ".join(f"{t}-{p}" if p >= 0 else f"{t}" for t, p in list(failed)[:10])
    if len(failed) > 10:
        names += f" and {len(failed) - 10} more"
    cause = next((v.error for v in failed.values() if v.error is not None), None)
    after = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
    maybe = {tp: v.possibly_written for tp, v in failed.items() if v.possibly_written}
    possibly = sum(maybe.values())
    if possibly:
        outcome = f" ({possibly} possibly written: the broker may have appended them; {lost - possibly} not sent)"
    else:
        outcome = " (not sent: none reached a broker)"
    exc = FailedToSendMessageError(
        f"failed to send {lost} message(s) to {names}{after}{outcome}: {cause}",
        lost_messages=lost,
        failed_partitions={tp: v.messages for tp, v in failed.items()},
        possibly_written=possibly,
        possibly_written_partitions=maybe,
        failed_records={tp: v.records for tp, v in failed.items()},
    )
    exc.__cause__ = cause
    return exc


def fail_tracked(failed: Failed, retries: int) -> None:
    """Fail the tracked records of each failed partition with an error
    naming that partition alone (its cause: the partition's error).

    Args:
        failed: The failures per topic-partition.
        retries: How many retries were made.
    """
    for tp, v in failed.items():
        if v.tracked:
            error = failure_error({tp: v}, retries)
            for report, index in v.tracked:
                report.failed(index, error)


def raise_failure(failed: Failed, retries: int) -> None:
    """Resolve the tracked records of ``failed`` and raise its error: the
    `FailedToSendMessageError`, or the `AuthenticationError` of a partition
    (never retried; Kafka's producer fails the send with the
    AuthenticationException itself, KIP-152) with that error as its cause.

    Args:
        failed: The failures per topic-partition (not empty).
        retries: How many retries were made.

    Raises:
        AuthenticationError: some partition failed authenticating.
        FailedToSendMessageError: otherwise.
    """
    error = failure_error(failed, retries)
    fail_tracked(failed, retries)
    auth = next((v.error for v in failed.values() if isinstance(v.error, AuthenticationError)), None)
    if auth is not None:
        raise auth from error
    raise error


def raiser(failed: Failed) -> Callable[[], Awaitable[None]]:
    """A ``finish`` coroutine function (see
    `kclient.client.producer.event_handler.DefaultEventHandler.start`) for a
    send that failed before writing anything.

    Args:
        failed: The failures per topic-partition.

    Returns:
        A coroutine function that fails the tracked records and raises the
        `FailedToSendMessageError`.
    """

    async def finish() -> None:
        error = failure_error(failed, 0)
        fail_tracked(failed, 0)
        raise error

    return finish

