"""KIP-101 and KIP-279 end to end (docs/scenarios.md §7, scenario 50 (a)–(d); docs/leader-epochs.md
§3), on real brokers in one process and virtual time.

Brokers are built by ``ops.wiring`` on memory adapters and run the real controller
(``tests/support/cluster.py``). As in Kafka's EpochDrivenReplicationProtocolAcceptanceTest, the
leader/epoch sequence of each scenario comes from what happens to the brokers, and the controller
decides: clean stops (controlled shutdown moves leadership away and takes the broker out of the
ISR, each a new leader epoch), kills (the controller elects once the session expires), power loss
(``kill(power_loss=True)`` keeps only what was fsynced), network cuts, a preferred replica
election, and chosen replies lost on the network. Each scenario first checks that it reached the
dangerous state the pre-KIP-101 protocol mishandles, then that the epoch-based protocol comes out
with no committed record lost and identical replicas.
"""

from __future__ import annotations

import pytest

from actors.common.errors import ErrorCode
from actors.common.names import broker_node
from actors.common.protocol import FetchResponse, OffsetsForLeaderEpochRequest
from actors.common.types import TopicPartition
from runtime.codec import WireEnvelope
from runtime.storage.log import Log
from runtime.transport.sim import LinkFilter
from tests.support.cluster import InProcessCluster, batch, started, values_of
from tests.support.fetcher_driver import epochs, log_bytes

pytestmark = pytest.mark.asyncio

TP = TopicPartition("kip", 0)


def values(log: Log) -> list[tuple[int, bytes | None]]:
    return values_of(log_bytes(log))


async def two_brokers(first: int, second: int) -> InProcessCluster:
    """Both brokers up (``first`` is the controller) and ``kip-0`` on [first, second], led by
    ``first`` at epoch 0."""
    cluster = await started(first, second, min_insync_replicas=1)
    await cluster.create_topic(TP.topic, {0: (first, second)})
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
    HW 1 (a clean bounce: out of the ISR, epoch 1). From then on no fetch answer of B's reaches A. The old
    protocol truncates A to its HW (drops m2); then B dies and A leads: m2 lost. With leader epochs A asks B
    where epoch 0 ends (2) and keeps m2; its fetch at 2 brings it back into the ISR, so when B dies the
    controller elects A, which still has m2."""
    b, a = 1, 2
    cluster = await two_brokers(b, a)
    try:
        assert await produce(cluster, b, b"m1") == 0
        await cluster.advance(1)
        assert cluster.log(a, TP).high_watermark == 1

        def carries_high_watermark_2(reply: object) -> bool:
            return isinstance(reply, FetchResponse) and any(
                p.high_watermark == 2 and not p.records for p in reply.partitions
            )

        cluster.network.drop_replies_when = carries_high_watermark_2
        assert await produce(cluster, b, b"m2") == 1  # acks=all: acknowledged, so committed
        assert len(cluster.network.dropped_replies) == 1
        # B's fetch answers no longer reach A (B dies before A fetches again, as far as A can tell).
        cluster.network.drop_replies_when = lambda reply: isinstance(reply, FetchResponse)
        assert cluster.log(b, TP).high_watermark == 2
        assert (cluster.log(a, TP).log_end_offset, cluster.log(a, TP).high_watermark) == (2, 1)

        await cluster.stop_broker(a)
        assert cluster.zk_partition_state(TP)[0].isr == (b,)
        await cluster.start_broker(a)
        # The pre-KIP-101 precondition: A's HW (1) is below its LEO (2) and m2 is committed.
        assert (cluster.log(a, TP).log_end_offset, cluster.log(a, TP).high_watermark) == (2, 1)
        # A truncated by epoch, not to its HW: its fetch at 2 made B take it back into the ISR.
        await cluster.wait_for_isr(TP, {b, a})
        assert (cluster.log(a, TP).log_end_offset, cluster.log(a, TP).high_watermark) == (2, 1)

        await cluster.kill(b)
        await cluster.wait_for_leader(TP, a)
        cluster.network.drop_replies_when = None
        fetched = await cluster.complete(cluster.fetch(a, TP, 0))
        assert values_of(fetched.partitions[0].records) == [(0, b"m1"), (1, b"m2")]
        assert cluster.log(a, TP).high_watermark == 2
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------------------------------ (b)


def epoch_requests_from(broker_id: int) -> LinkFilter:
    """A link filter losing every OffsetsForLeaderEpoch request ``broker_id`` sends."""

    def crosses(source: str, target: str, direction: str, envelope: WireEnvelope) -> bool:
        return not (
            source == broker_node(broker_id) and isinstance(envelope.message, OffsetsForLeaderEpochRequest)
        )

    return crosses


async def test_replicas_converge_after_a_double_crash_that_lost_a_follower_tail() -> None:
    """docs/scenarios.md §7 (b), KIP-101 #2: A (leader, epoch 0) has m1@0 and m2@1 on disk; B's disk has only
    m1 (m2 was never fsynced there). Both lose power at once; the controller (broker 3, no replica) takes
    them out of the ISR once their sessions are gone, which leaves B as its sole member (no leader). B
    restarts first and is elected; it appends m3@1. A returns as follower with the same LEO as B: the old
    protocol sees nothing to truncate and offset 1 differs forever. With epochs A asks where epoch 0 ends
    (B answers (0, 1)), truncates to 1 and fetches m3: identical logs."""
    a, b, c = 1, 2, 3
    cluster = await started(c, a, b, min_insync_replicas=1)
    try:
        await cluster.create_topic(TP.topic, {0: (a, b)})
        await produce(cluster, a, b"m1")
        for broker_id in (a, b):
            cluster.log(broker_id, TP).flush(now_ms=cluster.clock.now_ms())
        await produce(cluster, a, b"m2")
        assert cluster.log(b, TP).log_end_offset == 2
        cluster.log(a, TP).flush(now_ms=cluster.clock.now_ms())  # only A's disk has m2

        await cluster.kill(b, power_loss=True)
        await cluster.kill(a, power_loss=True)
        await cluster.wait_until_gone(a)
        await cluster.wait_until_gone(b)
        offline = await cluster.wait_for_state(TP, lambda s: s.leader == -1 and s.isr == (b,))
        await cluster.start_broker(b)
        await cluster.wait_for_leader(TP, b, epoch=offline.leader_epoch + 1)
        elected = offline.leader_epoch + 1
        assert values(cluster.log(b, TP)) == [(0, b"m1")]
        assert await produce(cluster, b, b"m3") == 1
        assert epochs(cluster.log(b, TP)) == [(0, 0), (elected, 1)]

        # A's first OffsetsForLeaderEpoch is held up, to look at A before it truncates.
        held = cluster.block(epoch_requests_from(a))
        await cluster.start_broker(a)
        # The pre-KIP-101 precondition: equal LEOs, different records at offset 1.
        assert values(cluster.log(a, TP)) == [(0, b"m1"), (1, b"m2")]
        assert cluster.log(a, TP).log_end_offset == cluster.log(b, TP).log_end_offset == 2
        answer = await cluster.complete(
            cluster.offsets_for_leader_epoch(b, TP, 0, current_leader_epoch=elected)
        )
        assert (answer.partitions[0].leader_epoch, answer.partitions[0].end_offset) == (0, 1)

        cluster.heal(held)
        await cluster.advance(1_000)  # the fetcher's back-off after the lost request
        assert values(cluster.log(a, TP)) == [(0, b"m1"), (1, b"m3")]
        assert log_bytes(cluster.log(a, TP)) == log_bytes(cluster.log(b, TP))
        assert epochs(cluster.log(a, TP)) == epochs(cluster.log(b, TP)) == [(0, 0), (elected, 1)]
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------------------------------ (c)


async def test_fast_leader_failover_truncates_to_the_end_of_the_epoch_both_sides_know() -> None:
    """docs/scenarios.md §7 (c), KIP-279: A leads epoch 0 with offsets 0–20 (LEO 21); B copied 0–10 before a
    network cut. A preferred replica election makes B (the preferred replica, still in the ISR) lead epoch 1;
    it appends 11–15, which A, cut from B, never fetches. B dies and the controller elects A (epoch 2,
    caching (2, 21) at election). B comes back and asks for the end of epoch 1; A answers (0, 21). KIP-101
    alone would truncate B to min(21, 16) = 16 and keep its epoch-1 records: divergence. KIP-279: B's own
    epoch 0 ends at 11 → truncate to min(11, 21, 16) = 11, then fetch 11–20: identical. Broker 3 is the
    controller and no replica, so the cut leaves the controller's requests alone."""
    a, b, c = 1, 2, 3
    cluster = await started(c, a, others=(b,), min_insync_replicas=1)
    try:
        # B, the preferred replica, is down when the topic is created: A leads epoch 0.
        await cluster.create_topic(TP.topic, {0: (b, a)})
        await cluster.start_broker(b)
        await cluster.wait_for_isr(TP, {a, b})
        await produce(cluster, a, *(b"a%d" % i for i in range(11)))
        assert cluster.log(b, TP).log_end_offset == 11
        cut = cluster.cut(a, b)
        await produce(cluster, a, *(b"a%d" % i for i in range(11, 21)), acks=1)
        assert cluster.log(a, TP).log_end_offset == 21

        await cluster.preferred_replica_election(TP)
        zk_state, _ = cluster.zk_partition_state(TP)
        assert (zk_state.leader, zk_state.leader_epoch, set(zk_state.isr)) == (b, 1, {a, b})
        await produce(cluster, b, *(b"b%d" % i for i in range(11, 16)), acks=1)
        assert cluster.log(b, TP).log_end_offset == 16
        assert epochs(cluster.log(b, TP)) == [(0, 0), (1, 11)]
        assert cluster.log(a, TP).log_end_offset == 21  # A follows B but cannot reach it

        await cluster.kill(b)
        await cluster.wait_for_leader(TP, a, epoch=2)
        assert epochs(cluster.log(a, TP)) == [(0, 0), (2, 21)]

        cluster.heal(cut)
        # Hold B's fetches once it is back, to see where its truncation stops.
        cluster.network.drop_replies_when = lambda reply: isinstance(reply, FetchResponse)
        await cluster.start_broker(b)
        answer = await cluster.complete(cluster.offsets_for_leader_epoch(a, TP, 1, current_leader_epoch=2))
        assert (answer.partitions[0].leader_epoch, answer.partitions[0].end_offset) == (0, 21)
        assert cluster.log(b, TP).log_end_offset == 11
        assert epochs(cluster.log(b, TP)) == [(0, 0)]

        cluster.network.drop_replies_when = None
        await cluster.advance(1_000)  # the fetcher's back-off after the lost reply
        assert cluster.log(b, TP).log_end_offset == 21
        assert values(cluster.log(b, TP)) == values(cluster.log(a, TP))
        assert log_bytes(cluster.log(b, TP)) == log_bytes(cluster.log(a, TP))
        # Epoch 2 reaches B's cache with the first record stamped 2 (docs/scenarios.md §7 (d)).
        assert epochs(cluster.log(b, TP)) == [(0, 0)]
        await produce(cluster, a, b"a21")
        assert epochs(cluster.log(b, TP)) == epochs(cluster.log(a, TP)) == [(0, 0), (2, 21)]
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------------------------------ (d)


async def test_leader_epoch_cache_workflow_across_follower_and_leader_bounces() -> None:
    """docs/scenarios.md §7 (d), shouldFollowLeaderEpochBasicWorkflow: RF 2. The first record → both caches
    [(0,0)]. Bounce the follower (its controlled shutdown takes it out of the ISR: epoch 1): the leader
    caches epoch 1 at once ([(0,0),(1,1)]), the follower only when the next record (stamped 1) replicates.
    Bounce the leader (its controlled shutdown moves leadership: epoch 2): the new leader caches (2,2) at
    once; the follower learns it with the next record."""
    a, b = 1, 2
    cluster = await two_brokers(a, b)
    try:
        await produce(cluster, a, b"r0")
        assert epochs(cluster.log(a, TP)) == epochs(cluster.log(b, TP)) == [(0, 0)]

        await cluster.stop_broker(b)
        assert epochs(cluster.log(a, TP)) == [(0, 0), (1, 1)]
        await cluster.start_broker(b)
        await cluster.wait_for_isr(TP, {a, b})
        assert epochs(cluster.log(b, TP)) == [(0, 0)]
        await produce(cluster, a, b"r1")
        await cluster.advance(1)
        assert epochs(cluster.log(b, TP)) == [(0, 0), (1, 1)]

        await cluster.stop_broker(a)
        assert cluster.zk_partition_state(TP)[0].leader == b
        assert epochs(cluster.log(b, TP)) == [(0, 0), (1, 1), (2, 2)]
        await cluster.start_broker(a)
        await cluster.wait_for_isr(TP, {a, b})
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
    replicated, bounce the follower, then the leader (each back in the ISR before the next bounce); repeat.
    Every broker's LEO equals the number of records written, and the replicas stay identical."""
    a, b = 1, 2
    cluster = await two_brokers(a, b)
    try:
        for i in range(6):
            leader = cluster.zk_partition_state(TP)[0].leader
            follower = b if leader == a else a
            await produce(cluster, leader, b"v%d" % i)
            assert cluster.log(follower, TP).log_end_offset == i + 1
            await cluster.stop_broker(follower)
            await cluster.start_broker(follower)
            await cluster.wait_for_isr(TP, {a, b})
            await cluster.stop_broker(leader)
            await cluster.start_broker(leader)
            await cluster.wait_for_isr(TP, {a, b})
            assert cluster.zk_partition_state(TP)[0].leader == follower
            for broker_id in (a, b):
                assert cluster.log(broker_id, TP).log_end_offset == i + 1
        assert log_bytes(cluster.log(a, TP)) == log_bytes(cluster.log(b, TP))
        assert [v for _, v in values(cluster.log(a, TP))] == [b"v%d" % i for i in range(6)]
    finally:
        await cluster.__aexit__(None, None, None)
