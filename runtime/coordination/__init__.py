"""Coordination: the ZooKeeper port, its session model, and the in-memory fake.

Public surface (no ZooKeeper library behind any of it):

* ``base``: ``Coordinator`` (the port), ``Stat``, ``WatchEvent``/``WatchEventKind``, multi ops
  (``CheckOp``, ``CreateOp``, ``SetDataOp``, ``DeleteOp``) and results, ``ANY_VERSION``.
* ``session``: ``SessionState`` + ``VALID_TRANSITIONS``, ``SessionEvent``, ``Subscription``.
* ``errors``: the typed failures, all ``runtime.errors.CoordinationError``.
* ``memory``: ``MemoryZooKeeper`` (a shared in-memory server) and ``MemoryCoordinator`` (a client).

The aiozk adapter, ``runtime.coordination.zk.ZkCoordinator``, is deliberately NOT re-exported:
only the composition root (and the tests) import it, so that nothing else pulls in aiozk.
"""

from runtime.coordination.base import (
    ANY_VERSION,
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
    WatchEvent,
    WatchEventKind,
)
from runtime.coordination.errors import (
    BadVersionError,
    ConnectionLossError,
    MultiOpError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionClosedError,
    SessionExpiredError,
)
from runtime.coordination.memory import MemoryCoordinator, MemoryZooKeeper
from runtime.coordination.session import (
    VALID_TRANSITIONS,
    SessionEvent,
    SessionState,
    Subscription,
)

__all__ = [
    "ANY_VERSION",
    "VALID_TRANSITIONS",
    "BadVersionError",
    "CheckOp",
    "CheckOpResult",
    "ConnectionLossError",
    "Coordinator",
    "CoordinatorStatistics",
    "CreateOp",
    "CreateOpResult",
    "CreateResult",
    "DeleteOp",
    "DeleteOpResult",
    "MemoryCoordinator",
    "MemoryZooKeeper",
    "MultiOp",
    "MultiOpError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "OpResult",
    "SessionClosedError",
    "SessionEvent",
    "SessionExpiredError",
    "SessionState",
    "SetDataOp",
    "SetDataOpResult",
    "Stat",
    "Subscription",
    "WatchCallback",
    "WatchEvent",
    "WatchEventKind",
]
