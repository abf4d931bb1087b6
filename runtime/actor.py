"""The Actor base class: a synchronous state machine over one closed message union.

An actor owns its state and reacts to one message at a time. ``receive`` is a plain method: it
never awaits, never blocks, and does all its effects through the ``Context`` (send, reply, timers,
piping async I/O back as a message, spawning children). The runtime runs one mailbox loop per actor
and applies the recorded effects after the handler returns; if the handler raises, its effects are
discarded and the actor's supervisor decides what happens (restart, stop or escalate).

Conventions every actor follows (see ARCHITECTURE.md):

* ``receive`` is a dispatch table: one ``match`` over the union, one short arm per message calling
  ``self._on_<message>(ctx, message)``, ending in ``case _: assert_never(message)``.
* ``statistics()`` returns a frozen snapshot of what observers may see (metrics are collected from
  it at scrape time; checkers read it in tests). It must be cheap and must not mutate anything.
* ``on_start`` runs before the first message of each incarnation (after a restart too), so timers
  and subscriptions are (re)created there.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from runtime.context import Context

__all__ = ["Actor"]

M = TypeVar("M")


class Actor(ABC, Generic[M]):
    """Base class of every actor. Subclass with the actor's message union as ``M``."""

    def on_start(self, ctx: Context[M]) -> None:
        """Called before the first message of this incarnation."""

    @abstractmethod
    def receive(self, ctx: Context[M], message: M) -> None:
        """Handle one message. Must not block; all effects go through ``ctx``."""

    def on_stop(self, ctx: Context[M]) -> None:
        """Called once when this incarnation stops (shutdown, stop request, or before a restart)."""

    def statistics(self) -> object | None:
        """A frozen snapshot of observable state, or None when the actor exposes nothing."""
        return None
