"""Event-loop lag: how late the loop runs a callback that is due, measured by a probe timer.

A process whose loop is busy in one long iteration (handlers running back to back, a blocking
call) serves nothing meanwhile: no socket is read, no ZooKeeper ping goes out, no timer fires. The
probe asks to be woken every ``interval_ms`` and counts how much later than asked it was woken.

Rules kept here:

* Measured on the Clock the probe is given (the loop's clock in production); the probe never
  sleeps otherwise and holds no state but its figures.
* ``max_lag_ms`` is the largest lag since the probe started; ``stalls_total`` counts lags of at least
  ``stall_ms``, each also logged once it is over (a stall cannot be logged while it lasts).
"""

from __future__ import annotations

import logging

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from runtime.clock import Clock, wait_ms

__all__ = ["LoopLagProbe"]

_log = logging.getLogger("actorlog.runtime.loop_lag")


class LoopLagProbe:
    """Run ``run()`` as a task for as long as the loop should be watched."""

    def __init__(self, clock: Clock, *, interval_ms: int = 100, stall_ms: int = 1_000) -> None:
        if interval_ms <= 0 or stall_ms <= 0:
            raise ValueError("interval_ms and stall_ms must be positive")
        self._clock = clock
        self._interval_ms = interval_ms
        self._stall_ms = stall_ms
        self.max_lag_ms = 0
        self.stalls_total = 0

    async def run(self) -> None:
        clock = self._clock
        while True:
            due_ns = clock.now_ns() + self._interval_ms * 1_000_000
            await wait_ms(clock, self._interval_ms)
            self.record(max(0, (clock.now_ns() - due_ns) // 1_000_000))

    def record(self, lag_ms: int) -> None:
        """One probe's lag (``run`` calls this; tests may too)."""
        self.max_lag_ms = max(self.max_lag_ms, lag_ms)
        if lag_ms >= self._stall_ms:
            self.stalls_total += 1
            _log.warning("the event loop was stalled for %d ms", lag_ms)

    def metric_families(self) -> list[Metric]:
        largest = GaugeMetricFamily(
            "actorlog_event_loop_lag_max_seconds",
            "Largest delay of the event loop in running a due callback since the process started.",
        )
        largest.add_metric([], self.max_lag_ms / 1000)
        stalls = CounterMetricFamily(
            "actorlog_event_loop_stalls",
            "Event-loop delays of at least one second (each is also logged).",
        )
        stalls.add_metric([], self.stalls_total)
        return [largest, stalls]
