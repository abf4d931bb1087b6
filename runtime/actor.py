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

Closed message sets. An actor's message union (the ``M`` of ``Actor[M]``) is the whole set of kinds
it handles: the runtime dead-letters anything else before ``receive`` sees it, so a stray message
can never crash an actor (and, through supervision, cost it its state). What may come from another
node is narrower still and declared per class: ``remote_tells`` and ``remote_asks``. The actor
system refuses any other kind, or a kind in the wrong mode (an ask kind as a tell), at the edge,
before it reaches a mailbox, and the HTTP transport answers that refusal with a 400.
"""

from __future__ import annotations

import types
import typing
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

if TYPE_CHECKING:
    from runtime.context import Context

__all__ = ["Actor", "message_kinds"]

M = TypeVar("M")


class Actor(ABC, Generic[M]):
    """Base class of every actor. Subclass with the actor's message union as ``M``."""

    #: Kinds another node may send to this actor as a tell, and as an ask (nothing by default).
    remote_tells: ClassVar[frozenset[type]] = frozenset()
    remote_asks: ClassVar[frozenset[type]] = frozenset()

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


_KINDS: dict[type, frozenset[type] | None] = {}


def message_kinds(actor_class: type) -> frozenset[type] | None:
    """The classes of ``actor_class``'s message union (``M`` of ``Actor[M]``), or None when the
    class does not name one (a generic helper actor): then every kind is handed to ``receive``."""
    if actor_class in _KINDS:
        return _KINDS[actor_class]
    kinds: frozenset[type] | None = None
    for klass in actor_class.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if typing.get_origin(base) is Actor:
                kinds = _classes_of(typing.get_args(base)[0])
                break
        if kinds is not None:
            break
    _KINDS[actor_class] = kinds
    return kinds


def _classes_of(union: Any) -> frozenset[type] | None:
    if union is Any or union is object:
        return None
    if isinstance(union, type) and typing.get_origin(union) is None:
        return frozenset({union})
    if typing.get_origin(union) in (typing.Union, types.UnionType):
        members: set[type] = set()
        for member in typing.get_args(union):
            classes = _classes_of(member)
            if classes is None:
                return None
            members |= classes
        return frozenset(members)
    return None  # a TypeVar, Any or a generic alias: the class accepts what its receive decides
