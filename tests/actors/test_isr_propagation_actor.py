"""The ISR change propagation rule on a running broker (docs/propagation.md §1), on virtual time.

A broker that changes an ISR it leads records the partition; its ``isr-change-propagation`` task
(every 2500 ms from the broker's start) writes one sequential ``/isr_change_notification/
isr_change_NNNNNNNNNN`` znode once no change was recorded for 5 s, or once nothing was propagated
for 60 s. The ISR changes here are real: the leader expands its ISR when a follower fetches at its
log end and shrinks it when that follower falls behind for longer than ``replica.lag.time.max.ms``.
The follower (broker 2) is played by the test, which sends its fetches at the instants it chooses
(broker 2 itself is not running), so every change happens at an exact, known time. Broker 1 runs
the real controller, which reads each notification and deletes it: the test notes every
notification znode as it is created (a child watch).
"""

from __future__ import annotations

import itertools
import json

import pytest

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.isr_propagation import (
    ISR_CHANGE_PROPAGATION_BLACK_OUT_MS,
    ISR_CHANGE_PROPAGATION_CHECK_INTERVAL_MS,
    ISR_CHANGE_PROPAGATION_INTERVAL_MS,
)
from tests.support.cluster import InProcessCluster, batch

pytestmark = pytest.mark.asyncio

TP = TopicPartition("orders", 0)
LEADER, FOLLOWER = 1, 2
PAYLOAD = {"version": 1, "partitions": [{"topic": "orders", "partition": 0}]}


async def leader_with_a_played_follower(*, lag_ms: int) -> InProcessCluster:
    """Broker 1 leads ``orders-0`` (replicas [1, 2], ISR [1]); broker 2 never runs."""
    cluster = InProcessCluster(
        broker_ids=(LEADER, FOLLOWER),
        config_overrides={"min_insync_replicas": 1, "replica_lag_time_max_ms": lag_ms},
    )
    await cluster.__aenter__()
    await cluster.start_broker(LEADER)
    # The controller elects the only live replica: broker 1 leads, ISR [1].
    await cluster.create_topic(TP.topic, {0: (LEADER, FOLLOWER)})
    assert cluster.zk_partition_state(TP)[0].isr == (LEADER,)
    assert cluster.clock.now_ms() == 0  # the broker started at 0: checks run at 0, 2500, 5000, ...
    return cluster


async def follower_catches_up(cluster: InProcessCluster) -> None:
    """Broker 2 fetches at the leader's log end: the leader adds it to the ISR."""
    log_end_offset = cluster.log(LEADER, TP).log_end_offset
    response = await cluster.follower_fetch(LEADER, TP, log_end_offset, replica_id=FOLLOWER, leader_epoch=0)
    assert response.partitions[0].error_code is ErrorCode.NONE
    await cluster.settle()
    assert cluster.partition(LEADER, TP).state.isr == {LEADER, FOLLOWER}


class NotificationWatch:
    """Notes when each notification znode is created (the controller deletes it soon after)."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self.cluster = cluster
        self.created = cluster.watch_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH)

    async def advance_to(self, until_ms: int) -> None:
        await self.cluster.advance(until_ms - self.cluster.clock.now_ms())

    def appeared(self) -> list[tuple[int, str, bytes]]:
        return sorted(self.created)


async def test_an_isolated_isr_change_is_propagated_once_after_five_seconds_of_quiet() -> None:
    """docs/propagation.md §1: one ISR change → exactly one notification znode, more than 5 s after the change
    (the black-out) and at most 7.5 s after it (the next 2.5 s check); its data names the partition."""
    cluster = await leader_with_a_played_follower(lag_ms=10_000)
    try:
        await cluster.advance(1_000 - cluster.clock.now_ms())
        changed_at = cluster.clock.now_ms()
        await follower_catches_up(cluster)
        stats = cluster.broker(LEADER).statistics()
        assert stats.pending_isr_changes == 1
        assert cluster.zookeeper.peek_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH) == []

        watch = NotificationWatch(cluster)
        await watch.advance_to(changed_at + 60_000)
        [(at, name, data)] = watch.appeared()
        assert changed_at + ISR_CHANGE_PROPAGATION_BLACK_OUT_MS < at
        assert (
            at <= changed_at + ISR_CHANGE_PROPAGATION_BLACK_OUT_MS + ISR_CHANGE_PROPAGATION_CHECK_INTERVAL_MS
        )
        assert at == 7_500  # the checks at 2500 and 5000 were inside the black-out
        assert name.startswith("isr_change_")
        assert len(name) == len("isr_change_") + 10
        assert name[len("isr_change_") :].isdigit()
        assert json.loads(data) == PAYLOAD

        stats = cluster.broker(LEADER).statistics()
        assert stats.propagation_outcomes == {"written": 1, "forced": 0, "deferred": 2}
        assert stats.pending_isr_changes == 0
        assert stats.propagation_delay.count == 1
        assert stats.propagation_delay.sum == pytest.approx(6.5)
    finally:
        await cluster.__aexit__(None, None, None)


async def test_an_isr_changing_every_second_is_propagated_at_the_sixty_second_bound() -> None:
    """docs/propagation.md §1: an ISR change every second for 70 s never leaves 5 s of quiet, so the only
    write during the storm is forced by the 60 s bound (at the first check after 60 s: 62.5 s); the changes
    after it are written once they stop, after 5 s of quiet."""
    # lag 200 ms: the isr-expiration task runs every 100 ms, and a follower 300 ms behind is out.
    cluster = await leader_with_a_played_follower(lag_ms=200)
    try:
        watch = NotificationWatch(cluster)
        changes: list[int] = []
        for second in range(1, 71):
            await watch.advance_to(second * 1_000)
            await follower_catches_up(cluster)  # expand at `second` s
            changes.append(cluster.clock.now_ms())
            produced = await cluster.produce(LEADER, TP, batch(b"x"), acks=1)
            assert produced.partitions[0].error_code is ErrorCode.NONE
            await watch.advance_to(second * 1_000 + 300)  # broker 2 is behind: shrink at +300 ms
            assert cluster.partition(LEADER, TP).state.isr == {LEADER}
            changes.append(cluster.clock.now_ms())
            if second == 60:
                assert watch.appeared() == []
        assert max(b - a for a, b in itertools.pairwise(changes)) <= 1_000
        assert cluster.partition(LEADER, TP).statistics().isr_expands_total == 70
        assert cluster.partition(LEADER, TP).statistics().isr_shrinks_total == 70

        await watch.advance_to(90_000)
        [(forced_at, _, forced), (written_at, _, written)] = watch.appeared()
        assert forced_at == 62_500
        assert forced_at > ISR_CHANGE_PROPAGATION_INTERVAL_MS
        assert forced_at <= ISR_CHANGE_PROPAGATION_INTERVAL_MS + ISR_CHANGE_PROPAGATION_CHECK_INTERVAL_MS
        assert changes[-1] + ISR_CHANGE_PROPAGATION_BLACK_OUT_MS < written_at == 77_500
        assert json.loads(forced) == json.loads(written) == PAYLOAD

        stats = cluster.broker(LEADER).statistics()
        assert stats.propagation_outcomes["forced"] == 1
        assert stats.propagation_outcomes["written"] == 1
        # Every other check from the first change (at 1 s) to the last write was deferred.
        assert stats.propagation_outcomes["deferred"] == len(range(2_500, 77_500, 2_500)) - 1
        assert stats.pending_isr_changes == 0
        assert stats.propagation_delay.count == 2
        # First change at 1 s, forced at 62.5 s; the next change (63 s) written at 77.5 s.
        assert stats.propagation_delay.sum == pytest.approx(61.5 + 14.5)
    finally:
        await cluster.__aexit__(None, None, None)
