"""Replication through real broker, partition and fetcher actors, in one process on virtual time.

Each test builds brokers with ``ops.wiring`` on memory adapters, with the real controller (see
tests/support/cluster.py), so every message crosses the codec and the controller decides who
leads; the tests create topics and inject faults (network cuts, stalls, kills).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.server.replica.partition_state import Role
from tests.support.cluster import InProcessCluster, batch, started, values_of

pytestmark = pytest.mark.asyncio

TP = TopicPartition("orders", 0)


async def three_brokers(**overrides: Any) -> InProcessCluster:
    """Brokers 1, 2, 3 (broker 1 is the controller) and ``orders`` on [1, 2, 3], led by 1."""
    cluster = await started(1, 2, 3, **overrides)
    await cluster.create_topic(TP.topic, {0: (1, 2, 3)})
    return cluster


async def test_acks_all_produce_is_acknowledged_once_every_isr_member_has_it() -> None:
    cluster = await three_brokers()
    try:
        response = await cluster.complete(cluster.produce(1, TP, batch(b"a", b"b", b"c")))
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
        fetched = await cluster.complete(cluster.fetch(1, TP, 0))
        assert values_of(fetched.partitions[0].records) == [(0, b"a"), (1, b"b"), (2, b"c")]
    finally:
        await cluster.__aexit__(None, None, None)


async def test_consumers_read_only_below_the_high_watermark() -> None:
    cluster = await three_brokers()
    try:
        cluster.cut(1, 3)  # broker 3 never fetches (but stays in the ISR for now): the HW stays at 0
        response = await cluster.complete(cluster.produce(1, TP, batch(b"x"), acks=1))
        assert response.partitions[0].error_code is ErrorCode.NONE
        assert cluster.log(1, TP).log_end_offset == 1
        assert cluster.log(1, TP).high_watermark == 0
        fetched = await cluster.complete(cluster.fetch(1, TP, 0))
        assert fetched.partitions[0].error_code is ErrorCode.NONE
        assert fetched.partitions[0].records == b""
        assert fetched.partitions[0].high_watermark == 0
    finally:
        await cluster.__aexit__(None, None, None)


async def test_stuck_follower_leaves_the_isr_and_acks_all_then_needs_min_isr() -> None:
    cluster = await three_brokers(replica_lag_time_max_ms=1_000)
    try:
        await cluster.complete(cluster.produce(1, TP, batch(b"a")))
        # Both followers stop (SIGSTOP): their sessions outlive the test's 1.6 s, so the controller
        # does not act; the leader must shrink the ISR itself.
        cluster.stall(3)
        cluster.stall(2)
        produce = asyncio.ensure_future(cluster.produce(1, TP, batch(b"b"), timeout_ms=30_000))
        await cluster.settle()
        # Lag 1000 ms, checked every 500 ms: out within 1.5 × lag.
        await cluster.advance(1_600)
        state, _ = cluster.zk_partition_state(TP)
        assert state.isr == (1,)
        assert cluster.partition(1, TP).state.isr == {1}
        # The pending acks=all produce completes once the ISR shrank: the HW reached it, but the
        # ISR is below min.insync.replicas = 2, so the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND.
        await cluster.settle()
        assert produce.done()
        assert produce.result().partitions[0].error_code is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        # New acks=all writes are refused before any append.
        refused = await cluster.complete(cluster.produce(1, TP, batch(b"c")))
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
        await cluster.kill(3)  # SIGKILL: its session lives on for 6 s, the leader notices first
        # A stopped follower whose LEO equals the leader's is never out of sync (docs/replication.md §2.2):
        # give the leader a record broker 3 does not have.
        await cluster.complete(cluster.produce(1, TP, batch(b"a"), acks=1))
        await cluster.advance(1_600)
        assert cluster.partition(1, TP).state.isr == {1, 2}
        for value in (b"b", b"c"):
            await cluster.complete(cluster.produce(1, TP, batch(value)))
        # Broker 3 starts again (once its old session is gone); the controller tells it the
        # partition's state and it fetches from the leader.
        await cluster.start_broker(3)
        await cluster.wait_for_isr(TP, {1, 2, 3})
        assert cluster.log(3, TP).log_end_offset == 3
        state, _ = cluster.zk_partition_state(TP)
        assert set(state.isr) == {1, 2, 3}
        assert cluster.partition(1, TP).statistics().isr_expands_total == 1
    finally:
        await cluster.__aexit__(None, None, None)


async def test_produce_to_a_follower_is_not_leader_or_follower() -> None:
    cluster = await three_brokers()
    try:
        response = await cluster.complete(cluster.produce(2, TP, batch(b"a")))
        assert response.partitions[0].error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
        unknown = await cluster.complete(cluster.produce(1, TopicPartition("nope", 0), batch(b"a")))
        assert unknown.partitions[0].error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        invalid = await cluster.complete(cluster.produce(1, TP, batch(b"a"), acks=3))
        assert invalid.partitions[0].error_code is ErrorCode.INVALID_REQUIRED_ACKS
        assert cluster.log(1, TP).log_end_offset == 0
        assert cluster.partition(2, TP).state.role is Role.FOLLOWER
    finally:
        await cluster.__aexit__(None, None, None)
