"""The one script driver: an actor's multi-step I/O as generators that yield steps and receive results.

An actor whose work takes several dependent steps (read a znode, decide, write conditionally, ask
another actor, wait for the cluster to catch up) writes it as a generator. The generator yields a
step; the ``ScriptRunner`` performs it outside the actor and sends the result back in, or throws
the error in. The script's return value (or its exception) goes to the ``finish`` callback, in the
actor. Steps:

* a ``ZkRequest`` (``runtime.coordination.requests``): executed through ``pipe_to_self``; resumes
  with its result or throws its error;
* ``Watch(request, kind)``: the same, with a watch: when it fires, the runner's ``on_watch(kind)``
  builds the message posted to the actor (built when the step runs, so it may capture state of
  that moment, such as the controller's generation);
* ``Ask``: ask another actor; resumes with the reply or throws ``AskFailed``;
* ``AskAll``: several asks at once; resumes, once all are answered, with the replies in order, a
  failed ask's ``AskFailure`` in its place (nothing is thrown);
* ``Pause``: resumes after ``delay_ms`` with the time then (``now_ms``), so a script can keep a
  deadline.

Rules kept:
* the actor never awaits: every step leaves through the context and returns as a ``ScriptStep``
  (or, after a pause, ``Resume``) message, which the actor hands to ``on_step`` (``on_resume``);
* many scripts run at once, each identified by a number; a step for a finished or cancelled
  script is ignored;
* in one-at-a-time mode (the controller's: Kafka processes controller events one by one) at most
  one script runs; starting another meanwhile is a bug and raises. The actor keeps its own queue
  of what to run next.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from runtime.context import Context
from runtime.coordination.base import Coordinator, WatchEvent
from runtime.coordination.requests import ZkRequest, execute
from runtime.messages import AskFailure
from runtime.ref import ActorRef

__all__ = [
    "Ask",
    "AskAll",
    "AskFailed",
    "Pause",
    "Resume",
    "Script",
    "ScriptRunner",
    "ScriptStep",
    "Step",
    "Watch",
    "perform_script",
]


@dataclass(frozen=True, slots=True)
class Ask:
    """Ask another actor; resumes with the reply, or throws ``AskFailed``."""

    target: ActorRef
    message: object
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class AskAll:
    """Ask several actors at once; resumes with a tuple of their replies, in order, an
    ``AskFailure`` in place of a reply that did not come."""

    asks: tuple[Ask, ...]


@dataclass(frozen=True, slots=True)
class Pause:
    """Resume after ``delay_ms`` with the time then (``now_ms``)."""

    delay_ms: int


@dataclass(frozen=True, slots=True)
class Watch:
    """A ZooKeeper request with a watch; when the watch fires, the runner's ``on_watch(kind)``
    builds the message that reaches the actor."""

    request: ZkRequest
    kind: Hashable


class AskFailed(Exception):
    def __init__(self, failure: AskFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


T = TypeVar("T")

Step: TypeAlias = ZkRequest | Watch | Ask | AskAll | Pause
Script: TypeAlias = Generator[Any, Any, Any]
Finish: TypeAlias = Callable[[object, Exception | None], None]
WatchAdapter: TypeAlias = Callable[[Hashable], Callable[[WatchEvent], object]]


@dataclass(frozen=True, slots=True)
class ScriptStep:
    """A step's outcome, on its way back into the actor. ``part`` is the position of one answer
    of an ``AskAll`` (None for every other step)."""

    script_id: int
    step: int
    value: object = None
    error: Exception | None = None
    part: int | None = None


@dataclass(frozen=True, slots=True)
class Resume:
    """A pause is over."""

    script_id: int
    step: int


@dataclass(slots=True)
class _Running:
    script: Script
    finish: Finish
    step: int = 0
    # The answers of the AskAll in progress, by position (None: not yet answered).
    gathering: list[object] = field(default_factory=list)
    missing: int = 0


_UNANSWERED = object()


class ScriptRunner:
    """Runs the scripts of one actor. The actor's message union must include ``ScriptStep`` and
    ``Resume`` (handed to ``on_step`` and ``on_resume``), and whatever ``on_watch`` builds."""

    def __init__(
        self,
        coordinator: Coordinator | None = None,
        *,
        one_at_a_time: bool = False,
        on_watch: WatchAdapter | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._one_at_a_time = one_at_a_time
        self._on_watch = on_watch
        self._running: dict[int, _Running] = {}
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._running)

    @property
    def busy(self) -> bool:
        return bool(self._running)

    def start(self, ctx: Context[Any], script: Script, finish: Finish) -> int:
        """Run ``script`` to its first step (or its end); returns its number."""
        if self._one_at_a_time and self._running:
            script.close()
            raise RuntimeError("a script started while another runs in one-at-a-time mode")
        script_id = next(self._ids)
        self._running[script_id] = _Running(script, finish)
        self._advance(ctx, script_id, None, None)
        return script_id

    def cancel(self, script_id: int) -> None:
        """Abandon a script (its ``finish`` is not called); its late steps are ignored."""
        running = self._running.pop(script_id, None)
        if running is not None:
            running.script.close()

    def cancel_all(self) -> None:
        for script_id in list(self._running):
            self.cancel(script_id)

    def on_step(self, ctx: Context[Any], message: ScriptStep) -> None:
        running = self._running.get(message.script_id)
        if running is None or running.step != message.step:
            return
        if message.part is None:
            self._advance(ctx, message.script_id, message.value, message.error)
            return
        if running.gathering[message.part] is not _UNANSWERED:
            return
        running.gathering[message.part] = message.value
        running.missing -= 1
        if running.missing == 0:
            replies, running.gathering = tuple(running.gathering), []
            self._advance(ctx, message.script_id, replies, None)

    def on_resume(self, ctx: Context[Any], message: Resume) -> None:
        running = self._running.get(message.script_id)
        if running is None or running.step != message.step:
            return
        self._advance(ctx, message.script_id, ctx.now_ms, None)

    def _advance(self, ctx: Context[Any], script_id: int, value: object, error: Exception | None) -> None:
        running = self._running[script_id]
        try:
            step = running.script.send(value) if error is None else running.script.throw(error)
        except StopIteration as finished:
            del self._running[script_id]
            running.finish(finished.value, None)
            return
        except Exception as failure:  # noqa: BLE001 - the script's failure is its result
            del self._running[script_id]
            running.finish(None, failure)
            return
        running.step += 1
        self._perform(ctx, script_id, running, step)

    def _perform(self, ctx: Context[Any], script_id: int, running: _Running, step: Step) -> None:
        number = running.step
        match step:
            case Ask(target=target, message=request, timeout_ms=timeout_ms):
                ctx.ask(
                    target,
                    request,
                    timeout_ms=timeout_ms,
                    on_reply=lambda reply: ScriptStep(script_id, number, value=reply),
                    on_failure=lambda failure: ScriptStep(script_id, number, error=AskFailed(failure)),
                )
            case AskAll(asks=asks):
                if not asks:
                    self._advance(ctx, script_id, (), None)
                    return
                running.gathering = [_UNANSWERED] * len(asks)
                running.missing = len(asks)
                for part, ask in enumerate(asks):
                    self._ask_part(ctx, script_id, number, part, ask)
            case Pause(delay_ms=delay_ms):
                ctx.start_timer(("script-pause", script_id), Resume(script_id, number), max(delay_ms, 0))
            case Watch(request=zk_request, kind=kind):
                if self._on_watch is None:
                    raise RuntimeError("a Watch step in a runner without on_watch")
                fire = ctx.message_adapter(self._on_watch(kind))
                self._pipe(ctx, script_id, number, zk_request, fire)
            case _:
                self._pipe(ctx, script_id, number, step, None)

    @staticmethod
    def _ask_part(ctx: Context[Any], script_id: int, number: int, part: int, ask: Ask) -> None:
        def answer(value: object) -> ScriptStep:
            return ScriptStep(script_id, number, value=value, part=part)

        ctx.ask(ask.target, ask.message, timeout_ms=ask.timeout_ms, on_reply=answer, on_failure=answer)

    def _pipe(
        self,
        ctx: Context[Any],
        script_id: int,
        number: int,
        zk_request: ZkRequest,
        watch: Callable[[WatchEvent], None] | None,
    ) -> None:
        coordinator = self._coordinator
        if coordinator is None:
            raise RuntimeError("a ZooKeeper step in a runner without a coordinator")
        ctx.pipe_to_self(
            lambda: execute(coordinator, zk_request, watch),
            lambda result: ScriptStep(script_id, number, value=result),
            lambda failure: ScriptStep(script_id, number, error=failure),
        )


async def perform_script(coordinator: Coordinator, script: Generator[ZkRequest, Any, T]) -> T:
    """Perform a script of ZooKeeper requests only, start to end, as one operation outside any
    actor (for an actor that pipes the whole exchange and wants one outcome message): each
    request's result is sent back in, its error thrown in, as ``ScriptRunner`` does step by step."""
    value: object = None
    error: Exception | None = None
    while True:
        try:
            request = script.send(value) if error is None else script.throw(error)
        except StopIteration as finished:
            result: T = finished.value
            return result
        try:
            value, error = await execute(coordinator, request), None
        except Exception as failure:  # noqa: BLE001 - thrown into the script, which decides
            value, error = None, failure
