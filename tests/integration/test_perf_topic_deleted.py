"""``actorlog perf produce`` whose topic is deleted while it runs (a real broker process, a real
ZooKeeper, the tool as a process): once the brokers answer UNKNOWN_TOPIC_OR_PARTITION the tool
fails after ``max.block.ms`` with one line naming it, exit 1 — not silence while its records are
retried for delivery.timeout.ms.

Every wait is a line of the tool's output or its exit, each bounded by a timeout."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from actors.common.types import TopicPartition
from ops.clients.admin import Admin
from ops.clients.connection import SECRET_ENV
from runtime.clock import LoopClock
from tests.support.process_cluster import ROOT, SECRET, ProcessCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]

TOPIC = "doomed"


@pytest_asyncio.fixture
async def cluster(zk_connect_string: str, tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    async with ProcessCluster(zk_connect_string, tmp_path, {"min.insync.replicas": "1"}) as cluster:
        await cluster.start(1)
        await cluster.create_topic(TOPIC, {0: [1], 1: [1]})
        for partition in (0, 1):
            await cluster.wait_for_partition_state(
                TopicPartition(TOPIC, partition), lambda state: state.leader == 1, timeout_s=30
            )
        yield cluster


async def test_a_topic_deleted_under_perf_produce_fails_it_after_max_block_ms(
    cluster: ProcessCluster, tmp_path: Path
) -> None:
    bootstrap = f"127.0.0.1:{cluster.brokers[1].port}"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ops", "perf", "produce", "--topic", TOPIC, "--num-records", "100000000",
        "--record-size", "100", "--throughput", "2000", "--bootstrap-server", bootstrap,
        "--producer-props", "max.block.ms=2000",
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), SECRET_ENV: SECRET},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stderr is not None
        # The tool's first report (every 5 s) says records are being acknowledged.
        first = await asyncio.wait_for(process.stdout.readline(), timeout=60)
        assert b" records sent, " in first, first
        clock = LoopClock()
        deleted = clock.now_ms()
        async with Admin(bootstrap, secret=SECRET) as admin:
            assert await admin.delete_topics([TOPIC]) == {TOPIC: None}
        rest, errors = await asyncio.wait_for(
            asyncio.gather(process.stdout.read(), process.stderr.read()), timeout=60
        )
        code = await asyncio.wait_for(process.wait(), timeout=30)
        elapsed_ms = clock.now_ms() - deleted
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert code == 1, errors
    assert errors.decode().splitlines() == [
        f"actorlog perf: topic {TOPIC} not present in metadata after 2000 ms: no such topic (the brokers "
        "answer UNKNOWN_TOPIC_OR_PARTITION): deleted, or never created"
    ]
    assert b"99.9th" not in rest  # it failed: no final summary line, only the 5 s reports
    assert elapsed_ms < 20_000
