"""Runtime-level messages: envelopes, requesters and ask failures.

* ``Envelope`` wraps every delivery with who sent it and, for asks, whom to reply to and by when.
* ``Requester`` is an opaque reply token. A handler that cannot answer at once (a delayed produce)
  keeps it and later calls ``ctx.reply_to(requester, response)``; a token that has expired or was
  already answered is ignored, which is what Kafka does with a late response on a closed connection.
* ``AskFailure`` is what an asker receives instead of a reply: ``AskTimedOut``, ``PeerUnavailable``
  or ``UnknownActor``. Askers adapt it into their own message union (see ``Context.ask``), so a
  failure is a message like any other, never an exception inside a handler.

These three failure kinds are wire messages too: an HTTP peer can report them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from runtime.codec import wire
from runtime.ref import ActorRef

__all__ = [
    "AskFailure",
    "AskTimedOut",
    "Envelope",
    "PeerUnavailable",
    "Requester",
    "UnknownActor",
]


@dataclass(frozen=True, slots=True)
class Requester:
    """Reply token of one ask, valid on the node that received the ask until its deadline."""

    reply_id: int
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class Envelope:
    """A message in a mailbox. ``requester`` is set for asks, None for tells."""

    message: Any
    sender: ActorRef | None = None
    requester: Requester | None = None


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class AskTimedOut:
    target: str
    timeout_ms: int


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class PeerUnavailable:
    node_id: str
    reason: str


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownActor:
    target: str


AskFailure: TypeAlias = AskTimedOut | PeerUnavailable | UnknownActor
