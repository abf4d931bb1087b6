"""The in-memory ZooKeeper *server*: one znode tree, its sessions and its watches.

Several ``MemoryCoordinator`` clients (one per simulated broker) share one ``MemoryZooKeeper``,
so they see the same tree, compete for the same ephemeral znodes and watch each other's changes.

Theory of operation (what is modelled, following ZooKeeper's DataTree and PrepRequestProcessor)
-----------------------------------------------------------------------------------------------
* Every successful write is one transaction with the next zxid; a multi is ONE transaction, so
  all its znodes share one czxid/mzxid. Opening and closing a session also take a zxid, as in
  ZooKeeper, so a re-created ephemeral always gets a larger czxid (Kafka's broker epoch).
* ``version`` counts data changes. ZooKeeper stores the number of child *creations* of a znode and
  reports ``cversion`` as creations + deletions (``2 * creations - num_children``, DataNode's
  copyStat); a sequential child is named ``prefix + "%010d" % creations``, so after a create and a
  delete the next sequence number is 1 while cversion is 2. Both are reproduced.
* Errors are checked in ZooKeeper's order: create = parent missing (NoNode), parent ephemeral,
  node exists; set = NoNode, BadVersion; delete = NoNode, BadVersion, NotEmpty; check = NoNode,
  BadVersion. A multi applies its ops in order against the state left by the earlier ops and
  undoes them all when one fails.
* Watches are server-side tables per path (data/exists watches, child watches), one-shot: a
  trigger removes them and then calls their callbacks, after the transaction is complete, before
  the mutating call returns. That is how ``Activity.wait_idle()`` sees the work a watch causes.
* A session's watches are delivered while its client is connected; while it is disconnected they
  queue and are delivered on reconnection (ZooKeeper re-sends them through SetWatches). A
  session that expires or closes loses its ephemeral znodes (one transaction) and its watches.
* Session timeouts need time: with a ``Clock`` the server expires a disconnected session
  ``timeout_ms`` after its client disconnected (ManualClock makes that virtual time); without one,
  sessions only expire on demand (``expire_session``).
* An outage (``stop_serving``/``resume_serving``, the simulation's): while the ensemble is down no
  session expires (its clock is not running); when it is back, every session still disconnected
  gets a full timeout again, as after a ZooKeeper leader election.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from runtime.coordination.base import (
    ANY_VERSION,
    CheckOp,
    CheckOpResult,
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
    WatchEvent,
    WatchEventKind,
    parent_path,
    validate_path,
)
from runtime.coordination.errors import (
    BadVersionError,
    CoordinationError,
    MultiOpError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

__all__ = ["MemoryZooKeeper", "SessionClient", "TimerScheduler"]

_FIRST_SESSION_ID = 0x0100_0000_0000_0000  # shaped like a standalone server's ids (server id 1)


class _Cancellable(Protocol):
    def cancel(self) -> None: ...


class TimerScheduler(Protocol):
    """What the server needs of a ``runtime.clock.Clock`` (ManualClock and LoopClock fit).

    Structural on purpose: importing ``runtime.clock`` would pull asyncio into everything that
    imports ``runtime.coordination``, actors included (import-linter forbids that).
    """

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> _Cancellable: ...


class SessionClient(Protocol):
    """What the server needs from the client owning a session."""

    def deliver_watch(self, callback: WatchCallback, event: WatchEvent) -> None: ...

    def session_expired_by_server(self, session_id: int) -> None: ...


@dataclass(slots=True)
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    ephemeral_owner: int
    version: int = 0
    child_creations: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> Stat:
        return Stat(
            version=self.version,
            cversion=2 * self.child_creations - len(self.children),
            czxid=self.czxid,
            mzxid=self.mzxid,
            ephemeral_owner=self.ephemeral_owner,
            num_children=len(self.children),
            data_length=len(self.data),
        )


@dataclass(slots=True)
class _Session:
    session_id: int
    timeout_ms: int
    client: SessionClient
    connected: bool = True
    ephemerals: set[str] = field(default_factory=set)
    pending: list[tuple[WatchCallback, WatchEvent]] = field(default_factory=list)
    expiry: _Cancellable | None = None


@dataclass(frozen=True, slots=True)
class _Watch:
    session_id: int
    callback: WatchCallback


@dataclass(slots=True)
class _Txn:
    """The undo log and watch triggers of one transaction in progress."""

    zxid: int
    undo: list[Callable[[], None]] = field(default_factory=list)
    triggers: list[tuple[str, WatchEventKind]] = field(default_factory=list)


class MemoryZooKeeper:
    """One in-memory ZooKeeper ensemble. Hand it to any number of ``MemoryCoordinator`` clients."""

    def __init__(self, *, clock: TimerScheduler | None = None) -> None:
        self._clock = clock
        self._zxid = 0
        self._nodes: dict[str, _Node] = {"/": _Node(data=b"", czxid=0, mzxid=0, ephemeral_owner=0)}
        self._sessions: dict[int, _Session] = {}
        self._session_ids = itertools.count(_FIRST_SESSION_ID)
        self._data_watches: dict[str, list[_Watch]] = {}
        self._child_watches: dict[str, list[_Watch]] = {}
        self._serving = True

    # ------------------------------------------------------------------------------ inspection

    @property
    def last_zxid(self) -> int:
        return self._zxid

    def session_ids(self) -> list[int]:
        """Live sessions, oldest first."""
        return sorted(self._sessions)

    def paths(self) -> list[str]:
        """Every znode path, sorted (for test assertions and debugging)."""
        return sorted(self._nodes)

    def peek(self, path: str) -> tuple[bytes, Stat] | None:
        """A znode's data and stat without a session or a watch (an omniscient observer's read,
        for the simulation's checks; no client can do this)."""
        node = self._nodes.get(path)
        return None if node is None else (node.data, node.stat())

    def peek_children(self, path: str) -> list[str]:
        node = self._nodes.get(path)
        return [] if node is None else sorted(node.children)

    # -------------------------------------------------------------------------------- sessions

    def open_session(self, client: SessionClient, timeout_ms: int) -> int:
        session_id = next(self._session_ids)
        self._zxid += 1  # createSession is a transaction in ZooKeeper
        self._sessions[session_id] = _Session(session_id, timeout_ms, client)
        return session_id

    def is_alive(self, session_id: int) -> bool:
        return session_id in self._sessions

    def close_session(self, session_id: int) -> None:
        """The owner closed it: ephemerals go at once; the client is not told (it asked)."""
        self._end_session(session_id)

    def expire_session(self, session_id: int) -> None:
        """Expire a session now (as the server does when it times out). No-op if already gone."""
        session = self._sessions.get(session_id)
        if session is None:
            return
        self._end_session(session_id)
        if session.connected:
            # A connected client learns at once: the server closes its connection and the
            # client's reconnect attempt is answered "expired".
            session.client.session_expired_by_server(session_id)

    def client_disconnected(self, session_id: int) -> None:
        session = self._sessions[session_id]
        session.connected = False
        if self._serving:
            self._start_expiry(session)

    def _start_expiry(self, session: _Session) -> None:
        if self._clock is not None and session.expiry is None:
            session_id = session.session_id
            session.expiry = self._clock.call_later(
                session.timeout_ms, lambda: self.expire_session(session_id)
            )

    @property
    def serving(self) -> bool:
        return self._serving

    def stop_serving(self) -> None:
        """The ensemble is down: pending expiries stop (clients must be disconnected by their
        owners; a call to a stopped server is the caller's bug)."""
        self._serving = False
        for session in self._sessions.values():
            if session.expiry is not None:
                session.expiry.cancel()
                session.expiry = None

    def resume_serving(self) -> None:
        """The ensemble is back: sessions whose clients are still away time out from now."""
        self._serving = True
        for session in list(self._sessions.values()):
            if not session.connected:
                self._start_expiry(session)

    def client_reconnected(self, session_id: int) -> bool:
        """Reattach a client to its session; False if it expired meanwhile. Flushes queued watches."""
        session = self._sessions.get(session_id)
        if session is None:
            return False
        if session.expiry is not None:
            session.expiry.cancel()
            session.expiry = None
        session.connected = True
        pending, session.pending = session.pending, []
        for callback, event in pending:
            session.client.deliver_watch(callback, event)
        return True

    def _end_session(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        if session.expiry is not None:
            session.expiry.cancel()
        for table in (self._data_watches, self._child_watches):
            for path in list(table):
                kept = [watch for watch in table[path] if watch.session_id != session_id]
                if kept:
                    table[path] = kept
                else:
                    del table[path]
        # closeSession is one transaction deleting every ephemeral of the session.
        txn = _Txn(zxid=self._zxid + 1)
        for path in sorted(session.ephemerals, reverse=True):
            if path in self._nodes:
                self._delete(txn, path, ANY_VERSION)
        self._commit(txn)

    # ------------------------------------------------------------------------------------ reads

    def get(self, session_id: int, path: str, watch: WatchCallback | None) -> tuple[bytes, Stat]:
        node = self._nodes.get(validate_path(path))
        if node is None:
            raise NoNodeError(path)
        if watch is not None:
            self._data_watches.setdefault(path, []).append(_Watch(session_id, watch))
        return node.data, node.stat()

    def exists(self, session_id: int, path: str, watch: WatchCallback | None) -> Stat | None:
        node = self._nodes.get(validate_path(path))
        if watch is not None:
            self._data_watches.setdefault(path, []).append(_Watch(session_id, watch))
        return None if node is None else node.stat()

    def get_children(self, session_id: int, path: str, watch: WatchCallback | None) -> list[str]:
        node = self._nodes.get(validate_path(path))
        if node is None:
            raise NoNodeError(path)
        if watch is not None:
            self._child_watches.setdefault(path, []).append(_Watch(session_id, watch))
        return sorted(node.children)

    # ----------------------------------------------------------------------------------- writes

    def create(self, session_id: int, op: CreateOp) -> CreateResult:
        """A create as its own transaction, answered with the new znode's Stat."""
        validate_path(op.path)
        txn = _Txn(zxid=self._zxid + 1)
        path, node = self._create(txn, session_id, op)
        self._commit(txn)
        return CreateResult(path=path, stat=node.stat())

    def write(self, session_id: int, op: MultiOp) -> OpResult:
        """One op as its own transaction; errors are raised as themselves."""
        txn = _Txn(zxid=self._zxid + 1)
        result = self._apply(txn, session_id, op)
        self._commit(txn)
        return result

    def multi(self, session_id: int, ops: Sequence[MultiOp]) -> tuple[OpResult, ...]:
        txn = _Txn(zxid=self._zxid + 1)
        results: list[OpResult] = []
        for index, op in enumerate(ops):
            try:
                results.append(self._apply(txn, session_id, op))
            except CoordinationError as error:
                for undo in reversed(txn.undo):
                    undo()
                raise MultiOpError(index, op, error) from error
        self._commit(txn)
        return tuple(results)

    def _apply(self, txn: _Txn, session_id: int, op: MultiOp) -> OpResult:
        validate_path(op.path)
        match op:
            case CreateOp():
                path, _ = self._create(txn, session_id, op)
                return CreateOpResult(path=path)
            case SetDataOp():
                node = self._node_at_version(op.path, op.version)
                old = (node.data, node.version, node.mzxid)
                node.data, node.version, node.mzxid = op.data, node.version + 1, txn.zxid

                def undo_set() -> None:
                    node.data, node.version, node.mzxid = old

                txn.undo.append(undo_set)
                txn.triggers.append((op.path, WatchEventKind.DATA_CHANGED))
                return SetDataOpResult(path=op.path, stat=node.stat())
            case DeleteOp():
                if op.path == "/":
                    raise ValueError("the root znode cannot be deleted")
                self._delete(txn, op.path, op.version)
                return DeleteOpResult(path=op.path)
            case CheckOp():
                self._node_at_version(op.path, op.version)
                return CheckOpResult(path=op.path)

    def _node_at_version(self, path: str, version: int) -> _Node:
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if version != ANY_VERSION and version != node.version:
            raise BadVersionError(path, version, node.version)
        return node

    def _create(self, txn: _Txn, session_id: int, op: CreateOp) -> tuple[str, _Node]:
        if op.path == "/":
            raise NodeExistsError("/")
        parent_name = parent_path(op.path)
        parent = self._nodes.get(parent_name)
        if parent is None:
            raise NoNodeError(op.path, f"parent {parent_name} does not exist")
        if parent.ephemeral_owner != 0:
            raise NoChildrenForEphemeralsError(op.path)
        path = f"{op.path}{parent.child_creations:010d}" if op.sequential else op.path
        if path in self._nodes:
            raise NodeExistsError(path)
        owner = session_id if op.ephemeral else 0
        node = _Node(data=op.data, czxid=txn.zxid, mzxid=txn.zxid, ephemeral_owner=owner)
        name = path.rsplit("/", 1)[1]
        self._nodes[path] = node
        parent.children.add(name)
        parent.child_creations += 1
        if owner:
            self._sessions[owner].ephemerals.add(path)

        def undo_create() -> None:
            del self._nodes[path]
            parent.children.discard(name)
            parent.child_creations -= 1
            if owner and owner in self._sessions:
                self._sessions[owner].ephemerals.discard(path)

        txn.undo.append(undo_create)
        txn.triggers.append((path, WatchEventKind.NODE_CREATED))
        txn.triggers.append((parent_name, WatchEventKind.CHILDREN_CHANGED))
        return path, node

    def _delete(self, txn: _Txn, path: str, version: int) -> None:
        node = self._node_at_version(path, version)
        if node.children:
            raise NotEmptyError(path)
        parent_name = parent_path(path)
        parent = self._nodes[parent_name]
        name = path.rsplit("/", 1)[1]
        del self._nodes[path]
        parent.children.discard(name)
        owner_session = self._sessions.get(node.ephemeral_owner)
        if owner_session is not None:
            owner_session.ephemerals.discard(path)

        def undo_delete() -> None:
            self._nodes[path] = node
            parent.children.add(name)
            if owner_session is not None:
                owner_session.ephemerals.add(path)

        txn.undo.append(undo_delete)
        txn.triggers.append((path, WatchEventKind.NODE_DELETED))
        txn.triggers.append((parent_name, WatchEventKind.CHILDREN_CHANGED))

    def _commit(self, txn: _Txn) -> None:
        if not txn.undo:
            return  # nothing changed (e.g. a session without ephemerals closed)
        self._zxid = txn.zxid
        for path, kind in txn.triggers:
            fired: list[_Watch] = []
            if kind is not WatchEventKind.CHILDREN_CHANGED:
                fired.extend(self._data_watches.pop(path, ()))
            if kind in (WatchEventKind.CHILDREN_CHANGED, WatchEventKind.NODE_DELETED):
                fired.extend(self._child_watches.pop(path, ()))
            for watch in fired:
                self._deliver(watch, WatchEvent(path=path, kind=kind))

    def _deliver(self, watch: _Watch, event: WatchEvent) -> None:
        session = self._sessions.get(watch.session_id)
        if session is None:
            return
        if session.connected:
            session.client.deliver_watch(watch.callback, event)
        else:
            session.pending.append((watch.callback, event))
