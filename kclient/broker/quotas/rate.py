"""A rate over sampled windows, as Kafka's ``Rate`` / ``SampledStat``
measures a client's bytes for its quota (``quota.window.num`` windows of
``quota.window.size.seconds`` each; Kafka's defaults 11 and 1).

The rate is the total of the live windows over the elapsed time since the
oldest one began, that time being at least ``num - 1`` full windows (so a
new client is not throttled by its first request). The throttle time that
brings the rate back to the quota is Kafka's ``QuotaUtils.throttleTime``:
``(rate - quota) / quota * window``.
"""

from __future__ import annotations

import attrs

__all__ = ["SampledRate"]


@attrs.define
class _Sample:
    start: float
    total: float = 0.0


class SampledRate:
    """Units per second over the last ``num`` windows of ``size`` seconds.

    Args:
        num: ``quota.window.num`` (at least 1).
        size: ``quota.window.size.seconds`` (seconds, > 0).
    """

    def __init__(self, num: int, size: float) -> None:
        self.num = max(1, num)
        self.size = size
        self._samples: list[_Sample] = []

    def _purge(self, now: float) -> None:
        horizon = now - self.num * self.size
        self._samples = [s for s in self._samples if s.start + self.size > horizon]

    def record(self, value: float, now: float) -> None:
        """Add ``value`` (bytes) at time ``now`` (seconds)."""
        self._purge(now)
        if not self._samples or now >= self._samples[-1].start + self.size:
            self._samples.append(_Sample(now))
        self._samples[-1].total += value

    def window(self, now: float) -> float:
        """The elapsed time the rate is measured over (seconds, Kafka's
        ``Rate.windowSize``)."""
        self._purge(now)
        oldest = self._samples[0].start if self._samples else now
        elapsed = now - oldest
        full = int(elapsed / self.size)
        least = self.num - 1
        if full < least:
            elapsed += (least - full) * self.size
        return elapsed

    def rate(self, now: float) -> float:
        """Units per second now."""
        self._purge(now)
        total = sum(s.total for s in self._samples)
        window = self.window(now)
        return total / window if window > 0 else 0.0

    def throttle_time(self, quota: float, now: float) -> float:
        """Seconds to wait so that the rate falls back to ``quota`` (0 when
        within it).

        Args:
            quota: Units per second allowed (> 0).
            now: The time (seconds).
        """
        rate = self.rate(now)
        if quota <= 0 or rate <= quota:
            return 0.0
        return (rate - quota) / quota * self.window(now)

    def unrecord(self, value: float, now: float) -> None:
        """Take back ``value`` recorded at ``now`` (a Fetch answered empty
        because it was throttled, as Kafka's ``unrecordQuotaSensor``)."""
        if self._samples:
            self._samples[-1].total -= value
