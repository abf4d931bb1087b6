"""ISR state-change events on running brokers, on virtual time (actors/server/state_changes.py).

The leader records its own ISR writes with why a follower left or came back, the broker records
each ISR change notification it writes and what it carried, the controller records the states it
writes (elections, removal of a dead broker) and the ones it reads without having seen them. The
ring answers ``since`` with what follows and counts what it already dropped.
"""

from __future__ import annotations

from typing import Any

import pytest

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.server.state_changes import StateChange, StateChangeLog
from tests.actors.test_isr_propagation_actor import (
    FOLLOWER,
    LEADER,
    TP,
    follower_catches_up,
    leader_with_a_played_follower,
)
from tests.support.cluster import InProcessCluster, batch


def _events(cluster: InProcessCluster, broker_id: int) -> list[dict[str, Any]]:
    node = cluster.brokers[broker_id].node
    assert node is not None
    assert node.state_changes is not None
    events: list[dict[str, Any]] = node.state_changes.since(0).document()["events"]
    return events


@pytest.mark.asyncio
async def test_a_leader_records_its_isr_writes_and_the_notification_that_carried_them() -> None:
    cluster = await leader_with_a_played_follower(lag_ms=1_000)
    try:
        start_wall = cluster.clock.wall_clock_ms()
        await cluster.advance(1_000)
        await follower_catches_up(cluster)
        expanded_at = cluster.clock.wall_clock_ms()
        # Broker 2 never fetches again: once behind for replica.lag.time.max.ms it is out, for
        # not fetching.
        produced = await cluster.produce(LEADER, TP, batch(b"x"), acks=1)
        assert produced.partitions[0].error_code is ErrorCode.NONE
        await cluster.wait_for(lambda: cluster.partition(LEADER, TP).state.isr == {LEADER}, step_ms=1)
        shrunk_at = cluster.clock.wall_clock_ms()
        await cluster.advance(10_000)  # 5 s of quiet, then the next 2.5 s check writes it

        events = _events(cluster, LEADER)
        kinds = [e["kind"] for e in events]
        # The controller (broker 1) wrote the new partition's state, and learned the leader's
        # writes when the notification came (the partition states it read had new versions).
        assert kinds[0] == "leader_election"
        assert events[0]["reason"] == "new_partition"
        assert events[0]["isr"] == [LEADER]
        assert events[0]["replicas"] == [LEADER, FOLLOWER]
        expand, shrink, propagation = (
            e for e in events if e["kind"] in ("isr_expand", "isr_shrink", "propagation")
        )
        assert expand["kind"] == "isr_expand"
        assert expand["reason"] == "caught_up"
        assert expand["previous_isr"] == [LEADER]
        assert expand["isr"] == [LEADER, FOLLOWER]
        assert expand["ts"] == expanded_at
        assert shrink["kind"] == "isr_shrink"
        assert shrink["reason"] == "fetch_stopped"
        assert shrink["isr"] == [LEADER]
        assert shrink["zk_version"] == expand["zk_version"] + 1
        assert shrink["ts"] == shrunk_at
        assert shrink["min_insync_replicas"] == 1
        assert shrink["replicas"] == [LEADER, FOLLOWER]
        assert propagation["kind"] == "propagation"
        assert propagation["reason"] == "written"
        assert propagation["partitions"] == [str(TP)]
        assert propagation["topic"] is None
        assert propagation["ts"] > shrunk_at + 5_000
        learned = [e for e in events if e["kind"] == "state_learned"]
        assert [(e["isr"], e["zk_version"]) for e in learned] == [([LEADER], shrink["zk_version"])]
        assert all(e["ts"] >= start_wall for e in events)
        assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    finally:
        await cluster.__aexit__(None, None, None)


ORDERS_0 = TopicPartition("orders", 0)


async def _broker_2_leads(tp: TopicPartition) -> InProcessCluster:
    """Three brokers (broker 1 the controller); ``tp`` has replicas [2, 3, 1], led by broker 2."""
    cluster = InProcessCluster(broker_ids=(1, 2, 3), config_overrides={"min_insync_replicas": 1})
    await cluster.__aenter__()
    await cluster.start_brokers(1, 2, 3)
    await cluster.create_topic(tp.topic, {0: (2, 3, 1)})
    await cluster.wait_for_leader(tp, 2)
    return cluster


@pytest.mark.asyncio
async def test_the_controller_records_removing_a_broker_and_electing_a_new_leader() -> None:
    """A controlled shutdown moves leadership and shrinks the ISR for that reason; a killed broker
    is removed from the ISR (and its partitions re-elected) as broker_down."""
    cluster = await _broker_2_leads(ORDERS_0)
    tp = ORDERS_0
    try:
        assert cluster.controller_id() == 1
        await cluster.stop_broker(2)
        await cluster.wait_for_leader(tp, 3)
        await cluster.kill(3)
        await cluster.wait_for_leader(tp, 1)
        events = [e for e in _events(cluster, 1) if e["topic"] == tp.topic]
        written = [
            (e["kind"], e["reason"], e["leader"], e["isr"])
            for e in events
            if e["kind"] in ("leader_election", "controller_isr_shrink")
        ]
        assert written == [
            ("leader_election", "new_partition", 2, [2, 3, 1]),
            ("leader_election", "controlled_shutdown", 3, [3, 1]),
            ("leader_election", "broker_down", 1, [1]),
        ]
        epochs = [e["leader_epoch"] for e in events if e["kind"] == "leader_election"]
        assert epochs == sorted(epochs)
        assert len(set(epochs)) == 3
        assert all(e["replicas"] == [2, 3, 1] for e in events)
    finally:
        await cluster.__aexit__(None, None, None)


@pytest.mark.asyncio
async def test_a_change_whose_writer_died_before_it_was_collected_is_learned_by_the_controller() -> None:
    """The leader shrinks the ISR and is killed before anyone collects its ring: the controller,
    electing a successor, reads that state first and records it (state_learned), so the history
    still has the shrink, at the time the controller learned it."""
    cluster = await _broker_2_leads(ORDERS_0)
    tp = ORDERS_0
    try:
        cluster.cut(2, 3)
        produced = await cluster.produce(2, tp, batch(b"x"), acks=1)
        assert produced.partitions[0].error_code is ErrorCode.NONE
        await cluster.wait_for(lambda: cluster.partition(2, tp).state.isr == {2, 1}, step_ms=1)
        [shrink] = [e for e in _events(cluster, 2) if e["kind"] == "isr_shrink"]
        await cluster.kill(2)
        await cluster.wait_for_leader(tp, 1)
        events = [e for e in _events(cluster, 1) if e["topic"] == tp.topic]
        learned = [
            e for e in events if e["kind"] == "state_learned" and e["zk_version"] == shrink["zk_version"]
        ]
        assert [(e["isr"], e["leader"], e["leader_epoch"]) for e in learned] == [([2, 1], 2, 0)]
        assert learned[0]["ts"] >= shrink["ts"]
        [election] = [e for e in events if e["kind"] == "leader_election" and e["reason"] == "broker_down"]
        assert election["previous_isr"] == [2, 1]
        assert (election["leader"], election["isr"]) == (1, [1])
        assert events.index(learned[0]) < events.index(election)
    finally:
        await cluster.__aexit__(None, None, None)


def _change(ts_ms: int) -> StateChange:
    return StateChange(ts_ms=ts_ms, kind="isr_shrink", tp=TopicPartition("t", 0), isr=(1,), reason="lag")


def test_since_answers_what_follows_and_counts_what_the_ring_dropped() -> None:
    ring = StateChangeLog(broker=1, incarnation=500, capacity=3)
    assert ring.since(0).events == ()
    assert ring.since(0).last_sequence == 0
    assert ring.since(0).dropped == 0
    for ts in range(1, 6):
        ring.record(_change(ts))
    answer = ring.since(0)
    assert [s for s, _ in answer.events] == [3, 4, 5]
    assert answer.dropped == 2
    assert answer.last_sequence == 5
    answer = ring.since(3)
    assert [s for s, _ in answer.events] == [4, 5]
    assert answer.dropped == 0
    assert ring.since(5).events == ()
    assert ring.since(5).last_sequence == 5
    limited = ring.since(2, limit=1)
    assert [s for s, _ in limited.events] == [3]
    assert limited.last_sequence == 3
    # A reader of an earlier incarnation (the process restarted) gets everything held.
    assert [s for s, _ in ring.since(4, incarnation=499).events] == [3, 4, 5]
    document = ring.since(4).document()
    assert document["incarnation"] == 500
    assert document["broker"] == 1
    assert document["events"] == [
        {
            "ts": 5, "broker": "1", "incarnation": 500, "sequence": 5, "kind": "isr_shrink", "topic": "t",
            "partition": 0, "leader": None, "leader_epoch": None, "zk_version": None, "isr": [1],
            "previous_isr": None, "replicas": None, "min_insync_replicas": None, "reason": "lag",
            "partitions": None,
        }
    ]  # fmt: skip
    with pytest.raises(ValueError, match="at least one"):
        StateChangeLog(broker=1, incarnation=1, capacity=0)
