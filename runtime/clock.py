"""The Clock port: the only place that reads time.

Two readings are offered, both in integer milliseconds:

* ``now_ms()`` is monotonic. Timers, lag decisions (``replica.lag.time.max.ms``), deadlines and
  everything that compares two instants use it, so a wall-clock jump never shrinks an ISR.
* ``wall_clock_ms()`` is Unix-epoch time. It is used only where Kafka writes a timestamp people
  read: record timestamps (CreateTime/LogAppendTime), znode ``timestamp`` fields, segment file times.

``LoopClock`` reads the monotonic clock asyncio's default loop uses and schedules on the loop.
``ManualClock`` is virtual time for tests and simulations: nothing moves until a test calls
``advance``/``advance_to``, which runs due callbacks in (due time, scheduling order).

Rules kept here:
* Nothing outside this module (and ``runtime/rng.py`` for randomness) reads ambient time; ruff's
  banned-api list enforces it.
* A callback scheduled for the same instant as another runs after it (FIFO per instant), so virtual
  time is deterministic.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Clock", "LoopClock", "ManualClock", "TimerHandle", "wait_ms"]


class TimerHandle(Protocol):
    """A scheduled callback that can be cancelled (idempotent)."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Time source and timer scheduler, in integer milliseconds."""

    def now_ms(self) -> int:
        """Monotonic milliseconds; only differences are meaningful."""
        ...

    def wall_clock_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...

    def now_ns(self) -> int:
        """Monotonic nanoseconds, for durations finer than a millisecond (request latencies)."""
        ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once, ``delay_ms`` from now (negative delays run as soon as possible)."""
        ...


async def wait_ms(clock: Clock, delay_ms: int) -> None:
    """Wait ``delay_ms`` on ``clock``: a client's retry back-off outside any actor. A timer on the
    Clock port (not an ambient sleep), so virtual time drives it where a ManualClock is used."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def fire() -> None:
        if not future.done():
            future.set_result(None)

    handle = clock.call_later(delay_ms, fire)
    try:
        await future
    finally:
        handle.cancel()


class LoopClock:
    """Production clock: the asyncio loop's monotonic clock plus the system wall clock."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    def _get_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def now_ms(self) -> int:
        # asyncio's default loop clock is time.monotonic; reading it directly works from any
        # thread (log recovery runs in a worker thread at start-up).
        return time.monotonic_ns() // 1_000_000

    def wall_clock_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return self._get_loop().call_later(max(delay_ms, 0) / 1000.0, callback)


@dataclass(eq=False)
class _ManualTimer:
    due_ms: int
    callback: Callable[[], None]
    cancelled: bool = field(default=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Virtual time. ``now_ms`` starts at ``start_ms``; wall-clock time is ``wall_offset_ms`` + now."""

    def __init__(self, start_ms: int = 0, wall_offset_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._wall_offset_ms = wall_offset_ms
        self._heap: list[tuple[int, int, _ManualTimer]] = []
        self._sequence = itertools.count()

    def now_ms(self) -> int:
        return self._now_ms

    def wall_clock_ms(self) -> int:
        return self._wall_offset_ms + self._now_ms

    def now_ns(self) -> int:
        return self._now_ms * 1_000_000

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        timer = _ManualTimer(self._now_ms + max(delay_ms, 0), callback)
        heapq.heappush(self._heap, (timer.due_ms, next(self._sequence), timer))
        return timer

    def next_due_ms(self) -> int | None:
        """The due time of the earliest pending callback, or None if nothing is scheduled."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def run_due(self) -> int:
        """Run every callback due at or before now; returns how many ran."""
        ran = 0
        while self._heap and self._heap[0][0] <= self._now_ms:
            _, _, timer = heapq.heappop(self._heap)
            if not timer.cancelled:
                timer.cancelled = True
                timer.callback()
                ran += 1
        return ran

    def step(self) -> bool:
        """Jump to the earliest pending callback and run everything due then. False if none."""
        due = self.next_due_ms()
        if due is None:
            return False
        self._now_ms = max(self._now_ms, due)
        self.run_due()
        return True

    def advance_to(self, target_ms: int) -> None:
        """Move time to ``target_ms`` (never backwards), running callbacks in due order."""
        if target_ms < self._now_ms:
            raise ValueError(f"virtual time cannot go backwards: {target_ms} < {self._now_ms}")
        while True:
            due = self.next_due_ms()
            if due is None or due > target_ms:
                break
            self._now_ms = due
            self.run_due()
        self._now_ms = target_ms

    def advance(self, delta_ms: int) -> None:
        """Move time forward by ``delta_ms``, running due callbacks in order."""
        self.advance_to(self._now_ms + delta_ms)
