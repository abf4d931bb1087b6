"""Waiting on ZooKeeper state from outside the actors (tools, the demo, tests): event-driven.

``wait_for_znode`` re-reads a znode at each watch event until a predicate holds — no polling, no
sleeping; ``wait_for_partition_state`` does that for a partition's state znode (leader, ISR,
leader epoch), which is where the controller and leaders publish their decisions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from actors.common.types import TopicPartition
from actors.server import zk_data
from runtime.coordination import NoNodeError, WatchEvent
from runtime.coordination.base import Coordinator

__all__ = ["read_partition_state", "wait_for_partition_state", "wait_for_znode"]


async def wait_for_znode(
    coordinator: Coordinator, path: str, predicate: Callable[[bytes | None], bool], *, timeout_s: float
) -> bytes | None:
    """Wait until ``predicate(data)`` holds for ``path`` (None: missing); TimeoutError after
    ``timeout_s``."""

    async def wait() -> bytes | None:
        while True:
            changed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def on_event(_event: WatchEvent, changed: asyncio.Future[None] = changed) -> None:
                if not changed.done():
                    changed.set_result(None)

            if await coordinator.exists(path, watch=on_event) is None:
                data: bytes | None = None
            else:
                try:
                    data, _ = await coordinator.get(path, watch=on_event)
                except NoNodeError:
                    data = None
            if predicate(data):
                return data
            await changed

    return await asyncio.wait_for(wait(), timeout=timeout_s)


async def wait_for_partition_state(
    coordinator: Coordinator,
    tp: TopicPartition,
    predicate: Callable[[zk_data.PartitionState], bool],
    *,
    timeout_s: float,
) -> zk_data.PartitionState:
    path = zk_data.partition_state_path(tp.topic, tp.partition)

    def matches(data: bytes | None) -> bool:
        return data is not None and predicate(zk_data.decode_partition_state(data, path=path))

    data = await wait_for_znode(coordinator, path, matches, timeout_s=timeout_s)
    assert data is not None
    return zk_data.decode_partition_state(data, path=path)


async def read_partition_state(
    coordinator: Coordinator, tp: TopicPartition
) -> tuple[zk_data.PartitionState, int]:
    """(state, zkVersion) of the partition state znode."""
    path = zk_data.partition_state_path(tp.topic, tp.partition)
    data, stat = await coordinator.get(path)
    return zk_data.decode_partition_state(data, path=path), stat.version
