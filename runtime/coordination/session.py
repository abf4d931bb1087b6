"""ZooKeeper session states, their transition table, and the watchdog that reports them.

States (kazoo's vocabulary; Kafka's ``SessionExpireListener`` sees the same events):

    LOST        no usable session: before the first connect, and from an expiry until a NEW
                session is established. Ephemeral znodes and watches of the old session are gone.
    CONNECTED   the session is usable.
    SUSPENDED   the connection dropped; the session may still be alive on the server (its
                ephemeral znodes still exist) until the session timeout elapses there.
    CLOSED      the owner closed the coordinator. Terminal.

Transitions and their triggers (``VALID_TRANSITIONS``):

    LOST      -> CONNECTED   a session was established (the first one, or a new one after expiry)
    CONNECTED -> SUSPENDED   the connection was lost
    CONNECTED -> LOST        the session expired while we were connected (the server said so)
    SUSPENDED -> CONNECTED   reconnected to the SAME session in time
    SUSPENDED -> LOST        the server reported the session expired when we reconnected
    any but CLOSED -> CLOSED close()

An illegal transition is a programmer error in an adapter: ``AssertionError`` naming both states.

The ``SessionWatchdog`` is shared by every Coordinator implementation: it holds the state, calls
subscribers synchronously (each gets a ``SessionEvent``), and counts what Kafka meters: expiries
(``kafka_server_sessionexpirelistener_zookeeperexpires_total``), disconnects and sync-connects.
A subscriber that raises is logged and does not stop the others: a broken listener must not wedge
the ZooKeeper client that called it.
"""

from __future__ import annotations

import enum
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = [
    "VALID_TRANSITIONS",
    "SessionEvent",
    "SessionListener",
    "SessionState",
    "SessionWatchdog",
    "Subscription",
]

_log = logging.getLogger("actorlog.runtime.coordination")


class SessionState(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"
    CLOSED = "closed"


VALID_TRANSITIONS: Final[Mapping[SessionState, frozenset[SessionState]]] = MappingProxyType(
    {
        SessionState.LOST: frozenset({SessionState.CONNECTED, SessionState.CLOSED}),
        SessionState.CONNECTED: frozenset({SessionState.SUSPENDED, SessionState.LOST, SessionState.CLOSED}),
        SessionState.SUSPENDED: frozenset({SessionState.CONNECTED, SessionState.LOST, SessionState.CLOSED}),
        SessionState.CLOSED: frozenset(),
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEvent:
    """One transition. ``session_id`` is the new session's for CONNECTED, else the affected one's."""

    state: SessionState
    previous: SessionState
    session_id: int | None

    @property
    def is_new_session(self) -> bool:
        """True when a session was (re-)established: everything ephemeral must be re-created."""
        return self.state is SessionState.CONNECTED and self.previous is SessionState.LOST


SessionListener = Callable[[SessionEvent], None]


class Subscription:
    """Handle returned by ``subscribe``; ``cancel()`` is idempotent."""

    __slots__ = ("_cancel",)

    def __init__(self, cancel: Callable[[], None]) -> None:
        self._cancel: Callable[[], None] | None = cancel

    def cancel(self) -> None:
        cancel, self._cancel = self._cancel, None
        if cancel is not None:
            cancel()


class SessionWatchdog:
    """Session state, subscribers and counters of one coordinator."""

    def __init__(self) -> None:
        self._state = SessionState.LOST
        self._session_id: int | None = None
        self._listeners: dict[int, SessionListener] = {}
        self._listener_ids = itertools.count(1)
        self.expires_total = 0
        self.disconnects_total = 0
        self.sync_connects_total = 0

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int | None:
        return self._session_id

    def subscribe(self, listener: SessionListener) -> Subscription:
        key = next(self._listener_ids)
        self._listeners[key] = listener

        def cancel() -> None:
            self._listeners.pop(key, None)

        return Subscription(cancel)

    def transition(self, state: SessionState, session_id: int | None) -> SessionEvent:
        """Move to ``state`` (asserting the edge is legal), count it, and notify subscribers."""
        previous = self._state
        if state not in VALID_TRANSITIONS[previous]:
            raise AssertionError(f"illegal ZooKeeper session transition {previous.name} -> {state.name}")
        if previous is SessionState.CONNECTED and state in (SessionState.SUSPENDED, SessionState.LOST):
            self.disconnects_total += 1
        if state is SessionState.LOST:
            self.expires_total += 1
        if state is SessionState.CONNECTED:
            self.sync_connects_total += 1
        self._state = state
        # A LOST or CLOSED event still names the session that went away.
        if session_id is not None or state is SessionState.CONNECTED:
            self._session_id = session_id
        event = SessionEvent(state=state, previous=previous, session_id=self._session_id)
        if state in (SessionState.LOST, SessionState.CLOSED):
            self._session_id = None
        _log.info("ZooKeeper session %s -> %s (session %s)", previous.name, state.name, event.session_id)
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:  # noqa: BLE001 - one broken listener must not wedge the client
                _log.exception("session listener %r failed on %s", listener, event)
        return event
