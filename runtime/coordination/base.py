"""The Coordinator port: ZooKeeper's data model and operations, with no ZooKeeper library in sight.

What this module owns: the values that cross the port (``Stat``, ``WatchEvent``, multi ops and
their results), path validation shared by every implementation, and the ``Coordinator`` abstract
base class that actors' I/O is written against. Two implementations exist and one contract suite
(``tests/contract/test_coordinator_contract.py``) proves they agree: ``runtime.coordination.zk``
(aiozk, real ZooKeeper) and ``runtime.coordination.memory`` (a verified in-memory fake).

Rules of the port
-----------------
* Methods are ``async`` and raise the typed errors of ``runtime.coordination.errors``. Actors never
  await them: they call them inside ``ctx.pipe_to_self(lambda: coordinator.get(path), ...)``.
* Every call is bounded in time. An implementation that cannot get an answer raises
  ``ConnectionLossError`` (whose outcome, for a write, is unknown), never hangs.
* Versions are always explicit. ``set``/``delete`` take ``version=`` (the znode's ``zk_version``, as
  Kafka says) and only ``ANY_VERSION`` (-1) means "whatever the version": no implicit caching.
* Watches are one-shot callbacks, registered by passing ``watch=`` to ``get``, ``exists`` or
  ``get_children``. A watch fires at most once, with the first matching ``WatchEvent``:

  ============== =================================================================
  registered by  fires on
  ============== =================================================================
  ``get``        DATA_CHANGED or NODE_DELETED of the znode
  ``exists``     NODE_CREATED if it was missing; DATA_CHANGED or NODE_DELETED if not
  ``get_children`` CHILDREN_CHANGED (a child created or deleted) or NODE_DELETED
  ============== =================================================================

  A watch is only registered when the call succeeds (``get`` on a missing znode registers none;
  use ``exists`` to wait for a creation). Watches survive a connection loss (events that happened
  while disconnected are delivered after reconnecting) but never a session: when the session is
  LOST its watches are dropped silently, and session subscribers re-read and re-watch.
* Callbacks (watches and session listeners) are plain synchronous functions called on the event
  loop, for example the callable returned by ``ctx.message_adapter``. They must not block.
* ``get_children`` returns names sorted, so that every implementation is deterministic.
"""

from __future__ import annotations

import contextlib
import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from runtime.coordination.errors import NodeExistsError
from runtime.coordination.session import SessionEvent, SessionState, Subscription

__all__ = [
    "ANY_VERSION",
    "CheckOp",
    "CheckOpResult",
    "Coordinator",
    "CoordinatorStatistics",
    "CreateOp",
    "CreateOpResult",
    "CreateResult",
    "DeleteOp",
    "DeleteOpResult",
    "MultiOp",
    "OpResult",
    "SetDataOp",
    "SetDataOpResult",
    "Stat",
    "WatchCallback",
    "WatchEvent",
    "WatchEventKind",
    "ancestors",
    "parent_path",
    "validate_path",
]

ANY_VERSION: Final = -1
"""Matches any zk_version in a conditional write (Kafka's ``ZkVersion.MatchAnyVersion``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stat:
    """A znode's metadata. ``version`` is the data version Kafka calls ``zk_version``.

    ``czxid``/``mzxid`` are the zxids of the creating and last modifying transactions; the czxid
    of a broker's registration znode is its broker epoch. ``ephemeral_owner`` is the owning
    session id, 0 for a persistent znode. ``cversion`` counts child creations and deletions.
    """

    version: int
    cversion: int
    czxid: int
    mzxid: int
    ephemeral_owner: int
    num_children: int
    data_length: int


class WatchEventKind(enum.Enum):
    NODE_CREATED = "node_created"
    NODE_DELETED = "node_deleted"
    DATA_CHANGED = "data_changed"
    CHILDREN_CHANGED = "children_changed"


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchEvent:
    path: str
    kind: WatchEventKind


WatchCallback: TypeAlias = Callable[[WatchEvent], None]


# ---------------------------------------------------------------------------------- multi ops


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckOp:
    """Fails the multi unless ``path`` is at ``version`` (Kafka's controller-epoch fencing)."""

    path: str
    version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SetDataOp:
    path: str
    data: bytes
    version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteOp:
    path: str
    version: int


MultiOp: TypeAlias = CheckOp | CreateOp | SetDataOp | DeleteOp


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateResult:
    """What ``create`` returns: the actual path (with its sequence suffix) and the new Stat."""

    path: str
    stat: Stat


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckOpResult:
    path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateOpResult:
    """A create inside a multi: ZooKeeper answers with the actual path only (no Stat)."""

    path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SetDataOpResult:
    """A set inside a multi, with the new Stat (its ``version`` is the new zk_version)."""

    path: str
    stat: Stat


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteOpResult:
    path: str


OpResult: TypeAlias = CheckOpResult | CreateOpResult | SetDataOpResult | DeleteOpResult


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorStatistics:
    """A snapshot of one coordinator (one ZooKeeper client).

    The counters mirror Kafka's ``SessionExpireListener`` meters: ``expires_total`` is
    ``kafka_server_sessionexpirelistener_zookeeperexpires_total``, ``disconnects_total`` the
    ZooKeeperDisconnects meter and ``sync_connects_total`` the ZooKeeperSyncConnects meter (every
    time a session becomes usable, the first connection included). Latencies are whole
    milliseconds on the coordinator's clock (``request_latency_ms_sum / requests_total`` is the
    mean; Kafka's histogram is ``ZooKeeperRequestLatencyMs``).
    """

    session_state: SessionState
    session_id: int | None
    expires_total: int
    disconnects_total: int
    sync_connects_total: int
    requests_total: int
    request_latency_ms_sum: int
    request_latency_ms_max: int


# ------------------------------------------------------------------------------------- paths


def validate_path(path: str) -> str:
    """Check a znode path the way ZooKeeper's client does; return it unchanged.

    A path is absolute, has no empty, ``.`` or ``..`` segment, no trailing slash (except the
    root itself) and no NUL. Violations are programmer errors (``ValueError``), not coordination
    errors: no implementation sends such a path anywhere.
    """
    if not path.startswith("/"):
        raise ValueError(f"znode path must be absolute: {path!r}")
    if path == "/":
        return path
    if path.endswith("/"):
        raise ValueError(f"znode path must not end with '/': {path!r}")
    if "\x00" in path:
        raise ValueError(f"znode path must not contain NUL: {path!r}")
    for segment in path[1:].split("/"):
        if segment in ("", ".", ".."):
            raise ValueError(f"znode path has an empty, '.' or '..' segment: {path!r}")
    return path


def parent_path(path: str) -> str:
    """The parent of a validated, non-root path."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def ancestors(path: str) -> list[str]:
    """Every proper ancestor of ``path`` except the root, outermost first."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


# -------------------------------------------------------------------------------------- port


class Coordinator(ABC):
    """One ZooKeeper client (one session at a time) as seen by actors and the composition root."""

    # ----------------------------------------------------------------------------- lifecycle

    @abstractmethod
    async def start(self) -> None:
        """Open the first session; returns once it is CONNECTED (bounded; ConnectionLossError).

        Idempotent while open; a closed coordinator cannot start again (SessionClosedError).
        """

    @abstractmethod
    async def close(self) -> None:
        """Close the session (its ephemeral znodes go at once) and move to CLOSED. Idempotent."""

    # ------------------------------------------------------------------------------- session

    @property
    @abstractmethod
    def session_state(self) -> SessionState: ...

    @property
    @abstractmethod
    def session_id(self) -> int | None:
        """The current session's id (the ``ephemeral_owner`` of znodes it creates), if any."""

    @abstractmethod
    def subscribe(self, listener: Callable[[SessionEvent], None]) -> Subscription:
        """Call ``listener`` synchronously on every session state change until cancelled."""

    @abstractmethod
    def statistics(self) -> CoordinatorStatistics: ...

    # ---------------------------------------------------------------------------------- data

    @abstractmethod
    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> CreateResult:
        """Create a znode. A sequential znode gets ``%010d`` of its parent's count of child
        creations appended (ZooKeeper's counter: not the cversion, which also counts deletions).

        Raises NodeExistsError, NoNodeError (missing parent), NoChildrenForEphemeralsError.
        """

    @abstractmethod
    async def get(self, path: str, *, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        """Data and Stat. Raises NoNodeError (and then registers no watch)."""

    @abstractmethod
    async def exists(self, path: str, *, watch: WatchCallback | None = None) -> Stat | None:
        """The Stat, or None when missing; a watch is registered either way."""

    @abstractmethod
    async def get_children(self, path: str, *, watch: WatchCallback | None = None) -> list[str]:
        """Child names (not paths), sorted. Raises NoNodeError (and then registers no watch)."""

    @abstractmethod
    async def set(self, path: str, data: bytes, *, version: int) -> Stat:
        """Conditional write. Raises NoNodeError, BadVersionError (unless version is ANY_VERSION)."""

    @abstractmethod
    async def delete(self, path: str, *, version: int) -> None:
        """Conditional delete. Raises NoNodeError, BadVersionError, NotEmptyError."""

    @abstractmethod
    async def multi(self, ops: Sequence[MultiOp]) -> tuple[OpResult, ...]:
        """Apply all ops atomically, in order, or none of them (MultiOpError names the culprit)."""

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing ancestors as empty persistent znodes (NodeExists is fine)."""
        validate_path(path)
        if path == "/":
            return
        for each in [*ancestors(path), path]:
            with contextlib.suppress(NodeExistsError):
                await self.create(each)
