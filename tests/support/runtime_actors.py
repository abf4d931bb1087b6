"""Wire messages and tiny actors used by the runtime's own tests (transport contract, processes).

Kept importable by a child process (``python -m tests.support.echo_node``) as well as by tests.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import TypeAlias, assert_never

import runtime.messages
from runtime import Actor, AskFailure, Context, wire
from runtime.codec import Codec
from runtime.ref import ActorRef


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class Ping:
    sequence: int
    payload: bytes = b""


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class Pong:
    sequence: int
    payload: bytes = b""


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class Note:
    """A tell carrying a sender-assigned sequence number, for ordering checks."""

    sender: str
    sequence: int


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class GetNotes:
    pass


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class Notes:
    notes: tuple[Note, ...]


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class Silence:
    """An ask that is never answered (for timeout tests)."""

    sequence: int


def make_codec() -> Codec:
    return Codec.from_modules(runtime.messages, sys.modules[__name__])


EchoMessage: TypeAlias = Ping | Note | GetNotes | Silence


class EchoActor(Actor[EchoMessage]):
    """Replies Pong to Ping, records Notes in arrival order, ignores Silence."""

    remote_asks = frozenset({Ping, GetNotes, Silence})
    remote_tells = frozenset({Note})

    def __init__(self) -> None:
        self.notes: list[Note] = []

    def receive(self, ctx: Context[EchoMessage], message: EchoMessage) -> None:
        match message:
            case Ping():
                ctx.reply(Pong(sequence=message.sequence, payload=message.payload))
            case Note():
                self.notes.append(message)
            case GetNotes():
                ctx.reply(Notes(notes=tuple(self.notes)))
            case Silence():
                pass
            case _:
                assert_never(message)


@dataclass(frozen=True, slots=True)
class SendPings:
    target: ActorRef
    count: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class PingAnswered:
    reply: object


@dataclass(frozen=True, slots=True)
class PingFailed:
    failure: AskFailure


AskerMessage: TypeAlias = SendPings | PingAnswered | PingFailed


class AskerActor(Actor[AskerMessage]):
    """Asks Pings from inside an actor and keeps what came back (replies and failures).

    ``done`` is set once ``expected`` outcomes have arrived, so tests wait on an event.
    """

    def __init__(self, expected: int = 0, done: asyncio.Event | None = None) -> None:
        self.outcomes: list[object] = []
        self.expected = expected
        self.done = done

    def record(self, outcome: object) -> None:
        self.outcomes.append(outcome)
        if self.done is not None and len(self.outcomes) >= self.expected:
            self.done.set()

    def receive(self, ctx: Context[AskerMessage], message: AskerMessage) -> None:
        match message:
            case SendPings():
                for sequence in range(message.count):
                    ctx.ask(
                        message.target,
                        Ping(sequence=sequence),
                        timeout_ms=message.timeout_ms,
                        on_reply=PingAnswered,
                        on_failure=PingFailed,
                    )
            case PingAnswered():
                self.record(message.reply)
            case PingFailed():
                self.record(message.failure)
            case _:
                assert_never(message)
