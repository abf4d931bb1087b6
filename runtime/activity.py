"""Activity: a count of work in flight, so tests wait for quiescence on an event, never a sleep.

Every queued message, running pipe operation and in-flight transport delivery holds one unit.
Work that holds a unit for a while takes a ``Hold`` (``Activity.hold()``), released exactly once
however the work ends. ``wait_idle()`` returns when the count is zero: nothing more will happen
until time advances or something external arrives. Several actor systems and a memory network may
share one ``Activity`` to wait for a whole in-process cluster to settle.
"""

from __future__ import annotations

import asyncio

__all__ = ["Activity", "Hold"]


class Activity:
    def __init__(self) -> None:
        self._count = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._began = asyncio.Event()

    @property
    def count(self) -> int:
        return self._count

    def begin(self) -> None:
        self._count += 1
        self._began.set()
        if self._count == 1:
            self._idle.clear()

    def end(self) -> None:
        self._count -= 1
        if self._count < 0:
            raise AssertionError("activity count went negative")
        if self._count == 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        # Yield once first so that callbacks scheduled with call_soon get a chance to begin().
        while True:
            await asyncio.sleep(0)  # noqa: TID251 - a scheduling point, not a sleep
            if self._count == 0:
                return
            await self._idle.wait()

    async def wait_begin(self) -> None:
        """Wait until some work begins after this call (for a driver that moves virtual time
        whenever everything is idle: it may have found nothing due only because the work that
        will set the next timer had not begun yet)."""
        self._began.clear()
        await self._began.wait()

    def hold(self) -> Hold:
        """Take one unit until the returned hold is released."""
        return Hold(self)


class Hold:
    """One unit of activity, released at most once (a second release does nothing)."""

    __slots__ = ("_activity", "_held")

    def __init__(self, activity: Activity) -> None:
        self._activity = activity
        self._held = True
        activity.begin()

    def release(self) -> None:
        if self._held:
            self._held = False
            self._activity.end()
