"""Throttle times the brokers asked of a client, as Kafka's client metrics
report them (KIP-13, KIP-219).

Kafka's producer reports ``produce-throttle-time-avg`` and
``produce-throttle-time-max`` (ms, over the Produce responses), its
consumer ``fetch-throttle-time-avg`` and ``fetch-throttle-time-max`` (over
the Fetch responses): each response's ``throttle_time_ms``, zero included,
over the client's sampled windows (``metrics.num.samples`` = 2 windows of
``metrics.sample.window.ms`` = 30 s, Kafka's defaults). A
`ThrottleTracker` is that sensor: the connections a client opens record
into it (`kclient.net.connection.BrokerConnection.throttles`) and the
client's statistics read it (`kclient.ProducerStatistics`,
`kclient.ConsumerStatistics`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["SAMPLE_WINDOW_SECONDS", "NUM_SAMPLES", "ThrottleTracker"]

#: Kafka's ``metrics.sample.window.ms`` default (30 s), in seconds.
SAMPLE_WINDOW_SECONDS = 30.0
#: Kafka's ``metrics.num.samples`` default.
NUM_SAMPLES = 2


class _Sample:
    __slots__ = ("start", "count", "total", "max")

    def __init__(self, start: float) -> None:
        self.start = start
        self.count = 0
        self.total = 0.0
        self.max = 0.0


class ThrottleTracker:
    """The throttle times of one client's responses, per API key.

    Thread-safe: the connections record on the client's trio thread, the
    statistics read from any thread.

    Args:
        window: Each sample's length (seconds).
        samples: How many samples are kept.
        clock: Seconds, monotonic.
    """

    def __init__(self, window: float = SAMPLE_WINDOW_SECONDS, samples: int = NUM_SAMPLES, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.samples = max(1, samples)
        self.clock = clock
        self._lock = threading.Lock()
        self._by_api: dict[int, list[_Sample]] = {}

    def record(self, api_key: int, throttle_time_ms: float) -> None:
        """Record one response's ``throttle_time_ms``.

        Args:
            api_key: The response's API key (0 Produce, 1 Fetch, ...).
            throttle_time_ms: Its throttle time (ms; 0 when not throttled).
        """
        now = self.clock()
        value = max(0.0, float(throttle_time_ms))
        with self._lock:
            samples = self._by_api.setdefault(api_key, [])
            if not samples or now - samples[-1].start >= self.window:
                samples.append(_Sample(now))
                del samples[: -self.samples]
            sample = samples[-1]
            sample.count += 1
            sample.total += value
            sample.max = max(sample.max, value)

    def _live(self, api_key: int) -> list[_Sample]:
        oldest = self.clock() - self.window * self.samples
        return [s for s in self._by_api.get(api_key, ()) if s.start > oldest]

    def avg(self, api_key: int) -> float:
        """The average throttle time (ms) of the API's responses in the live
        samples; 0.0 when there are none (Kafka reports NaN)."""
        with self._lock:
            live = self._live(api_key)
            count = sum(s.count for s in live)
            return sum(s.total for s in live) / count if count else 0.0

    def max(self, api_key: int) -> float:
        """The longest throttle time (ms) of the API's responses in the live
        samples; 0.0 when there are none."""
        with self._lock:
            return max((s.max for s in self._live(api_key)), default=0.0)
