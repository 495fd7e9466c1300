"""Plug-ins named by dotted class path in tests/test_producer.py
(``partitioner.class``, ``serializer.class``, ``key.serializer.class``,
``event.handler``, ``callback.handler``)."""

from __future__ import annotations

import threading

from kclient.client.producer.callbacks import CallbackHandler
from kclient.client.producer.event_handler import DefaultEventHandler
from kclient.client.producer.partitioner import Partitioner
from kclient.client.serde import Encoder


class LastPartitioner(Partitioner):
    """Every message goes to the highest partition."""

    def partition(self, key, num_partitions):
        return num_partitions - 1


class KeyDigitPartitioner(Partitioner):
    """The key's last character is a digit naming the partition (mod n)."""

    def partition(self, key, num_partitions):
        return int(key.decode()[-1]) % num_partitions


class OutOfRangePartitioner(Partitioner):
    """A broken partitioner: returns a partition that does not exist."""

    def partition(self, key, num_partitions):
        return num_partitions + 7


class UpperStringEncoder(Encoder):
    """str -> upper-cased UTF-8 bytes."""

    def to_message(self, value):
        return value.upper().encode("utf-8")


class PrefixKeyEncoder(Encoder):
    """str key -> b"key:" + UTF-8 bytes; takes the config to show it is passed."""

    def __init__(self, config=None):
        self.config = config

    def to_message(self, value):
        return b"key:" + value.encode("utf-8")


class RecordingEventHandler(DefaultEventHandler):
    """The default pipeline, recording the message count of every batch it
    handles; ``wait_for(n)`` blocks until ``n`` batches were handled."""

    def __init__(self):
        super().__init__()
        self.batch_sizes: list[int] = []
        self._cond = threading.Condition()

    async def handle(self, events):
        try:
            await super().handle(events)
        finally:
            with self._cond:
                self.batch_sizes.append(sum(len(d.messages) for d in events))
                self._cond.notify_all()

    def wait_for(self, batches: int, timeout: float = 20.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.batch_sizes) >= batches, timeout)


class GateCallbacks(CallbackHandler):
    """Holds the ProducerSendThread in ``before_sending_data`` until
    ``release`` is set, so a test can fill the queue deterministically.
    ``entered`` is set once the send thread is held. Records every hook call
    with the name of the thread it ran on."""

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[tuple[str, str]] = []
        self.enqueued: list[tuple[object, bool]] = []
        self.errors: list[tuple[list, BaseException]] = []
        self.closed = False

    def _note(self, hook):
        self.calls.append((hook, threading.current_thread().name))

    def before_enqueue(self, data):
        self._note("before_enqueue")
        return data

    def after_enqueue(self, data, added):
        self._note("after_enqueue")
        self.enqueued.append((data, added))

    def after_dequeuing_existing_data(self, data):
        self._note("after_dequeuing_existing_data")
        return [data]

    def before_sending_data(self, batch):
        self._note("before_sending_data")
        self.entered.set()
        if not self.release.wait(30):
            raise RuntimeError("test gate never released")
        return batch

    def on_send_error(self, events, exc):
        self._note("on_send_error")
        self.errors.append((list(events), exc))

    def close(self):
        self._note("close")
        self.closed = True
