"""The idempotent producer's state: producer id, epoch and per-partition
sequence numbers (KIP-98, "Exactly Once Delivery and Transactional
Messaging"; the record batch fields ``producerId``, ``producerEpoch`` and
``baseSequence`` of the Kafka protocol guide, "Record Batch").

With ``enable.idempotence=true`` the producer

* asks any broker for a producer id with InitProducerId (API key 22)
  before its first Produce, retrying retriable errors (a broker that
  cannot reach ZooKeeper answers COORDINATOR_NOT_AVAILABLE) with
  ``retry.backoff.ms`` backoff, up to ``message.send.max.retries`` times;
* numbers the records of each partition from 0: a batch carries the
  sequence of its first record, the next batch starts where it ended
  (modulo 2**31, as the broker counts);
* sends the very same batch bytes when it retries, so a leader (or the new
  leader after a failover, whose log holds the replicated batches and so
  the producer's state) that already appended the batch answers with the
  offsets it got the first time, appending nothing (a DUPLICATE_SEQUENCE_NUMBER
  answer is also taken as success);
* keeps up to ``max.in.flight.requests.per.connection`` (at most
  `MAX_IN_FLIGHT`, 5: the broker remembers the last 5 batches of a
  producer for duplicate detection) batches of a partition in flight at
  once (`acquire` / `release`), as Kafka's producer does since 1.0
  (KAFKA-5494). Batches are numbered in the order they are written
  (`ordering` holds the numbering and the writing of several in flight
  together), and the partition's in-flight batches are queued in that
  order (`enter` / `settle`). The broker appends a batch only if its
  sequence follows the last one it holds, so the log keeps that order; the
  producer's part is to resend in that order: a retry waits until every
  earlier batch of its partition is settled (`wait_turn`), and a batch
  answered OUT_OF_ORDER_SEQUENCE_NUMBER that was written while an earlier
  batch of its partition was unsettled (the broker expects the earlier
  one's sequence) is retried after it with the same sequence and bytes
  (`writing` / `behind`). With the default of 1, one batch per partition is in
  flight, numbered once the previous one is settled.

When a batch finally fails, the broker's idea of the next sequence and the
producer's may differ:

* nothing of the failed batches can be in the log (every attempt was
  refused before the append): the partition's sequence is rewound to the
  first failed batch (`rewind`), and the next batch reuses its numbers;
* a failed batch may be in the log (no answer, or REQUEST_TIMED_OUT /
  NOT_ENOUGH_REPLICAS_AFTER_APPEND), or the broker answered
  OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID or
  INVALID_PRODUCER_EPOCH: the numbering restarts (`reset`). The same
  happens when the failed batch has later batches of its partition in
  flight (they cannot be appended without it: each fails with the earlier
  batch's error, `doomed`, and is never resent under new numbers). Against
  a broker with KIP-360 (it advertises InitProducerId v3+, Kafka 2.5+ and
  the bundled broker) the producer keeps its producer id and bumps the
  epoch itself, as Kafka's ``TransactionManager.bumpIdempotentProducerEpoch``
  does: no request is sent (a broker answers InitProducerId without a
  transactional id with a new producer id whatever id and epoch it is
  given), and the partition leaders accept the higher epoch from
  sequence 0 on every partition. At the highest epoch (32767), or against
  an older broker, the producer id is dropped instead and the next send
  gets a new one, whose sequences start at 0. The failed records
  themselves are reported in the `FailedToSendMessageError`, never
  resent behind the application's back.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING

import trio

from kclient.errors import (
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    UNKNOWN_PRODUCER_ID,
    KafkaError,
    error_for_code,
)
from kclient.protocol.messages import INIT_PRODUCER_ID
from kclient.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

if TYPE_CHECKING:  # pragma: no cover
    from kclient.client.cluster import Cluster
    from kclient.client.producer.batching import PartitionSend

log = logging.getLogger(__name__)

#: Sequence numbers are int32 and wrap to 0 after 2**31 - 1 (KIP-98).
SEQUENCE_MODULUS = 2**31
#: Broker errors after which the producer id must be replaced.
RESET_CODES = frozenset((OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH))
#: The most batches of one partition in flight with idempotence: the
#: broker keeps the last 5 batches per producer for duplicate detection
#: (Kafka's ``MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION`` bound for idempotence).
MAX_IN_FLIGHT = 5
#: Upper bound of the InitProducerId retry backoff (seconds).
MAX_BACKOFF_S = 10.0
#: The highest producer epoch (int16): past it a new producer id is needed.
MAX_PRODUCER_EPOCH = 2**15 - 1
#: The first InitProducerId version of KIP-360 (Kafka 2.5): a broker
#: advertising it accepts an idempotent producer's own epoch bump.
KIP360_VERSION = 3

TopicPartition = tuple[str, int]


class IdempotentProducerState:
    """Producer id, epoch and next sequence per partition of one producer.

    Used on the producer's trio loop only.

    Args:
        cluster: Where InitProducerId is sent (any broker).
        retries: InitProducerId retries of retriable errors
            (``message.send.max.retries``).
        backoff_ms: First pause between them (``retry.backoff.ms``),
            doubled each time up to 10 s.
        max_in_flight: Batches of one partition in flight at once
            (``max.in.flight.requests.per.connection``), capped at
            `MAX_IN_FLIGHT`.
    """

    def __init__(self, cluster: Cluster, *, retries: int = 3, backoff_ms: int = 100, max_in_flight: int = 1) -> None:
        self._cluster = cluster
        self._retries = retries
        self._backoff_ms = max(1, backoff_ms)
        #: The producer id, -1 until InitProducerId answered (or after a reset).
        self.producer_id = -1
        #: The producer epoch, -1 until InitProducerId answered.
        self.producer_epoch = -1
        #: How many times the numbering restarted (`reset`): epoch bumps
        #: plus dropped producer ids.
        self.resets = 0
        #: Whether the broker that gave the producer id has KIP-360
        #: (InitProducerId v3+): `reset` then bumps the epoch.
        self.epoch_bump = False
        self._next: dict[TopicPartition, int] = {}
        self._slots: dict[TopicPartition, trio.Semaphore] = {}
        self._init_lock = trio.Lock()
        #: Batches of one partition in flight at once (1 to `MAX_IN_FLIGHT`).
        self.max_in_flight = max(1, min(max_in_flight, MAX_IN_FLIGHT))
        # Numbered, unsettled parts of each partition, in sequence order.
        self._queues: dict[TopicPartition, list[PartitionSend]] = {}
        # id() of a queued part -> the error of an earlier batch of its
        # partition that finally failed (it can never be appended).
        self._doomed: dict[int, BaseException] = {}
        # id() of a queued part whose last attempt was written while an
        # earlier part of its partition (same numbering) was unsettled.
        self._behind: set[int] = set()
        self._turns = trio.lowlevel.ParkingLot()
        self._write_lock = trio.Lock()

    # ------------------------------------------------------------ producer id

    async def ensure_producer_id(self) -> None:
        """Get a producer id if there is none (InitProducerId, KIP-98).

        Raises:
            KafkaError: the last error once the retries ran out, or a
                non-retriable one at once (e.g. an `AuthenticationError`,
                or `UnsupportedVersionError` from a broker without
                InitProducerId).
        """
        if self.producer_id >= 0:
            return
        async with self._init_lock:
            attempt = 0
            while self.producer_id < 0:
                try:
                    conn = await self._cluster.any_connection()
                    version = conn.version_for(INIT_PRODUCER_ID, ceiling=1)
                    body = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
                    response: InitProducerIdResponse = await conn.request(INIT_PRODUCER_ID, body, version=version)
                    code = response.error_code
                    if code:
                        raise error_for_code(code)("InitProducerId")
                except KafkaError as exc:
                    if not exc.retriable or attempt >= self._retries:
                        log.error("cannot get a producer id (InitProducerId) after %d retries: %s", attempt, exc)
                        raise
                    attempt += 1
                    delay = min(self._backoff_ms * 2 ** (attempt - 1) / 1000, MAX_BACKOFF_S)
                    log.info("InitProducerId failed (%s); retry %d of %d in %.2f s", exc, attempt, self._retries, delay)
                    await trio.sleep(delay)
                    continue
                self.producer_id = response.producer_id
                self.producer_epoch = response.producer_epoch
                self.epoch_bump = conn.api_versions.get(INIT_PRODUCER_ID.key, (0, -1))[1] >= KIP360_VERSION
                self._next.clear()
                log.info("idempotent producer: producer id %d, epoch %d", self.producer_id, self.producer_epoch)

    def adopt(self, producer_id: int, producer_epoch: int) -> None:
        """Take the producer id and epoch a transaction manager got
        (InitProducerId with a ``transactional.id``): with a new id or epoch
        every partition's sequence starts again from 0.

        Args:
            producer_id: The producer id.
            producer_epoch: Its epoch.
        """
        if producer_id != self.producer_id or producer_epoch != self.producer_epoch:
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch
            self._next.clear()

    def reset(self, reason: str) -> None:
        """Restart every partition's numbering at 0: with KIP-360
        (`epoch_bump`) under the same producer id with the next epoch,
        else (or at the highest epoch) by dropping the producer id, so
        that the next send asks for a new one (see the module docstring).

        Args:
            reason: Logged at WARNING.
        """
        if self.producer_id < 0:
            return
        if self.epoch_bump and 0 <= self.producer_epoch < MAX_PRODUCER_EPOCH:
            self.producer_epoch += 1
            self._next.clear()
            self.resets += 1
            log.warning("idempotent producer %d: epoch bumped to %d (%s), sequences restart at 0 (KIP-360)", self.producer_id, self.producer_epoch, reason)
            return
        log.warning("idempotent producer %d: dropping the producer id (%s); the next send gets a new one", self.producer_id, reason)
        self.producer_id = -1
        self.producer_epoch = -1
        self._next.clear()
        self.resets += 1

    # ------------------------------------------------------------ sequences

    def next_sequence(self, tp: TopicPartition) -> int:
        """The sequence the next batch of a partition starts at (0 for a
        partition not written with this producer id yet)."""
        return self._next.get(tp, 0)

    def stamp(self, part: PartitionSend) -> None:
        """Give each chunk of ``part`` the producer id, epoch and its base
        sequence, and advance the partition's sequence past them.

        Call right after `ensure_producer_id` with no ``await`` in between
        (the producer id may otherwise have been reset).

        Args:
            part: The partition, its ``counts`` set (records per chunk).

        Raises:
            RuntimeError: there is no producer id.
        """
        if self.producer_id < 0:
            raise RuntimeError("no producer id: call ensure_producer_id() first")
        tp = (part.topic, part.partition)
        seq = self._next.get(tp, 0)
        sequences = []
        for count in part.counts:
            sequences.append(seq)
            seq = (seq + count) % SEQUENCE_MODULUS
        self._next[tp] = seq
        part.producer_id = self.producer_id
        part.producer_epoch = self.producer_epoch
        part.sequences = sequences

    def rewind(self, part: PartitionSend) -> None:
        """Give the sequences of ``part``'s pending chunks back: none of
        them is in the log, so the partition's next batch starts at the
        first one's sequence.

        Only valid while ``part`` holds its partition's slot (no later
        batch was numbered); a ``part`` numbered under an older producer
        id changes nothing.

        Args:
            part: The partition whose pending chunks finally failed.
        """
        if not part.sequences or part.producer_id != self.producer_id or part.producer_epoch != self.producer_epoch:
            return
        self._next[(part.topic, part.partition)] = part.sequences[0]

    # ------------------------------------------------------------ in flight

    async def acquire(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Wait until fewer than `max_in_flight` earlier batches of these
        partitions are in flight and take a slot of each (in sorted order,
        so two callers cannot deadlock).

        Args:
            tps: The partitions a batch writes.

        Returns:
            The partitions taken, sorted; give them back with `release`.
        """
        taken: list[TopicPartition] = []
        try:
            for tp in sorted(set(tps)):
                slot = self._slots.get(tp)
                if slot is None:
                    slot = self._slots[tp] = trio.Semaphore(self.max_in_flight)
                await slot.acquire()
                taken.append(tp)
        except BaseException:
            self.release(taken)
            raise
        return taken

    def release(self, tps: Iterable[TopicPartition]) -> None:
        """Give back the slots `acquire` took (from any task)."""
        for tp in tps:
            self._slots[tp].release()

    @contextlib.asynccontextmanager
    async def ordering(self) -> AsyncIterator[None]:
        """Hold the numbering (`stamp`) and the writing of a batch together
        when several batches of a partition may be in flight, so the
        broker gets each partition's batches in sequence order (a no-op with
        one in flight: the slot already orders them)."""
        if self.max_in_flight == 1:
            yield
            return
        async with self._write_lock:
            yield

    def enter(self, parts: Iterable[PartitionSend]) -> None:
        """Queue ``parts`` behind their partitions' in-flight batches (call
        right before numbering them, inside `ordering`).

        Args:
            parts: The parts about to be numbered and written.
        """
        for part in parts:
            self._queues.setdefault((part.topic, part.partition), []).append(part)

    def settle(self, part: PartitionSend, error: BaseException | None = None) -> bool:
        """Take ``part`` out of its partition's queue: acknowledged, or
        finally failed with ``error``. A failure dooms the later queued
        parts numbered under the same producer id and epoch: their
        sequences follow the failed one's, so the broker can never append
        them.

        Args:
            part: A part given to `enter` (others are ignored).
            error: Why it finally failed; None when it succeeded or was
                abandoned.

        Returns:
            Whether a later part was doomed.
        """
        self._doomed.pop(id(part), None)
        self._behind.discard(id(part))
        tp = (part.topic, part.partition)
        queue = self._queues.get(tp, [])
        index = next((i for i, p in enumerate(queue) if p is part), -1)
        if index < 0:
            return False
        later = queue[index + 1 :]
        del queue[index]
        if not queue:
            del self._queues[tp]
        doomed = False
        if error is not None:
            for other in later:
                if _same_numbering(other, part):
                    self._doomed.setdefault(id(other), error)
                    doomed = True
        if index == 0 or doomed:
            self._turns.unpark_all()
        return doomed

    def doomed(self, part: PartitionSend) -> BaseException | None:
        """The error of an earlier batch of ``part``'s partition that
        finally failed (see `settle`), or None."""
        return self._doomed.get(id(part))

    def has_earlier(self, part: PartitionSend) -> bool:
        """Whether an earlier part of ``part``'s partition, numbered under
        the same producer id and epoch, is still unsettled."""
        for other in self._queues.get((part.topic, part.partition), ()):
            if other is part:
                return False
            if _same_numbering(other, part):
                return True
        return False

    def writing(self, parts: Iterable[PartitionSend]) -> None:
        """Note, right before an attempt writes ``parts``, which of them go
        out behind an earlier unsettled part of their partition (`behind`).

        Args:
            parts: The parts of the attempt.
        """
        behind = self._behind
        for part in parts:
            if self.has_earlier(part):
                behind.add(id(part))
            else:
                behind.discard(id(part))

    def behind(self, part: PartitionSend) -> bool:
        """Whether ``part``'s last attempt was written while an earlier part
        of its partition (same numbering) was unsettled: an
        OUT_OF_ORDER_SEQUENCE_NUMBER answer then means the broker waits for
        that one first (Kafka's ``TransactionManager.canRetry``: the batch
        was not the next after the last acknowledged one), not a lost
        sequence. The answer may be read later than it was given (the
        producer completes its batches in submission order), so what
        counts is the state at writing time."""
        return id(part) in self._behind

    async def wait_turn(self, part: PartitionSend) -> None:
        """Wait until every earlier part of ``part``'s partition is settled
        (a retry is resent only then, in sequence order) or ``part`` is
        doomed.

        Args:
            part: A part about to be resent.
        """
        while self._doomed.get(id(part)) is None:
            queue = self._queues.get((part.topic, part.partition))
            if not queue or queue[0] is part or all(p is not part for p in queue):
                return
            await self._turns.park()


def _same_numbering(a: PartitionSend, b: PartitionSend) -> bool:
    """Whether two parts were numbered under the same producer id and epoch."""
    return a.producer_id == b.producer_id and a.producer_epoch == b.producer_epoch


__all__ = ["KIP360_VERSION", "MAX_IN_FLIGHT", "MAX_PRODUCER_EPOCH", "RESET_CODES", "SEQUENCE_MODULUS", "IdempotentProducerState"]
