"""Concurrent request scripts for an actor: generators that yield I/O steps and receive results.

An actor whose requests take several dependent steps (read a znode, decide, write conditionally,
wait for the cluster to catch up) writes each request as a generator. The generator yields a
step; the ``ScriptRunner`` performs it outside the actor (``pipe_to_self`` for ZooKeeper, an ask
for another actor, a timer for a pause) and sends the result back in, or throws the error in.
The script's return value (or its exception) goes to the ``finish`` callback, in the actor.

Rules kept:
* the actor never awaits: every step leaves through the context and returns as a ``ScriptStep``
  message, which the actor hands to ``ScriptRunner.on_step``;
* many scripts run at once, each identified by a number; a step for a finished or abandoned
  script is ignored;
* ``Pause`` resumes with the time at resumption (``now_ms``), so a script can keep a deadline.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeAlias

from runtime.context import Context
from runtime.coordination.base import Coordinator
from runtime.coordination.requests import ZkRequest, execute
from runtime.messages import AskFailure
from runtime.ref import ActorRef

__all__ = ["Ask", "AskFailed", "Pause", "Resume", "Script", "ScriptRunner", "ScriptStep", "Step"]


@dataclass(frozen=True, slots=True)
class Ask:
    """Ask another actor; resumes with the reply, or throws ``AskFailed``."""

    target: ActorRef
    message: object
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Pause:
    """Resume after ``delay_ms`` with the time then (``now_ms``)."""

    delay_ms: int


class AskFailed(Exception):
    def __init__(self, failure: AskFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


Step: TypeAlias = ZkRequest | Ask | Pause
Script: TypeAlias = Generator[Step, Any, Any]


@dataclass(frozen=True, slots=True)
class ScriptStep:
    """A step's outcome, on its way back into the actor."""

    script_id: int
    step: int
    value: object = None
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class Resume:
    """A pause is over."""

    script_id: int
    step: int


@dataclass(slots=True)
class _Running:
    script: Script
    finish: Callable[[object, Exception | None], None]
    step: int = 0


class ScriptRunner:
    """Runs the scripts of one actor. The actor's message union must include
    ``ScriptStep`` and ``Resume`` (handed to ``on_step`` and ``on_resume``)."""

    def __init__(self, coordinator: Coordinator | None = None) -> None:
        self._coordinator = coordinator
        self._running: dict[int, _Running] = {}
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._running)

    def start(
        self, ctx: Context[Any], script: Script, finish: Callable[[object, Exception | None], None]
    ) -> None:
        script_id = next(self._ids)
        self._running[script_id] = _Running(script, finish)
        self._advance(ctx, script_id, None, None)

    def on_step(self, ctx: Context[Any], message: ScriptStep) -> None:
        running = self._running.get(message.script_id)
        if running is None or running.step != message.step:
            return
        self._advance(ctx, message.script_id, message.value, message.error)

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
            case Pause(delay_ms=delay_ms):
                ctx.start_timer(("script-pause", script_id), Resume(script_id, number), max(delay_ms, 0))
            case _:
                coordinator = self._coordinator
                if coordinator is None:
                    raise RuntimeError("a ZooKeeper step in a runner without a coordinator")
                zk_request = step
                ctx.pipe_to_self(
                    lambda: execute(coordinator, zk_request),
                    lambda result: ScriptStep(script_id, number, value=result),
                    lambda failure: ScriptStep(script_id, number, error=failure),
                )

    def on_resume(self, ctx: Context[Any], message: Resume) -> None:
        running = self._running.get(message.script_id)
        if running is None or running.step != message.step:
            return
        self._advance(ctx, message.script_id, ctx.now_ms, None)
