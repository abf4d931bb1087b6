"""ZkCoordinator: the Coordinator port over a real ZooKeeper, through aiozk. The only aiozk importer.

aiozk 0.32 works, but has sharp edges (docs/operations.md §3). This adapter uses the raw request API
and the client's session internals, and works around each edge on purpose:

* **Implicit versions.** ``set_data``/``delete`` silently reuse a version cached from an earlier
  response. We send ``SetDataRequest``/``DeleteRequest`` with the caller's explicit version, and
  the client's ``stat_cache`` is replaced by a dict that keeps nothing (it also grew forever).
* **Recipes.** ``DataWatcher(wait_for_create=True)`` mutates a class-level list, and the watch
  loops end silently on a missing node. We use no recipe: a watch is the server-side watch set by
  ``get``/``exists``/``get_children`` (``watch=True``) plus one-shot callbacks in the session's
  watch table (``runtime.coordination.zk_watches``, which also explains stale-event handling).
* **Container ensure_path.** aiozk's ``ensure_path`` (and its chroot) create *container* znodes,
  which the server deletes when they become empty. Chroot and ``ensure_path`` are ours, persistent.
* **No session listener.** The session's state machine is replaced by a subclass that calls us
  synchronously on every transition; we translate aiozk's states into ``SessionState`` (a new
  session id after a reconnection means the old session expired) and drop our watches on LOST
  (aiozk would silently re-arm them on the new session).
* **Slow disconnect detection.** aiozk notices a closed connection only when a heartbeat times out
  (about one session timeout later). We watch the connection's read loop: when it ends while the
  session is CONNECTED, we abort the connection and suspend the session at once, which starts
  aiozk's reconnection.
* **Watches re-armed from zxid 0.** After reconnecting, aiozk re-arms watches with SetWatches
  relative to zxid 0, which fires every data and child watch spuriously. We restore the last zxid
  seen before the disconnection, as ZooKeeper's own client does.
* **Unbounded calls.** aiozk's default retry policy waits forever for a reconnection. Every call
  here runs under ``asyncio.timeout(request_timeout_ms)``; expiry of that bound is
  ``ConnectionLossError``. A call waiting for a reconnection fails with ``SessionExpiredError`` if
  the session is lost meanwhile. Residual gap: a request already on the wire when the connection
  drops is resent by aiozk after reconnecting, even if that reconnection is a new session.
* **A traceback per failed connection attempt.** aiozk logs every attempt that fails (an ensemble
  that is down, at a broker's start) with ``logger.exception``, and retries with back-off forever.
  The session's ``make_connection`` is ours: a failed attempt is one WARNING line naming the
  server, the ensemble, the attempt and the error's class and message; ``start`` that runs out of
  time says how many attempts failed and how the last one did. aiozk's other ``logger.exception``
  calls (a connection lost while reading or writing) go through a filter that folds the exception
  into the line: an expected network error is not a crash.
* **No addauth.** aiozk has ZooKeeper's AuthPacket (xid -4, OpCode.auth 100) but never sends it,
  and the server keeps authentication per *connection*: ZooKeeper's own client re-sends it on every
  reconnection. With a ``ZkSecurity`` credential, the session's ``establish_session`` is wrapped:
  once a connection has its session (the first one, a resumed one or a new one after an expiry)
  the digest AuthPacket is written on it, before the session is reported CONNECTED and so before
  any other request (the re-armed watches included). The server handles an AuthPacket as it reads
  it, so every later request on that connection is already authenticated. Every create (plain,
  inside a multi, the chroot's own znodes) carries the ACL ``ZkSecurity.acls`` gives its path
  (``runtime.coordination.zk_auth`` says why the port itself knows nothing of ACLs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

import aiozk
from aiozk import exc, protocol
from aiozk.connection import Connection
from aiozk.protocol.acl import ID
from aiozk.states import SessionStateMachine, States

from runtime.clock import Clock, LoopClock
from runtime.coordination.base import (
    CheckOp,
    CheckOpResult,
    Coordinator,
    CoordinatorStatistics,
    CreateOp,
    CreateOpResult,
    CreateResult,
    DeleteOp,
    DeleteOpResult,
    MultiOp,
    OpResult,
    SetDataOp,
    SetDataOpResult,
    Stat,
    WatchCallback,
    WatchEventKind,
    ancestors,
    validate_path,
)
from runtime.coordination.errors import (
    BadVersionError,
    ConnectionLossError,
    CoordinationError,
    MultiOpError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionClosedError,
    SessionExpiredError,
)
from runtime.coordination.session import SessionEvent, SessionState, SessionWatchdog, Subscription
from runtime.coordination.zk_auth import AclEntry, ZkSecurity
from runtime.coordination.zk_watches import WatchTable

__all__ = ["ZkCoordinator"]

_log = logging.getLogger("actorlog.runtime.coordination.zk")
# The aiozk modules that log expected network errors with a traceback (module docstring).
_AIOZK_LOGGERS = ("aiozk.session", "aiozk.connection")

_CREATED = protocol.WatchEvent.CREATED
_DELETED = protocol.WatchEvent.DELETED
_DATA_CHANGED = protocol.WatchEvent.DATA_CHANGED
_CHILDREN_CHANGED = protocol.WatchEvent.CHILDREN_CHANGED
_KINDS = {
    _CREATED: WatchEventKind.NODE_CREATED,
    _DELETED: WatchEventKind.NODE_DELETED,
    _DATA_CHANGED: WatchEventKind.DATA_CHANGED,
    _CHILDREN_CHANGED: WatchEventKind.CHILDREN_CHANGED,
}


class _ObservedStateMachine(SessionStateMachine):  # type: ignore[misc]  # aiozk is untyped
    """aiozk's session state machine, reporting every transition synchronously."""

    def __init__(self, session: Any, on_transition: Callable[[str], None]) -> None:
        super().__init__(session=session)
        self._on_transition = on_transition

    def transition_to(self, state: str) -> None:
        super().transition_to(state)
        self._on_transition(state)


class _NoStatCache(dict[str, Any]):
    """Replaces aiozk's ``stat_cache`` so that no call can ever use an implicit version."""

    def __setitem__(self, key: str, value: Any) -> None:
        return None


class _OneLineExceptions(logging.Filter):
    """Folds a record's exception into its message (``...: ErrorClass: message``) and drops the
    traceback: aiozk logs expected network errors with ``logger.exception``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {_describe_error(error)}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def _fold_aiozk_tracebacks() -> None:
    """Installs ``_OneLineExceptions`` on aiozk's loggers, once per process (every coordinator
    calls it; logger filters are process-wide)."""
    for name in _AIOZK_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(each, _OneLineExceptions) for each in logger.filters):
            logger.addFilter(_OneLineExceptions())


def _describe_error(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _split_connect_string(connect_string: str) -> tuple[str, str]:
    """``host:port[,host:port...][/chroot]`` -> (servers, chroot or "")."""
    servers, slash, chroot = connect_string.partition("/")
    if not servers:
        raise ValueError(f"no ZooKeeper server in {connect_string!r}")
    return servers, (validate_path("/" + chroot) if slash and chroot else "")


def _stat(raw: Any) -> Stat:
    return Stat(
        version=raw.version,
        cversion=raw.child_version,
        czxid=raw.created_zxid,
        mzxid=raw.last_modified_zxid,
        ephemeral_owner=raw.ephemeral_owner,
        num_children=raw.num_children,
        data_length=raw.data_length,
    )


def _aiozk_acl(entries: Sequence[AclEntry]) -> list[Any]:
    return [aiozk.ACL(perms=int(e.perms), id=ID(scheme=e.scheme, id=e.id)) for e in entries]


def _translate(error: BaseException, operation: str, path: str, version: int | None = None) -> Exception:
    """aiozk's exception -> the port's typed error (anything unexpected stays a CoordinationError)."""
    if isinstance(error, exc.NoAuth):
        # Not a port error: every actorlog process authenticates as the same user (zk_auth).
        return CoordinationError(
            f"{operation} {path}: refused by the znode's ACL (ZooKeeper NoAuth): this client is not "
            "authenticated as the user that created it"
        )
    if isinstance(error, exc.NoNode):
        return NoNodeError(path)
    if isinstance(error, exc.NodeExists):
        return NodeExistsError(path)
    if isinstance(error, exc.BadVersion):
        return BadVersionError(path, -1 if version is None else version)
    if isinstance(error, exc.NotEmpty):
        return NotEmptyError(path)
    if isinstance(error, exc.NoChildrenForEphemerals):
        return NoChildrenForEphemeralsError(path)
    if isinstance(error, exc.SessionExpired | exc.SessionLost | exc.SessionMoved):
        return SessionExpiredError(operation, path)
    if isinstance(
        error,
        exc.ConnectError
        | exc.ConnectionLoss
        | exc.TimeoutError
        | exc.FailedRetry
        | exc.UnfinishedRead
        | exc.OperationTimeout,
    ):
        return ConnectionLossError(operation, path, type(error).__name__)
    return CoordinationError(f"{operation} {path}: ZooKeeper error {type(error).__name__}: {error}")


class ZkCoordinator(Coordinator):
    """A ZooKeeper client. ``connect_string`` is Kafka's ``zookeeper.connect`` (chroot allowed);
    ``security`` its credential and ACL rule (none: unauthenticated, every znode open)."""

    def __init__(
        self,
        connect_string: str,
        *,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
        request_timeout_ms: int | None = None,
        clock: Clock | None = None,
        security: ZkSecurity | None = None,
    ) -> None:
        servers, self._chroot = _split_connect_string(connect_string)
        self._security = security if security is not None else ZkSecurity()
        self._connect_string = connect_string
        self._servers = servers
        self._session_timeout_ms = session_timeout_ms
        # Kafka: zookeeper.connection.timeout.ms defaults to the session timeout.
        self._connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._request_timeout_ms = request_timeout_ms or session_timeout_ms
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._client = aiozk.ZKClient(servers, session_timeout=session_timeout_ms / 1000)
        self._client.stat_cache = _NoStatCache()
        session = self._client.session
        session.state = _ObservedStateMachine(session, self._on_aiozk_transition)
        # aiozk's find_server loop calls this for every attempt (module docstring).
        session.make_connection = self._make_connection
        # aiozk's repair loop calls this on every new connection (module docstring, "No addauth").
        self._aiozk_establish_session = session.establish_session
        session.establish_session = self._establish_session
        _fold_aiozk_tracebacks()
        self._connect_attempts = 0
        self._last_connect_error: str | None = None
        self._watchdog = SessionWatchdog()
        self._watches = WatchTable(session, _KINDS)
        self._state_waiters: list[asyncio.Future[None]] = []
        self._last_zxid_before_suspend: int | None = None
        self._started = False
        self._closing = False
        self._hold_reconnect = False
        self._requests_total = 0
        self._latency_sum_ms = 0
        self._latency_max_ms = 0

    # ----------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self._closing:
            raise SessionClosedError("start", self._connect_string)
        if self._started:
            return
        self._started = True
        try:
            async with asyncio.timeout(self._connection_timeout_ms / 1000):
                await self._client.start()
        except TimeoutError:
            self._closing = True
            await self._force_close_client()
            self._watchdog.transition(SessionState.CLOSED, None)
            reason = f"no session within {self._connection_timeout_ms} ms"
            if self._last_connect_error is not None:
                reason += (
                    f" ({self._connect_attempts} connection attempt(s) failed, the last with "
                    f"{self._last_connect_error})"
                )
            raise ConnectionLossError("start", self._connect_string, reason) from None
        if self._chroot:
            # Kafka creates its chroot with the ACLs its rule gives the chroot's own (full) paths.
            for each in [*ancestors(self._chroot), self._chroot]:
                with contextlib.suppress(NodeExistsError):
                    await self._request("create", each, self._create_request(each, each, b"", False, False))

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._started and self._watchdog.state is not SessionState.CONNECTED:
            # No connection to say goodbye on: the server expires the session by itself.
            await self._force_close_client()
        elif self._started:
            try:
                async with asyncio.timeout(self._request_timeout_ms / 1000):
                    await self._client.close()
            except (TimeoutError, exc.ZKError, OSError) as error:
                _log.info("ZooKeeper close did not complete (%r); closing the connection", error)
                await self._force_close_client()
        self._watches.drop_all()
        if self._watchdog.state is not SessionState.CLOSED:
            self._watchdog.transition(SessionState.CLOSED, None)
        self._wake_state_waiters()

    async def _make_connection(self, host: str, port: Any) -> Any:
        """aiozk's ``Session.make_connection`` (one attempt; None when it failed, and aiozk's loop
        tries again after its back-off), logging a failure as one line instead of a traceback."""
        session = self._client.session
        self._connect_attempts += 1
        conn = Connection(host, port, watch_handler=session.event_dispatch, read_timeout=session.read_timeout)
        try:
            await conn.connect()
        except Exception as error:  # noqa: BLE001 - as in aiozk: any failure is a failed attempt
            self._last_connect_error = _describe_error(error)
            _log.warning(
                "ZooKeeper %s:%s unreachable (ensemble %s, attempt %d): %s",
                host,
                port,
                self._servers,
                self._connect_attempts,
                self._last_connect_error,
            )
            return None
        self._connect_attempts = 0
        self._last_connect_error = None
        return conn

    async def _establish_session(self) -> None:
        """aiozk's ``Session.establish_session``, then ``addauth`` on the same connection."""
        await self._aiozk_establish_session()
        credential = self._security.credential
        if credential is None:
            return
        conn = self._client.session.conn
        request = protocol.AuthRequest(type=0, scheme="digest", auth=credential.auth_data)
        # Not awaited: the answer is read by the connection's read loop, which aiozk starts only
        # after this returns. The server has applied the credential before it reads our next request.
        conn.send(request).add_done_callback(self._on_auth_answer)

    def _on_auth_answer(self, answer: asyncio.Future[Any]) -> None:
        if answer.cancelled():
            return
        error = answer.exception()
        if isinstance(error, exc.ConnectError):
            return  # the connection went before the answer: the next one authenticates again
        if error is not None:
            # The server closes the connection after a refused AuthPacket (AUTH_FAILED).
            _log.error("ZooKeeper refused digest authentication: %s", _describe_error(error))

    async def _force_close_client(self) -> None:
        """Tear aiozk's session down without the server's help (it may be unreachable)."""
        session = self._client.session
        session.closing = True
        for handle in (session.heartbeat_handle,):
            if handle is not None:
                handle.cancel()
        tasks = [t for t in (session.repair_loop_task, session.heartbeat_task) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        conn = session.conn
        if conn is not None:
            conn.abort()
            if conn.read_loop_task is not None:
                conn.read_loop_task.cancel()
                await asyncio.gather(conn.read_loop_task, return_exceptions=True)
            if conn.writer is not None:
                conn.writer.close()
        session.started = False

    # ------------------------------------------------------------------------------- session

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
            request_latency_ms_sum=self._latency_sum_ms,
            request_latency_ms_max=self._latency_max_ms,
        )

    def _on_aiozk_transition(self, state: str) -> None:
        """Called synchronously inside aiozk's state machine on every transition."""
        if self._closing:
            return
        session = self._client.session
        ours = self._watchdog.state
        if state == States.CONNECTED:
            session_id = session.session_id
            if ours is SessionState.SUSPENDED and session_id == self._watchdog.session_id:
                # aiozk re-arms our watches next, relative to this zxid (it reset it to None).
                session.last_zxid = self._last_zxid_before_suspend
                self._transition(SessionState.CONNECTED, session_id)
            else:
                if ours is not SessionState.LOST:
                    self._lose_session()  # a new session id without LOST: the old one expired
                self._transition(SessionState.CONNECTED, session_id)
            asyncio.get_running_loop().call_soon(self._watch_read_loop, session.conn)
        elif state == States.SUSPENDED:
            if ours is SessionState.CONNECTED:
                self._last_zxid_before_suspend = session.last_zxid
                self._watches.forget_empty_keys()
                self._transition(SessionState.SUSPENDED, None)
        elif state == States.LOST and ours is not SessionState.LOST:
            self._lose_session()
        # READ_ONLY cannot happen: read-only sessions are not allowed.

    def _transition(self, state: SessionState, session_id: int | None) -> None:
        self._watchdog.transition(state, session_id)
        self._wake_state_waiters()

    def _lose_session(self) -> None:
        self._watches.drop_all()
        self._transition(SessionState.LOST, None)

    def _wake_state_waiters(self) -> None:
        waiters, self._state_waiters = self._state_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _watch_read_loop(self, conn: Any) -> None:
        task = getattr(conn, "read_loop_task", None)
        if task is not None:
            task.add_done_callback(lambda _: self._on_read_loop_ended(conn))

    def _on_read_loop_ended(self, conn: Any) -> None:
        session = self._client.session
        if self._closing or self._hold_reconnect or session.closing:
            return
        if conn is not session.conn or conn.closing:
            return
        if session.state.current_state != States.CONNECTED:
            return
        _log.info("ZooKeeper connection to %s:%s closed by the server; reconnecting", conn.host, conn.port)
        conn.abort()  # in-flight requests fail with ConnectError; aiozk resends them
        session.state.transition_to(States.SUSPENDED)

    # ------------------------------------------------------------------------ test support

    async def force_expiry(self) -> None:
        """Make the server expire this session now (test support; kazoo's harness trick).

        A second connection presents this session's id and password, which moves the session
        to it (the server drops our connection), then closes it, which ends the session on the
        server: its ephemerals are deleted at once. Our own reconnection is held back until that
        close has been answered, so it always finds the session expired (no race with it).
        """
        session = self._client.session
        conn = session.conn
        servers, _ = _split_connect_string(self._connect_string)
        intruder = aiozk.ZKClient(servers, session_timeout=self._session_timeout_ms / 1000)
        intruder.session.session_id = session.session_id
        intruder.session.password = session.password
        self._hold_reconnect = True
        try:
            async with asyncio.timeout(self._request_timeout_ms / 1000):
                await intruder.start()
                await intruder.close()
        finally:
            self._hold_reconnect = False
            if conn.read_loop_task is not None and conn.read_loop_task.done():
                self._on_read_loop_ended(conn)

    def drop_connection(self) -> None:
        """Abort the TCP connection under the session (test support): the session survives."""
        self._client.session.conn.writer.transport.abort()

    # ---------------------------------------------------------------------------------- data

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> CreateResult:
        full = self._full(path)
        response = await self._request(
            "create", path, self._create_request(path, full, data, ephemeral, sequential)
        )
        return CreateResult(path=self._relative(response.path), stat=_stat(response.stat))

    async def get(self, path: str, *, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        full = self._full(path)
        registered = self._watches.register(path, full, watch, (_DATA_CHANGED, _DELETED))
        try:
            request = protocol.GetDataRequest(path=full, watch=registered is not None)
            response = await self._request("get", path, request)
        except BaseException:
            self._watches.cancel(registered)
            raise
        self._watches.arm(registered)
        return bytes(response.data or b""), _stat(response.stat)

    async def exists(self, path: str, *, watch: WatchCallback | None = None) -> Stat | None:
        full = self._full(path)
        registered = self._watches.register(path, full, watch, (_CREATED, _DATA_CHANGED, _DELETED))
        try:
            request = protocol.ExistsRequest(path=full, watch=registered is not None)
            response = await self._request("exists", path, request)
        except NoNodeError:
            # The server set an exists-watch: only a creation can fire it.
            self._watches.arm(registered, keep=(_CREATED,))
            return None
        except BaseException:
            self._watches.cancel(registered)
            raise
        self._watches.arm(registered, keep=(_DATA_CHANGED, _DELETED))
        return _stat(response.stat)

    async def get_children(self, path: str, *, watch: WatchCallback | None = None) -> list[str]:
        full = self._full(path)
        registered = self._watches.register(path, full, watch, (_CHILDREN_CHANGED, _DELETED))
        try:
            request = protocol.GetChildren2Request(path=full, watch=registered is not None)
            response = await self._request("get_children", path, request)
        except BaseException:
            self._watches.cancel(registered)
            raise
        self._watches.arm(registered)
        return sorted(response.children)

    async def set(self, path: str, data: bytes, *, version: int) -> Stat:
        request = protocol.SetDataRequest(path=self._full(path), data=data, version=version)
        response = await self._request("set", path, request, version)
        return _stat(response.stat)

    async def delete(self, path: str, *, version: int) -> None:
        if validate_path(path) == "/":
            raise ValueError("the root znode cannot be deleted")
        await self._request(
            "delete", path, protocol.DeleteRequest(path=self._full(path), version=version), version
        )

    async def multi(self, ops: Sequence[MultiOp]) -> tuple[OpResult, ...]:
        if not ops:
            raise ValueError("a multi needs at least one op")
        request = protocol.TransactionRequest()
        for op in ops:
            request.add(self._op_request(op))
        response = await self._request("multi", ops[0].path, request)
        replies = list(response.responses)
        for index, (op, reply) in enumerate(zip(ops, replies, strict=True)):
            # ZooKeeper marks ops before the culprit RolledBack and after it RuntimeInconsistency.
            if isinstance(reply, exc.ResponseError) and not isinstance(
                reply, exc.RolledBack | exc.RuntimeInconsistency
            ):
                cause = _translate(reply, "multi", op.path, getattr(op, "version", None))
                if not isinstance(cause, CoordinationError):
                    raise cause
                raise MultiOpError(index, op, cause)
        return tuple(self._op_result(op, reply) for op, reply in zip(ops, replies, strict=True))

    # ------------------------------------------------------------------------------ requests

    def _create_request(self, path: str, full: str, data: bytes, ephemeral: bool, sequential: bool) -> Any:
        """A create of ``full`` whose ACL is the one ``ZkSecurity`` gives ``path`` (Kafka's rule)."""
        acl = _aiozk_acl(self._security.acls(path))
        request = protocol.Create2Request(path=full, data=data, acl=acl)
        request.set_flags(ephemeral=ephemeral, sequential=sequential, container=False)
        return request

    def _op_request(self, op: MultiOp) -> Any:
        full = self._full(op.path)
        match op:
            case CheckOp():
                return protocol.CheckVersionRequest(path=full, version=op.version)
            case CreateOp():
                return self._create_request(op.path, full, op.data, op.ephemeral, op.sequential)
            case SetDataOp():
                return protocol.SetDataRequest(path=full, data=op.data, version=op.version)
            case DeleteOp():
                if op.path == "/":
                    raise ValueError("the root znode cannot be deleted")
                return protocol.DeleteRequest(path=full, version=op.version)

    def _op_result(self, op: MultiOp, reply: Any) -> OpResult:
        match op:
            case CheckOp():
                return CheckOpResult(path=op.path)
            case CreateOp():
                return CreateOpResult(path=self._relative(reply.path))
            case SetDataOp():
                return SetDataOpResult(path=op.path, stat=_stat(reply.stat))
            case DeleteOp():
                return DeleteOpResult(path=op.path)

    async def _request(self, operation: str, path: str, request: Any, version: int | None = None) -> Any:
        started_ms = self._clock.now_ms()
        self._requests_total += 1
        try:
            async with asyncio.timeout(self._request_timeout_ms / 1000):
                await self._wait_usable(operation, path)
                return await self._client.send(request)
        except TimeoutError:
            raise ConnectionLossError(
                operation, path, f"no answer within {self._request_timeout_ms} ms"
            ) from None
        except exc.ZKError as error:
            raise _translate(error, operation, path, version) from error
        finally:
            elapsed_ms = self._clock.now_ms() - started_ms
            self._latency_sum_ms += elapsed_ms
            self._latency_max_ms = max(self._latency_max_ms, elapsed_ms)

    async def _wait_usable(self, operation: str, path: str) -> None:
        """Return when CONNECTED on the session the call started on; raise if that is impossible."""
        session_id = self._watchdog.session_id
        while True:
            state = self._watchdog.state
            if state is SessionState.CLOSED or not self._started or self._closing:
                raise SessionClosedError(operation, path)
            if state is SessionState.LOST or self._watchdog.session_id != session_id:
                raise SessionExpiredError(operation, path)
            if state is SessionState.CONNECTED:
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._state_waiters.append(waiter)
            await waiter

    # --------------------------------------------------------------------------------- paths

    def _full(self, path: str) -> str:
        validate_path(path)
        if not self._chroot:
            return path
        return self._chroot if path == "/" else self._chroot + path

    def _relative(self, full: str) -> str:
        if not self._chroot:
            return full
        if full == self._chroot:
            return "/"
        assert full.startswith(self._chroot + "/"), f"{full} is outside the chroot {self._chroot}"
        return full[len(self._chroot) :]
