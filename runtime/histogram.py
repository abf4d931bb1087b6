"""A pure histogram accumulator that actors own and expose through ``statistics()``.

Actors may not import ``prometheus_client`` (import-linter forbids it), yet some metrics are events
rather than state: request durations, propagation delays, election times. An actor records those
in a ``Histogram`` and puts ``histogram.snapshot()`` in its statistics; the metrics collector turns
the snapshot into a Prometheus histogram family at scrape time.

Values are in base units (seconds). Buckets are cumulative on output, as Prometheus expects.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

__all__ = [
    "LATENCY_BUCKETS_SECONDS",
    "PROPAGATION_BUCKETS_SECONDS",
    "Histogram",
    "HistogramSnapshot",
]

# Loopback RPCs take 0.1-1 ms, so the default Prometheus buckets (5 ms .. 10 s) are too coarse.
LATENCY_BUCKETS_SECONDS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0,
)  # fmt: skip
# The ISR change propagation rule delays by 5 s of quiet and at most ~60 s.
PROPAGATION_BUCKETS_SECONDS: tuple[float, ...] = (
    1.0, 2.5, 5.0, 6.0, 7.5, 10.0, 15.0, 30.0, 45.0, 60.0, 62.5, 75.0, 120.0,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """Cumulative bucket counts (upper bound, count), plus sum and count of all observations."""

    buckets: tuple[tuple[float, int], ...]
    sum: float
    count: int


class Histogram:
    __slots__ = ("_bounds", "_count", "_counts", "_sum")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS_SECONDS) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError("histogram bounds must be strictly increasing")
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)  # the last slot is +Inf
        self._sum = 0.0
        self._count = 0

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self._bounds, value)] += 1
        self._sum += value
        self._count += 1

    @property
    def count(self) -> int:
        return self._count

    def snapshot(self) -> HistogramSnapshot:
        cumulative = 0
        buckets: list[tuple[float, int]] = []
        for bound, count in zip((*self._bounds, float("inf")), self._counts, strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        return HistogramSnapshot(tuple(buckets), self._sum, self._count)

    def quantile(self, q: float) -> float | None:
        """An upper-bound estimate of the q-quantile (the bucket bound containing it)."""
        if self._count == 0:
            return None
        rank = q * self._count
        cumulative = 0
        for bound, count in zip((*self._bounds, float("inf")), self._counts, strict=True):
            cumulative += count
            if cumulative >= rank:
                return bound
        return float("inf")
