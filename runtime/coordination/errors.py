"""Typed failures of the Coordinator port (ZooKeeper semantics, no ZooKeeper library types).

    CoordinationError                    (runtime.errors)
    ├── NoNodeError                      the znode (or, for a create, its parent) does not exist
    ├── NodeExistsError                  a create found the znode already there
    ├── BadVersionError                  a conditional write's expected zk_version did not match
    ├── NotEmptyError                    a delete found children under the znode
    ├── NoChildrenForEphemeralsError     a create under an ephemeral znode
    ├── ConnectionLossError              no answer in time: the outcome of a write is UNKNOWN
    ├── SessionExpiredError              the session the call was made on is gone
    │   └── SessionClosedError           the coordinator was closed by its owner
    └── MultiOpError                     one op of a multi failed; nothing was applied

Rules kept here:

* Every error names the path it is about, so a log line is enough to find the znode.
* ``ConnectionLossError`` never means "not applied": a write may have reached the server before the
  connection dropped. Callers re-read (or rely on CheckedEphemeral-style ownership checks).
* ``MultiOpError`` carries the index and the op that failed and the per-op error as ``cause``
  (ZooKeeper reports the first failing op; the others are rolled back).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.errors import CoordinationError

if TYPE_CHECKING:
    from runtime.coordination.base import MultiOp

__all__ = [
    "BadVersionError",
    "ConnectionLossError",
    "CoordinationError",
    "MultiOpError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionClosedError",
    "SessionExpiredError",
]


class NoNodeError(CoordinationError):
    def __init__(self, path: str, detail: str = "") -> None:
        super().__init__(f"no node {path}{': ' + detail if detail else ''}")
        self.path = path


class NodeExistsError(CoordinationError):
    def __init__(self, path: str) -> None:
        super().__init__(f"node {path} already exists")
        self.path = path


class BadVersionError(CoordinationError):
    def __init__(self, path: str, expected_version: int, actual_version: int | None = None) -> None:
        actual = "" if actual_version is None else f", znode is at version {actual_version}"
        super().__init__(f"bad version for {path}: expected zk_version {expected_version}{actual}")
        self.path = path
        self.expected_version = expected_version
        self.actual_version = actual_version


class NotEmptyError(CoordinationError):
    def __init__(self, path: str) -> None:
        super().__init__(f"node {path} has children")
        self.path = path


class NoChildrenForEphemeralsError(CoordinationError):
    def __init__(self, path: str) -> None:
        super().__init__(f"cannot create {path}: its parent is ephemeral")
        self.path = path


class ConnectionLossError(CoordinationError):
    """The request got no answer in time (disconnected, or the server did not reply)."""

    def __init__(self, operation: str, path: str, reason: str) -> None:
        super().__init__(f"connection loss during {operation} {path}: {reason}")
        self.operation = operation
        self.path = path
        self.reason = reason


class SessionExpiredError(CoordinationError):
    """The session is gone: its ephemeral znodes and watches are gone with it."""

    def __init__(self, operation: str, path: str, reason: str = "session expired") -> None:
        super().__init__(f"{operation} {path}: {reason}")
        self.operation = operation
        self.path = path


class SessionClosedError(SessionExpiredError):
    """The coordinator was closed (or never started) by its owner."""

    def __init__(self, operation: str, path: str) -> None:
        super().__init__(operation, path, "the coordinator is closed")


class MultiOpError(CoordinationError):
    """Op ``index`` of a multi failed with ``cause``; the whole multi was rolled back."""

    def __init__(self, index: int, op: MultiOp, cause: CoordinationError) -> None:
        super().__init__(f"multi aborted: op {index} ({type(op).__name__} {op.path}) failed: {cause}")
        self.index = index
        self.op = op
        self.cause = cause
