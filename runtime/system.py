"""ActorSystem: one per node. Mailboxes, the mailbox loops, timers, asks, pipes and supervision.

Theory of operation
-------------------
Every actor lives in a *cell*: its ref, its mailbox (a deque), its current instance, its timers and
its children. One asyncio task per cell drains the mailbox and calls the instance's ``receive``
synchronously; the effects the handler recorded are then applied in order. All tasks (mailbox
loops, pipe operations, transport pumps) belong to the system's single ``TaskGroup``: nothing is
fire-and-forget, and an exception that escalates past a top-level actor ends the group and the node.

Rules this module keeps
-----------------------
* A handler's effects are applied only if it returns normally.
* Mailboxes are bounded for *ingress*: ``deliver`` (the transport's inbound path) waits while the
  mailbox is at capacity, which pushes back on remote senders. Sends between actors of one node,
  timer deliveries, ask replies and pipe results never wait and are never dropped: blocking there
  could deadlock two actors that send to each other. Depth is a metric (``statistics()``).
* A timer that was cancelled or replaced never delivers, even if its message was already queued
  (each timer carries a generation).
* A restarted actor keeps its ref and its mailbox; its timers and children are stopped first.
* Every deadline (ask timeouts, restart back-off) is measured on the system's Clock, so virtual time
  drives them in tests.
* With a turn budget (``turn_budget_ms``), the handlers one event-loop iteration runs stop taking
  items once the iteration has run for the budget on the system's Clock; the cells still waiting go
  on in later iterations, first come first served. asyncio runs in one iteration every task that
  was ready when it began, so without a budget a handler that spawns or tells thousands of actors
  makes one iteration run all their handlers back to back, and nothing else (socket reads,
  ZooKeeper pings) is served meanwhile. A virtual clock does not move while handlers run, so under
  one nothing is deferred and the order is the same as without a budget.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeAlias, TypeVar, assert_never

from runtime.activity import Activity, Hold
from runtime.actor import Actor, message_kinds
from runtime.clock import Clock, LoopClock, TimerHandle
from runtime.codec import WireEnvelope
from runtime.effects import Ask, CancelTimer, Effect, Halt, Pipe, Reply, Spawn, StartTimer, Stop, Tell
from runtime.errors import (
    AskTimeoutError,
    MailboxClosedError,
    PeerUnavailableError,
    RefusedMessageError,
    RemoteRequestError,
    TransportError,
    UnknownActorError,
)
from runtime.messages import (
    AskFailure,
    AskTimedOut,
    Envelope,
    PeerUnavailable,
    Requester,
    UnknownActor,
)
from runtime.recording_context import RecordingContext
from runtime.ref import ActorRef
from runtime.supervision import Directive, RestartTracker, SupervisorStrategy
from runtime.transport.base import Transport

__all__ = ["ActorSystem", "CellStatistics", "ChildFailedError", "NodeHalted", "SystemStatistics"]

T = TypeVar("T")
M = TypeVar("M")

_log = logging.getLogger("actorlog.runtime.system")


class NodeHalted(Exception):
    """An actor halted its node (``Context.halt_node``)."""

    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(f"node {node_id} halted: {reason}")
        self.node_id = node_id
        self.reason = reason


class ChildFailedError(Exception):
    """A child's failure escalated to its parent."""

    def __init__(self, child: ActorRef, error: BaseException) -> None:
        super().__init__(f"child {child} failed: {error!r}")
        self.child = child
        self.error = error


@dataclass(frozen=True, slots=True, kw_only=True)
class CellStatistics:
    name: str
    mailbox_depth: int
    processed_total: int
    failures_total: int
    restarts_total: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemStatistics:
    node_id: str
    actors: tuple[CellStatistics, ...]
    dead_letters_total: int


@dataclass(frozen=True, slots=True)
class _TimerFired:
    key: Hashable
    generation: int
    message: Any


@dataclass(frozen=True, slots=True)
class _Crash:
    """Queued when an outcome adapter raised: the actor fails as if its handler had."""

    error: BaseException


@dataclass(slots=True)
class _Timer:
    generation: int
    handle: TimerHandle
    periodic: bool


@dataclass(slots=True)
class _Route:
    """Where the reply of one pending ask goes."""

    deliver: Callable[[Any], None]
    fail: Callable[[AskFailure], None]
    target: str
    timeout_ms: int
    timer: TimerHandle | None = None


class _CellContext(RecordingContext):
    """The context handed to a cell's handlers; records effects for the cell to take after the
    handler returns. Only its cell calls ``begin`` and ``take_effects``."""

    __slots__ = ("_cell", "_envelope", "effects")

    def __init__(self, cell: _Cell) -> None:
        self._cell = cell
        self._envelope: Envelope | None = None
        self.effects: list[Effect] = []

    def begin(self, envelope: Envelope | None) -> None:
        """A handler (or on_start / on_stop, without an envelope) is about to run."""
        self._envelope = envelope
        self.effects = []

    def take_effects(self) -> list[Effect]:
        """The handler has ended: what it recorded, and the context is clear again."""
        effects = self.effects
        self.effects = []
        self._envelope = None
        return effects

    @property
    def self_ref(self) -> ActorRef:
        return self._cell.ref

    @property
    def now_ms(self) -> int:
        return self._cell.system.clock.now_ms()

    @property
    def wall_clock_ms(self) -> int:
        return self._cell.system.clock.wall_clock_ms()

    @property
    def now_ns(self) -> int:
        return self._cell.system.clock.now_ns()

    @property
    def rng(self) -> random.Random:
        return self._cell.system.rng

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        return self._cell.log

    @property
    def sender(self) -> ActorRef | None:
        return None if self._envelope is None else self._envelope.sender

    @property
    def requester(self) -> Requester | None:
        return None if self._envelope is None else self._envelope.requester

    def _next_ask_id(self) -> int:
        return self._cell.system.next_ask_id()

    def message_adapter(self, adapt: Callable[[T], Any]) -> Callable[[T], None]:
        cell = self._cell

        def post(value: T) -> None:
            cell.post_adapted(adapt, value)

        return post


_Item: TypeAlias = Envelope | _TimerFired | _Crash


class _TurnBudget:
    """How much handler work one event-loop iteration may run, and the cells waiting for a later one.

    A *turn* starts with the first ``admit`` after the previous turn ended and ends at the next loop
    iteration (a callback scheduled when it starts). Within a turn, cells are admitted until the
    Clock has moved ``budget_ns`` since the turn started; later ones wait in order. Each new turn
    wakes the oldest waiters: as many as the last full turn admitted (at least one, so every turn
    makes progress), doubled while a turn ends with budget to spare. A waiter woken but refused again
    goes back to the front, keeping its place."""

    __slots__ = (
        "_admitted",
        "_batch",
        "_budget_ns",
        "_clock",
        "_end_scheduled",
        "_refused",
        "_started_ns",
        "_waiters",
    )

    def __init__(self, clock: Clock, budget_ms: float) -> None:
        self._clock = clock
        self._budget_ns = int(budget_ms * 1_000_000)
        self._started_ns: int | None = None
        self._end_scheduled = False
        self._admitted = 0
        self._batch = 1
        self._waiters: deque[asyncio.Future[None]] = deque()
        # Woken this turn but refused again: they go back ahead of the others when the turn ends.
        self._refused: list[asyncio.Future[None]] = []

    def has_room(self) -> bool:
        """True (and counted) if a handler may run now in this turn."""
        now = self._clock.now_ns()
        if self._started_ns is None:
            self._started_ns = now
            self._admitted = 0
            self._schedule_end()
        elif now - self._started_ns >= self._budget_ns:
            return False
        self._admitted += 1
        return True

    def _schedule_end(self) -> None:
        if not self._end_scheduled:
            self._end_scheduled = True
            asyncio.get_running_loop().call_soon(self._end_turn)

    async def wait_turn(self, *, woken: bool = False) -> None:
        """Wait until a later turn wakes this cell (it then asks ``has_room`` again)."""
        waiter = asyncio.get_running_loop().create_future()
        if woken:
            self._refused.append(waiter)
        else:
            self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._wake_one()  # woken, then cancelled (shutdown): the next waiter takes the wake
            raise

    async def admit(self) -> None:
        """Return once a handler may run in the current turn."""
        woken = False
        while not self.has_room():
            await self.wait_turn(woken=woken)
            woken = True

    def _end_turn(self) -> None:
        self._end_scheduled = False
        exhausted = (
            self._started_ns is not None and self._clock.now_ns() - self._started_ns >= self._budget_ns
        )
        self._started_ns = None
        if self._refused:
            self._waiters.extendleft(reversed(self._refused))
            self._refused.clear()
        if exhausted:
            self._batch = max(1, self._admitted)
        else:
            self._batch = max(self._batch * 2, self._admitted, 1)
        for _ in range(self._batch):
            if not self._wake_one():
                break
        if self._waiters:
            # The next turn's end comes even if no cell woken now asks for room (one paused for a
            # restart's back-off meanwhile): the others would wait for unrelated work otherwise.
            self._schedule_end()

    def _wake_one(self) -> bool:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():  # a cancelled waiter (shutdown) takes no place
                waiter.set_result(None)
                return True
        return False


class _Mailbox:
    """A cell's queue, and the only place a mailbox counts toward the node's quiescence.

    While the mailbox runs, each queued item holds one unit of activity, and so does the item
    taken for processing until ``done()``. While it is paused (before the first start, during a
    restart's back-off, a hold, a stall) its items cannot progress until time passes or someone
    releases it, so they hold none. Once closed it takes nothing more."""

    __slots__ = ("_activity", "_capacity", "_items", "_space_waiters", "_wakeup", "closed", "paused")

    def __init__(self, activity: Activity, capacity: int) -> None:
        self._activity = activity
        self._capacity = capacity
        self._items: deque[_Item] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._space_waiters: deque[asyncio.Future[None]] = deque()
        self.paused = True
        self.closed = False

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: _Item) -> None:
        self._items.append(item)
        if not self.paused:
            self._activity.begin()
            self._wake()

    async def put_when_space(self, item: _Item) -> bool:
        """Wait while the mailbox is at capacity; False if it closed meanwhile (nothing put)."""
        while len(self._items) >= self._capacity and not self.closed:
            waiter = asyncio.get_running_loop().create_future()
            self._space_waiters.append(waiter)
            await waiter
        if self.closed:
            return False
        self.put(item)
        return True

    def pause(self) -> None:
        if not self.paused:
            self.paused = True
            for _ in self._items:
                self._activity.end()

    def resume(self) -> None:
        if self.paused and not self.closed:
            self.paused = False
            for _ in self._items:
                self._activity.begin()
            self._wake()

    async def take(self, budget: _TurnBudget | None = None) -> _Item | None:
        """The next item once the mailbox runs and has one (and ``budget`` has room for it in this
        loop iteration); None once it is closed. An item waits for its turn in the mailbox, so a
        pause or a close meanwhile still applies to it."""
        loop = asyncio.get_running_loop()
        woken = False
        while True:
            while (self.paused or not self._items) and not self.closed:
                self._wakeup = loop.create_future()
                await self._wakeup
                self._wakeup = None
                woken = False
            if self.closed or budget is None or budget.has_room():
                break
            await budget.wait_turn(woken=woken)
            woken = True
        if self.closed:
            return None
        item = self._items.popleft()
        while self._space_waiters and len(self._items) < self._capacity:
            waiter = self._space_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        return item

    def done(self) -> None:
        """The item taken last has been processed (however it ended)."""
        self._activity.end()

    def close(self) -> list[_Item]:
        """Take nothing more; returns what was still queued (dead letters for the caller)."""
        self.pause()
        self.closed = True
        left = list(self._items)
        self._items.clear()
        for waiter in self._space_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._space_waiters.clear()
        self._wake()
        return left

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)


class _Cell:
    """One actor's home: ref, mailbox, instance, timers, children and supervision state.

    The cell owns all of these; the system owns the node (the registry of cells, ask routes,
    tasks, the stall) and applies the effects a handler recorded. What the cell asks of the
    system is its small interface: ``apply_effects``, ``dead_letter``, ``forget``, ``fail_node``,
    ``next_ask_id`` and ``defer_while_stalled``."""

    def __init__(
        self,
        system: ActorSystem,
        ref: ActorRef,
        factory: Callable[[], Actor[Any]],
        strategy: SupervisorStrategy,
        parent: _Cell | None,
    ) -> None:
        self.system = system
        self.ref = ref
        self.factory = factory
        self.parent = parent
        self.tracker = RestartTracker(strategy)
        self.children: dict[str, _Cell] = {}
        self.instance: Actor[Any] | None = None
        # Known once the first incarnation is built: the class decides which kinds are accepted.
        self.actor_class: type[Actor[Any]] | None = None
        self.kinds: frozenset[type] | None = None
        # Paused until the first instance has started.
        self._mailbox = _Mailbox(system.activity, system.mailbox_capacity)
        # Not started yet counts as activity: released once the first incarnation has started
        # (or failed to).
        self._starting = system.activity.hold()
        self._timers: dict[Hashable, _Timer] = {}
        self._timer_generations = itertools.count(1)
        self.context = _CellContext(self)
        self.log = logging.LoggerAdapter(
            logging.getLogger("actorlog.actor"), {"node": system.node_id, "actor": ref.name}
        )
        self.stopped = False
        self.processed_total = 0
        self.failures_total = 0
        self.restarts_total = 0

    @property
    def paused(self) -> bool:
        return self._mailbox.paused

    # ------------------------------------------------------------------------------ mailbox

    def enqueue(self, item: _Item) -> None:
        if self.stopped:
            self.system.dead_letter(self.ref, item)
            return
        self._mailbox.put(item)

    def pause(self) -> None:
        self._mailbox.pause()

    def resume(self) -> None:
        if self.system.defer_while_stalled(self, start=False):
            return
        if not self.stopped:
            self._mailbox.resume()

    async def enqueue_when_space(self, item: Envelope) -> None:
        if self.stopped or not await self._mailbox.put_when_space(item):
            raise MailboxClosedError(str(self.ref))

    def post_adapted(self, adapt: Callable[[T], Any], value: T) -> None:
        try:
            message = adapt(value)
        except Exception as error:  # noqa: BLE001 - a failing adapter fails its actor, by design
            self.enqueue(_Crash(error))
            return
        self.enqueue(Envelope(message))

    # -------------------------------------------------------------------------------- loop

    async def run(self) -> None:
        budget = self.system.turn_budget
        try:
            if budget is not None:
                await budget.admit()
            self.start_instance()
        finally:
            self._starting.release()
        while (item := await self._mailbox.take(budget)) is not None:
            try:
                self._process(item)
            finally:
                self._mailbox.done()

    def _process(self, item: _Item) -> None:
        match item:
            case _TimerFired():
                timer = self._timers.get(item.key)
                if timer is None or timer.generation != item.generation:
                    return  # cancelled or replaced after its message was queued
                if not timer.periodic:
                    del self._timers[item.key]
                envelope = Envelope(item.message)
            case _Crash():
                self.fail(item.error)
                return
            case Envelope():
                envelope = item
            case _:
                assert_never(item)
        instance = self.instance
        assert instance is not None
        if not self._accepts(envelope):
            self.system.dead_letter(self.ref, envelope)
            return
        context = self.context
        context.begin(envelope)
        try:
            hook = self.system.before_handler
            if hook is not None:
                hook(self.ref, envelope.message)
            instance.receive(context, envelope.message)
        except Exception as error:  # noqa: BLE001 - handler failures go to supervision
            context.take_effects()
            self.fail(error)
            return
        effects = context.take_effects()
        self.processed_total += 1
        self.tracker.on_message_processed()
        if effects:
            self.system.apply_effects(self, effects)

    def _accepts(self, envelope: Envelope) -> bool:
        """A kind outside the actor's union, or a remote-ask kind without anyone to answer, never
        reaches ``receive``: it would only raise there, and a raise costs the actor its state."""
        kinds = self.kinds
        kind = type(envelope.message)
        if kinds is not None and kind not in kinds and not isinstance(envelope.message, tuple(kinds)):
            self.log.warning("dead letter: %s does not handle %s", self.ref.name, kind.__name__)
            return False
        actor_class = self.actor_class
        if (
            envelope.requester is None
            and actor_class is not None
            and kind in actor_class.remote_asks
            and kind not in actor_class.remote_tells
        ):
            self.log.warning("dead letter: %s answers %s only as an ask", self.ref.name, kind.__name__)
            return False
        return True

    def start_instance(self) -> None:
        if self.stopped:
            return
        if self.system.defer_while_stalled(self, start=True):
            return
        context = self.context
        try:
            self.instance = self.factory()
            if self.actor_class is None:
                self.actor_class = type(self.instance)
                self.kinds = message_kinds(self.actor_class)
            context.begin(None)
            self.instance.on_start(context)
        except Exception as error:  # noqa: BLE001 - start failures go to supervision
            context.take_effects()
            self.fail(error)
            return
        effects = context.take_effects()
        self.resume()
        self.system.apply_effects(self, effects)

    # ------------------------------------------------------------------------------ timers

    def start_timer(self, effect: StartTimer) -> None:
        previous = self._timers.pop(effect.key, None)
        if previous is not None:
            previous.handle.cancel()
        generation = next(self._timer_generations)
        clock = self.system.clock

        def fire() -> None:
            timer = self._timers.get(effect.key)
            if timer is None or timer.generation != generation or self.stopped:
                return
            # A one-shot timer stays registered until its message is handled or it is cancelled,
            # so that a cancel after firing still suppresses the queued delivery.
            if effect.interval_ms is not None:
                timer.handle = clock.call_later(effect.interval_ms, fire)
            self.enqueue(_TimerFired(effect.key, generation, effect.message))

        self._timers[effect.key] = _Timer(
            generation, clock.call_later(effect.delay_ms, fire), effect.interval_ms is not None
        )

    def cancel_timer(self, key: Hashable) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.handle.cancel()

    # ------------------------------------------------------------------------- supervision

    def fail(self, error: BaseException) -> None:
        self.failures_total += 1
        self.log.error("actor failed: %r", error, exc_info=error)
        directive, delay_ms = self.tracker.on_failure(self.system.clock.now_ms())
        if directive is Directive.RESTART:
            self.restarts_total += 1
            self._stop_incarnation()
            self.pause()
            self.log.warning("restarting in %d ms", delay_ms)
            self.system.clock.call_later(delay_ms, self.start_instance)
        elif directive is Directive.STOP:
            self.stop()
        else:
            self._escalate(error)

    def _escalate(self, error: BaseException) -> None:
        self.stop()
        parent = self.parent
        if parent is not None and not parent.stopped:
            parent.fail(ChildFailedError(self.ref, error))
        else:
            # Past the top: the node fails.
            self.system.fail_node(ChildFailedError(self.ref, error))

    def stop(self) -> None:
        """Stop for good: children and timers first, then ``on_stop``; what is still queued is
        dead-lettered and the system forgets the cell."""
        if self.stopped:
            return
        self._stop_incarnation()
        self.stopped = True
        for item in self._mailbox.close():
            self.system.dead_letter(self.ref, item)
        if self.parent is not None:
            self.parent.children.pop(self.ref.name, None)
        self.system.forget(self)

    def _stop_incarnation(self) -> None:
        for child in reversed(list(self.children.values())):
            child.stop()
        for timer in self._timers.values():
            timer.handle.cancel()
        self._timers.clear()
        instance = self.instance
        self.instance = None
        if instance is not None:
            context = self.context
            context.begin(None)
            try:
                instance.on_stop(context)
            except Exception:
                self.log.exception("on_stop raised")
                context.take_effects()
            effects = context.take_effects()
            # Final effects (a last tell, a reply) still go out; new children do not.
            self.system.apply_effects(self, [e for e in effects if not isinstance(e, Spawn)])

    def statistics(self) -> CellStatistics:
        return CellStatistics(
            name=self.ref.name,
            mailbox_depth=len(self._mailbox),
            processed_total=self.processed_total,
            failures_total=self.failures_total,
            restarts_total=self.restarts_total,
        )


class ActorSystem:
    """Hosts the actors of one node. Use as ``async with ActorSystem(...) as system:``."""

    def __init__(
        self,
        node_id: str,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        transport: Transport | None = None,
        mailbox_capacity: int = 10_000,
        activity: Activity | None = None,
        deterministic: bool = False,
        turn_budget_ms: float | None = None,
    ) -> None:
        if mailbox_capacity <= 0:
            raise ValueError("mailbox_capacity must be positive")
        if turn_budget_ms is not None and turn_budget_ms <= 0:
            raise ValueError("turn_budget_ms must be positive")
        self.node_id = node_id
        self.clock: Clock = clock if clock is not None else LoopClock()
        self.rng = rng if rng is not None else random.Random(0)
        self.transport = transport
        self.mailbox_capacity = mailbox_capacity
        self.activity = activity if activity is not None else Activity()
        # Handler work per event-loop iteration (None: unbounded); see the module docstring.
        self.turn_budget = None if turn_budget_ms is None else _TurnBudget(self.clock, turn_budget_ms)
        self._cells: dict[str, _Cell] = {}
        self._top_level: dict[str, _Cell] = {}
        self._routes: dict[int, _Route] = {}
        self._reply_ids = itertools.count(1)
        self._ask_ids = itertools.count(1)
        self._task_group: asyncio.TaskGroup | None = None
        # Tasks that are not mailbox loops (pipes, remote asks, transport pumps): cancelled at
        # shutdown, since their outcome would go to actors that no longer exist.
        self._auxiliary_tasks: set[asyncio.Task[None]] = set()
        self._dead_letters_total = 0
        self._closing = False
        # Deterministic mode (the simulation): blocking pipes run inline instead of in a worker
        # thread, whose timing no seed decides.
        self.deterministic = deterministic
        # Fault injection (the simulation only): called before every handler with the actor's
        # ref and the message; an exception it raises is what the handler raised.
        self.before_handler: Callable[[ActorRef, object], None] | None = None
        # A stalled process (SIGSTOP): while set, mailboxes hold their messages and no actor
        # starts; what was running, or would have started, continues when the stall ends.
        self._stalled = False
        self._paused_by_stall: list[_Cell] = []
        self._starts_after_stall: list[_Cell] = []

    # ----------------------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> ActorSystem:
        self._task_group = asyncio.TaskGroup()
        await self._task_group.__aenter__()
        if self.transport is not None:
            await self.transport.start(self, self._spawn_task)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        await self.shutdown()
        assert self._task_group is not None
        # The body's own exception propagates as it is: handed to the task group it would come
        # out wrapped in an ExceptionGroup (Python 3.11's TaskGroup), which callers of a client
        # (``async with Admin(...)``) cannot catch as the KafkaError it is.
        await self._task_group.__aexit__(None, None, None)
        return None

    async def shutdown(self) -> None:
        """Stop every actor (children first, then top-level actors in reverse spawn order)."""
        if self._closing:
            return
        self._closing = True
        for cell in reversed(list(self._top_level.values())):
            cell.stop()
        routes = list(self._routes.values())
        self._routes.clear()
        for route in routes:
            if route.timer is not None:
                route.timer.cancel()
            # Whoever waits for these replies learns that this node is gone.
            route.fail(PeerUnavailable(node_id=self.node_id, reason="node shutting down"))
        if self.transport is not None:
            await self.transport.stop()
        for task in list(self._auxiliary_tasks):
            task.cancel()

    def _spawn_task(
        self,
        coroutine: Coroutine[Any, Any, None],
        *,
        auxiliary: bool = True,
        holding: Hold | None = None,
    ) -> None:
        """Start a task of this node. ``holding`` is released when the task ends however it ends,
        even cancelled before its first step (shutdown cancels auxiliary tasks)."""
        if self._task_group is None:
            coroutine.close()
            if holding is not None:
                holding.release()
            raise RuntimeError("the actor system is not running (use `async with`)")
        try:
            task = self._task_group.create_task(coroutine)
        except RuntimeError:
            # The node is failing (its task group is shutting down): nothing new starts. A timer
            # due in the same instant (a supervisor's restart) may still try.
            coroutine.close()
            if holding is not None:
                holding.release()
            return
        if auxiliary:
            self._auxiliary_tasks.add(task)
            task.add_done_callback(self._auxiliary_tasks.discard)
        if holding is not None:
            unit = holding
            task.add_done_callback(lambda _: unit.release())

    # ------------------------------------------------------------------------------ spawning

    def spawn(
        self,
        name: str,
        factory: Callable[[], Actor[Any]],
        *,
        supervision: SupervisorStrategy | None = None,
    ) -> ActorRef:
        """Start a top-level actor. Its name must be unique on this node."""
        return self._spawn(ActorRef(node_id=self.node_id, name=name), factory, supervision, None)

    def _spawn(
        self,
        ref: ActorRef,
        factory: Callable[[], Actor[Any]],
        supervision: SupervisorStrategy | None,
        parent: _Cell | None,
    ) -> ActorRef:
        if self._closing:
            raise RuntimeError(f"cannot spawn {ref.name}: the system is shutting down")
        if ref.node_id != self.node_id:
            raise ValueError(f"cannot spawn {ref} on node {self.node_id}")
        if ref.name in self._cells:
            raise ValueError(f"an actor named {ref.name!r} already exists on node {self.node_id}")
        strategy = supervision if supervision is not None else SupervisorStrategy()
        cell = _Cell(self, ref, factory, strategy, parent)
        self._cells[ref.name] = cell
        if parent is None:
            self._top_level[ref.name] = cell
        else:
            parent.children[ref.name] = cell
        self._spawn_task(cell.run(), auxiliary=False)
        return ref

    def halt(self, reason: str) -> None:
        """End the node: its task group fails with ``NodeHalted`` (the process exits non-zero)."""
        _log.error("halting node %s: %s", self.node_id, reason)
        self.fail_node(NodeHalted(self.node_id, reason))

    # ------------------------------------------------------------- the cells' interface

    def fail_node(self, error: Exception) -> None:
        """Fail the node by raising ``error`` inside its task group."""

        async def fail() -> None:
            raise error

        self._spawn_task(fail(), auxiliary=False)

    def forget(self, cell: _Cell) -> None:
        """A cell has stopped: its name is free again."""
        if self._cells.get(cell.ref.name) is cell:
            del self._cells[cell.ref.name]
        self._top_level.pop(cell.ref.name, None)

    def next_ask_id(self) -> int:
        return next(self._ask_ids)

    def defer_while_stalled(self, cell: _Cell, *, start: bool) -> bool:
        """While the node is stalled, a cell's resume (or its instance's start) waits for the
        stall to end: True if deferred."""
        if not self._stalled:
            return False
        if start:
            self._starts_after_stall.append(cell)
        elif cell not in self._paused_by_stall:
            self._paused_by_stall.append(cell)
        return True

    def dead_letter(self, target: ActorRef, item: object) -> None:
        self._dead_letters_total += 1
        if isinstance(item, Envelope) and item.requester is not None:
            self._fail_route(item.requester.reply_id, UnknownActor(target=str(target)))
        _log.debug("dead letter to %s: %r", target, item)

    def apply_effects(self, cell: _Cell, effects: list[Effect]) -> None:
        """Carry out, in order, what one of ``cell``'s handlers recorded."""
        for effect in effects:
            match effect:
                case Tell():
                    self._tell(effect.target, effect.message, cell.ref)
                case Reply():
                    self._reply(effect.requester, effect.message)
                case Ask():
                    self._ask_from_actor(cell, effect)
                case StartTimer():
                    cell.start_timer(effect)
                case CancelTimer():
                    cell.cancel_timer(effect.key)
                case Pipe():
                    self._pipe(cell, effect)
                case Spawn():
                    self._spawn(effect.ref, effect.factory, effect.supervision, cell)
                case Stop():
                    target = self._cells.get(effect.ref.name)
                    if target is not None and effect.ref.node_id == self.node_id:
                        target.stop()
                case Halt():
                    self.halt(f"{cell.ref.name}: {effect.reason}")
                case _:
                    assert_never(effect)

    def _tell(self, target: ActorRef, message: object, sender: ActorRef | None) -> None:
        if target.node_id == self.node_id:
            cell = self._cells.get(target.name)
            if cell is None:
                self.dead_letter(target, message)
                return
            cell.enqueue(Envelope(message, sender))
            return
        if self.transport is None:
            self.dead_letter(target, message)
            return
        self.transport.send(target.node_id, WireEnvelope(target.name, message, sender, None))

    # ----------------------------------------------------------------------------------- asks

    def _new_route(self, route: _Route) -> Requester:
        reply_id = next(self._reply_ids)
        deadline_ms = self.clock.now_ms() + route.timeout_ms

        def expire() -> None:
            expired = self._routes.pop(reply_id, None)
            if expired is not None:
                target = expired.target if "@" in expired.target else f"{expired.target}@{self.node_id}"
                expired.fail(AskTimedOut(target=target, timeout_ms=expired.timeout_ms))

        route.timer = self.clock.call_later(route.timeout_ms, expire)
        self._routes[reply_id] = route
        return Requester(reply_id, deadline_ms)

    def _reply(self, requester: Requester, message: object) -> None:
        route = self._routes.pop(requester.reply_id, None)
        if route is None:
            _log.debug("late or duplicate reply dropped: %r", message)
            return
        if route.timer is not None:
            route.timer.cancel()
        route.deliver(message)

    def _fail_route(self, reply_id: int, failure: AskFailure) -> None:
        route = self._routes.pop(reply_id, None)
        if route is None:
            return
        if route.timer is not None:
            route.timer.cancel()
        route.fail(failure)

    def _ask_from_actor(self, cell: _Cell, effect: Ask) -> None:
        def deliver(reply: object) -> None:
            cell.post_adapted(effect.on_reply, reply)

        def fail(failure: AskFailure) -> None:
            cell.post_adapted(effect.on_failure, failure)

        target = effect.target
        if target.node_id == self.node_id:
            target_cell = self._cells.get(target.name)
            if target_cell is None:
                fail(UnknownActor(target=str(target)))
                return
            requester = self._new_route(_Route(deliver, fail, str(target), effect.timeout_ms))
            target_cell.enqueue(Envelope(effect.message, cell.ref, requester))
            return
        transport = self.transport
        if transport is None:
            fail(PeerUnavailable(node_id=target.node_id, reason="no transport"))
            return
        envelope = WireEnvelope(target.name, effect.message, cell.ref, effect.timeout_ms)
        # The request counts as activity until it is in the target's mailbox (which counts it from
        # there); waiting for the reply is not activity: the target may park it on a timer.
        in_transit = self.activity.hold()

        async def remote_ask() -> None:
            try:
                reply = await transport.ask(target.node_id, envelope, effect.timeout_ms, in_transit.release)
            except TransportError as error:
                fail(_failure_of(error, target))
            else:
                if not cell.stopped:
                    deliver(reply)
            finally:
                in_transit.release()

        self._spawn_task(remote_ask(), holding=in_transit)

    async def ask(self, target: ActorRef, message: object, *, timeout_ms: int) -> Any:
        """Ask from outside any actor (HTTP edge, CLI, tests). Raises TransportError subclasses."""
        if target.node_id != self.node_id:
            if self.transport is None:
                raise PeerUnavailableError(target.node_id, "no transport")
            envelope = WireEnvelope(target.name, message, None, timeout_ms)
            in_transit = self.activity.hold()
            try:
                return await self.transport.ask(target.node_id, envelope, timeout_ms, in_transit.release)
            finally:
                in_transit.release()
        cell = self._cells.get(target.name)
        if cell is None:
            raise UnknownActorError(str(target))
        future = self._reply_future(str(target), timeout_ms)
        requester = future.requester
        cell.enqueue(Envelope(message, None, requester))
        return await future.result()

    def tell(self, target: ActorRef, message: object, *, sender: ActorRef | None = None) -> None:
        """Tell from outside any actor."""
        self._tell(target, message, sender)

    def stop_actor(self, ref: ActorRef) -> None:
        """Stop an actor of this node from outside any actor (its ``on_stop`` runs)."""
        cell = self._cells.get(ref.name)
        if cell is not None and ref.node_id == self.node_id:
            cell.stop()

    def hold_actor(self, ref: ActorRef) -> None:
        """Stop one actor from taking messages (a slow actor, for tests that need a message to
        wait in its mailbox); what arrives is kept. ``release_actor`` lets it go on."""
        cell = self._cells.get(ref.name)
        if cell is not None and ref.node_id == self.node_id:
            cell.pause()

    def release_actor(self, ref: ActorRef) -> None:
        cell = self._cells.get(ref.name)
        if cell is not None and ref.node_id == self.node_id:
            cell.resume()

    def _reply_future(self, target: str, timeout_ms: int) -> _PendingReply:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        # From the moment the answer exists until whoever awaits it has resumed (and, for a
        # remote asker, posted it to its actor's mailbox, which counts from there), the answer is
        # in flight: it counts as activity so wait_idle cannot slip into that gap.
        in_flight: list[Hold] = []

        def deliver(reply: object) -> None:
            if not future.done():
                in_flight.append(self.activity.hold())
                future.set_result(reply)

        def fail(failure: AskFailure) -> None:
            if not future.done():
                in_flight.append(self.activity.hold())
                future.set_exception(_error_of(failure))

        async def result() -> Any:
            try:
                return await future
            finally:
                for unit in in_flight:
                    unit.release()

        requester = self._new_route(_Route(deliver, fail, target, timeout_ms))
        return _PendingReply(requester, result)

    # -------------------------------------------------------------------------------- pipes

    def _pipe(self, cell: _Cell, effect: Pipe) -> None:
        running = self.activity.hold()
        blocking = effect.blocking if self.deterministic else None

        async def run() -> None:
            try:
                try:
                    result = blocking() if blocking is not None else await effect.operation()
                except Exception as error:  # noqa: BLE001 - the outcome is data for the actor
                    if not cell.stopped:
                        cell.post_adapted(effect.on_failure, error)
                else:
                    if not cell.stopped:
                        cell.post_adapted(effect.on_success, result)
            finally:
                running.release()

        self._spawn_task(run(), holding=running)

    # --------------------------------------------------------------------- inbound transport

    def admit(self, envelope: WireEnvelope, *, ask: bool) -> None:
        """Check, before anything is delivered, that the target exists and takes this kind from
        another node in this mode. Raises UnknownActorError or RefusedMessageError."""
        cell = self._cells.get(envelope.target)
        if cell is None:
            raise UnknownActorError(f"{envelope.target}@{self.node_id}")
        actor_class = cell.actor_class
        if actor_class is None:
            return  # not started yet: the mailbox's own check (_accepts) still applies
        allowed = actor_class.remote_asks if ask else actor_class.remote_tells
        if type(envelope.message) not in allowed:
            raise RefusedMessageError(
                f"{envelope.target}@{self.node_id}",
                type(envelope.message).__name__,
                "an ask" if ask else "a tell",
            )

    async def deliver(self, envelope: WireEnvelope) -> None:
        try:
            self.admit(envelope, ask=False)
        except TransportError:
            self._dead_letters_total += 1
            raise
        cell = self._cells[envelope.target]
        await cell.enqueue_when_space(Envelope(envelope.message, envelope.sender))

    async def deliver_ask(self, envelope: WireEnvelope) -> object:
        return await (await self.submit_ask(envelope))

    async def submit_ask(self, envelope: WireEnvelope) -> Awaitable[Any]:
        self.admit(envelope, ask=True)
        cell = self._cells[envelope.target]
        timeout_ms = envelope.timeout_ms if envelope.timeout_ms is not None else 30_000
        pending = self._reply_future(envelope.target, timeout_ms)
        try:
            await cell.enqueue_when_space(Envelope(envelope.message, envelope.sender, pending.requester))
        except MailboxClosedError:
            self._routes.pop(pending.requester.reply_id, None)
            raise UnknownActorError(f"{envelope.target}@{self.node_id}") from None
        return pending.result()

    # ------------------------------------------------------------------- a stalled process

    def stall(self) -> None:
        """Stop processing messages, as a process stopped by SIGSTOP (the simulation's clock
        pauses): mailboxes keep what arrives, timers still queue their messages."""
        if self._stalled:
            return
        self._stalled = True
        self._paused_by_stall = [cell for cell in self._cells.values() if not cell.paused]
        for cell in self._paused_by_stall:
            cell.pause()

    def unstall(self) -> None:
        """Resume a stalled node: every mailbox that was running runs again."""
        if not self._stalled:
            return
        self._stalled = False
        paused, self._paused_by_stall = self._paused_by_stall, []
        starts, self._starts_after_stall = self._starts_after_stall, []
        for cell in paused:
            cell.resume()
        for cell in starts:
            cell.start_instance()

    @property
    def stalled(self) -> bool:
        return self._stalled

    @property
    def closing(self) -> bool:
        """Shutting down (a clean stop, or a halt ending the node): its actors are stopping."""
        return self._closing

    # ---------------------------------------------------------------------------- observing

    def has_actor(self, name: str) -> bool:
        return name in self._cells

    def ref(self, name: str) -> ActorRef:
        return ActorRef(node_id=self.node_id, name=name)

    def actor_instances(self) -> list[tuple[ActorRef, Actor[Any]]]:
        """Live actor instances (for collectors at scrape time and for test checkers)."""
        return [(cell.ref, cell.instance) for cell in self._cells.values() if cell.instance is not None]

    def statistics(self) -> SystemStatistics:
        return SystemStatistics(
            node_id=self.node_id,
            actors=tuple(cell.statistics() for cell in self._cells.values()),
            dead_letters_total=self._dead_letters_total,
        )

    async def wait_idle(self) -> None:
        """Wait until no message, pipe or delivery is pending (see runtime.activity)."""
        await self.activity.wait_idle()


@dataclass(frozen=True, slots=True)
class _PendingReply:
    requester: Requester
    # Await exactly once: it releases the answer's activity when the awaiting side resumes.
    result: Callable[[], Awaitable[Any]]


def _failure_of(error: TransportError, target: ActorRef) -> AskFailure:
    if isinstance(error, AskTimeoutError):
        return AskTimedOut(target=error.target, timeout_ms=error.timeout_ms)
    if isinstance(error, UnknownActorError):
        return UnknownActor(target=error.target)
    if isinstance(error, PeerUnavailableError):
        return PeerUnavailable(node_id=error.node_id, reason=error.reason)
    if isinstance(error, RemoteRequestError):
        return PeerUnavailable(node_id=target.node_id, reason=str(error))
    return PeerUnavailable(node_id=target.node_id, reason=repr(error))


def _error_of(failure: AskFailure) -> TransportError:
    if isinstance(failure, AskTimedOut):
        return AskTimeoutError(failure.target, failure.timeout_ms)
    if isinstance(failure, UnknownActor):
        return UnknownActorError(failure.target)
    return PeerUnavailableError(failure.node_id, failure.reason)
