"""One partition replica on this broker: its role, ISR and high watermark.

Kafka's replication design (documentation, "Replication"; Kafka's
``Partition`` class): the controller makes a broker the *leader* or a
*follower* of each partition it hosts with a LeaderAndIsr request carrying
the leader, the leader epoch, the replicas and the in-sync replicas (ISR).

As leader, a `Partition`

- appends produced batches, stamping them with its leader epoch
  (KIP-101) and checking idempotent producers' sequence numbers (KIP-98);
  with ``acks=-1`` it refuses the append when the ISR is smaller than
  ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS);
- tracks every follower's log end offset from its Fetch requests and
  the last time it was caught up; a follower that has not caught up for
  ``replica.lag.time.max.ms`` leaves the ISR, and one whose log end offset
  reaches the high watermark (and the start of the current leader epoch)
  joins it again. ISR changes are written to the partition's state znode
  first (a conditional write, so a stale leader cannot overwrite a
  controller's decision) and applied after;
- advances the high watermark to the smallest log end offset in the ISR:
  consumers read below it, and ``acks=-1`` produce requests are answered
  once it passes their records (`wait_for_replication`).

As follower it only remembers who leads; the replica fetcher
(`kclient.broker.replica_fetcher`) copies the leader's log into it.

Trio-thread only. ISR writes go through the replica manager's ISR task
(``request_isr_change``), never block here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import trio

from kclient.errors import (
    NONE,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    REQUEST_TIMED_OUT,
    NotEnoughReplicasError,
    NotLeaderForPartitionError,
)
from kclient.protocol.messages.leader_and_isr import LeaderAndIsrPartitionState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kclient.protocol.primitives import Buffer
    from kclient.storage import AppendResult, Log
    from kclient.storage.append_info import ValidatedBatch

log = logging.getLogger("kclient.broker")


@attrs.define
class ReplicaState:
    """What the leader knows of one follower: its log end offset (-1:
    unknown yet), when it was last caught up with the leader, and the
    leader's log end offset at its previous fetch (ms, offsets)."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1


class Partition:
    """One hosted partition (see the module docstring).

    Args:
        topic: The topic.
        partition: The partition index.
        log: Its `kclient.storage.Log`.
        broker_id: This broker's id.
        request_isr_change: Called as ``request_isr_change(partition,
            new_isr)`` to have an ISR change written and applied.
        notify: Called with ``(topic, partition)`` whenever the high
            watermark or the log end offset moves (wakes Fetch long polls).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        log: Log,
        broker_id: int,
        *,
        request_isr_change: Callable[[Partition, tuple[int, ...]], None],
        notify: Callable[[tuple[str, int]], None],
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.broker_id = broker_id
        #: The ISR of a leader alone (see `append_records_to_leader`).
        self._alone = (broker_id,)
        self.leader_id = -1
        self.leader_epoch = -1
        #: Bumped each time this broker becomes leader after not leading: a
        #: produce waiting for replication fails if leadership was lost and
        #: regained meanwhile (its records may have been truncated).
        self.leadership = 0
        #: Where the current leader epoch started in this log (leader only).
        self.leader_epoch_start_offset = 0
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.zk_version = 0
        self.controller_epoch = 0
        self.min_insync_replicas = 1
        self.remote: dict[int, ReplicaState] = {}
        self._request_isr_change = request_isr_change
        self._notify = notify
        #: Set (and dropped) when the high watermark moves; made by the
        #: first produce that waits for it (none while nothing waits).
        self._hw_moved: trio.Event | None = None
        #: ``(topic, partition)``, the key of the append notifier.
        self._key = (topic, partition)
        #: Held while a follower write (append, truncation) of this log runs
        #: and while this broker's role for the partition changes, so that a
        #: new leader never starts on a log a fetcher is still appending to
        #: (Kafka's fetcher partition-map lock).
        self.replication_lock = trio.Lock()
        #: An ISR change is being written (at most one at a time).
        self.isr_change_pending = False
        #: The ISR being written while ``isr_change_pending``, else ``()``.
        #: The high watermark waits for its replicas too (Kafka's "maximal
        #: ISR", KIP-497): once ZooKeeper names a joining replica in the ISR
        #: it may be elected, so it must hold every acknowledged record.
        self.pending_isr: tuple[int, ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        """``(topic, partition)``."""
        return self._key

    @property
    def is_leader(self) -> bool:
        """True while this broker leads the partition."""
        return self.leader_id == self.broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return f"<Partition {self.topic}-{self.partition} {role} epoch {self.leader_epoch} isr {list(self.isr)}>"

    # ------------------------------------------------------------ roles

    def make_leader(self, state: LeaderAndIsrPartitionState, now_ms: int) -> None:
        """Become (or stay) leader with a LeaderAndIsr partition state."""
        new_epoch = state.leader_epoch != self.leader_epoch or not self.is_leader
        if not self.is_leader:
            self.leadership += 1
        self._apply_state(state)
        # From now on the replication layer moves the high watermark.
        self.log.update_high_watermark(self.log.high_watermark)
        if new_epoch:
            leo = self.log.log_end_offset
            self.log.leader_epoch_cache.assign(self.leader_epoch, leo)
            self.leader_epoch_start_offset = leo
            self.remote = {}
        for r in self.replicas:
            if r != self.broker_id and r not in self.remote:
                self.remote[r] = ReplicaState(last_caught_up_ms=now_ms if r in self.isr else 0)
        for r in list(self.remote):
            if r not in self.replicas:
                del self.remote[r]
        log.info(
            "%s-%d: leader (epoch %d) with ISR %s, replicas %s, high watermark %d, log end offset %d",
            self.topic, self.partition, self.leader_epoch, list(self.isr), list(self.replicas),
            self.log.high_watermark, self.log.log_end_offset,
        )
        self.maybe_increment_high_watermark()
        self._wake()

    def make_follower(self, state: LeaderAndIsrPartitionState) -> bool:
        """Become (or stay) a follower; True if the leader or its epoch
        changed (the fetcher must truncate and restart)."""
        changed = state.leader != self.leader_id or state.leader_epoch != self.leader_epoch
        self._apply_state(state)
        self.log.update_high_watermark(self.log.high_watermark)
        self.remote = {}
        self._wake()
        if changed:
            log.info("%s-%d: follower of broker %d (epoch %d)", self.topic, self.partition, self.leader_id, self.leader_epoch)
        return changed

    def _apply_state(self, state: LeaderAndIsrPartitionState) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.isr = tuple(state.isr)
        self.replicas = tuple(state.replicas)
        # ZooKeeper mode: the partition epoch is the state znode's version.
        self.zk_version = state.partition_epoch
        self.controller_epoch = state.controller_epoch

    def stop(self) -> None:
        """No longer a replica here (StopReplica): wake every waiter."""
        self.leader_id = -1
        self._wake()

    # ------------------------------------------------------------ leader: produce

    def check_leader(self) -> None:
        """Raise NotLeaderForPartitionError unless this broker leads."""
        if not self.is_leader:
            raise NotLeaderForPartitionError(
                f"broker {self.broker_id} is not the leader of {self.topic}-{self.partition} (leader {self.leader_id})"
            )

    @property
    def effective_min_isr(self) -> int:
        """``min.insync.replicas`` capped at the number of replicas, as
        Kafka's ``Partition.effectiveMinIsr``: a topic with fewer replicas
        than its min.insync.replicas still takes acks=-1 writes once every
        replica is in sync (Apache Kafka 3.9 and 4.x)."""
        return min(self.min_insync_replicas, max(1, len(self.replicas)))

    def check_min_isr(self, acks: int) -> None:
        """``acks=-1`` with an ISR below the effective ``min.insync.replicas``
        (`effective_min_isr`): NotEnoughReplicasError (nothing is appended)."""
        if acks == -1 and len(self.isr) < self.effective_min_isr:
            raise NotEnoughReplicasError(
                f"{self.topic}-{self.partition}: ISR {list(self.isr)} is smaller than min.insync.replicas={self.min_insync_replicas}"
            )

    def append_records_to_leader(
        self, records: Buffer, now_ms: int, batches: Sequence[ValidatedBatch] | None, *, validate_producer_state: bool = True
    ) -> AppendResult:
        """Append a Produce request's validated records as the leader
        (Kafka's ``Partition.appendRecordsToLeader``): stamped with the
        leader epoch (KIP-101), the idempotent producers' sequence numbers
        checked (KIP-98), then the high watermark moved as
        `after_leader_append` moves it (unless the records were a
        duplicate). A leader alone in its ISR (none being added) has the
        log move it to the new log end offset within the append.

        Args:
            records (bytes | bytearray | memoryview): The record set, in the
                stored format.
            now_ms: The append time in ms.
            batches: What validation found of its batches (`kclient.storage.Log.append`'s ``batches``).
            validate_producer_state: Check the idempotent producers'
                sequence numbers (False for a coordinator's transaction
                marker, `kclient.broker.txn_markers_api`).

        Returns:
            The log's `kclient.storage.AppendResult`.

        Raises:
            BrokerResponseError: As `kclient.storage.Log.append` (nothing was
                appended).
            OSError: The write failed.
        """
        alone = self.isr == self._alone and not self.pending_isr and self.leader_id == self.broker_id
        result = self.log.append(
            records,
            now_ms=now_ms,
            leader_epoch=self.leader_epoch,
            validate_producer_state=validate_producer_state,
            batches=batches,
            high_watermark_to_end=alone,
        )
        if result.duplicate:
            return result
        if not alone:
            self.after_leader_append()
        elif result.last_offset >= result.base_offset:
            self._wake()  # (the high watermark moved with the log end offset)
        else:
            self._notify(self._key)
        return result

    def after_leader_append(self) -> None:
        """The leader appended: the high watermark may move (ISR of one);
        Fetch long polls on the partition are woken either way."""
        if not self.maybe_increment_high_watermark():  # (a move wakes them itself)
            self._notify(self._key)

    async def wait_for_replication(self, required_offset: int, deadline: float) -> int:
        """Wait until the high watermark reaches ``required_offset`` (the
        offset after the appended records): every ISR member has them.

        Args:
            required_offset: The first offset after the records.
            deadline: ``trio.current_time()`` at which to give up.

        Returns:
            NONE; REQUEST_TIMED_OUT after ``deadline``;
                NOT_LEADER_OR_FOLLOWER if leadership moved meanwhile (a new
                leader epoch with this broker still leading is fine);
                NOT_ENOUGH_REPLICAS_AFTER_APPEND if the records are
                replicated but the ISR is below ``min.insync.replicas``.
        """
        # A new leader epoch with this broker still leading (the controller
        # shrank the ISR after a broker died) is no reason to fail: the high
        # watermark moves on with the new ISR, as Kafka's DelayedProduce.
        leadership = self.leadership
        while self.log.high_watermark < required_offset:
            if not self.is_leader or self.leadership != leadership or self.log.log_end_offset < required_offset:
                return NOT_LEADER_OR_FOLLOWER
            event = self._hw_moved
            if event is None:
                event = self._hw_moved = trio.Event()
            with trio.move_on_at(deadline):
                await event.wait()
            if trio.current_time() >= deadline and self.log.high_watermark < required_offset:
                return REQUEST_TIMED_OUT
        if len(self.isr) < self.effective_min_isr:
            return NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return NONE

    # ------------------------------------------------------------ leader: followers

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched at ``fetch_offset``: that is its log end
        offset. Updates when it was last caught up (Kafka's rule: caught up
        now if it asked for the leader's log end offset, or at its previous
        fetch if it reached what the leader had then), may add it to the
        ISR and may advance the high watermark."""
        state = self.remote.get(replica_id)
        if state is None:
            if replica_id not in self.replicas:
                return
            state = self.remote[replica_id] = ReplicaState()
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            state.last_caught_up_ms = now_ms
        elif state.last_fetch_leader_leo >= 0 and fetch_offset >= state.last_fetch_leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now_ms
        state.last_fetch_leader_leo = leader_leo
        if (
            replica_id not in self.isr
            and not self.isr_change_pending
            and fetch_offset >= self.log.high_watermark
            and fetch_offset >= self.leader_epoch_start_offset
        ):
            log.info("%s-%d: replica %d caught up (offset %d); adding it to the ISR", self.topic, self.partition, replica_id, fetch_offset)
            self._request_isr_change(self, tuple(sorted(set(self.isr) | {replica_id})))
        self.maybe_increment_high_watermark()

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR followers not caught up for more than ``max_lag_ms``."""
        if not self.is_leader:
            return []
        out = []
        for r in self.isr:
            if r == self.broker_id:
                continue
            state = self.remote.get(r)
            if state is None or now_ms - state.last_caught_up_ms > max_lag_ms:
                out.append(r)
        return out

    def begin_isr_change(self, isr: tuple[int, ...]) -> bool:
        """An ISR change is about to be written: from now until
        `end_isr_change` the high watermark also waits for its replicas.

        Returns:
            False (nothing starts) if a change is being written already or
            ``isr`` is the current ISR.
        """
        if self.isr_change_pending or tuple(sorted(isr)) == tuple(sorted(self.isr)):
            return False
        self.isr_change_pending = True
        self.pending_isr = tuple(isr)
        return True

    def end_isr_change(self) -> None:
        """The change is written and applied (`apply_isr`), or not written:
        the high watermark follows the ISR alone again."""
        self.isr_change_pending = False
        self.pending_isr = ()
        self.maybe_increment_high_watermark()  # an unwritten change held it back

    def apply_isr(self, isr: tuple[int, ...], zk_version: int) -> None:
        """An ISR change was written: apply it."""
        self.isr = isr
        self.zk_version = zk_version
        self.maybe_increment_high_watermark()
        self._wake()

    def maybe_increment_high_watermark(self) -> bool:
        """Leader: set the high watermark to the smallest log end offset in
        the ISR (and the ISR being written, `pending_isr`) if that is
        higher; True if it moved."""
        me = self.broker_id
        if self.leader_id != me:
            return False
        log_ = self.log
        hw = log_.log_end_offset
        for r in set(self.isr).union(self.pending_isr) if self.pending_isr else self.isr:
            if r == me:
                continue
            state = self.remote.get(r)
            if state is None or state.log_end_offset < 0:
                return False
            hw = min(hw, state.log_end_offset)
        if hw > log_.high_watermark:
            log_.update_high_watermark(hw)
            self._wake()
            return True
        return False

    def _wake(self) -> None:
        event = self._hw_moved
        if event is not None:
            self._hw_moved = None
            event.set()
        self._notify(self._key)


__all__ = ["Partition", "ReplicaState"]
