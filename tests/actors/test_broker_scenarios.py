"""Broker-level scenarios: controller-request fencing, a deposed leader's ISR writes, parked
produces, and fetch/epoch errors through the broker's request path (docs/replication.md §2.4, §5,
docs/controller.md §5, docs/scenarios.md §2 #11/#14/#16; docs/leader-epochs.md §4 KIP-320).

Real brokers in one process on virtual time, with the real controller (``tests/support/cluster.py``):
leadership changes come from the controller, driven by faults, clean stops and elections. Only the
fencing tests send LeaderAndIsr by hand, as a stale or forged controller would.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actors.common.errors import ErrorCode
from actors.common.names import broker_node, broker_ref, fetcher_name, partition_name
from actors.common.protocol import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    OffsetForLeaderEpochResult,
    OffsetsForLeaderEpochResponse,
    StopReplicaResponse,
)
from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.replica.partition_state import Role
from runtime.ref import ActorRef
from runtime.storage.config import LogConfig
from runtime.transport.sim import LinkBehaviour
from tests.support.cluster import InProcessCluster, batch, started

pytestmark = pytest.mark.asyncio

TP = TopicPartition("orders", 0)


def state(
    *,
    leader: int,
    leader_epoch: int,
    isr: tuple[int, ...],
    replicas: tuple[int, ...],
    zk_version: int = 0,
    controller_epoch: int = 1,
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        topic=TP.topic,
        partition=TP.partition,
        controller_epoch=controller_epoch,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=isr,
        zk_version=zk_version,
        replicas=replicas,
    )


def requests_total(cluster: InProcessCluster, broker_id: int, kind: str) -> int:
    return cluster.broker(broker_id).statistics().requests_total.get(kind, 0)


# ---------------------------------------------------------------- LeaderAndIsr fencing (docs/controller.md
# §5)


async def test_same_leader_with_a_higher_epoch_makes_the_follower_truncate_exactly_once() -> None:
    """docs/scenarios.md §2 #11 (testMakeFollowerWithNoLeaderIdChange,
    testBecomeFollowerWhenLeaderIsUnchangedBut MissedLeaderUpdate): follower of broker 1 at epoch 0; the
    controller takes broker 3 out of the ISR (its controlled shutdown), which bumps the leader epoch with the
    same leader → the follower steps run and the fetcher truncates once (one OffsetsForLeaderEpoch); that
    LeaderAndIsr again (a duplicate, as a controller replays it) → skipped, STALE_CONTROLLER_EPOCH for the
    partition."""
    cluster = await started(4, 1, 2, 3, min_insync_replicas=1)  # broker 4: the controller, no replica
    try:
        await cluster.create_topic(TP.topic, {0: (1, 2, 3)})
        await cluster.complete(cluster.produce(1, TP, batch(b"a")))
        assert cluster.log(2, TP).log_end_offset == 1
        assert cluster.partition(2, TP).state.leader_epoch == 0
        epoch_requests = requests_total(cluster, 1, "OffsetsForLeaderEpoch")
        assert epoch_requests == 0  # the follower's log was empty when it started following

        await cluster.stop_broker(3)
        zk_state = await cluster.wait_for_leader(TP, 1, epoch=1)
        assert zk_state.isr == (1, 2)
        assert cluster.partition(2, TP).state.role is Role.FOLLOWER
        assert cluster.partition(2, TP).state.leader_epoch == 1
        assert requests_total(cluster, 1, "OffsetsForLeaderEpoch") == 1
        assert cluster.log(2, TP).log_end_offset == 1

        replayed = cluster.current_leader_and_isr(TP)
        assert (replayed.leader, replayed.leader_epoch) == (1, 1)
        for broker_id in (1, 2):
            again = await cluster.send_leader_and_isr(broker_id, replayed)
            assert again.error_code is ErrorCode.NONE
            assert again.partitions[0].error_code is ErrorCode.STALE_CONTROLLER_EPOCH
        await cluster.advance(1_000)
        assert requests_total(cluster, 1, "OffsetsForLeaderEpoch") == 1
    finally:
        await cluster.__aexit__(None, None, None)


async def test_leader_and_isr_with_an_equal_or_lower_leader_epoch_is_stale_per_partition() -> None:
    """docs/controller.md §5: only a higher leader epoch is applied; equal or lower → STALE_CONTROLLER_EPOCH
    for that partition, while the other partitions of the request are applied. The request comes from a
    forged controller (the active one's id and epoch); the partition reached leader epoch 1 for real."""
    other = TopicPartition("orders", 1)
    cluster = await started(1, 2)
    try:
        await cluster.create_topic(TP.topic, {0: (1, 2)})
        await cluster.stop_broker(2)  # its controlled shutdown takes it out of the ISR: epoch 1
        await cluster.wait_for_leader(TP, 1, epoch=1)
        fresh = LeaderAndIsrPartitionState(
            topic=other.topic, partition=other.partition, controller_epoch=1, leader=1, leader_epoch=0,
            isr=(1,), zk_version=0, replicas=(1,),
        )  # fmt: skip
        response = await cluster.send_leader_and_isr(
            1,
            state(leader=1, leader_epoch=1, isr=(1,), replicas=(1,)),
            state(leader=1, leader_epoch=0, isr=(1,), replicas=(1,)),
            fresh,
        )
        assert response.error_code is ErrorCode.NONE
        assert [p.error_code for p in response.partitions] == [
            ErrorCode.STALE_CONTROLLER_EPOCH,
            ErrorCode.STALE_CONTROLLER_EPOCH,
            ErrorCode.NONE,
        ]
        assert cluster.partition(1, TP).state.leader_epoch == 1
        assert cluster.partition(1, other).state.role is Role.LEADER
    finally:
        await cluster.__aexit__(None, None, None)


async def test_leader_and_isr_from_an_older_controller_is_stale_as_a_whole() -> None:
    """docs/controller.md §2/§5: a lower controller epoch than the highest seen → STALE_CONTROLLER_EPOCH for
    the whole request, and none of it is applied (not even a higher leader epoch). The controller (broker 3,
    epoch 1) loses its session and a new one (epoch 2) takes over; the old one's request arrives late."""
    cluster = await started(3, 1, 2)
    try:
        await cluster.create_topic(TP.topic, {0: (1, 2)})
        assert (cluster.controller_id(), cluster.controller_epoch()) == (3, 1)
        cluster.expire_session(3)
        await cluster.wait_for(
            lambda: cluster.controller_epoch() == 2 and cluster.broker(1).controller_epoch == 2
        )
        response = await cluster.send_leader_and_isr(
            1, state(leader=2, leader_epoch=9, isr=(2,), replicas=(1, 2)), controller_epoch=1, controller_id=3
        )
        assert response.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
        assert response.partitions == ()
        partition = cluster.partition(1, TP)
        assert (partition.state.role, partition.state.leader_epoch) == (Role.LEADER, 0)
        stats = cluster.broker(1).statistics()
        assert stats.controller_epoch == 2
        assert stats.request_errors_total[("LeaderAndIsr", "STALE_CONTROLLER_EPOCH")] == 1
    finally:
        await cluster.__aexit__(None, None, None)


# -------------------------------------------------------------- a deposed leader (docs/replication.md §2.4
# step 6)


async def test_deposed_leader_cannot_change_the_isr_until_a_leader_and_isr_gives_it_the_zk_version() -> None:
    """docs/replication.md §2.4: the controller moved leadership to broker 2 (epoch 1) without broker 1
    hearing of it: broker 1 is cut from the other brokers and its ZooKeeper session expires (it gets a new
    one at once), so the controller elects broker 2 and its LeaderAndIsr to broker 1 is lost. Broker 1
    still leads epoch 0 in its own view and accepts an acks=all write its former followers never fetch; its
    shrink is a conditional write on the old zkVersion: it fails, is counted, and fails again at every
    isr-expiration run, so the write is never acknowledged. Once the network heals, broker 1 follows and
    rejoins; a preferred replica election (epoch 2) gives it the current zkVersion, and when its followers
    then fall behind its shrink succeeds."""
    cluster = await started(4, 1, 2, 3)  # broker 4: the controller, no replica
    try:
        await cluster.create_topic(TP.topic, {0: (1, 2, 3)})
        cuts = [cluster.cut(1, other) for other in (2, 3, 4)]
        cluster.expire_session(1)
        zk_state = await cluster.wait_for_state(TP, lambda s: s.leader == 2)
        assert (zk_state.leader_epoch, zk_state.isr) == (1, (2, 3))
        _, moved_version = cluster.zk_partition_state(TP)
        zombie = cluster.partition(1, TP)
        assert (zombie.state.role, zombie.state.leader_epoch, zombie.state.zk_version) == (Role.LEADER, 0, 0)

        produce = asyncio.ensure_future(cluster.produce(1, TP, batch(b"zombie"), timeout_ms=20_000))
        await cluster.advance(15_000)
        failed = zombie.statistics().failed_isr_updates_total
        assert failed >= 1
        assert zombie.state.isr == {1, 2, 3}
        assert zombie.statistics().isr_shrinks_total == 0
        await cluster.advance(10_000)  # two more isr-expiration runs (every 5 s): two more failures
        assert zombie.statistics().failed_isr_updates_total == failed + 2
        assert produce.done()
        assert produce.result().partitions[0].error_code is ErrorCode.REQUEST_TIMED_OUT
        assert cluster.log(1, TP).high_watermark == 0
        zk_state, version = cluster.zk_partition_state(TP)
        assert (zk_state.leader, zk_state.leader_epoch, zk_state.isr, version) == (
            2,
            1,
            (2, 3),
            moved_version,
        )

        cluster.heal(*cuts)  # the controller's LeaderAndIsr reaches broker 1: it follows broker 2
        await cluster.wait_for_isr(TP, {1, 2, 3})
        await cluster.preferred_replica_election(TP)
        await cluster.wait_for_leader(TP, 1, epoch=2)
        _, given_version = cluster.zk_partition_state(TP)
        leader = cluster.partition(1, TP)
        assert leader.state.zk_version == given_version
        # Its followers stop fetching and fall behind: the leader shrinks the ISR, and this time the
        # conditional write holds.
        cluster.cut(1, 2)
        cluster.cut(1, 3)
        await cluster.complete(cluster.produce(1, TP, batch(b"behind"), acks=1))
        await cluster.advance(15_000)
        zk_state, version = cluster.zk_partition_state(TP)
        assert (zk_state.leader, zk_state.leader_epoch, zk_state.isr, version) == (
            1,
            2,
            (1,),
            given_version + 1,
        )
        assert leader.statistics().isr_shrinks_total == 1
        assert leader.state.isr == {1}
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------------- parked produces (docs/replication.md
# §5.1)


async def test_parked_acks_all_produce_answers_not_leader_when_the_broker_becomes_follower() -> None:
    """docs/scenarios.md §2 #14 (ReplicaManagerTest.testClearPurgatoryOnBecomingFollower): an acks=-1 produce
    is parked on broker 1 (broker 3 pins the HW); a preferred replica election makes broker 1 a follower of
    broker 2 (epoch 1) → the produce completes with NOT_LEADER_OR_FOLLOWER."""
    cluster = await started(1, 3, others=(2,))
    try:
        # Broker 2, the preferred replica, is down when the topic is created: broker 1 leads.
        await cluster.create_topic(TP.topic, {0: (2, 1, 3)})
        await cluster.start_broker(2)
        await cluster.wait_for_isr(TP, {1, 2, 3})
        assert cluster.zk_partition_state(TP)[0].leader == 1
        cluster.cut(1, 3)  # broker 3 stays in the ISR but cannot fetch
        produce = asyncio.ensure_future(cluster.produce(1, TP, batch(b"a")))
        await cluster.advance(1_000)
        assert not produce.done()
        assert cluster.partition(1, TP).statistics().delayed_produces == 1
        await cluster.preferred_replica_election(TP)
        zk_state, _ = cluster.zk_partition_state(TP)
        assert (zk_state.leader, zk_state.leader_epoch) == (2, 1)
        await cluster.settle()
        assert produce.done()
        assert produce.result().partitions[0].error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert cluster.partition(1, TP).state.role is Role.FOLLOWER
    finally:
        await cluster.__aexit__(None, None, None)


async def test_parked_acks_all_produce_times_out_with_request_timed_out() -> None:
    """docs/scenarios.md §2 #16: neither the HW nor the ISR moves within the produce's timeout (1500 ms; the
    lag bound is 10 s) → REQUEST_TIMED_OUT at 1500 ms, counted by the broker."""
    cluster = await started(1, 2, 3)
    try:
        await cluster.create_topic(TP.topic, {0: (1, 2, 3)})
        cluster.cut(1, 3)  # broker 3 stays in the ISR but cannot fetch
        sent_at = cluster.clock.now_ms()
        produce = asyncio.ensure_future(cluster.produce(1, TP, batch(b"a"), timeout_ms=1_500))
        await cluster.advance(1_499)
        assert not produce.done()
        await cluster.advance(1)
        assert produce.done()
        assert cluster.clock.now_ms() - sent_at == 1_500
        assert produce.result().partitions[0].error_code is ErrorCode.REQUEST_TIMED_OUT
        assert cluster.broker(1).statistics().request_errors_total[("Produce", "REQUEST_TIMED_OUT")] == 1
        assert cluster.partition(1, TP).statistics().delayed_produce_expires_total == 1
        assert cluster.log(1, TP).log_end_offset == 1  # the record stays; its fate is unknown
    finally:
        await cluster.__aexit__(None, None, None)


# ---------------------------------------------------------------- fetch errors (docs/replication.md §4.2,
# §5.2)


async def test_consumer_fetch_above_the_log_end_is_offset_out_of_range() -> None:
    """docs/replication.md §4.2/§5.2 through the broker: above the HW (≤ LEO) nothing and no error; above the
    LEO OFFSET_OUT_OF_RANGE."""
    cluster = await started(1, 2, min_insync_replicas=1)
    try:
        await cluster.create_topic(TP.topic, {0: (1, 2)})
        cluster.cut(1, 2)  # broker 2 stays in the ISR but cannot fetch: the HW stays at 0
        await cluster.complete(cluster.produce(1, TP, batch(b"a", b"b"), acks=1))
        assert (cluster.log(1, TP).high_watermark, cluster.log(1, TP).log_end_offset) == (0, 2)
        at_leo = await cluster.complete(cluster.fetch(1, TP, 2))
        assert (at_leo.partitions[0].error_code, at_leo.partitions[0].records) == (ErrorCode.NONE, b"")
        beyond = await cluster.complete(cluster.fetch(1, TP, 3))
        assert beyond.partitions[0].error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    finally:
        await cluster.__aexit__(None, None, None)


@pytest.mark.parametrize(
    ("current_leader_epoch", "expected"),
    [(1, ErrorCode.FENCED_LEADER_EPOCH), (3, ErrorCode.UNKNOWN_LEADER_EPOCH), (2, ErrorCode.NONE)],
)
async def test_fetch_and_offsets_for_leader_epoch_are_fenced_through_the_broker(
    current_leader_epoch: int, expected: ErrorCode
) -> None:
    """KIP-320 (docs/leader-epochs.md §4): a request naming an older leader epoch → FENCED_LEADER_EPOCH,
    a newer one → UNKNOWN_LEADER_EPOCH, per partition, for Fetch and OffsetsForLeaderEpoch. Broker 1 leads
    epoch 2: twice, broker 2 stopped cleanly (out of the ISR: epoch + 1) and came back."""
    cluster = await started(1, 2, min_insync_replicas=1)
    try:
        await cluster.create_topic(TP.topic, {0: (1, 2)})
        for _ in range(2):
            await cluster.stop_broker(2)
            await cluster.start_broker(2)
            await cluster.wait_for_isr(TP, {1, 2})
        assert cluster.partition(1, TP).state.leader_epoch == 2
        await cluster.complete(cluster.produce(1, TP, batch(b"a")))
        fetched = await cluster.complete(cluster.fetch(1, TP, 0, leader_epoch=current_leader_epoch))
        assert fetched.partitions[0].error_code is expected
        epochs = await cluster.complete(
            cluster.offsets_for_leader_epoch(1, TP, 2, current_leader_epoch=current_leader_epoch)
        )
        assert epochs.partitions[0].error_code is expected
        if expected is ErrorCode.NONE:
            assert fetched.partitions[0].records != b""
            assert (epochs.partitions[0].leader_epoch, epochs.partitions[0].end_offset) == (2, 1)
    finally:
        await cluster.__aexit__(None, None, None)


# -------------------------------------------------------------------- fetcher supervision


async def test_a_restarted_replica_fetcher_resumes_the_partitions_the_broker_gave_it() -> None:
    """Supervision (ARCHITECTURE.md: a restarted actor rebuilds its state in ``on_start``): the
    leader answers an OffsetsForLeaderEpoch with a partition that was not asked about, which the
    fetcher treats as an illegal state (Kafka's IllegalStateException) and crashes on. Its
    supervisor restarts it; it must pick up the partitions the broker handed it, truncate again
    and replicate, so an acks=all write still completes with the follower in the ISR. The
    OffsetsForLeaderEpoch follows a new leader epoch (broker 3 stopped cleanly: out of the ISR)."""
    cluster = await started(1, 2, 3)
    try:
        await cluster.create_topic(TP.topic, {0: (1, 2, 3)})
        await cluster.complete(cluster.produce(1, TP, batch(b"a")))
        assert cluster.log(2, TP).log_end_offset == 1

        ghosts: list[OffsetsForLeaderEpochResponse] = []

        def answer_with_a_ghost(reply: object) -> object:
            if not isinstance(reply, OffsetsForLeaderEpochResponse):
                return reply
            cluster.network.rewrite_replies = None  # once
            ghost = OffsetForLeaderEpochResult(topic="ghost", partition=0, error_code=ErrorCode.NONE)
            ghosts.append(OffsetsForLeaderEpochResponse(partitions=(*reply.partitions, ghost)))
            return ghosts[-1]

        cluster.network.rewrite_replies = answer_with_a_ghost
        await cluster.stop_broker(3)
        await cluster.wait_for_leader(TP, 1, epoch=1)
        assert len(ghosts) == 1  # the follower asked where its epoch ends, and got the ghost
        await cluster.advance(1_000)  # the supervisor's restart back-off
        node = cluster.brokers[2].node
        assert node is not None
        [fetcher] = [a for a in node.system.statistics().actors if a.name == fetcher_name(0, 1)]
        assert fetcher.restarts_total == 1

        response = await cluster.complete(cluster.produce(1, TP, batch(b"b")), within_ms=5_000)
        assert response.partitions[0].error_code is ErrorCode.NONE
        assert cluster.log(2, TP).log_end_offset == 2
        assert cluster.partition(1, TP).state.isr == {1, 2}
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------- StopReplica (docs/controller.md §5)


async def test_stop_replica_without_delete_keeps_the_leader_epoch_so_a_replayed_leader_and_isr_is_stale() -> (
    None
):
    """Kafka keeps the ``Partition`` on StopReplica without delete: the replica goes offline with its
    log and leader epoch, so a LeaderAndIsr it already applied (a new controller replays the current
    state) is still STALE_CONTROLLER_EPOCH and does not bring it back; a higher epoch does."""
    cluster = await started(1, 2)
    try:
        await cluster.create_topic(TP.topic, {0: (1, 2)})
        await cluster.complete(cluster.produce(1, TP, batch(b"a")))
        await cluster.wait_for(lambda: cluster.log(2, TP).log_end_offset == 1)
        response = await cluster.complete(cluster.stop_replica(2, TP, delete=False), step_ms=1)
        assert isinstance(response, StopReplicaResponse)
        assert [p.error_code for p in response.partitions] == [ErrorCode.NONE]
        await cluster.settle()
        stopped = cluster.partition(2, TP)
        assert (stopped.state.role, stopped.state.leader_epoch) == (Role.NONE, 0)
        assert cluster.log(2, TP).log_end_offset == 1

        replayed = await cluster.send_leader_and_isr(
            2, state(leader=1, leader_epoch=0, isr=(1, 2), replicas=(1, 2))
        )
        assert [p.error_code for p in replayed.partitions] == [ErrorCode.STALE_CONTROLLER_EPOCH]
        assert cluster.partition(2, TP).state.role is Role.NONE
        assert cluster.partition(2, TP) is stopped

        newer = await cluster.send_leader_and_isr(
            2, state(leader=1, leader_epoch=1, isr=(1, 2), replicas=(1, 2))
        )
        assert [p.error_code for p in newer.partitions] == [ErrorCode.NONE]
        assert cluster.partition(2, TP).state.role is Role.FOLLOWER
    finally:
        await cluster.__aexit__(None, None, None)


async def test_leader_and_isr_for_a_partition_still_deleting_its_log_waits_for_it() -> None:
    """StopReplica(delete) then, before the partition actor has run it, a LeaderAndIsr for the same
    partition (a topic of the same name created again): the broker must not start a second actor of
    the same name beside the one still deleting (that crashed the node); the new state applies once
    the old actor is gone, on a new, empty log."""
    cluster = await started(1, 2)
    try:
        await cluster.create_topic(TP.topic, {0: (1, 2)})
        await cluster.complete(cluster.produce(1, TP, batch(b"old")))
        await cluster.wait_for(lambda: cluster.log(2, TP).log_end_offset == 1)
        node = cluster.brokers[2].system
        assert node is not None
        partition = ActorRef(node_id=broker_node(2), name=partition_name(TP))
        node.hold_actor(partition)
        deletion = cluster.run_in_background(cluster.stop_replica(2, TP, delete=True))
        await cluster.advance(10)
        applied = await cluster.send_leader_and_isr(
            2, state(leader=2, leader_epoch=5, isr=(2,), replicas=(2,))
        )
        assert [p.error_code for p in applied.partitions] == [ErrorCode.NONE]
        assert cluster.broker_actor(2) is not None
        node.release_actor(partition)
        answer = await cluster.complete(deletion, step_ms=1)
        assert isinstance(answer, StopReplicaResponse)
        assert [p.error_code for p in answer.partitions] == [ErrorCode.NONE]
        await cluster.wait_for(lambda: cluster.partition_actor(2, TP) is not None)
        recreated = cluster.partition(2, TP)
        assert (recreated.state.role, recreated.state.leader_epoch) == (Role.LEADER, 5)
        assert cluster.log(2, TP).log_end_offset == 0
    finally:
        await cluster.__aexit__(None, None, None)


async def test_a_replica_whose_leader_is_not_alive_still_creates_its_log() -> None:
    """KAFKA-1647: a LeaderAndIsr naming a leader the broker's metadata does not know alive does not
    make the replica a follower yet, but its log exists at once (and so its checkpoints); the same
    state sent again once the leader is known applies (the epoch was not taken)."""
    cluster = await started(1, 2)
    try:
        dead_leader = state(leader=9, leader_epoch=3, isr=(9, 2), replicas=(9, 2))
        response = await cluster.send_leader_and_isr(2, dead_leader)
        assert [p.error_code for p in response.partitions] == [ErrorCode.NONE]
        assert cluster.log(2, TP).log_end_offset == 0
        assert cluster.partition(2, TP).state.role is Role.NONE
        alive_leader = state(leader=1, leader_epoch=3, isr=(1, 2), replicas=(1, 2))
        response = await cluster.send_leader_and_isr(2, alive_leader)
        assert [p.error_code for p in response.partitions] == [ErrorCode.NONE]
        assert cluster.partition(2, TP).state.role is Role.FOLLOWER
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------- the log flusher (docs/log.md §8)


async def test_the_log_flusher_flushes_logs_whose_flush_ms_has_passed() -> None:
    """``log.flush.scheduler.interval.ms`` runs Kafka's ``kafka-log-flusher`` (first after 30 s):
    every log with unflushed data whose ``flush.ms`` (``log.flush.interval.ms``) passed since its
    last flush is flushed to its end, so its recovery point reaches the log end offset."""
    cluster = InProcessCluster(
        broker_ids=(1,),
        config_overrides={"log_flush_scheduler_interval_ms": 1_000},
        default_log_config=LogConfig(flush_ms=2_000),
        link=LinkBehaviour(min_delay_ms=0, max_delay_ms=0),
    )
    await cluster.__aenter__()
    try:
        await cluster.start_brokers(1)
        await cluster.create_topic(TP.topic, {0: (1,)})
        await cluster.complete(cluster.produce(1, TP, batch(b"a", b"b", b"c"), acks=1))
        log = cluster.log(1, TP)
        assert (log.log_end_offset, log.recovery_point) == (3, 0)
        await cluster.advance(20_000)
        assert log.recovery_point == 0  # the flusher's first run is 30 s after start
        await cluster.wait_for(lambda: log.recovery_point == 3, within_ms=20_000)
    finally:
        await cluster.__aexit__(None, None, None)


# ------------------------------------------------------------------ parked fetches (request_fanout.py rule 6)


def count_reads(cluster: InProcessCluster, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Reads each partition actor on broker 1 serves from now on (a live count)."""
    reads = dict.fromkeys(tps, 0)
    for tp in tps:
        actor = cluster.partition(1, tp)
        serve = actor._on_read_records

        def counting(ctx: Any, message: Any, tp: TopicPartition = tp, serve: Any = serve) -> None:
            reads[tp] += 1
            serve(ctx, message)

        actor._on_read_records = counting  # type: ignore[method-assign]
    return reads


def fetch_all(
    tps: list[TopicPartition], offsets: dict[TopicPartition, int], max_wait_ms: int
) -> FetchRequest:
    wanted = tuple(
        FetchPartition(
            topic=tp.topic, partition=tp.partition, fetch_offset=offsets[tp], partition_max_bytes=1 << 20
        )
        for tp in tps
    )
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=10 << 20, partitions=wanted
    )


async def test_a_parked_fetch_reads_again_only_the_partitions_that_changed() -> None:
    """A consumer fetch for ten idle partitions is read once per partition and parks. One partition
    gets a record: only that one is read again, and the fetch is answered with it. A second fetch
    parks, nothing changes, and at its expiry it is answered from its first reads. (Before, every
    change and every expiry read all ten again: an idle follower fetch naming a thousand
    partitions cost three thousand partition asks per round.)"""
    cluster = await started(1, min_insync_replicas=1)
    try:
        tps = [TopicPartition("idle", p) for p in range(10)]
        await cluster.create_topic("idle", dict.fromkeys(range(10), (1,)))
        reads = count_reads(cluster, tps)
        offsets = dict.fromkeys(tps, 0)
        parked = asyncio.ensure_future(
            cluster.client_node.ask(broker_ref(1), fetch_all(tps, offsets, 5_000), timeout_ms=60_000)
        )
        await cluster.advance(100)
        assert not parked.done()
        assert set(reads.values()) == {1}
        await cluster.complete(cluster.produce(1, tps[3], batch(b"new")))
        response = await cluster.complete(parked)
        assert isinstance(response, FetchResponse)
        assert [p.partition for p in response.partitions if p.records] == [3]
        assert reads == {tp: 2 if tp == tps[3] else 1 for tp in tps}

        offsets[tps[3]] = 1
        answered = await cluster.complete(
            cluster.client_node.ask(broker_ref(1), fetch_all(tps, offsets, 500), timeout_ms=60_000)
        )
        assert isinstance(answered, FetchResponse)
        assert [p.high_watermark for p in answered.partitions] == [offsets[tp] for tp in tps]
        assert not any(p.records for p in answered.partitions)
        assert reads == {tp: 3 if tp == tps[3] else 2 for tp in tps}
    finally:
        await cluster.__aexit__(None, None, None)


async def test_a_parked_fetch_whose_partitions_are_deleted_is_answered_without_them() -> None:
    """Deleting the topic stops its partitions (offline first, which they say): the parked fetch
    reads them again, long before its wait ends, and answers them as a broker that no longer
    hosts them."""
    cluster = await started(1, min_insync_replicas=1)
    try:
        tps = [TopicPartition("doomed", p) for p in range(2)]
        await cluster.create_topic("doomed", dict.fromkeys(range(2), (1,)))
        offsets = dict.fromkeys(tps, 0)
        parked = asyncio.ensure_future(
            cluster.client_node.ask(broker_ref(1), fetch_all(tps, offsets, 20_000), timeout_ms=60_000)
        )
        await cluster.advance(100)
        assert not parked.done()
        await cluster.operator.create(zk_data.delete_topic_path("doomed"))
        await cluster.wait_for(parked.done, within_ms=5_000, step_ms=10)
        response = parked.result()
        assert isinstance(response, FetchResponse)
        assert {p.error_code for p in response.partitions} == {ErrorCode.NOT_LEADER_OR_FOLLOWER}
    finally:
        await cluster.__aexit__(None, None, None)
