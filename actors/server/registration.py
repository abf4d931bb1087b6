"""BrokerRegistrationActor: keeps ``/brokers/ids/<broker_id>`` registered across ZooKeeper sessions.

The broker's liveness in Kafka is its ephemeral registration znode; its creation zxid (czxid) is
the broker epoch (KIP-380). This actor registers on start, and again every time a NEW session is
established after an expiry, and tells an optional subscriber what happened.

States (``RegistrationState``) and their triggers
------------------------------------------------
    UNREGISTERED       no session yet, or the session was lost (its znode is gone)
    REGISTERING        a create (or its CheckedEphemeral follow-up read) is in flight
    AWAITING_OLD_OWNER the znode exists but belongs to an OLD session of ours that the server has
                       not expired yet: wait for its deletion (an exists-watch), looking again
                       every session timeout
    REGISTERED         the znode exists and its ephemeral_owner is our current session
    FAILED             the znode was still held by another session after ``old_owner_rounds``
                       session timeouts: no session of ours can outlive that, so another process
                       holds this broker id; the broker halts (its supervisor restarts it)

Kafka's CheckedEphemeral (KAFKA-7165): on NodeExists, read the znode's Stat. If its
``ephemeral_owner`` is our current session, the create did succeed (a retry after a connection
loss): it is ours. If it is another session, it is our previous session lingering until the
server times it out (a restart within the session timeout, a stall, a ZooKeeper outage, which
stops the server's clock): like Kafka's later ``checkedEphemeralCreate``, keep waiting for it to
disappear, looking again every ``old_owner_wait_ms`` (the session timeout by default), and give
up only after ``old_owner_rounds`` of them. A broker that gave up must not stay alive
unregistered (the controller counts it dead while it still answers clients): it halts.

Rules kept here:

* Handlers are synchronous; every ZooKeeper call goes through ``ctx.pipe_to_self``.
* Every piped result and watch carries the ``attempt`` it belongs to. A new session starts a new
  attempt, so a late answer from a previous session can never mark us registered.
* ConnectionLossError means "unknown outcome": retry the create after ``retry_backoff_ms``; a
  NodeExists owned by our session then proves the first create succeeded.
* The actor never deletes its znode: closing the session (the broker's shutdown) does that.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TypeAlias, assert_never

from actors.server.zk_data import (
    BROKER_IDS_PATH,
    BrokerRegistration,
    broker_id_path,
    encode_broker_registration,
)
from runtime.actor import Actor
from runtime.context import Context
from runtime.coordination import (
    ConnectionLossError,
    Coordinator,
    CreateResult,
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    SessionExpiredError,
    SessionState,
    Stat,
    Subscription,
    WatchEvent,
    WatchEventKind,
)
from runtime.ref import ActorRef

__all__ = [
    "BrokerRegistered",
    "BrokerRegistrationActor",
    "BrokerRegistrationEvent",
    "BrokerRegistrationFailed",
    "RegistrationState",
    "RegistrationStatistics",
    "RestartSeen",
    "SessionLost",
    "SessionSuspended",
]


# ------------------------------------------------------------------------ public messages (in)


@dataclass(frozen=True, slots=True)
class RestartSeen:
    """A controller has seen this process (its UpdateMetadata named it live): registrations from
    now on (after a session expiry) no longer say ``unclean_start``."""


# ----------------------------------------------------------------------- public messages (out)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistered:
    """The registration znode exists for the current session; ``broker_epoch`` is its czxid."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSuspended:
    """The ZooKeeper connection dropped; the registration survives if we reconnect in time."""

    broker_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionLost:
    """The session expired: the registration is gone until a new session re-creates it."""

    broker_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationFailed:
    broker_id: int
    reason: str


BrokerRegistrationEvent: TypeAlias = (
    BrokerRegistered | SessionSuspended | SessionLost | BrokerRegistrationFailed
)


# ---------------------------------------------------------------------------- private messages


@dataclass(frozen=True, slots=True, kw_only=True)
class _SessionChanged:
    event: SessionEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class _Created:
    attempt: int
    result: CreateResult


@dataclass(frozen=True, slots=True, kw_only=True)
class _CreateFailed:
    attempt: int
    error: Exception


@dataclass(frozen=True, slots=True, kw_only=True)
class _ExistingChecked:
    """The Stat of the znode after NodeExists (None: it vanished meanwhile)."""

    attempt: int
    stat: Stat | None


@dataclass(frozen=True, slots=True, kw_only=True)
class _CheckFailed:
    attempt: int
    error: Exception


@dataclass(frozen=True, slots=True, kw_only=True)
class _ExistingChanged:
    attempt: int
    event: WatchEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class _ParentsEnsured:
    attempt: int
    error: Exception | None


@dataclass(frozen=True, slots=True, kw_only=True)
class _RetryCreate:
    attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _OldOwnerDeadline:
    attempt: int


RegistrationMessage: TypeAlias = (
    RestartSeen
    | _SessionChanged
    | _Created
    | _CreateFailed
    | _ExistingChecked
    | _CheckFailed
    | _ExistingChanged
    | _ParentsEnsured
    | _RetryCreate
    | _OldOwnerDeadline
)

_RETRY_TIMER = "retry-create"
_DEADLINE_TIMER = "old-owner-deadline"


class RegistrationState(enum.Enum):
    UNREGISTERED = "unregistered"
    REGISTERING = "registering"
    AWAITING_OLD_OWNER = "awaiting_old_owner"
    REGISTERED = "registered"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistrationStatistics:
    broker_id: int
    state: RegistrationState
    registered: bool
    broker_epoch: int | None
    registrations_total: int
    expiries_seen: int


class BrokerRegistrationActor(Actor[RegistrationMessage]):
    """Registers ``registration`` (its timestamp refreshed each time) as an ephemeral znode."""

    def __init__(
        self,
        coordinator: Coordinator,
        registration: BrokerRegistration,
        *,
        session_timeout_ms: int,
        old_owner_wait_ms: int | None = None,
        old_owner_rounds: int = 3,
        retry_backoff_ms: int = 500,
        subscriber: ActorRef | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._registration = registration
        self._path = broker_id_path(registration.broker_id)
        self._old_owner_wait_ms = session_timeout_ms if old_owner_wait_ms is None else old_owner_wait_ms
        self._old_owner_rounds = old_owner_rounds
        self._old_owner_rounds_waited = 0
        self._retry_backoff_ms = retry_backoff_ms
        self._subscriber = subscriber
        self._subscription: Subscription | None = None
        self._state = RegistrationState.UNREGISTERED
        self._attempt = 0
        self._session_id: int | None = None
        self._deadline_armed = False
        self._parents_ensured = False
        self._broker_epoch: int | None = None
        self._registrations_total = 0
        self._expiries_seen = 0

    @property
    def broker_id(self) -> int:
        return self._registration.broker_id

    # ------------------------------------------------------------------------------ lifecycle

    def on_start(self, ctx: Context[RegistrationMessage]) -> None:
        self._subscription = self._coordinator.subscribe(
            ctx.message_adapter(lambda event: _SessionChanged(event=event))
        )
        if self._coordinator.session_state is SessionState.CONNECTED:
            self._begin_attempt(ctx)

    def on_stop(self, ctx: Context[RegistrationMessage]) -> None:
        if self._subscription is not None:
            self._subscription.cancel()
            self._subscription = None

    def statistics(self) -> RegistrationStatistics:
        return RegistrationStatistics(
            broker_id=self.broker_id,
            state=self._state,
            registered=self._state is RegistrationState.REGISTERED,
            broker_epoch=self._broker_epoch,
            registrations_total=self._registrations_total,
            expiries_seen=self._expiries_seen,
        )

    # -------------------------------------------------------------------------------- receive

    def receive(self, ctx: Context[RegistrationMessage], message: RegistrationMessage) -> None:
        match message:
            case RestartSeen():
                self._registration = replace(self._registration, unclean_start=False)
            case _SessionChanged():
                self._on_session_changed(ctx, message)
            case _Created():
                self._on_created(ctx, message)
            case _CreateFailed():
                self._on_create_failed(ctx, message)
            case _ExistingChecked():
                self._on_existing_checked(ctx, message)
            case _CheckFailed():
                self._on_check_failed(ctx, message)
            case _ExistingChanged():
                self._on_existing_changed(ctx, message)
            case _ParentsEnsured():
                self._on_parents_ensured(ctx, message)
            case _RetryCreate():
                self._on_retry_create(ctx, message)
            case _OldOwnerDeadline():
                self._on_old_owner_deadline(ctx, message)
            case _:
                assert_never(message)

    # ------------------------------------------------------------------------------- handlers

    def _on_session_changed(self, ctx: Context[RegistrationMessage], message: _SessionChanged) -> None:
        event = message.event
        match event.state:
            case SessionState.CONNECTED:
                # A new session (or the first one we see) needs its own registration; a
                # reconnection to the session we registered on does not.
                if event.is_new_session or event.session_id != self._session_id:
                    self._begin_attempt(ctx)
            case SessionState.SUSPENDED:
                self._notify(ctx, SessionSuspended(broker_id=self.broker_id))
            case SessionState.LOST | SessionState.CLOSED:
                if event.state is SessionState.LOST:
                    self._expiries_seen += 1
                self._abandon_attempt(ctx)
                self._state = RegistrationState.UNREGISTERED
                self._notify(ctx, SessionLost(broker_id=self.broker_id))

    def _on_created(self, ctx: Context[RegistrationMessage], message: _Created) -> None:
        if self._is_current(message.attempt):
            self._registered(ctx, message.result.stat)

    def _on_create_failed(self, ctx: Context[RegistrationMessage], message: _CreateFailed) -> None:
        if not self._is_current(message.attempt):
            return
        error = message.error
        if isinstance(error, NodeExistsError):
            self._check_existing(ctx)
        elif isinstance(error, NoNodeError) and not self._parents_ensured:
            self._parents_ensured = True
            attempt = self._attempt
            ctx.pipe_to_self(
                lambda: self._coordinator.ensure_path(BROKER_IDS_PATH),
                lambda _: _ParentsEnsured(attempt=attempt, error=None),
                lambda failure: _ParentsEnsured(attempt=attempt, error=failure),
            )
        elif isinstance(error, ConnectionLossError):
            ctx.start_timer(_RETRY_TIMER, _RetryCreate(attempt=self._attempt), self._retry_backoff_ms)
        elif isinstance(error, SessionExpiredError):
            pass  # the LOST session event follows and starts the next attempt
        else:
            self._fail(ctx, f"cannot create {self._path}: {error}")

    def _on_existing_checked(self, ctx: Context[RegistrationMessage], message: _ExistingChecked) -> None:
        if not self._is_current(message.attempt):
            return
        stat = message.stat
        if stat is None:
            self._create(ctx)  # the old owner's znode went away between our create and our read
        elif stat.ephemeral_owner == self._session_id:
            self._registered(ctx, stat)  # our own create succeeded before a connection loss
        else:
            self._state = RegistrationState.AWAITING_OLD_OWNER
            ctx.log.info(
                "%s is held by session %#x, not ours (%#x): waiting for it to expire",
                self._path,
                stat.ephemeral_owner,
                self._session_id or 0,
            )
            if not self._deadline_armed:
                self._deadline_armed = True
                deadline = _OldOwnerDeadline(attempt=self._attempt)
                ctx.start_timer(_DEADLINE_TIMER, deadline, self._old_owner_wait_ms)

    def _on_check_failed(self, ctx: Context[RegistrationMessage], message: _CheckFailed) -> None:
        if self._is_current(message.attempt):
            self._on_create_failed(ctx, _CreateFailed(attempt=message.attempt, error=message.error))

    def _on_existing_changed(self, ctx: Context[RegistrationMessage], message: _ExistingChanged) -> None:
        if not self._is_current(message.attempt) or self._state is not RegistrationState.AWAITING_OLD_OWNER:
            return
        if message.event.kind is WatchEventKind.NODE_DELETED:
            self._create(ctx)
        else:
            self._check_existing(ctx)

    def _on_parents_ensured(self, ctx: Context[RegistrationMessage], message: _ParentsEnsured) -> None:
        if not self._is_current(message.attempt):
            return
        if message.error is None:
            self._create(ctx)
        else:
            self._on_create_failed(ctx, _CreateFailed(attempt=message.attempt, error=message.error))

    def _on_retry_create(self, ctx: Context[RegistrationMessage], message: _RetryCreate) -> None:
        if self._is_current(message.attempt):
            self._create(ctx)

    def _on_old_owner_deadline(self, ctx: Context[RegistrationMessage], message: _OldOwnerDeadline) -> None:
        if not self._is_current(message.attempt) or self._state is not RegistrationState.AWAITING_OLD_OWNER:
            return
        self._old_owner_rounds_waited += 1
        if self._old_owner_rounds_waited >= self._old_owner_rounds:
            waited = self._old_owner_rounds_waited * self._old_owner_wait_ms
            self._fail(ctx, f"{self._path} still held by another session after {waited} ms")
            return
        # Look again (a watch lost with a reconnection must not leave us waiting forever).
        self._deadline_armed = False
        self._check_existing(ctx)

    # -------------------------------------------------------------------------------- helpers

    def _begin_attempt(self, ctx: Context[RegistrationMessage]) -> None:
        self._abandon_attempt(ctx)
        self._session_id = self._coordinator.session_id
        self._create(ctx)

    def _abandon_attempt(self, ctx: Context[RegistrationMessage]) -> None:
        """Invalidate everything in flight for the current attempt (answers, watches, timers)."""
        self._attempt += 1
        self._session_id = None
        self._deadline_armed = False
        self._parents_ensured = False
        ctx.cancel_timer(_RETRY_TIMER)
        ctx.cancel_timer(_DEADLINE_TIMER)

    def _is_current(self, attempt: int) -> bool:
        return attempt == self._attempt

    def _create(self, ctx: Context[RegistrationMessage]) -> None:
        self._state = RegistrationState.REGISTERING
        attempt = self._attempt
        data = encode_broker_registration(self._registration.with_timestamp(ctx.wall_clock_ms))
        ctx.pipe_to_self(
            lambda: self._coordinator.create(self._path, data, ephemeral=True),
            lambda result: _Created(attempt=attempt, result=result),
            lambda error: _CreateFailed(attempt=attempt, error=error),
        )

    def _check_existing(self, ctx: Context[RegistrationMessage]) -> None:
        """CheckedEphemeral: whose is the existing znode? Watch it, in case it is not ours."""
        self._state = RegistrationState.REGISTERING
        attempt = self._attempt

        def changed(event: WatchEvent) -> RegistrationMessage:
            return _ExistingChanged(attempt=attempt, event=event)

        on_change = ctx.message_adapter(changed)
        ctx.pipe_to_self(
            lambda: self._coordinator.exists(self._path, watch=on_change),
            lambda stat: _ExistingChecked(attempt=attempt, stat=stat),
            lambda error: _CheckFailed(attempt=attempt, error=error),
        )

    def _registered(self, ctx: Context[RegistrationMessage], stat: Stat) -> None:
        ctx.cancel_timer(_DEADLINE_TIMER)
        self._old_owner_rounds_waited = 0
        self._state = RegistrationState.REGISTERED
        self._broker_epoch = stat.czxid
        self._registrations_total += 1
        ctx.log.info("registered %s with broker epoch %d", self._path, stat.czxid)
        self._notify(ctx, BrokerRegistered(broker_id=self.broker_id, broker_epoch=stat.czxid))

    def _fail(self, ctx: Context[RegistrationMessage], reason: str) -> None:
        self._abandon_attempt(ctx)
        self._state = RegistrationState.FAILED
        ctx.log.error("broker registration failed: %s", reason)
        self._notify(ctx, BrokerRegistrationFailed(broker_id=self.broker_id, reason=reason))

    def _notify(self, ctx: Context[RegistrationMessage], event: BrokerRegistrationEvent) -> None:
        if self._subscriber is not None:
            ctx.tell(self._subscriber, event)
