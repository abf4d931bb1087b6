"""/readyz gates rolling restarts: a restarted broker is not ready until it is back in the ISR of
every partition it follows (as the controller publishes it), then it is."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from actors.common.types import TopicPartition
from runtime.clock import LoopClock, wait_ms
from tests.support.process_cluster import ProcessCluster, ProduceLoop

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]

TP = TopicPartition("orders", 0)


@pytest_asyncio.fixture
async def cluster(zk_connect_string: str, tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    properties = {"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "2000"}
    async with ProcessCluster(zk_connect_string, tmp_path, properties) as cluster:
        await asyncio.gather(*(cluster.start(broker_id) for broker_id in (1, 2, 3)))
        yield cluster


async def readiness(
    session: aiohttp.ClientSession, cluster: ProcessCluster, broker_id: int
) -> tuple[int, dict[str, Any]]:
    async with session.get(cluster.brokers[broker_id].url + "/readyz") as response:
        return response.status, await response.json()


async def test_a_restarted_broker_is_ready_only_once_back_in_the_isr(cluster: ProcessCluster) -> None:
    await cluster.create_topic(TP.topic, {0: [1, 2, 3]})
    await cluster.wait_for_partition_state(TP, lambda s: len(s.isr) == 3, timeout_s=30)
    clock = LoopClock()
    async with aiohttp.ClientSession() as session:

        async def until(condition: Callable[[int, dict[str, Any]], bool]) -> tuple[int, dict[str, Any]]:
            """Ask /readyz until ``condition`` holds: an external process's state, observed over
            HTTP (a 20 ms poll interval on the clock port keeps the brokers' CPU free)."""
            while True:
                status, body = await readiness(session, cluster, 3)
                if condition(status, body):
                    return status, body
                await wait_ms(clock, 20)

        # A new follower is ready once its fetcher runs and the controller's metadata has arrived.
        await asyncio.wait_for(until(lambda status, _b: status == 200), timeout=30)
        await cluster.kill(3, signal.SIGKILL)
        await cluster.wait_for_partition_state(TP, lambda s: 3 not in s.isr, timeout_s=30)
        producer = ProduceLoop(cluster, TP)
        producer.start()
        await producer.wait_for_acks(50, timeout_s=30)  # broker 3 is now behind
        await cluster.start(3)
        status, body = await readiness(session, cluster, 3)
        assert status == 503  # no word from the controller yet, or it shows broker 3 out of the ISR

        # Once the controller's metadata arrives it shows broker 3 out of the ISR: still not ready
        # (the leader's ISR change reaches the controller only after 5 s of quiet).
        status, body = await asyncio.wait_for(until(lambda _s, b: b["metadata_from_controller"]), timeout=30)
        assert status == 503
        assert body["out_of_isr_partitions"] == ["orders-0"]
        # The leader readmits it once caught up; the controller then tells everyone (after the
        # leader's 5 s propagation quiet period), and only then is broker 3 ready.
        await cluster.wait_for_partition_state(TP, lambda s: 3 in s.isr, timeout_s=60)

        _, body = await asyncio.wait_for(until(lambda status, _b: status == 200), timeout=30)
        assert body["out_of_isr_partitions"] == []
        await producer.stop()
