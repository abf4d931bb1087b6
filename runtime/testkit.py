"""Test support that ships with the runtime: a synchronous behaviour kit and virtual-time stepping.

``BehaviorTestKit`` (Akka's BehaviorTestKit) runs one actor's handlers directly, with no event loop,
on a ``ManualClock``. Each call returns the effects the handler recorded, so a test asserts exactly
what the actor decided: who it told, what it replied, which timers it started, which I/O it piped.
Timers are real ManualClock timers: ``advance(ms)`` delivers due timer messages in time order.
Pipes are not run: the test plays their outcome with ``complete_pipe``.

``advance(clock, activity, ms)`` is the virtual-time driver for full actor systems: it moves a
ManualClock forward one due timer at a time and waits for quiescence (``Activity.wait_idle``)
after each, so timer-driven work interleaves with message handling exactly as it would in real
time, without sleeping.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from runtime.activity import Activity
from runtime.actor import Actor
from runtime.clock import ManualClock, TimerHandle
from runtime.context import Context
from runtime.effects import Ask, CancelTimer, Effect, Pipe, Reply, Spawn, StartTimer, Stop, Tell
from runtime.messages import Requester
from runtime.recording_context import RecordingContext
from runtime.ref import ActorRef

__all__ = ["BehaviorTestKit", "advance"]

M = TypeVar("M")
T = TypeVar("T")


async def advance(clock: ManualClock, activity: Activity, delta_ms: int) -> None:
    """Advance virtual time by ``delta_ms``, letting the systems settle after each due timer."""
    target = clock.now_ms() + delta_ms
    await activity.wait_idle()
    while True:
        due = clock.next_due_ms()
        if due is None or due > target:
            break
        clock.advance_to(due)
        await activity.wait_idle()
    clock.advance_to(target)
    await activity.wait_idle()


@dataclass(slots=True)
class _KitTimer:
    message: Any
    interval_ms: int | None
    handle: TimerHandle | None = None


class _KitContext(RecordingContext):
    def __init__(self, kit: BehaviorTestKit[Any]) -> None:
        self._kit = kit
        self.effects: list[Effect] = []
        self.sender_ref: ActorRef | None = None
        self.current_requester: Requester | None = None
        self._log = logging.LoggerAdapter(
            logging.getLogger("actorlog.testkit"), {"actor": kit.ref.name, "node": kit.ref.node_id}
        )

    @property
    def self_ref(self) -> ActorRef:
        return self._kit.ref

    @property
    def now_ms(self) -> int:
        return self._kit.clock.now_ms()

    @property
    def wall_clock_ms(self) -> int:
        return self._kit.clock.wall_clock_ms()

    @property
    def now_ns(self) -> int:
        return self._kit.clock.now_ns()

    @property
    def rng(self) -> random.Random:
        return self._kit.rng

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        return self._log

    @property
    def sender(self) -> ActorRef | None:
        return self.sender_ref

    @property
    def requester(self) -> Requester | None:
        return self.current_requester

    def _next_ask_id(self) -> int:
        return next(self._kit._ask_ids)

    def message_adapter(self, adapt: Callable[[T], Any]) -> Callable[[T], None]:
        def post(value: T) -> None:
            self._kit.inbox.append(adapt(value))

        return post


class BehaviorTestKit(Generic[M]):
    """Drives one actor synchronously and records its effects."""

    def __init__(
        self,
        actor: Actor[M],
        *,
        name: str = "under-test",
        node_id: str = "test",
        clock: ManualClock | None = None,
        seed: int = 0,
    ) -> None:
        self.actor = actor
        self.ref = ActorRef(node_id=node_id, name=name)
        self.clock = clock if clock is not None else ManualClock()
        self.rng = random.Random(seed)
        self.timers: dict[Hashable, _KitTimer] = {}
        # Messages posted by timers and message adapters, run by run_inbox() / advance().
        self.inbox: deque[Any] = deque()
        self._ask_ids = itertools.count(1)
        self._reply_ids = itertools.count(1)
        self._context = _KitContext(self)
        self.all_effects: list[Effect] = []
        self._run(lambda ctx: actor.on_start(ctx))

    # ------------------------------------------------------------------------------ driving

    def tell(self, message: M, *, sender: ActorRef | None = None) -> list[Effect]:
        """Handle a tell; returns its effects."""
        return self._handle(message, sender, None)

    def ask(
        self, message: M, *, sender: ActorRef | None = None, timeout_ms: int = 30_000
    ) -> tuple[Requester, list[Effect]]:
        """Handle an ask; returns the requester token (to match Reply effects) and the effects."""
        requester = Requester(next(self._reply_ids), self.clock.now_ms() + timeout_ms)
        return requester, self._handle(message, sender, requester)

    def advance(self, delta_ms: int) -> list[Effect]:
        """Move time forward, handling timer messages as they fall due; returns all effects."""
        effects: list[Effect] = []
        target = self.clock.now_ms() + delta_ms
        while True:
            effects.extend(self.run_inbox())
            due = self.clock.next_due_ms()
            if due is None or due > target:
                break
            self.clock.advance_to(due)
        self.clock.advance_to(target)
        effects.extend(self.run_inbox())
        return effects

    def run_inbox(self) -> list[Effect]:
        effects: list[Effect] = []
        while self.inbox:
            effects.extend(self._handle(self.inbox.popleft(), None, None))
        return effects

    def complete_pipe(self, pipe: Pipe, result: Any) -> list[Effect]:
        """Deliver the successful outcome of a recorded pipe and handle it."""
        return self._handle(pipe.on_success(result), None, None)

    def fail_pipe(self, pipe: Pipe, error: Exception) -> list[Effect]:
        return self._handle(pipe.on_failure(error), None, None)

    def stop(self) -> list[Effect]:
        for timer in self.timers.values():
            if timer.handle is not None:
                timer.handle.cancel()
        self.timers.clear()
        return self._run(lambda ctx: self.actor.on_stop(ctx))

    # ---------------------------------------------------------------------------- internals

    def _handle(self, message: Any, sender: ActorRef | None, requester: Requester | None) -> list[Effect]:
        def run(ctx: Context[Any]) -> None:
            self.actor.receive(ctx, message)

        self._context.sender_ref = sender
        self._context.current_requester = requester
        try:
            return self._run(run)
        finally:
            self._context.sender_ref = None
            self._context.current_requester = None

    def _run(self, body: Callable[[Context[Any]], None]) -> list[Effect]:
        self._context.effects = []
        body(self._context)
        effects = self._context.effects
        self._context.effects = []
        for effect in effects:
            self._apply_timer(effect)
        self.all_effects.extend(effects)
        return effects

    def _apply_timer(self, effect: Effect) -> None:
        if isinstance(effect, StartTimer):
            previous = self.timers.pop(effect.key, None)
            if previous is not None and previous.handle is not None:
                previous.handle.cancel()
            timer = _KitTimer(effect.message, effect.interval_ms)
            self.timers[effect.key] = timer
            self._schedule(effect.key, timer, effect.delay_ms)
        elif isinstance(effect, CancelTimer):
            cancelled = self.timers.pop(effect.key, None)
            if cancelled is not None and cancelled.handle is not None:
                cancelled.handle.cancel()

    def _schedule(self, key: Hashable, timer: _KitTimer, delay_ms: int) -> None:
        def fire() -> None:
            if self.timers.get(key) is not timer:
                return
            if timer.interval_ms is not None:
                self._schedule(key, timer, timer.interval_ms)
            else:
                del self.timers[key]
            self.inbox.append(timer.message)

        timer.handle = self.clock.call_later(delay_ms, fire)

    # --------------------------------------------------------------------------- inspection

    @staticmethod
    def tells(effects: list[Effect]) -> list[Tell]:
        return [e for e in effects if isinstance(e, Tell)]

    @staticmethod
    def replies(effects: list[Effect]) -> list[Reply]:
        return [e for e in effects if isinstance(e, Reply)]

    @staticmethod
    def asks(effects: list[Effect]) -> list[Ask]:
        return [e for e in effects if isinstance(e, Ask)]

    @staticmethod
    def pipes(effects: list[Effect]) -> list[Pipe]:
        return [e for e in effects if isinstance(e, Pipe)]

    @staticmethod
    def spawns(effects: list[Effect]) -> list[Spawn]:
        return [e for e in effects if isinstance(e, Spawn)]

    @staticmethod
    def stops(effects: list[Effect]) -> list[Stop]:
        return [e for e in effects if isinstance(e, Stop)]
