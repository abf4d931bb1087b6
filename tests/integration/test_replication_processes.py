"""Replication across three real broker processes, a real ZooKeeper and HTTP on loopback.

A follower stopped with SIGSTOP leaves the ISR within 1.5 × replica.lag.time.max.ms (plus slack),
the partition state znode shows it, the ISR counters move; after SIGCONT it rejoins once caught up;
acks=all is refused with NOT_ENOUGH_REPLICAS while the ISR is below min.insync.replicas; and every
acknowledged record is read back from the leader at the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from actors.common.errors import ErrorCode
from actors.common.protocol import (
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
)
from actors.common.types import TopicPartition
from runtime.storage.record_builder import SimpleRecord, build_batch
from tests.support.process_cluster import ProcessCluster
from tests.support.producer_faults import read_partition

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]

TP = TopicPartition("events", 0)
LAG_MS = 2_000
SLACK_MS = 4_000


@pytest_asyncio.fixture
async def cluster(zk_connect_string: str, tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    properties = {
        "replica.lag.time.max.ms": str(LAG_MS),
        "min.insync.replicas": "2",
        "replica.fetch.wait.max.ms": "200",
        "replica.fetch.backoff.ms": "200",
    }
    async with ProcessCluster(zk_connect_string, tmp_path, properties) as cluster:
        await asyncio.gather(*(cluster.start(broker_id) for broker_id in (1, 2, 3)))
        yield cluster


async def produce(cluster: ProcessCluster, value: bytes, *, acks: int = -1) -> ProduceResponse:
    request = ProduceRequest(
        acks=acks,
        timeout_ms=10_000,
        partitions=(
            ProducePartitionData(
                topic=TP.topic, partition=TP.partition, records=build_batch([SimpleRecord(value)])
            ),
        ),
    )
    response = await cluster.client.ask(cluster.brokers[1].ref, request, timeout_ms=20_000)
    assert isinstance(response, ProduceResponse)
    return response


async def metric(cluster: ProcessCluster, broker_id: int, name: str) -> float:
    async with (
        aiohttp.ClientSession() as session,
        session.get(cluster.brokers[broker_id].url + "/metrics") as response,
    ):
        text = await response.text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return float(sample.value)
    raise AssertionError(f"{name} not exported by broker {broker_id}")


async def test_stalled_follower_leaves_and_rejoins_the_isr_and_nothing_acknowledged_is_lost(
    cluster: ProcessCluster,
) -> None:
    await cluster.create_topic(TP.topic, {0: [1, 2, 3]})
    state = await cluster.wait_for_partition_state(
        TP, lambda s: s.leader == 1 and len(s.isr) == 3, timeout_s=30
    )
    assert state.leader_epoch == 0
    acknowledged: list[bytes] = []
    shrink_within_s = (1.5 * LAG_MS + SLACK_MS) / 1000

    async def write(value: bytes) -> ErrorCode:
        result = (await produce(cluster, value)).partitions[0]
        if result.error_code is ErrorCode.NONE:
            acknowledged.append(value)
        return result.error_code

    for number in range(5):
        assert await write(f"before-{number}".encode()) is ErrorCode.NONE

    # Stall broker 3: it must leave the ISR within 1.5 × lag (+ slack), as the znode shows.
    cluster.pause(3)
    await write(b"while-3-stalled")  # gives the leader an offset broker 3 does not have
    state = await cluster.wait_for_partition_state(TP, lambda s: 3 not in s.isr, timeout_s=shrink_within_s)
    assert state.isr == (1, 2)
    for number in range(5):
        assert await write(f"isr-1-2-{number}".encode()) is ErrorCode.NONE
    # The watch above may fire before the leader hears back from its own write; an acks=all write
    # completing means the shrink is applied (the HW cannot pass broker 3 while it is pending).
    assert await metric(cluster, 1, "kafka_server_replicamanager_isrshrinks_total") == 1
    assert await metric(cluster, 1, "kafka_server_replicamanager_underreplicatedpartitions") == 1

    # Resume it: once caught up it rejoins.
    cluster.resume(3)
    await cluster.wait_for_partition_state(TP, lambda s: set(s.isr) == {1, 2, 3}, timeout_s=30)

    # Below min.insync.replicas acks=all is refused before any append.
    cluster.pause(2)
    cluster.pause(3)
    await produce(cluster, b"only-on-the-leader", acks=1)
    await cluster.wait_for_partition_state(TP, lambda s: s.isr == (1,), timeout_s=shrink_within_s)
    assert await write(b"refused") is ErrorCode.NOT_ENOUGH_REPLICAS
    assert await metric(cluster, 1, "kafka_server_replicamanager_underminisrpartitioncount") == 1
    # This shrink could only start once the expansion was applied: one change at a time.
    assert await metric(cluster, 1, "kafka_server_replicamanager_isrexpands_total") == 1
    cluster.resume(2)
    cluster.resume(3)

    values = [value for _, value in await read_partition(cluster.client, cluster.brokers[1].ref, TP)]
    missing = [value for value in acknowledged if value not in values]
    assert missing == []
    assert b"refused" not in values
    assert [v for v in values if v in acknowledged] == acknowledged  # in order
