"""The actor system's behaviour, driven on virtual time (ManualClock + Activity), no sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from runtime import (
    Activity,
    Actor,
    ActorRef,
    ActorSystem,
    AskTimedOut,
    Context,
    ManualClock,
    SupervisorStrategy,
)
from runtime.errors import AskTimeoutError, UnknownActorError
from runtime.system import ChildFailedError
from runtime.testkit import advance
from tests.support.runtime_actors import EchoActor, Note, Ping, Pong

pytestmark = pytest.mark.asyncio


@dataclass(frozen=True)
class Record:
    value: Any


class Recorder(Actor[Any]):
    """Keeps every message; answers asks with ('ack', message)."""

    def __init__(self, log: list[Any] | None = None) -> None:
        self.log: list[Any] = log if log is not None else []

    def receive(self, ctx: Context[Any], message: Any) -> None:
        self.log.append(message)
        if ctx.requester is not None:
            ctx.reply(("ack", message))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def activity() -> Activity:
    return Activity()


async def test_tells_from_one_sender_arrive_in_order(clock, activity):
    log: list[Any] = []
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        ref = system.spawn("recorder", lambda: Recorder(log))
        for number in range(100):
            system.tell(ref, number)
        await system.wait_idle()
    assert log == list(range(100))


async def test_ask_returns_the_reply(clock, activity):
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        echo = system.spawn("echo", EchoActor)
        reply = await system.ask(echo, Ping(sequence=3, payload=b"abc"), timeout_ms=1000)
    assert reply == Pong(sequence=3, payload=b"abc")


async def test_ask_to_unknown_actor_fails_at_once(clock, activity):
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        with pytest.raises(UnknownActorError):
            await system.ask(system.ref("nobody"), Ping(sequence=1), timeout_ms=1000)


@dataclass(frozen=True)
class Start:
    pass


@dataclass(frozen=True)
class Outcome:
    value: Any


class SilentAsker(Actor[Any]):
    """Asks a target that never answers; records the failure it gets."""

    def __init__(self, target_name: str, outcomes: list[Any]) -> None:
        self.target_name = target_name
        self.outcomes = outcomes

    def receive(self, ctx: Context[Any], message: Any) -> None:
        match message:
            case Start():
                ctx.ask(
                    ctx.self_ref.sibling(self.target_name),
                    "never answered",
                    timeout_ms=500,
                    on_reply=Outcome,
                    on_failure=Outcome,
                )
            case Outcome():
                self.outcomes.append(message.value)
            case _:
                raise AssertionError(f"unexpected {message!r}")


class Mute(Actor[Any]):
    def receive(self, ctx: Context[Any], message: Any) -> None:
        pass


async def test_ask_timeout_arrives_as_a_message_at_the_deadline(clock, activity):
    outcomes: list[Any] = []
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        system.spawn("mute", Mute)
        asker = system.spawn("asker", lambda: SilentAsker("mute", outcomes))
        system.tell(asker, Start())
        await advance(clock, activity, 499)
        assert outcomes == []
        await advance(clock, activity, 1)
        assert outcomes == [AskTimedOut(target="mute@n1", timeout_ms=500)]


async def test_edge_ask_times_out_on_virtual_time(clock, activity):
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        mute = system.spawn("mute", Mute)
        task = asyncio.ensure_future(system.ask(mute, "hello", timeout_ms=250))
        await advance(clock, activity, 250)
        with pytest.raises(AskTimeoutError):
            await task


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class Arm:
    key: str
    delay_ms: int


@dataclass(frozen=True)
class Disarm:
    key: str


class TimerActor(Actor[Any]):
    def __init__(self, fired: list[tuple[int, str]]) -> None:
        self.fired = fired

    def on_start(self, ctx: Context[Any]) -> None:
        ctx.start_periodic_timer("periodic", "tick", interval_ms=1000)

    def receive(self, ctx: Context[Any], message: Any) -> None:
        match message:
            case Arm(key=key, delay_ms=delay):
                ctx.start_timer(key, f"one-shot:{key}", delay)
            case Disarm(key=key):
                ctx.cancel_timer(key)
            case str():
                self.fired.append((ctx.now_ms, message))
            case _:
                raise AssertionError(f"unexpected {message!r}")


async def test_periodic_timer_fires_every_interval(clock, activity):
    fired: list[tuple[int, str]] = []
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        system.spawn("timers", lambda: TimerActor(fired))
        await advance(clock, activity, 3500)
    assert fired == [(1000, "tick"), (2000, "tick"), (3000, "tick")]


async def test_restarting_a_timer_with_the_same_key_replaces_it(clock, activity):
    fired: list[tuple[int, str]] = []
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        ref = system.spawn("timers", lambda: TimerActor(fired))
        system.tell(ref, Arm("a", 300))
        await advance(clock, activity, 200)
        system.tell(ref, Arm("a", 300))  # replaces: due at 500, not 300
        await advance(clock, activity, 400)
    assert [f for f in fired if f[1] != "tick"] == [(500, "one-shot:a")]


async def test_cancelled_timer_never_delivers_even_if_already_queued(clock, activity):
    fired: list[tuple[int, str]] = []
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        ref = system.spawn("timers", lambda: TimerActor(fired))
        system.tell(ref, Arm("b", 100))
        await system.wait_idle()
        # Queue the cancel, then fire the timer behind it: when the actor handles the cancel,
        # the timer's message is already in the mailbox and must be suppressed.
        system.tell(ref, Disarm("b"))
        clock.advance(100)
        assert _mailbox_depth(system, "timers") == 2
        await system.wait_idle()
    assert fired == []


@dataclass(frozen=True)
class Work:
    fail: bool


@dataclass(frozen=True)
class WorkDone:
    value: Any


@dataclass(frozen=True)
class WorkFailed:
    error: Exception


class Piper(Actor[Any]):
    def __init__(self, results: list[Any]) -> None:
        self.results = results

    def receive(self, ctx: Context[Any], message: Any) -> None:
        match message:
            case Work(fail=fail):

                async def operation() -> str:
                    if fail:
                        raise ValueError("boom")
                    return "ok"

                ctx.pipe_to_self(operation, WorkDone, WorkFailed)
            case WorkDone() | WorkFailed():
                self.results.append(message)
            case _:
                raise AssertionError(f"unexpected {message!r}")


async def test_pipe_to_self_delivers_result_and_failure_as_messages(clock, activity):
    results: list[Any] = []
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        ref = system.spawn("piper", lambda: Piper(results))
        system.tell(ref, Work(fail=False))
        system.tell(ref, Work(fail=True))
        await system.wait_idle()
    assert results[0] == WorkDone("ok")
    assert isinstance(results[1], WorkFailed)
    assert str(results[1].error) == "boom"


class Fragile(Actor[Any]):
    """Fails on 'crash'; counts incarnations; keeps state per incarnation."""

    def __init__(self, incarnations: list[int], seen: list[Any]) -> None:
        incarnations.append(len(incarnations) + 1)
        self.incarnation = len(incarnations)
        self.seen = seen

    def receive(self, ctx: Context[Any], message: Any) -> None:
        if message == "crash":
            raise RuntimeError("injected failure")
        self.seen.append((self.incarnation, message))


async def test_restart_keeps_the_address_and_the_queued_messages(clock, activity):
    incarnations: list[int] = []
    seen: list[Any] = []
    strategy = SupervisorStrategy.restart(backoff_min_ms=100, backoff_max_ms=1000)
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        ref = system.spawn("fragile", lambda: Fragile(incarnations, seen), supervision=strategy)
        system.tell(ref, "before")
        system.tell(ref, "crash")
        system.tell(ref, "during-backoff")
        await system.wait_idle()
        assert seen == [(1, "before")]  # paused for the back-off
        await advance(clock, activity, 100)
        assert seen == [(1, "before"), (2, "during-backoff")]
        stats = {a.name: a for a in system.statistics().actors}["fragile"]
        assert stats.restarts_total == 1
        assert stats.failures_total == 1


async def test_too_many_restarts_escalate_and_fail_the_node(clock, activity):
    incarnations: list[int] = []
    strategy = SupervisorStrategy.restart(max_restarts=2, within_ms=10_000, backoff_min_ms=0)
    with pytest.raises(ExceptionGroup) as raised:  # noqa: PT012 - the failure surfaces at system exit
        async with ActorSystem("n1", clock=clock, activity=activity) as system:
            ref = system.spawn("fragile", lambda: Fragile(incarnations, []), supervision=strategy)
            for _ in range(3):
                system.tell(ref, "crash")
                await advance(clock, activity, 1)
            await advance(clock, activity, 1)
    assert raised.group_contains(ChildFailedError)
    assert len(incarnations) == 3


class Parent(Actor[Any]):
    def __init__(self, failures: list[Any], child_strategy: SupervisorStrategy) -> None:
        self.failures = failures
        self.child_strategy = child_strategy

    def on_start(self, ctx: Context[Any]) -> None:
        ctx.spawn("child", lambda: Fragile([], []), supervision=self.child_strategy)

    def receive(self, ctx: Context[Any], message: Any) -> None:
        pass


async def test_escalated_child_failure_restarts_the_parent(clock, activity):
    parents: list[int] = []

    class CountingParent(Parent):
        def __init__(self) -> None:
            parents.append(1)
            super().__init__([], SupervisorStrategy.escalate())

    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        system.spawn("parent", CountingParent, supervision=SupervisorStrategy.restart(backoff_min_ms=10))
        await system.wait_idle()
        system.tell(system.ref("child"), "crash")
        await advance(clock, activity, 10)
        assert len(parents) == 2
        assert system.has_actor("child")  # the new parent spawned a new child


class StopRecorder(Actor[Any]):
    def __init__(self, name: str, stopped: list[str]) -> None:
        self.name = name
        self.stopped = stopped

    def on_start(self, ctx: Context[Any]) -> None:
        if self.name == "parent":
            ctx.spawn("child-1", lambda: StopRecorder("child-1", self.stopped))
            ctx.spawn("child-2", lambda: StopRecorder("child-2", self.stopped))

    def receive(self, ctx: Context[Any], message: Any) -> None:
        pass

    def on_stop(self, ctx: Context[Any]) -> None:
        self.stopped.append(self.name)


async def test_shutdown_stops_children_first_then_top_level_in_reverse_order(clock, activity):
    stopped: list[str] = []
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        system.spawn("first", lambda: StopRecorder("first", stopped))
        system.spawn("parent", lambda: StopRecorder("parent", stopped))
        await system.wait_idle()
    assert stopped == ["child-2", "child-1", "parent", "first"]


async def test_tell_to_a_stopped_actor_is_a_dead_letter(clock, activity):
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        ref = system.spawn("recorder", Recorder)
        await system.wait_idle()
        system.tell(ref, "x")
        await system.wait_idle()
        system.stop_actor(ref)
        system.tell(ref, "y")
        assert system.statistics().dead_letters_total == 1


async def test_a_kind_outside_the_union_is_a_dead_letter_not_a_crash(clock, activity):
    """A stray kind (or an ask kind told with nobody to answer) never reaches ``receive``: there it
    could only raise, and supervision would replace the actor, state and all."""
    echo = EchoActor()
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        ref = system.spawn("echo", lambda: echo)
        await system.wait_idle()
        system.tell(ref, Pong(sequence=1))  # a reply kind: not in EchoActor's union
        system.tell(ref, Ping(sequence=2))  # an ask kind as a tell: nobody to answer
        system.tell(ref, Note(sender="a", sequence=3))
        await system.wait_idle()
        (cell,) = [cell for cell in system.statistics().actors if cell.name == "echo"]
        assert (cell.failures_total, cell.restarts_total) == (0, 0)
        assert system.statistics().dead_letters_total == 2
        assert [note.sequence for note in echo.notes] == [3]
        assert system.actor_instances() == [(ref, echo)]


async def test_inbound_delivery_waits_for_mailbox_capacity(clock, activity):
    from runtime.codec import WireEnvelope

    class Gate(Actor[Any]):
        remote_tells = frozenset({Note})

        def receive(self, ctx: Context[Any], message: Any) -> None:
            pass

    async with ActorSystem("n1", clock=clock, activity=activity, mailbox_capacity=2) as system:
        system.spawn("gate", Gate)
        await system.wait_idle()
        gate = system.ref("gate")
        system.hold_actor(gate)  # simulate a busy actor: nothing is consumed
        await system.deliver(WireEnvelope("gate", Note(sender="a", sequence=1)))
        await system.deliver(WireEnvelope("gate", Note(sender="a", sequence=2)))
        third = asyncio.ensure_future(system.deliver(WireEnvelope("gate", Note(sender="a", sequence=3))))
        await system.wait_idle()  # a scheduling point: the delivery reaches its capacity wait
        assert not third.done()
        assert _mailbox_depth(system, "gate") == 2
        system.release_actor(gate)
        await third
        await system.wait_idle()
        assert _mailbox_depth(system, "gate") == 0


async def test_statistics_report_mailbox_and_processed_counts(clock, activity):
    async with ActorSystem("n1", clock=clock, activity=activity) as system:
        ref = system.spawn("recorder", Recorder)
        for number in range(5):
            system.tell(ref, number)
        await system.wait_idle()
        stats = {a.name: a for a in system.statistics().actors}["recorder"]
    assert stats.processed_total == 5
    assert stats.mailbox_depth == 0


def _mailbox_depth(system: ActorSystem, name: str) -> int:
    (cell,) = [cell for cell in system.statistics().actors if cell.name == name]
    return cell.mailbox_depth


# ------------------------------------------------------------------ turn budget (issue 19)


class _LoopTurns:
    """Counts event-loop iterations: a callback that schedules itself once per iteration."""

    def __init__(self) -> None:
        self.count = 0
        self._handle: asyncio.Handle | None = None

    def start(self) -> None:
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.count += 1
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


class Busy(Actor[Any]):
    """Each handler (and the start) costs ``cost_ms`` of the clock, as storage work costs real time;
    records the loop iteration it ran in."""

    def __init__(
        self,
        clock: ManualClock,
        turns: _LoopTurns,
        ran: list[tuple[str, int]],
        cost_ms: int,
        then: Callable[[], None] | None = None,
    ) -> None:
        self.clock = clock
        self.turns = turns
        self.ran = ran
        self.cost_ms = cost_ms
        self.then = then

    def on_start(self, ctx: Context[Any]) -> None:
        self.clock.advance(self.cost_ms)
        self.ran.append((f"start {ctx.self_ref.name}", self.turns.count))

    def receive(self, ctx: Context[Any], message: Any) -> None:
        self.clock.advance(self.cost_ms)
        self.ran.append((f"{message} {ctx.self_ref.name}", self.turns.count))
        if self.then is not None:
            self.then()


def _per_turn(ran: list[tuple[str, int]]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for _, turn in ran:
        counts[turn] = counts.get(turn, 0) + 1
    return counts


async def test_a_turn_budget_spreads_many_starts_and_tells_over_loop_iterations(clock, activity):
    # 40 actors started, then told, by one caller at once: 5 ms each against a 20 ms budget. Without
    # a budget asyncio runs all 40 in the one iteration after the spawns (then after the tells).
    turns = _LoopTurns()
    ran: list[tuple[str, int]] = []
    async with ActorSystem("n1", clock=clock, activity=activity, turn_budget_ms=20) as system:
        turns.start()
        refs = [system.spawn(f"a{n:02}", lambda: Busy(clock, turns, ran, 5)) for n in range(40)]
        await system.wait_idle()
        for ref in refs:
            system.tell(ref, "m")
        await system.wait_idle()
        turns.stop()
    starts = [entry for entry in ran if entry[0].startswith("start")]
    tells = [entry for entry in ran if entry[0].startswith("m ")]
    # Every actor started and handled its message, each in the order it was spawned or told.
    assert [name for name, _ in starts] == [f"start a{n:02}" for n in range(40)]
    assert [name for name, _ in tells] == [f"m a{n:02}" for n in range(40)]
    # No iteration ran more than the budget's worth: 4 handlers of 5 ms.
    assert max(_per_turn(ran).values()) == 4
    assert len(_per_turn(starts)) == 10
    assert len(_per_turn(tells)) == 10


async def test_under_virtual_time_a_turn_budget_defers_nothing(clock, activity):
    # The virtual clock does not move while handlers run: the order and the iterations are those of
    # a system without a budget, so the simulation's runs do not change.
    async def run(turn_budget_ms: float | None) -> list[tuple[str, int]]:
        turns = _LoopTurns()
        ran: list[tuple[str, int]] = []
        async with ActorSystem(
            "n1", clock=ManualClock(), activity=Activity(), turn_budget_ms=turn_budget_ms
        ) as system:
            turns.start()
            refs = [system.spawn(f"a{n:02}", lambda: Busy(clock, turns, ran, 0)) for n in range(20)]
            for ref in refs:
                system.tell(ref, "m")
            await system.wait_idle()
            turns.stop()
        return ran

    with_budget = await run(20)
    assert with_budget == await run(None)
    assert len(_per_turn(with_budget)) <= 2


async def test_a_cell_stopped_while_waiting_for_its_turn_handles_nothing(clock, activity):
    turns = _LoopTurns()
    ran: list[tuple[str, int]] = []
    async with ActorSystem("n1", clock=clock, activity=activity, turn_budget_ms=10) as system:
        turns.start()
        refs: list[ActorRef] = []
        refs.append(
            system.spawn("a0", lambda: Busy(clock, turns, ran, 0, lambda: system.stop_actor(refs[2])))
        )
        refs += [system.spawn(f"a{n}", lambda: Busy(clock, turns, ran, 0)) for n in (1, 2)]
        slow = system.spawn("slow", lambda: Busy(clock, turns, ran, 10))
        await system.wait_idle()
        ran.clear()
        # slow's handler uses the whole turn: a0, a1 and a2, told in the same iteration, wait for
        # later ones with their messages still queued. a0 goes first and stops a2, whose message is
        # then never handled.
        for ref in [slow, *refs]:
            system.tell(ref, "m")
        await system.wait_idle()
        turns.stop()
        assert [name for name, _ in ran] == ["m slow", "m a0", "m a1"]
        assert len({turn for _, turn in ran}) == 3
        assert system.statistics().dead_letters_total == 1
