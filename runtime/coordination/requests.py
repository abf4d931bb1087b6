"""ZooKeeper operations as data, and the one interpreter that performs them.

Actors describe the coordination I/O they need as ``ZkRequest`` values and the runtime performs it
(``execute``) outside the actor, through ``pipe_to_self``; the answer comes back as a message. An
actor with long sequences of ZooKeeper steps (the controller) writes them as a generator that yields
requests and receives results, so the steps read in order while the actor never awaits.

Beyond single calls there are a few composite requests, because the controller needs them often:
* ``ZkGetMany`` — several znodes at once (missing ones map to None);
* ``ZkGetChildrenData`` — a directory's children with their data (children that vanish meanwhile
  are skipped);
* ``ZkFencedSetMany`` / ``ZkFencedCreateMany`` — conditional writes, each in a multi with a
  ``CheckOp`` on a fencing znode (Kafka's controller-epoch check). A failed fence raises
  ``FencedError``; per-write outcomes are reported, never raised;
* ``ZkDeleteRecursive`` — a subtree, leaves first, fenced.

Watches: a request with ``watch=True`` is executed with the watch callback the caller supplies.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from runtime.coordination.base import (
    ANY_VERSION,
    CheckOp,
    Coordinator,
    CreateOp,
    DeleteOp,
    MultiOp,
    OpResult,
    SetDataOp,
    SetDataOpResult,
    Stat,
    WatchCallback,
)
from runtime.coordination.errors import (
    BadVersionError,
    CoordinationError,
    MultiOpError,
    NodeExistsError,
    NoNodeError,
)

__all__ = [
    "FencedError",
    "WriteOutcome",
    "ZkCreate",
    "ZkDelete",
    "ZkDeleteRecursive",
    "ZkEnsurePath",
    "ZkExists",
    "ZkFencedCreateMany",
    "ZkFencedSetMany",
    "ZkGet",
    "ZkGetChildren",
    "ZkGetChildrenData",
    "ZkGetMany",
    "ZkMulti",
    "ZkRequest",
    "ZkSet",
    "execute",
]


class FencedError(CoordinationError):
    """The fencing znode moved: whoever fenced its writes on it has been superseded."""


@dataclass(frozen=True, slots=True)
class ZkGet:
    """(data, Stat); raises NoNodeError."""

    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class ZkExists:
    """Stat or None; the watch fires on creation too."""

    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class ZkGetChildren:
    """Sorted child names; raises NoNodeError."""

    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class ZkGetMany:
    """{path: (data, Stat) or None}; with ``watch`` a data watch on each existing znode."""

    paths: tuple[str, ...]
    watch: bool = False


@dataclass(frozen=True, slots=True)
class ZkGetChildrenData:
    """{child name: (data, Stat)} for the children existing when read."""

    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class ZkCreate:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class ZkSet:
    path: str
    data: bytes
    version: int


@dataclass(frozen=True, slots=True)
class ZkDelete:
    path: str
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class ZkEnsurePath:
    path: str


@dataclass(frozen=True, slots=True)
class ZkMulti:
    ops: tuple[MultiOp, ...]


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """One fenced write: the new zkVersion, or why it did not happen."""

    path: str
    new_version: int | None
    error: str | None = None  # "bad_version", "no_node", "node_exists"

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class ZkFencedSetMany:
    """Each (path, data, expected version) in its own multi with ``fence``."""

    fence: CheckOp
    updates: tuple[tuple[str, bytes, int], ...]


@dataclass(frozen=True, slots=True)
class ZkFencedCreateMany:
    """Each (path, data) created (parents ensured first) in its own multi with ``fence``."""

    fence: CheckOp
    creates: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ZkDeleteRecursive:
    """Delete ``path`` and everything below it, each delete fenced (missing is fine)."""

    path: str
    fence: CheckOp | None = None


ZkRequest: TypeAlias = (
    ZkGet
    | ZkExists
    | ZkGetChildren
    | ZkGetMany
    | ZkGetChildrenData
    | ZkCreate
    | ZkSet
    | ZkDelete
    | ZkEnsurePath
    | ZkMulti
    | ZkFencedSetMany
    | ZkFencedCreateMany
    | ZkDeleteRecursive
)


async def execute(coordinator: Coordinator, request: ZkRequest, watch: WatchCallback | None = None) -> object:
    """Perform ``request``; raises the coordinator's typed errors (and FencedError)."""
    match request:
        case ZkGet(path=path, watch=wants_watch):
            return await coordinator.get(path, watch=watch if wants_watch else None)
        case ZkExists(path=path, watch=wants_watch):
            return await coordinator.exists(path, watch=watch if wants_watch else None)
        case ZkGetChildren(path=path, watch=wants_watch):
            return await coordinator.get_children(path, watch=watch if wants_watch else None)
        case ZkGetMany(paths=paths, watch=wants_watch):
            each = watch if wants_watch else None
            return dict(
                zip(
                    paths,
                    await asyncio.gather(*(_get_or_none(coordinator, p, each) for p in paths)),
                    strict=True,
                )
            )
        case ZkGetChildrenData(path=path, watch=wants_watch):
            children = await coordinator.get_children(path, watch=watch if wants_watch else None)
            found = await asyncio.gather(
                *(_get_or_none(coordinator, f"{path}/{child}") for child in children)
            )
            return {child: value for child, value in zip(children, found, strict=True) if value is not None}
        case ZkCreate(path=path, data=data, ephemeral=ephemeral, sequential=sequential):
            return await coordinator.create(path, data, ephemeral=ephemeral, sequential=sequential)
        case ZkSet(path=path, data=data, version=version):
            return await coordinator.set(path, data, version=version)
        case ZkDelete(path=path, version=version):
            await coordinator.delete(path, version=version)
            return None
        case ZkEnsurePath(path=path):
            await coordinator.ensure_path(path)
            return None
        case ZkMulti(ops=ops):
            return await coordinator.multi(ops)
        case ZkFencedSetMany(fence=fence, updates=updates):
            return list(
                await asyncio.gather(*(_fenced_set(coordinator, fence, *update) for update in updates))
            )
        case ZkFencedCreateMany(fence=fence, creates=creates):
            return list(
                await asyncio.gather(*(_fenced_create(coordinator, fence, *create) for create in creates))
            )
        case ZkDeleteRecursive(path=path, fence=fence):
            await _delete_recursive(coordinator, path, fence)
            return None
    raise AssertionError(f"unknown ZooKeeper request {request!r}")


async def _get_or_none(
    coordinator: Coordinator, path: str, watch: WatchCallback | None = None
) -> tuple[bytes, Stat] | None:
    try:
        return await coordinator.get(path, watch=watch)
    except NoNodeError:
        return None


async def _fenced(coordinator: Coordinator, fence: CheckOp, ops: Sequence[MultiOp]) -> tuple[OpResult, ...]:
    try:
        return await coordinator.multi((fence, *ops))
    except MultiOpError as error:
        if error.index == 0:
            raise FencedError(f"fence {fence.path} is no longer at version {fence.version}") from None
        raise error.cause from None


async def _fenced_set(
    coordinator: Coordinator, fence: CheckOp, path: str, data: bytes, version: int
) -> WriteOutcome:
    try:
        results = await _fenced(coordinator, fence, [SetDataOp(path=path, data=data, version=version)])
    except BadVersionError:
        return WriteOutcome(path, None, "bad_version")
    except NoNodeError:
        return WriteOutcome(path, None, "no_node")
    result = results[1]
    assert isinstance(result, SetDataOpResult)
    return WriteOutcome(path, result.stat.version)


async def _fenced_create(coordinator: Coordinator, fence: CheckOp, path: str, data: bytes) -> WriteOutcome:
    parent = path.rsplit("/", 1)[0]
    if parent:
        await coordinator.ensure_path(parent)
    try:
        await _fenced(coordinator, fence, [CreateOp(path=path, data=data)])
    except NodeExistsError:
        return WriteOutcome(path, None, "node_exists")
    return WriteOutcome(path, 0)


async def _delete_recursive(coordinator: Coordinator, path: str, fence: CheckOp | None) -> None:
    try:
        children = await coordinator.get_children(path)
    except NoNodeError:
        return
    for child in children:
        await _delete_recursive(coordinator, f"{path}/{child}", fence)
    with contextlib.suppress(NoNodeError):
        if fence is None:
            await coordinator.delete(path, version=ANY_VERSION)
        else:
            await _fenced(coordinator, fence, [DeleteOp(path=path, version=ANY_VERSION)])
