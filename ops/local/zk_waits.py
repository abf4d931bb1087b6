"""Waiting on ZooKeeper state from outside the actors (tools, the demo, tests): event-driven.

``wait_for_znode`` re-reads a znode at each watch event until a predicate holds — no polling, no
sleeping; ``wait_for_partition_state`` does that for a partition's state znode (leader, ISR,
leader epoch), which is where the controller and leaders publish their decisions.
``PartitionStateWatch`` does it for many partitions of a topic at once and notes, per partition,
the instant (the loop's clock) of the watch notification whose re-read first satisfied the
predicate: what a benchmark times a failover by.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from actors.common.types import TopicPartition
from actors.server import zk_data
from runtime.coordination import NoNodeError, WatchEvent
from runtime.coordination.base import Coordinator

__all__ = [
    "PartitionStateWatch",
    "read_partition_state",
    "wait_for_partition_state",
    "wait_for_partition_states",
    "wait_for_znode",
]


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


class PartitionStateWatch:
    """Per partition of ``topic``, the first instant (``loop.time()``) its state znode satisfies
    ``predicate(partition, state)``: ``arm`` reads every znode once with a watch (an instant from
    that read when it already holds); ``wait`` re-reads at each notification, the instant being
    the notification's."""

    def __init__(
        self,
        coordinator: Coordinator,
        topic: str,
        partitions: Sequence[int],
        predicate: Callable[[int, zk_data.PartitionState], bool],
    ) -> None:
        self._coordinator = coordinator
        self._topic = topic
        self._partitions = partitions
        self._predicate = predicate
        self._changed: dict[int, asyncio.Future[float]] = {}
        self.satisfied_at: dict[int, float] = {}

    async def _read(self, partition: int, seen_at: float | None) -> None:
        path = zk_data.partition_state_path(self._topic, partition)
        loop = asyncio.get_running_loop()
        changed: asyncio.Future[float] = loop.create_future()

        def on_event(_event: WatchEvent) -> None:
            if not changed.done():
                changed.set_result(loop.time())

        self._changed[partition] = changed
        data, _ = await self._coordinator.get(path, watch=on_event)
        if self._predicate(partition, zk_data.decode_partition_state(data, path=path)):
            self.satisfied_at[partition] = loop.time() if seen_at is None else seen_at

    async def arm(self) -> int:
        """Read every partition once, watches set; how many satisfy the predicate already."""
        await asyncio.gather(*(self._read(p, None) for p in self._partitions))
        return len(self.satisfied_at)

    async def wait(self, timeout_s: float) -> dict[int, float]:
        """Partition -> instant, once every partition satisfies the predicate; TimeoutError after
        ``timeout_s``."""

        async def follow(partition: int) -> None:
            while partition not in self.satisfied_at:
                await self._read(partition, await self._changed[partition])

        await asyncio.wait_for(asyncio.gather(*(follow(p) for p in self._partitions)), timeout=timeout_s)
        return self.satisfied_at


async def wait_for_partition_states(
    coordinator: Coordinator,
    topic: str,
    partitions: Sequence[int],
    predicate: Callable[[int, zk_data.PartitionState], bool],
    *,
    timeout_s: float,
) -> None:
    """Until every partition's state satisfies ``predicate``; TimeoutError after ``timeout_s``."""
    watch = PartitionStateWatch(coordinator, topic, partitions, predicate)
    await watch.arm()
    await watch.wait(timeout_s)
