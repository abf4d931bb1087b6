"""/cluster/id: made once by the first broker, read by every other, and a guard against joining
the wrong cluster (Kafka's getOrGenerateClusterId)."""

from __future__ import annotations

import random

import pytest

from actors.server import zk_data
from ops.wiring import get_or_create_cluster_id
from runtime.coordination import MemoryCoordinator, MemoryZooKeeper
from runtime.errors import RuntimeFailure

pytestmark = pytest.mark.asyncio


async def test_the_first_broker_creates_the_id_and_the_others_read_it() -> None:
    server = MemoryZooKeeper()
    first, second = MemoryCoordinator(server), MemoryCoordinator(server)
    await first.start()
    await second.start()
    made = await get_or_create_cluster_id(first, None, rng=random.Random(1))
    assert len(made) == 22
    assert await get_or_create_cluster_id(second, None, rng=random.Random(2)) == made
    data, _ = await first.get(zk_data.CLUSTER_ID_PATH)
    assert data == b'{"version":"1","id":"' + made.encode() + b'"}'


async def test_a_configured_id_is_used_first_and_then_enforced() -> None:
    server = MemoryZooKeeper()
    coordinator = MemoryCoordinator(server)
    await coordinator.start()
    assert await get_or_create_cluster_id(coordinator, "prod-eu-1", rng=random.Random(1)) == "prod-eu-1"
    assert await get_or_create_cluster_id(coordinator, "prod-eu-1", rng=random.Random(1)) == "prod-eu-1"
    with pytest.raises(RuntimeFailure, match="belongs to another cluster"):
        await get_or_create_cluster_id(coordinator, "staging", rng=random.Random(1))
