"""``actorlog cluster health`` against three real broker processes: a healthy cluster allows a
restart; with one broker killed the tool lists the under-replicated partitions (the dead broker out
of their ISR) and refuses a second broker's restart, naming the partitions that block it, while the
dead broker's own restart is allowed; ``--wait`` returns as soon as the killed broker is back in
sync. The broker's ``GET /v1/cluster/health`` answers what the tool prints (one code path)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import pytest
import pytest_asyncio

from ops.clients.connection import SECRET_ENV
from runtime.clock import LoopClock, wait_ms
from tests.support.process_cluster import ROOT, SECRET, ProcessCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]

TOPIC = "orders"
ASSIGNMENT = {0: (1, 2, 3), 1: (2, 3, 1)}


@pytest_asyncio.fixture
async def cluster(zk_connect_string: str, tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    properties = {"zookeeper.session.timeout.ms": "3000", "replica.lag.time.max.ms": "3000"}
    async with ProcessCluster(zk_connect_string, tmp_path, properties) as cluster:
        await asyncio.gather(*(cluster.start(broker_id) for broker_id in (1, 2, 3)))
        await cluster.create_topic(TOPIC, dict(ASSIGNMENT), {"min.insync.replicas": "2"})
        yield cluster


async def health(cluster: ProcessCluster, *arguments: str) -> tuple[int, str, str]:
    """``actorlog cluster health`` through broker 1: (exit status, stdout, stderr)."""
    environment = {**os.environ, SECRET_ENV: SECRET, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ops", "cluster", "health",
        "--bootstrap-server", f"127.0.0.1:{cluster.brokers[1].port}", *arguments,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=environment,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def wait_for_isr(cluster: ProcessCluster, isr: set[int], *, timeout_ms: int = 60_000) -> None:
    """Until broker 1's metadata shows exactly ``isr`` for every partition of the topic."""
    clock = LoopClock()
    deadline = clock.now_ms() + timeout_ms
    while True:
        (topic,) = (await cluster.metadata(1, (TOPIC,))).topics
        if all(set(p.isr) == isr for p in topic.partitions):
            return
        assert clock.now_ms() < deadline, f"ISRs still {[p.isr for p in topic.partitions]}"
        await wait_ms(clock, 100)


async def test_health_and_the_restart_check_with_a_broker_down(cluster: ProcessCluster) -> None:
    status, out, err = await health(cluster, "--broker", "2")
    assert status == 0, out + err
    assert "Cluster: HEALTHY" in out
    assert "Under-replicated partitions: 0" in out
    assert "Restart of broker 2: ALLOWED" in out

    await cluster.kill(3)
    await wait_for_isr(cluster, {1, 2})

    status, out, err = await health(cluster)
    assert status == 1, out + err
    assert "Under-replicated partitions: 2" in out
    assert (
        f"\tTopic: {TOPIC}\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2\tMinIsr: 2\tOutOfIsr: 3" in out
    )
    assert "Under-min-ISR partitions: 0" in out

    status, out, err = await health(cluster, "--broker", "2", "--output", "json")
    assert status == 1, out + err
    body = orjson.loads(out)
    assert body["brokers"] == [1, 2]
    assert [(p["partition"], p["out_of_isr"]) for p in body["under_replicated_partitions"]] == [
        (0, [3]),
        (1, [3]),
    ]
    restart = body["restart"]
    assert (restart["broker"], restart["allowed"]) == (2, False)
    assert [p["partition"] for p in restart["blocking_partitions"]] == [0, 1]

    # The broker's own endpoint: the same answer.
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{cluster.brokers[1].url}/v1/cluster/health",
            params={"broker": "2"},
            headers={"Authorization": f"Bearer {SECRET}"},
        ) as response,
    ):
        assert response.status == 200
        assert orjson.loads(await response.read()) == body

    # The dead broker itself may restart: that is how its partitions come back.
    status, out, err = await health(cluster, "--broker", "3")
    assert status == 0, out + err
    assert "Restart of broker 3: ALLOWED: broker 3 is not live" in out

    # --wait: refused now, allowed once broker 3 is back in both ISRs.
    await cluster.start(3)
    status, out, err = await health(cluster, "--broker", "2", "--wait", "90")
    assert status == 0, out + err
    assert "Cluster: HEALTHY" in out
    assert "Restart of broker 2: ALLOWED" in out


async def test_an_unreachable_cluster_is_one_line_and_status_2(cluster: ProcessCluster) -> None:
    environment = {**os.environ, SECRET_ENV: SECRET, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ops", "cluster", "health", "--bootstrap-server", "127.0.0.1:1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=environment,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("actorlog cluster health: cannot ask the cluster")
    assert out == b""
