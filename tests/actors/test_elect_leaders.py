"""ElectLeaders (KIP-460) on virtual time: asked of a broker's admin actor, relayed to the active
controller, answered per partition with Kafka 2.4's codes (``actors/controller/logic.py``'s
``on_elect_leaders``, ``actors/server/admin/manager.py``'s relay)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from actors.common.errors import ErrorCode
from actors.common.names import admin_ref, broker_node, controller_ref
from actors.common.protocol import ElectLeadersRequest, ElectLeadersResponse, UpdateMetadataRequest
from actors.common.types import TopicPartition
from runtime.codec import WireEnvelope
from runtime.transport.sim import LinkBehaviour, LinkFilter
from tests.support.cluster import InProcessCluster, started

pytestmark = pytest.mark.asyncio

SESSION_MS = 4_000
CONFIG: dict[str, Any] = {
    "replica_lag_time_max_ms": 2_000,
    "replica_fetch_wait_max_ms": 200,
    "replica_fetch_backoff_ms": 200,
    "min_insync_replicas": 1,
    "auto_leader_rebalance_enable": False,
}
PREFERRED, UNCLEAN = 0, 1


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    cluster = await started(
        1, 2, 3, session_timeout_ms=SESSION_MS, link=LinkBehaviour(min_delay_ms=1, max_delay_ms=1), **CONFIG
    )
    try:
        yield cluster
    finally:
        await cluster.__aexit__(None, None, None)


def others(cluster: InProcessCluster) -> tuple[int, int]:
    """The two brokers that are not the controller."""
    controller = cluster.controller_id()
    first, second = (b for b in (1, 2, 3) if b != controller)
    return first, second


async def elect(
    cluster: InProcessCluster, via: int, election_type: int, *tps: TopicPartition, everything: bool = False
) -> dict[TopicPartition, ErrorCode]:
    """ElectLeaders through broker ``via``'s admin actor; each result's code."""
    request = ElectLeadersRequest(election_type=election_type, partitions=None if everything else tps)
    response = await cluster.complete(
        cluster.client_node.ask(admin_ref(via), request, timeout_ms=30_000), within_ms=40_000, step_ms=10
    )
    assert isinstance(response, ElectLeadersResponse)
    assert response.error_code is ErrorCode.NONE, response
    results = {TopicPartition(r.topic, r.partition): r.error_code for r in response.results}
    # An election is reported once the broker that relayed it knows the new leader (Kafka's
    # DelayedElectLeader): its metadata, at the moment of the answer, says what ZooKeeper says.
    broker = cluster.broker_actor(via)
    assert broker is not None
    for tp in (tp for tp, code in results.items() if code is ErrorCode.NONE):
        (topic,) = broker.metadata.response((tp.topic,)).topics
        (known,) = (p for p in topic.partitions if p.partition == tp.partition)
        state, _ = cluster.zk_partition_state(tp)
        assert (known.leader, known.leader_epoch) == (state.leader, state.leader_epoch), tp
    return results


async def test_preferred_election_moves_leadership_back_and_says_why_it_cannot(
    cluster: InProcessCluster,
) -> None:
    a, b = others(cluster)
    await cluster.create_topic("orders", {0: (a, b), 1: (b, a)})
    moved, settled = TopicPartition("orders", 0), TopicPartition("orders", 1)
    await cluster.kill(a)
    await cluster.wait_for_state(moved, lambda s: s.leader == b, within_ms=SESSION_MS + 5_000)

    results = await elect(cluster, b, PREFERRED, moved, settled, TopicPartition("nope", 0))
    assert results == {
        moved: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,  # a is down
        settled: ErrorCode.ELECTION_NOT_NEEDED,
        TopicPartition("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert cluster.zk_partition_state(moved)[0].leader == b

    await cluster.start_broker(a)
    await cluster.wait_for_isr(moved, (a, b), within_ms=30_000)
    epoch = cluster.zk_partition_state(moved)[0].leader_epoch
    # Every partition: those already led by their preferred replica are left out of the answer.
    assert await elect(cluster, a, PREFERRED, everything=True) == {moved: ErrorCode.NONE}
    state, _ = cluster.zk_partition_state(moved)
    assert (state.leader, state.leader_epoch) == (a, epoch + 1)
    assert await elect(cluster, a, PREFERRED, moved) == {moved: ErrorCode.ELECTION_NOT_NEEDED}
    assert await elect(cluster, a, PREFERRED, everything=True) == {}


async def test_unclean_election_elects_a_live_replica_outside_the_isr_whatever_the_topic_says(
    cluster: InProcessCluster,
) -> None:
    a, b = others(cluster)
    controller = cluster.controller_id()
    await cluster.create_topic(
        "ledger", {0: (a, b), 1: (controller, a)}, configs={"unclean.leader.election.enable": "false"}
    )
    offline, led = TopicPartition("ledger", 0), TopicPartition("ledger", 1)
    await cluster.wait_for_isr(offline, (a, b), within_ms=30_000)
    await cluster.kill(b)
    await cluster.wait_for_state(offline, lambda s: s.isr == (a,), within_ms=SESSION_MS + 5_000)
    await cluster.kill(a)
    await cluster.wait_for_state(offline, lambda s: s.leader == -1, within_ms=SESSION_MS + 5_000)

    # No replica alive at all: nobody to elect.
    assert await elect(cluster, controller, UNCLEAN, offline) == {
        offline: ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    }
    await cluster.start_broker(b)
    state, _ = cluster.zk_partition_state(offline)
    assert (state.leader, state.isr) == (-1, (a,))  # the topic does not allow unclean elections

    results = await elect(cluster, b, UNCLEAN, offline, led)
    assert results == {offline: ErrorCode.NONE, led: ErrorCode.ELECTION_NOT_NEEDED}
    state, _ = cluster.zk_partition_state(offline)
    assert (state.leader, state.isr) == (b, (b,))
    controller_actor = cluster.controller_actor(controller)
    assert controller_actor is not None
    assert controller_actor.statistics().unclean_leader_elections_total == 1
    assert await elect(cluster, b, UNCLEAN, offline) == {offline: ErrorCode.ELECTION_NOT_NEEDED}


async def test_a_broker_that_is_not_the_controller_says_so_and_an_unreachable_or_silent_one_is_reported(
    cluster: InProcessCluster,
) -> None:
    a, b = others(cluster)
    await cluster.create_topic("orders", {0: (a, b)})
    request = ElectLeadersRequest(election_type=PREFERRED, partitions=(TopicPartition("orders", 0),))
    response = await cluster.complete(
        cluster.client_node.ask(controller_ref(a), request, timeout_ms=30_000), step_ms=10
    )
    assert isinstance(response, ElectLeadersResponse)
    assert response.error_code is ErrorCode.NOT_CONTROLLER

    # The controller's node cannot be reached: NOT_CONTROLLER, and the client looks again.
    controller = cluster.controller_id()
    cut = cluster.cut(a, controller)
    response = await cluster.complete(
        cluster.client_node.ask(admin_ref(a), request, timeout_ms=40_000), step_ms=100
    )
    assert isinstance(response, ElectLeadersResponse)
    assert response.error_code is ErrorCode.NOT_CONTROLLER, response
    cluster.heal(cut)

    # It is reached but does not answer (stalled): REQUEST_TIMED_OUT, before the client gives up.
    cluster.stall(controller)
    response = await cluster.complete(
        cluster.client_node.ask(admin_ref(a), request, timeout_ms=30_000), within_ms=40_000, step_ms=100
    )
    assert isinstance(response, ElectLeadersResponse)
    assert response.error_code is ErrorCode.REQUEST_TIMED_OUT, response
    assert response.results == ()


def update_metadata_to(broker_id: int) -> LinkFilter:
    """A link filter losing every UpdateMetadata sent to ``broker_id`` (the controller retries)."""

    def crosses(source: str, target: str, direction: str, envelope: WireEnvelope) -> bool:
        return not (target == broker_node(broker_id) and isinstance(envelope.message, UpdateMetadataRequest))

    return crosses


async def test_an_election_is_reported_once_the_relaying_broker_knows_the_new_leader(
    cluster: InProcessCluster,
) -> None:
    a, b = others(cluster)
    await cluster.create_topic("orders", {0: (a, b)})
    tp = TopicPartition("orders", 0)
    await cluster.kill(a)
    await cluster.wait_for_state(tp, lambda s: s.leader == b, within_ms=SESSION_MS + 5_000)
    await cluster.start_broker(a)
    await cluster.wait_for_isr(tp, (a, b), within_ms=30_000)

    held = cluster.block(update_metadata_to(b))
    request = ElectLeadersRequest(election_type=PREFERRED, partitions=(tp,))
    asking = cluster.run_in_background(
        cluster.client_node.ask(admin_ref(b), request, timeout_ms=30_000), name="elect"
    )
    await cluster.wait_for(lambda: cluster.zk_partition_state(tp)[0].leader == a, within_ms=5_000)
    await cluster.advance(2_000)
    assert not asking.done()  # elected, but broker b has not heard of it yet
    cluster.heal(held)
    response = await cluster.complete(asking, step_ms=10)
    assert isinstance(response, ElectLeadersResponse)
    assert [(r.partition, r.error_code) for r in response.results] == [(0, ErrorCode.NONE)]

    # Never heard of within the relay's time: REQUEST_TIMED_OUT for that partition (it was
    # elected all the same, as in Kafka).
    await cluster.kill(a)
    await cluster.wait_for_state(tp, lambda s: s.leader == b, within_ms=SESSION_MS + 5_000)
    await cluster.start_broker(a)
    await cluster.wait_for_isr(tp, (a, b), within_ms=30_000)
    held = cluster.block(update_metadata_to(b))
    response = await cluster.complete(
        cluster.client_node.ask(admin_ref(b), request, timeout_ms=30_000), within_ms=40_000, step_ms=100
    )
    assert isinstance(response, ElectLeadersResponse)
    assert [(r.partition, r.error_code) for r in response.results] == [(0, ErrorCode.REQUEST_TIMED_OUT)]
    assert cluster.zk_partition_state(tp)[0].leader == a
    cluster.heal(held)
