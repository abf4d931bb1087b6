"""KIP-101 and KIP-279 end to end (docs/scenarios.md §7, scenario 50 (a)–(d); docs/leader-epochs.md
§3), on real brokers in one process and virtual time.

Brokers are built by ``ops.wiring`` on memory adapters (``tests/support/cluster.py``); the test plays
the controller (it writes the partition state znode and sends LeaderAndIsr, as Kafka's controller
would on each leader change), bounces brokers (a clean stop keeps the disk; a crash is a power
loss that keeps only what was fsynced) and loses chosen network replies. Each scenario first checks
that it reached the dangerous state the pre-KIP-101 protocol mishandles, then that the epoch-based
protocol comes out with no committed record lost and identical replicas.
"""

from __future__ import annotations

import pytest

from actors.common.errors import ErrorCode
from actors.common.protocol import FetchResponse
from actors.common.types import TopicPartition
from runtime.storage.log import Log
from tests.support.cluster import InProcessCluster, batch, values_of
from tests.support.fetcher_driver import epochs, log_bytes

pytestmark = pytest.mark.asyncio

TP = TopicPartition("kip", 0)


def values(log: Log) -> list[tuple[int, bytes | None]]:
    return values_of(log_bytes(log))


async def two_brokers(first: int, second: int) -> InProcessCluster:
    cluster = InProcessCluster(config_overrides={"min_insync_replicas": 1})
    await cluster.__aenter__()
    await cluster.start_broker(first)
    await cluster.start_broker(second)
    return cluster


async def produce(cluster: InProcessCluster, broker_id: int, *values_: bytes, acks: int = -1) -> int:
    response = await cluster.complete(cluster.produce(broker_id, TP, batch(*values_), acks=acks))
    [partition] = response.partitions
    assert partition.error_code is ErrorCode.NONE, partition
    return partition.base_offset


# ------------------------------------------------------------------------------------ (a)


async def test_follower_restarted_before_learning_the_high_watermark_keeps_the_committed_record() -> None:
    """docs/scenarios.md §7 (a), KIP-101 #1: B leads, A follows. A fetches m2 (LEO 2); its next fetch moves
    B's HW to 2 (m2 is committed and acknowledged), but the response carrying HW 2 is lost and A restarts with
    HW 1. The old protocol truncates A to its HW (drops m2); then B dies and A leads: m2 lost. With leader
    epochs A asks B where its epoch ends (2), keeps m2, and still has it as leader."""
    b, a = 1, 2
    cluster = await two_brokers(b, a)
    try:
        await cluster.make_leader(TP, leader=b, isr=[b, a], replicas=[b, a])
        assert await produce(cluster, b, b"m1") == 0
        await cluster.advance(1)
        assert cluster.log(a, TP).high_watermark == 1

        def carries_high_watermark_2(reply: object) -> bool:
            return isinstance(reply, FetchResponse) and any(
                p.high_watermark == 2 and not p.records for p in reply.partitions
            )

        cluster.network.drop_replies_when = carries_high_watermark_2
        assert await produce(cluster, b, b"m2") == 1  # acks=all: acknowledged, so committed
        cluster.network.drop_replies_when = None
        assert len(cluster.network.dropped_replies) == 1
        assert cluster.log(b, TP).high_watermark == 2
        assert (cluster.log(a, TP).log_end_offset, cluster.log(a, TP).high_watermark) == (2, 1)

        await cluster.stop_broker(a)
        await cluster.start_broker(a)
        # The pre-KIP-101 precondition: A's HW (1) is below its LEO (2) and m2 is committed.
        assert (cluster.log(a, TP).log_end_offset, cluster.log(a, TP).high_watermark) == (2, 1)
        # B dies before A fetches again: A's fetches to B get no answer from now on.
        cluster.network.drop_replies_when = lambda reply: isinstance(reply, FetchResponse)
        await cluster.send_current_state(TP, recipients=[a])  # the controller's onBrokerStartup
        assert cluster.log(a, TP).log_end_offset == 2

        await cluster.stop_broker(b)
        cluster.network.drop_replies_when = None
        await cluster.make_leader(TP, leader=a, isr=[a], replicas=[b, a])
        fetched = await cluster.complete(cluster.fetch(a, TP, 0))
        assert values_of(fetched.partitions[0].records) == [(0, b"m1"), (1, b"m2")]
        assert cluster.log(a, TP).high_watermark == 2
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------------------------------ (b)


async def test_replicas_converge_after_a_double_crash_that_lost_a_follower_tail() -> None:
    """docs/scenarios.md §7 (b), KIP-101 #2: A (leader, epoch 0) has m1@0 and m2@1 on disk; B's disk has only
    m1 (m2 was never fsynced there). Both lose power; B restarts first, leads epoch 1 and appends m3@1. A
    returns as follower with the same LEO as B: the old protocol sees nothing to truncate and offset 1 differs
    forever. With epochs A asks where epoch 0 ends (B answers (0, 1)), truncates to 1 and fetches m3:
    identical logs."""
    a, b = 1, 2
    cluster = await two_brokers(a, b)
    try:
        await cluster.make_leader(TP, leader=a, isr=[a, b], replicas=[a, b])
        await produce(cluster, a, b"m1")
        for broker_id in (a, b):
            cluster.log(broker_id, TP).flush(now_ms=cluster.clock.now_ms())
        await produce(cluster, a, b"m2")
        assert cluster.log(b, TP).log_end_offset == 2
        cluster.log(a, TP).flush(now_ms=cluster.clock.now_ms())  # only A's disk has m2

        await cluster.crash_broker(b)
        await cluster.crash_broker(a)
        await cluster.start_broker(b)
        assert values(cluster.log(b, TP)) == [(0, b"m1")]
        await cluster.make_leader(TP, leader=b, isr=[b], replicas=[a, b], recipients=[b])
        assert await produce(cluster, b, b"m3") == 1
        assert epochs(cluster.log(b, TP)) == [(0, 0), (1, 1)]

        await cluster.start_broker(a)
        # The pre-KIP-101 precondition: equal LEOs, different records at offset 1.
        assert values(cluster.log(a, TP)) == [(0, b"m1"), (1, b"m2")]
        assert cluster.log(a, TP).log_end_offset == cluster.log(b, TP).log_end_offset == 2
        answer = await cluster.complete(cluster.offsets_for_leader_epoch(b, TP, 0, current_leader_epoch=1))
        assert (answer.partitions[0].leader_epoch, answer.partitions[0].end_offset) == (0, 1)

        await cluster.send_current_state(TP, recipients=[a])
        await cluster.advance(1_000)
        assert values(cluster.log(a, TP)) == [(0, b"m1"), (1, b"m3")]
        assert log_bytes(cluster.log(a, TP)) == log_bytes(cluster.log(b, TP))
        assert epochs(cluster.log(a, TP)) == epochs(cluster.log(b, TP)) == [(0, 0), (1, 1)]
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------------------------------ (c)


async def test_fast_leader_failover_truncates_to_the_end_of_the_epoch_both_sides_know() -> None:
    """docs/scenarios.md §7 (c), KIP-279: A leads epoch 1 with offsets 0–20 (LEO 21); B copied 0–10. B leads
    epoch 2 and appends 11–15 (A never fetches them); A leads epoch 3 (caching (3, 21) at election). B asks
    for the end of epoch 2; A answers (1, 21). KIP-101 alone would truncate B to min(21, 16) = 16 and keep its
    epoch-2 records: divergence. KIP-279: B's own epoch 1 ends at 11 → truncate to min(11, 21, 16) = 11, then
    fetch 11–20: identical."""
    a, b = 1, 2
    cluster = await two_brokers(a, b)
    try:
        await cluster.make_leader(TP, leader=a, isr=[a, b], replicas=[a, b], leader_epoch=1)
        await produce(cluster, a, *(b"a%d" % i for i in range(11)))
        assert cluster.log(b, TP).log_end_offset == 11
        cluster.network.partition(str(a), str(b))
        await produce(cluster, a, *(b"a%d" % i for i in range(11, 21)), acks=1)
        assert cluster.log(a, TP).log_end_offset == 21

        await cluster.make_leader(TP, leader=b, isr=[b], replicas=[a, b], leader_epoch=2, recipients=[b])
        await produce(cluster, b, *(b"b%d" % i for i in range(11, 16)), acks=1)
        assert cluster.log(b, TP).log_end_offset == 16
        assert epochs(cluster.log(b, TP)) == [(1, 0), (2, 11)]

        cluster.network.heal()
        # Hold B's fetches for a moment, to see where its truncation stops.
        cluster.network.drop_replies_when = lambda reply: isinstance(reply, FetchResponse)
        await cluster.make_leader(TP, leader=a, isr=[a], replicas=[a, b], leader_epoch=3)
        assert epochs(cluster.log(a, TP)) == [(1, 0), (3, 21)]
        answer = await cluster.complete(cluster.offsets_for_leader_epoch(a, TP, 2, current_leader_epoch=3))
        assert (answer.partitions[0].leader_epoch, answer.partitions[0].end_offset) == (1, 21)
        assert cluster.log(b, TP).log_end_offset == 11
        assert epochs(cluster.log(b, TP)) == [(1, 0)]

        cluster.network.drop_replies_when = None
        await cluster.advance(1_000)  # the fetcher's back-off after the lost reply
        assert cluster.log(b, TP).log_end_offset == 21
        assert values(cluster.log(b, TP)) == values(cluster.log(a, TP))
        assert log_bytes(cluster.log(b, TP)) == log_bytes(cluster.log(a, TP))
        # Epoch 3 reaches B's cache with the first record stamped 3 (docs/scenarios.md §7 (d)).
        assert epochs(cluster.log(b, TP)) == [(1, 0)]
        await produce(cluster, a, b"a21")
        assert epochs(cluster.log(b, TP)) == epochs(cluster.log(a, TP)) == [(1, 0), (3, 21)]
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------------------------------ (d)


async def test_leader_epoch_cache_workflow_across_follower_and_leader_bounces() -> None:
    """docs/scenarios.md §7 (d), shouldFollowLeaderEpochBasicWorkflow: RF 2. The first record → both caches
    [(0,0)]. Bounce the follower: the leader caches epoch 1 at once ([(0,0),(1,1)]), the follower
    only when the next record (stamped 1) replicates. Bounce the leader: the new leader caches (2,2)
    at once; the follower learns it with the next record."""
    a, b = 1, 2
    cluster = await two_brokers(a, b)
    try:
        await cluster.make_leader(TP, leader=a, isr=[a, b], replicas=[a, b])
        await produce(cluster, a, b"r0")
        assert epochs(cluster.log(a, TP)) == epochs(cluster.log(b, TP)) == [(0, 0)]

        await cluster.stop_broker(b)
        await cluster.make_leader(TP, leader=a, isr=[a], replicas=[a, b], recipients=[a])
        assert epochs(cluster.log(a, TP)) == [(0, 0), (1, 1)]
        await cluster.start_broker(b)
        await cluster.send_current_state(TP, recipients=[b])
        assert epochs(cluster.log(b, TP)) == [(0, 0)]
        await produce(cluster, a, b"r1")
        await cluster.advance(1)
        assert epochs(cluster.log(b, TP)) == [(0, 0), (1, 1)]

        await cluster.stop_broker(a)
        await cluster.make_leader(TP, leader=b, isr=[b], replicas=[a, b], recipients=[b])
        assert epochs(cluster.log(b, TP)) == [(0, 0), (1, 1), (2, 2)]
        await cluster.start_broker(a)
        await cluster.send_current_state(TP, recipients=[a])
        assert epochs(cluster.log(a, TP)) == [(0, 0), (1, 1)]
        await produce(cluster, b, b"r2")
        await cluster.advance(1)
        assert epochs(cluster.log(a, TP)) == [(0, 0), (1, 1), (2, 2)]
        assert log_bytes(cluster.log(a, TP)) == log_bytes(cluster.log(b, TP))
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------------------------ fast changes


async def test_no_record_is_lost_when_every_replicated_record_bounces_follower_then_leader() -> None:
    """docs/leader-epochs.md §3 shouldSurviveFastLeaderChange / docs/scenarios.md §7: as soon as a record has
    replicated, bounce the follower, then the leader; repeat. Every broker's LEO equals the number
    of records written, and the replicas stay identical."""
    a, b = 1, 2
    cluster = await two_brokers(a, b)
    try:
        leader, follower = a, b
        await cluster.make_leader(TP, leader=leader, isr=[a, b], replicas=[a, b])
        for i in range(6):
            await produce(cluster, leader, b"v%d" % i)
            assert cluster.log(follower, TP).log_end_offset == i + 1
            await cluster.stop_broker(follower)
            await cluster.make_leader(TP, leader=leader, isr=[leader], replicas=[a, b], recipients=[leader])
            await cluster.start_broker(follower)
            await cluster.send_current_state(TP, recipients=[follower])
            await cluster.stop_broker(leader)
            await cluster.make_leader(
                TP, leader=follower, isr=[follower], replicas=[a, b], recipients=[follower]
            )
            await cluster.start_broker(leader)
            await cluster.send_current_state(TP, recipients=[leader])
            leader, follower = follower, leader
            await cluster.advance(1_000)
            for broker_id in (a, b):
                assert cluster.log(broker_id, TP).log_end_offset == i + 1
        assert log_bytes(cluster.log(a, TP)) == log_bytes(cluster.log(b, TP))
        assert [v for _, v in values(cluster.log(a, TP))] == [b"v%d" % i for i in range(6)]
    finally:
        await cluster.__aexit__(None, None, None)
