"""Replication through real broker, partition and fetcher actors, in one process on virtual time.

Each test builds brokers with ``ops.wiring`` on memory adapters (see tests/support/cluster.py), so
every message crosses the codec, and drives leadership like a controller would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

import pytest

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.server.replica.partition_state import Role
from tests.support.cluster import InProcessCluster, batch, values_of

pytestmark = pytest.mark.asyncio

TP = TopicPartition("orders", 0)
T = TypeVar("T")


async def complete(cluster: InProcessCluster, awaitable: Awaitable[T], *, within_ms: int = 60_000) -> T:
    """Run ``awaitable`` while virtual time moves forward; fail if it needs more than ``within_ms``."""
    task = asyncio.ensure_future(awaitable)
    waited = 0
    await cluster.settle()
    while not task.done() and waited < within_ms:
        await cluster.advance(100)
        waited += 100
    if not task.done():
        task.cancel()
        raise AssertionError(f"not complete after {within_ms} ms of virtual time")
    return task.result()


async def three_brokers(**overrides: object) -> InProcessCluster:
    cluster = InProcessCluster(config_overrides=dict(overrides))
    await cluster.__aenter__()
    for broker_id in (1, 2, 3):
        await cluster.start_broker(broker_id)
    return cluster


async def test_acks_all_produce_is_acknowledged_once_every_isr_member_has_it() -> None:
    cluster = await three_brokers()
    try:
        await cluster.make_leader(TP, leader=1, isr=[1, 2, 3], replicas=[1, 2, 3])
        response = await complete(cluster, cluster.produce(1, TP, batch(b"a", b"b", b"c")))
        assert response.partitions[0].error_code is ErrorCode.NONE
        assert response.partitions[0].base_offset == 0
        for broker_id in (1, 2, 3):
            log = cluster.log(broker_id, TP)
            assert log.log_end_offset == 3
        assert cluster.log(1, TP).high_watermark == 3
        # Followers learn the HW with their next fetch, answered at once (KIP-392).
        await cluster.advance(1)
        for broker_id in (2, 3):
            assert cluster.log(broker_id, TP).high_watermark == 3
        fetched = await complete(cluster, cluster.fetch(1, TP, 0))
        assert values_of(fetched.partitions[0].records) == [(0, b"a"), (1, b"b"), (2, b"c")]
    finally:
        await cluster.__aexit__(None, None, None)


async def test_consumers_read_only_below_the_high_watermark() -> None:
    cluster = await three_brokers()
    try:
        await cluster.make_leader(TP, leader=1, isr=[1, 2, 3], replicas=[1, 2, 3])
        await cluster.stop_broker(3)  # broker 3 never fetches: the HW stays pinned at 0
        response = await complete(cluster, cluster.produce(1, TP, batch(b"x"), acks=1))
        assert response.partitions[0].error_code is ErrorCode.NONE
        assert cluster.log(1, TP).log_end_offset == 1
        assert cluster.log(1, TP).high_watermark == 0
        fetched = await complete(cluster, cluster.fetch(1, TP, 0))
        assert fetched.partitions[0].error_code is ErrorCode.NONE
        assert fetched.partitions[0].records == b""
        assert fetched.partitions[0].high_watermark == 0
    finally:
        await cluster.__aexit__(None, None, None)


async def test_stuck_follower_leaves_the_isr_and_acks_all_then_needs_min_isr() -> None:
    cluster = await three_brokers(replica_lag_time_max_ms=1_000)
    try:
        await cluster.make_leader(TP, leader=1, isr=[1, 2, 3], replicas=[1, 2, 3])
        await complete(cluster, cluster.produce(1, TP, batch(b"a")))
        await cluster.stop_broker(3)
        await cluster.stop_broker(2)
        produce = asyncio.ensure_future(cluster.produce(1, TP, batch(b"b"), timeout_ms=30_000))
        await cluster.settle()
        # Lag 1000 ms, checked every 500 ms: out within 1.5 × lag.
        await cluster.advance(1_600)
        state, _ = await cluster.zk_partition_state(TP)
        assert state.isr == (1,)
        assert cluster.partition(1, TP).state.isr == {1}
        # The pending acks=all produce completes once the ISR shrank: the HW reached it, but the
        # ISR is below min.insync.replicas = 2, so the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND.
        await cluster.settle()
        assert produce.done()
        assert produce.result().partitions[0].error_code is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        # New acks=all writes are refused before any append.
        refused = await complete(cluster, cluster.produce(1, TP, batch(b"c")))
        assert refused.partitions[0].error_code is ErrorCode.NOT_ENOUGH_REPLICAS
        assert cluster.log(1, TP).log_end_offset == 2
        stats = cluster.partition(1, TP).statistics()
        assert stats.isr_shrinks_total == 1
        assert stats.under_min_isr
    finally:
        await cluster.__aexit__(None, None, None)


async def test_restarted_follower_rejoins_the_isr_once_caught_up() -> None:
    cluster = await three_brokers(replica_lag_time_max_ms=1_000)
    try:
        await cluster.make_leader(TP, leader=1, isr=[1, 2, 3], replicas=[1, 2, 3])
        await cluster.stop_broker(3)
        # A stopped follower whose LEO equals the leader's is never out of sync (docs/replication.md §2.2):
        # give the leader a record broker 3 does not have.
        await complete(cluster, cluster.produce(1, TP, batch(b"a"), acks=1))
        await cluster.advance(1_600)
        assert cluster.partition(1, TP).state.isr == {1, 2}
        for value in (b"b", b"c"):
            await complete(cluster, cluster.produce(1, TP, batch(value)))
        await cluster.start_broker(3)
        # The controller (our stand-in) tells the returning broker the current state.
        await cluster.send_current_state(TP, recipients=[3])
        await cluster.advance(1_000)
        assert cluster.log(3, TP).log_end_offset == 3
        state, _ = await cluster.zk_partition_state(TP)
        assert set(state.isr) == {1, 2, 3}
        assert cluster.partition(1, TP).statistics().isr_expands_total == 1
    finally:
        await cluster.__aexit__(None, None, None)


async def test_produce_to_a_follower_is_not_leader_or_follower() -> None:
    cluster = await three_brokers()
    try:
        await cluster.make_leader(TP, leader=1, isr=[1, 2, 3], replicas=[1, 2, 3])
        response = await complete(cluster, cluster.produce(2, TP, batch(b"a")))
        assert response.partitions[0].error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
        unknown = await complete(cluster, cluster.produce(1, TopicPartition("nope", 0), batch(b"a")))
        assert unknown.partitions[0].error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        invalid = await complete(cluster, cluster.produce(1, TP, batch(b"a"), acks=3))
        assert invalid.partitions[0].error_code is ErrorCode.INVALID_REQUIRED_ACKS
        assert cluster.log(1, TP).log_end_offset == 0
        assert cluster.partition(2, TP).state.role is Role.FOLLOWER
    finally:
        await cluster.__aexit__(None, None, None)
