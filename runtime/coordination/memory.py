"""MemoryCoordinator: a Coordinator client of an in-memory ZooKeeper (``MemoryZooKeeper``).

The verified fake behind unit, actor and simulation tests: the contract suite runs the same tests
against it and against real ZooKeeper. Every call completes without awaiting anything, and every
callback (watches, session listeners) runs synchronously before the call or test control that
caused it returns; callbacks built with ``ctx.message_adapter`` only enqueue, so an actor system's
``wait_idle()`` accounts for all the work a change causes.

Where it deliberately differs from the aiozk adapter
----------------------------------------------------
* A call made while SUSPENDED fails at once with ``ConnectionLossError`` (the adapter waits up to
  its request timeout for a reconnection first): zero virtual time passes in the fake.
* Latencies are not measured (``request_latency_ms_*`` stay 0); ``requests_total`` counts calls.

Test controls (the reason this class exists)
--------------------------------------------
* ``disconnect()``: CONNECTED -> SUSPENDED. The session lives on in the server (its ephemerals
  stay) until ``reconnect()``, or until its timeout elapses on the server's clock.
* ``reconnect()``: SUSPENDED -> CONNECTED on the same session, with the watch events that happened
  meanwhile delivered now; or, if the session expired meanwhile, -> LOST -> CONNECTED (a new
  session). From LOST (after ``expire(reconnect=False)``) it establishes a new session.
* ``expire(reconnect=True)``: the server expires the session now (ephemerals deleted, watches
  dropped) -> LOST, then, like aiozk, a new session at once -> CONNECTED.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runtime.coordination.base import (
    Coordinator,
    CoordinatorStatistics,
    CreateOp,
    CreateResult,
    DeleteOp,
    MultiOp,
    OpResult,
    SetDataOp,
    SetDataOpResult,
    Stat,
    WatchCallback,
    WatchEvent,
    validate_path,
)
from runtime.coordination.errors import (
    ConnectionLossError,
    SessionClosedError,
    SessionExpiredError,
)
from runtime.coordination.memory_server import MemoryZooKeeper
from runtime.coordination.session import SessionEvent, SessionState, SessionWatchdog, Subscription

__all__ = ["MemoryCoordinator", "MemoryZooKeeper"]


class MemoryCoordinator(Coordinator):
    """One client (one session at a time) of a shared ``MemoryZooKeeper``."""

    def __init__(self, server: MemoryZooKeeper, *, session_timeout_ms: int = 18_000) -> None:
        if session_timeout_ms <= 0:
            raise ValueError("session_timeout_ms must be positive")
        self._server = server
        self._session_timeout_ms = session_timeout_ms
        self._watchdog = SessionWatchdog()
        self._session: int | None = None
        self._started = False
        self._requests_total = 0

    # ----------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self._watchdog.state is SessionState.CLOSED:
            raise SessionClosedError("start", "/")
        if self._started:
            return
        self._started = True
        self._open_new_session()

    async def close(self) -> None:
        if self._watchdog.state is SessionState.CLOSED:
            return
        if self._session is not None:
            self._server.close_session(self._session)
        self._session = None
        self._watchdog.transition(SessionState.CLOSED, None)

    # ------------------------------------------------------------------------------- session

    @property
    def server(self) -> MemoryZooKeeper:
        return self._server

    @property
    def session_state(self) -> SessionState:
        return self._watchdog.state

    @property
    def session_id(self) -> int | None:
        return self._watchdog.session_id

    def subscribe(self, listener: Callable[[SessionEvent], None]) -> Subscription:
        return self._watchdog.subscribe(listener)

    def statistics(self) -> CoordinatorStatistics:
        watchdog = self._watchdog
        return CoordinatorStatistics(
            session_state=watchdog.state,
            session_id=watchdog.session_id,
            expires_total=watchdog.expires_total,
            disconnects_total=watchdog.disconnects_total,
            sync_connects_total=watchdog.sync_connects_total,
            requests_total=self._requests_total,
            request_latency_ms_sum=0,
            request_latency_ms_max=0,
        )

    # -------------------------------------------------------------------------- test controls

    def disconnect(self) -> None:
        """Drop the connection; the session lives on in the server until its timeout."""
        self._require_state(SessionState.CONNECTED, "disconnect")
        assert self._session is not None
        self._server.client_disconnected(self._session)
        self._watchdog.transition(SessionState.SUSPENDED, self._session)

    def abandon(self) -> None:
        """The client's process died (SIGKILL): its connection drops and nothing will ever use
        this client again, but the session lives on in the server until its timeout, with its
        ephemeral znodes, as ZooKeeper keeps a dead client's session."""
        state = self._watchdog.state
        if state is SessionState.CONNECTED:
            assert self._session is not None
            self._server.client_disconnected(self._session)
        self._session = None
        if state is not SessionState.CLOSED:
            self._watchdog.transition(SessionState.CLOSED, None)

    def reconnect(self) -> None:
        """Reconnect: the same session if it is still alive, else LOST and then a new session."""
        state = self._watchdog.state
        if state is SessionState.SUSPENDED:
            assert self._session is not None
            session = self._session
            # Transition first so that queued watch events reach a CONNECTED client.
            if self._server.is_alive(session):
                self._watchdog.transition(SessionState.CONNECTED, session)
                self._server.client_reconnected(session)
                return
            self._session = None
            self._watchdog.transition(SessionState.LOST, session)
            self._open_new_session()
        elif state is SessionState.LOST and self._started:
            self._open_new_session()
        else:
            raise AssertionError(f"reconnect() in session state {state.name}")

    def expire(self, *, reconnect: bool = True) -> None:
        """Expire the session on the server now; then (by default) establish a new one.

        A connected client learns at once (-> LOST). A SUSPENDED client learns only when it
        reconnects, as with ZooKeeper; ``reconnect=True`` does that reconnection too.
        """
        state = self._watchdog.state
        if state not in (SessionState.CONNECTED, SessionState.SUSPENDED):
            raise AssertionError(f"expire() needs a session, not state {state.name}")
        assert self._session is not None
        self._server.expire_session(self._session)  # calls session_expired_by_server if connected
        if not reconnect:
            return
        if state is SessionState.SUSPENDED:
            self.reconnect()
        else:
            self._open_new_session()

    # ----------------------------------------------------------------- called by the server

    def deliver_watch(self, callback: WatchCallback, event: WatchEvent) -> None:
        callback(event)

    def session_expired_by_server(self, session_id: int) -> None:
        if session_id != self._session:
            return
        self._session = None
        self._watchdog.transition(SessionState.LOST, session_id)

    # ---------------------------------------------------------------------------------- data

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> CreateResult:
        session = self._usable_session("create", path)
        op = CreateOp(path=validate_path(path), data=data, ephemeral=ephemeral, sequential=sequential)
        return self._server.create(session, op)

    async def get(self, path: str, *, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        session = self._usable_session("get", path)
        return self._server.get(session, path, watch)

    async def exists(self, path: str, *, watch: WatchCallback | None = None) -> Stat | None:
        session = self._usable_session("exists", path)
        return self._server.exists(session, path, watch)

    async def get_children(self, path: str, *, watch: WatchCallback | None = None) -> list[str]:
        session = self._usable_session("get_children", path)
        return self._server.get_children(session, path, watch)

    async def set(self, path: str, data: bytes, *, version: int) -> Stat:
        session = self._usable_session("set", path)
        result = self._server.write(session, SetDataOp(path=validate_path(path), data=data, version=version))
        assert isinstance(result, SetDataOpResult)
        return result.stat

    async def delete(self, path: str, *, version: int) -> None:
        session = self._usable_session("delete", path)
        if validate_path(path) == "/":
            raise ValueError("the root znode cannot be deleted")
        self._server.write(session, DeleteOp(path=path, version=version))

    async def multi(self, ops: Sequence[MultiOp]) -> tuple[OpResult, ...]:
        first = ops[0].path if ops else "/"
        session = self._usable_session("multi", first)
        if not ops:
            raise ValueError("a multi needs at least one op")
        return self._server.multi(session, ops)

    # ------------------------------------------------------------------------------ helpers

    def _open_new_session(self) -> None:
        self._session = self._server.open_session(self, self._session_timeout_ms)
        self._watchdog.transition(SessionState.CONNECTED, self._session)

    def _require_state(self, expected: SessionState, control: str) -> None:
        if self._watchdog.state is not expected:
            raise AssertionError(
                f"{control}() needs session state {expected.name}, not {self._watchdog.state.name}"
            )

    def _usable_session(self, operation: str, path: str) -> int:
        self._requests_total += 1
        state = self._watchdog.state
        if state is SessionState.CONNECTED:
            assert self._session is not None
            return self._session
        if state is SessionState.SUSPENDED:
            raise ConnectionLossError(operation, path, "disconnected from ZooKeeper")
        if state is SessionState.CLOSED or not self._started:
            raise SessionClosedError(operation, path)
        raise SessionExpiredError(operation, path)
