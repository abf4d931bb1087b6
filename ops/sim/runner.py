"""One simulated run: a seed's plan applied to a ``SimCluster``, invariants checked after every
step, then the faults healed and liveness checked; and shrinking a failing plan.

Theory of operation
-------------------
``run_seed`` builds a cluster of three brokers (the real controller on each) and walks the plan in
time order. Between actions, virtual time advances one due timer at a time and the cheap
invariants run after each settled step; the data invariants run every second of virtual time.
Faults with a duration schedule their own end. After the last action everything is healed
(network, ZooKeeper, disks, stalls; brokers that are down start again), producers stop sending,
and the cluster must become whole within ``liveness_bound_ms``: a live leader and the full
replica set in the ISR for every partition, every replica's log equal to the leader's. The first
violation ends the run.

Power loss is only injected where Kafka's durability model allows it: a broker may lose power
only while no other broker's power loss is outstanding (one that has not yet caught up again:
every partition it hosts has it back in ZooKeeper's ISR). Otherwise two power losses in a row
could take the only two copies of an acknowledged record, which Kafka does not promise to survive
(KIP-966's "last replica standing").

Determinism: every random choice comes from the seed (the plan, the network, each broker's rng);
nodes run blocking work inline; the process's hash seed must be fixed (``actorlog sim`` re-runs
itself with ``PYTHONHASHSEED=0``), since set iteration order decides some message orders. The
event log's hash is the proof that two runs did the same thing.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from actors.common.client_protocol import (
    AlterableConfig,
    AlterConfigOp,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
    TopicConfigEntry,
)
from actors.common.errors import ErrorCode
from actors.common.names import (
    CONTROLLER_ACTOR_NAME,
    admin_ref,
    broker_node,
)
from actors.common.protocol import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
)
from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.config import ProtocolFault
from ops.sim.cluster import BrokerState, SimCluster
from ops.sim.events import EventLog
from ops.sim.invariants import Checker, Failed, TopicModel, Violation
from ops.sim.plan import (
    Action,
    ActorCrash,
    AlterTopicConfig,
    BrokerFault,
    ControlledShutdown,
    CreateTopic,
    DeleteTopic,
    DiskFaultAction,
    FaultKind,
    LinkFault,
    PlanOptions,
    PreferredElection,
    Produce,
    Reassign,
    ZooKeeperOutage,
    describe,
    fault_kind,
    generate_plan,
)
from ops.sim.workload import ConsumerClient, ProducerClient
from runtime.codec import WireEnvelope
from runtime.coordination import MemoryCoordinator
from runtime.coordination.errors import CoordinationError
from runtime.coordination.session import SessionState
from runtime.errors import RuntimeFailure, TransportError
from runtime.ref import ActorRef
from runtime.transport.sim import LinkBehaviour, LinkFilter

__all__ = ["RunResult", "SimOptions", "run_seed", "shrink"]

_log = logging.getLogger("actorlog.sim")

_DEEP_CHECK_EVERY_MS = 1_000
# How long a supervisor (Kubernetes, ``cluster up``) takes to start a process that exited.
_SUPERVISOR_RESTART_MS = 5_000
# Topic settings under which Kafka does not promise to keep acknowledged records.
_UNSAFE_SETTINGS = frozenset({("unclean.leader.election.enable", "true"), ("min.insync.replicas", "1")})
_POLL_EVERY_MS = 500


class InjectedCrash(Exception):
    """An exception the simulation raised inside a handler (the fault ``actor-crash``)."""


@dataclass(frozen=True, slots=True)
class SimOptions:
    steps: int = 120
    plan: PlanOptions = field(default_factory=PlanOptions)
    liveness_bound_ms: int = 120_000
    # Broker configuration for every broker (BrokerConfig field names).
    broker_config: tuple[tuple[str, Any], ...] = (
        ("replica_lag_time_max_ms", 10_000),
        ("replica_fetch_wait_max_ms", 500),
        ("replica_fetch_backoff_ms", 1_000),
        ("controlled_shutdown_retry_backoff_ms", 1_000),
        ("leader_imbalance_check_interval_seconds", 30),
    )
    session_timeout_ms: int = 6_000
    echo: bool = False
    # Negative controls: deliberate protocol bugs the invariants must catch.
    protocol_faults: frozenset[ProtocolFault] = frozenset()


@dataclass
class RunResult:
    seed: int
    violation: Violation | None
    events: EventLog
    steps: int
    virtual_ms: int
    wall_s: float
    faults: Counter[str] = field(default_factory=Counter)
    checks: int = 0
    acked_records: int = 0
    plan: Sequence[Action] = ()

    @property
    def passed(self) -> bool:
        return self.violation is None


# ------------------------------------------------------------------------------------- the run


class _Run:
    def __init__(self, seed: int, plan: Sequence[Action], options: SimOptions) -> None:
        self.seed = seed
        self.plan = list(plan)
        self.options = options
        self.events = EventLog(echo=options.echo)
        self.cluster = SimCluster(
            broker_ids=options.plan.brokers,
            seed=seed,
            config_overrides={**dict(options.broker_config), "protocol_faults": options.protocol_faults},
            session_timeout_ms=options.session_timeout_ms,
            link=LinkBehaviour(min_delay_ms=0, max_delay_ms=3),
        )
        self.topics = {slot: TopicModel(name=f"topic{slot}") for slot in range(options.plan.topic_slots)}
        self.checker = Checker(self.cluster, self.topics, on_change=self.note)
        self.faults: Counter[str] = Counter()
        self._timeline: list[tuple[int, int, Callable[[], Any]]] = []
        self._sequence = itertools.count()
        self._outstanding_power_loss: set[int] = set()
        self._pending_crashes: dict[int, list[str]] = {}
        self._link_filters = itertools.count()
        self._last_deep_ms = 0
        self._operator: MemoryCoordinator | None = None
        self._producing = True
        self.exits = 0

    def note(self, text: str) -> None:
        self.events.add(self.cluster.clock.now_ms(), text)

    def at(self, when_ms: int, work: Callable[[], Any]) -> None:
        heapq.heappush(self._timeline, (when_ms, next(self._sequence), work))

    # -------------------------------------------------------------------------------- driving

    async def run(self) -> Violation | None:
        cluster = self.cluster
        async with cluster:
            self._operator = MemoryCoordinator(cluster.zookeeper, session_timeout_ms=30_000)
            await self._operator.start()
            for broker_id in cluster.broker_ids:
                await cluster.start(broker_id)
                self._install_crash_hook(broker_id)
            self.note(f"started brokers {list(cluster.broker_ids)}")
            cluster.on_step = self._on_step
            cluster.on_exit = self._on_exit
            for action in self.plan:
                self.at(action.at_ms, functools.partial(self.apply, action))
            self.at(_POLL_EVERY_MS, self._poll)
            try:
                end = max((a.at_ms for a in self.plan), default=0)
                await self._run_until(end)
                await self._heal_and_check_liveness()
            except Failed as failed:
                self.note(f"VIOLATION {failed.violation}")
                return failed.violation
            finally:
                cluster.on_step = None
            if cluster.background_failures:
                error = cluster.background_failures[0]
                violation = Violation("SimulationError", cluster.clock.now_ms(), repr(error))
                self.note(f"VIOLATION {violation}")
                return violation
        return None

    async def _run_until(self, end_ms: int) -> None:
        cluster = self.cluster
        while self._timeline and self._timeline[0][0] <= end_ms:
            when, _, work = heapq.heappop(self._timeline)
            now = cluster.clock.now_ms()
            if when > now:
                await cluster.advance(when - now)
            result = work()
            if asyncio.iscoroutine(result):
                await result
            await cluster.settle()
            self._raise_background_failure()

    def _raise_background_failure(self) -> None:
        failures = self.cluster.background_failures
        if failures:
            raise Failed(Violation("SimulationError", self.cluster.clock.now_ms(), repr(failures[0])))

    def _on_step(self) -> None:
        self.checker.step()
        now = self.cluster.clock.now_ms()
        if now - self._last_deep_ms >= _DEEP_CHECK_EVERY_MS:
            self._last_deep_ms = now
            self.checker.deep()
            self._update_outstanding_power_loss()

    def _on_exit(self, broker_id: int, reason: str) -> None:
        """A broker process ended on its own: as Kubernetes or ``cluster up`` would, start it
        again after a while."""
        self.note(f"broker {broker_id} exited: {reason}"[:240])
        self.exits += 1
        self.at(self.cluster.clock.now_ms() + _SUPERVISOR_RESTART_MS, lambda: self._restart_after(broker_id))

    def _poll(self) -> None:
        for topic in self.topics.values():
            if topic.alive and topic.consumer is not None:
                topic.consumer.poll()
        self.at(self.cluster.clock.now_ms() + _POLL_EVERY_MS, self._poll)

    # --------------------------------------------------------------------------------- healing

    async def _heal_and_check_liveness(self) -> None:
        cluster = self.cluster
        self.note("healing every fault")
        # Only the heal and restart events remain meaningful; run them now.
        pending, self._timeline = self._timeline, []
        self._producing = False
        cluster.network.filters.clear()
        cluster.network.links.clear()
        if not cluster.zookeeper.serving:
            cluster.zookeeper_back()
        for broker_id, broker in cluster.brokers.items():
            broker.fs.clear_fault()
            self._pending_crashes.pop(broker_id, None)
            if broker.stalled:
                cluster.unstall(broker_id)
            if broker.zookeeper_cut:
                cluster.reconnect(broker_id)
        del pending
        for topic in self.topics.values():
            if topic.alive and topic.consumer is not None:
                topic.consumer.poll()
        await self._wait_until_whole()
        self.note("whole again after healing")
        # Let consumers and producers finish what is in flight, then whole again, and the checks.
        for _ in range(6):
            for topic in self.topics.values():
                if topic.alive and topic.consumer is not None:
                    topic.consumer.poll()
            await cluster.advance(500)
        await self._wait_until_whole()
        self.checker.converged()
        self.checker.check_reassignment_targets()
        self.checker.deep(final=True)

    async def _wait_until_whole(self) -> None:
        cluster = self.cluster
        waited = 0
        step_ms = 500
        while True:
            for broker_id, broker in cluster.brokers.items():
                if broker.state == BrokerState.DOWN:
                    await self._start(broker_id)
            reason = self.checker.healed()
            if reason is None:
                return
            if waited >= self.options.liveness_bound_ms:
                raise Failed(
                    Violation(
                        "Liveness",
                        cluster.clock.now_ms(),
                        f"not whole {waited} ms after the faults healed: {reason}",
                    )
                )
            await cluster.advance(step_ms)
            self._raise_background_failure()
            waited += step_ms

    # ---------------------------------------------------------------------------------- actions

    async def apply(self, action: Action) -> None:
        applied = await self._apply(action)
        kind = fault_kind(action)
        if kind is not None and applied:
            self.faults[kind.value] += 1

    async def _apply(self, action: Action) -> bool:
        match action:
            case CreateTopic():
                return self._create_topic(action)
            case DeleteTopic():
                return self._delete_topic(action)
            case AlterTopicConfig():
                return self._alter_topic(action)
            case Produce():
                return self._produce(action)
            case ControlledShutdown():
                return self._controlled_shutdown(action)
            case PreferredElection():
                return await self._preferred_election(action)
            case Reassign():
                return self._reassign(action)
            case BrokerFault():
                return await self._broker_fault(action)
            case LinkFault():
                return self._link_fault(action)
            case ZooKeeperOutage():
                return self._zookeeper_outage(action)
            case DiskFaultAction():
                return self._disk_fault(action)
            case ActorCrash():
                return self._actor_crash(action)
        raise AssertionError(action)

    def _skip(self, action: Action, why: str) -> bool:
        self.note(f"skip {describe(action)}: {why}")
        return False

    def _did(self, action: Action) -> bool:
        self.note(describe(action))
        return True

    def _admin(self, request: object, then: Callable[[object | None], Any], what: str) -> None:
        """Ask the admin actor of some live broker in the background (time moves on meanwhile);
        ``then`` gets the answer, or None when there was none."""
        up = [b.broker_id for b in self.cluster.brokers.values() if b.up and not b.stalled]

        async def ask() -> None:
            response: object | None = None
            if up:
                client = await self.cluster.client("operator")
                try:
                    response = await client.ask(admin_ref(up[0]), request, timeout_ms=15_000)
                except TransportError:
                    response = None
            result = then(response)
            if asyncio.iscoroutine(result):
                await result

        _ = self.cluster.run_in_background(ask(), name=what)

    def _create_topic(self, action: CreateTopic) -> bool:
        topic = self.topics[action.slot]
        if topic.alive or topic.busy:
            return self._skip(action, "it exists" if topic.alive else "a request for it is in flight")
        topic.busy = True
        # The new generation's epochs start at 0 again: the checker forgets the old one's when it
        # sees the topic's znode created again (Checker._follow_generations).
        request = CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=topic.name,
                    num_partitions=action.partitions,
                    replication_factor=action.replication_factor,
                    configs=(TopicConfigEntry(name="min.insync.replicas", value="2"),),
                ),
            ),
            timeout_ms=10_000,
        )
        self._admin(request, lambda response: self._created(action, response), "create topic")
        return self._did(action)

    async def _created(self, action: CreateTopic, response: object | None) -> None:
        topic = self.topics[action.slot]
        topic.busy = False
        error = response.topics[0].error_code if isinstance(response, CreateTopicsResponse) else None
        created = error is ErrorCode.NONE
        if error is ErrorCode.TOPIC_ALREADY_EXISTS and self._topic_in_zookeeper(topic.name):
            created = True  # an earlier attempt whose answer was lost created it
        if not created:
            self.note(f"create topic{action.slot} failed: {error.name if error else 'no answer'}")
            return
        found = self.cluster.zookeeper.peek(zk_data.topic_path(topic.name))
        if found is None:
            self.note(f"create topic{action.slot}: answered, but gone from ZooKeeper")
            return
        assignment = zk_data.decode_topic_assignment(topic.name, found[0])
        czxid = found[1].czxid
        same_generation = czxid == topic.znode_czxid
        if same_generation:
            # Our deletion never took (its request was lost): this is the same generation again.
            self.note(f"topic{action.slot} generation {topic.generation} was never deleted")
        else:
            topic.generation += 1
            topic.tainted = False
            topic.znode_czxid = czxid
            topic.reassignment_targets = {}
        topic.alive = True
        topic.incarnation += 1
        topic.partitions = len(assignment.partitions)
        topic.replication_factor = len(assignment.partitions[0])
        if not same_generation:
            topic.producers = []
        for index in range(self.options.plan.producers_per_topic):
            producer = ProducerClient(
                self.cluster,
                f"t{action.slot}g{topic.generation}i{topic.incarnation}p{index}",
                topic.name,
                topic.generation,
            )
            await producer.start()
            topic.producers.append(producer)
        # The plan's producer numbers name the newest incarnation's producers.
        topic.active_producers = topic.producers[-self.options.plan.producers_per_topic :]
        previous_consumer = topic.consumer
        topic.consumer = ConsumerClient(
            self.cluster,
            f"t{action.slot}g{topic.generation}i{topic.incarnation}c",
            topic.name,
            topic.generation,
            topic.partitions,
        )
        if same_generation and previous_consumer is not None:
            topic.consumer.seen.update(previous_consumer.seen)
        await topic.consumer.start()
        self.note(f"topic{action.slot} generation {topic.generation}: {dict(assignment.partitions)}")

    def _topic_in_zookeeper(self, name: str) -> bool:
        return (
            self.cluster.zookeeper.peek(zk_data.topic_path(name)) is not None
            and self.cluster.zookeeper.peek(zk_data.delete_topic_path(name)) is None
        )

    def _delete_topic(self, action: DeleteTopic) -> bool:
        topic = self.topics[action.slot]
        if not topic.alive or topic.busy:
            return self._skip(action, "it does not exist" if not topic.alive else "a request is in flight")
        for producer in topic.producers:
            producer.stop()
        if topic.consumer is not None:
            topic.consumer.stop()
        topic.alive = False
        topic.busy = True

        def deleted(response: object | None) -> None:
            topic.busy = False
            self.note(f"delete topic{action.slot} answered: {response!r}"[:240])

        self._admin(
            DeleteTopicsRequest(topic_names=(topic.name,), timeout_ms=10_000), deleted, "delete topic"
        )
        return self._did(action)

    def _alter_topic(self, action: AlterTopicConfig) -> bool:
        topic = self.topics[action.slot]
        if not topic.alive:
            return self._skip(action, "it does not exist")
        if (action.key, action.value) in (
            ("unclean.leader.election.enable", "true"),
            ("min.insync.replicas", "1"),
        ):
            # Kafka promises nothing about acknowledged records from here on (whether or not the
            # change lands: its answer may be lost).
            topic.tainted = True
        request = IncrementalAlterConfigsRequest(
            resource_type=ConfigResourceType.TOPIC,
            resource_name=topic.name,
            configs=(AlterableConfig(name=action.key, op=AlterConfigOp.SET, value=action.value),),
        )

        def altered(response: object | None) -> None:
            self.note(f"alter topic{action.slot} answered: {response!r}"[:240])

        self._admin(request, altered, "alter topic")
        return self._did(action)

    def _produce(self, action: Produce) -> bool:
        topic = self.topics[action.slot]
        if not topic.alive or not self._producing or action.producer >= len(topic.active_producers):
            return False
        topic.active_producers[action.producer].send(
            action.count, self.cluster.clock.now_ms(), self.cluster.clock.wall_clock_ms()
        )
        return True

    def _controlled_shutdown(self, action: ControlledShutdown) -> bool:
        broker = self.cluster.brokers[action.broker]
        if not broker.up or broker.stalled:
            return self._skip(action, f"broker {action.broker} is {broker.state}")
        why_not = self._outage_forbidden(action.broker)
        if why_not is not None:
            return self._skip(action, why_not)
        stopping = self.cluster.run_in_background(self.cluster.stop(action.broker), name="stop")
        self.at(
            self.cluster.clock.now_ms() + action.downtime_ms,
            lambda: self._restart_after(action.broker, stopping),
        )
        return self._did(action)

    async def _restart_after(self, broker_id: int, stopping: asyncio.Task[None] | None = None) -> None:
        # A broker cannot start while ZooKeeper is down (Kafka's start-up waits for its session);
        # its supervisor tries again.
        if (stopping is not None and not stopping.done()) or not self.cluster.zookeeper.serving:
            self.at(self.cluster.clock.now_ms() + 500, lambda: self._restart_after(broker_id, stopping))
            return
        if self.cluster.brokers[broker_id].state == BrokerState.DOWN:
            await self._start(broker_id)

    async def _start(self, broker_id: int) -> None:
        try:
            await self.cluster.start(broker_id)
        except (OSError, RuntimeFailure, CoordinationError) as error:
            # The process exits at start-up (a disk that still fails, ZooKeeper gone): like
            # Kubernetes or ``cluster up``, the simulation starts it again a little later.
            self.note(f"broker {broker_id} failed to start: {error!r}"[:240])
            self.at(self.cluster.clock.now_ms() + 1_000, lambda: self._restart_after(broker_id))
            return
        self._install_crash_hook(broker_id)
        self.note(f"broker {broker_id} started")

    async def _preferred_election(self, action: PreferredElection) -> bool:
        topic = self.topics[action.slot]
        operator = self._operator
        if not topic.alive or operator is None or not self.cluster.zookeeper.serving:
            return self._skip(action, "no topic or no ZooKeeper")
        if self.cluster.zookeeper.peek(zk_data.PREFERRED_REPLICA_ELECTION_PATH) is not None:
            return self._skip(action, "an election is already pending")
        data = zk_data.encode_preferred_replica_election(
            [zk_data.TopicPartition(topic=tp.topic, partition=tp.partition) for tp in topic.tps()]
        )
        await operator.create(zk_data.PREFERRED_REPLICA_ELECTION_PATH, data)
        return self._did(action)

    def _reassign(self, action: Reassign) -> bool:
        """AlterPartitionReassignments through some broker's admin actor, as
        ``kafka-reassign-partitions.sh --bootstrap-server`` does: the partition's replica count
        stays, its replicas become the first ones of the action's broker order."""
        topic = self.topics[action.slot]
        if not topic.alive or topic.busy or topic.partitions == 0:
            return self._skip(action, "no topic")
        partition = action.partition % topic.partitions
        found = self.cluster.zookeeper.peek(zk_data.topic_path(topic.name))
        if found is None:
            return self._skip(action, "no topic znode")
        current = zk_data.decode_topic_assignment(topic.name, found[0])
        replicas = current.partitions.get(partition, ())
        removing = current.removing_replicas.get(partition, ())
        target = action.brokers[: len(replicas) - len(removing)]
        generation = topic.generation

        def ask(replicas: tuple[int, ...] | None, what: str) -> None:
            request = AlterPartitionReassignmentsRequest(
                partitions=(ReassignablePartition(topic=topic.name, partition=partition, replicas=replicas),)
            )
            self._admin(request, lambda response: answered(replicas, what, response), what)

        def answered(replicas: tuple[int, ...] | None, what: str, response: object | None) -> None:
            self.note(f"{what} of topic{action.slot}-{partition} answered: {response!r}"[:240])
            if topic.generation != generation or not topic.alive:
                return
            if not isinstance(response, AlterPartitionReassignmentsResponse) or not response.results:
                # No answer: it may or may not have been done.
                topic.reassignment_targets[partition] = None
                return
            if response.results[0].error_code is not ErrorCode.NONE:
                return
            if replicas is not None:
                topic.reassignment_targets[partition] = replicas
            else:
                # Cancelled: back to the original replicas, which the controller wrote before it
                # answered (their order is not always the first one, as in Kafka).
                now = self.cluster.zookeeper.peek(zk_data.topic_path(topic.name))
                reverted = None if now is None else zk_data.decode_topic_assignment(topic.name, now[0])
                topic.reassignment_targets[partition] = (
                    None if reverted is None else reverted.partitions.get(partition)
                )

        ask(target, "reassignment")
        if action.cancel_after_ms is not None:
            self.at(
                self.cluster.clock.now_ms() + action.cancel_after_ms,
                lambda: ask(None, "reassignment cancellation") if topic.generation == generation else None,
            )
        return self._did(action)

    # ------------------------------------------------------------------------------ faults

    async def _broker_fault(self, action: BrokerFault) -> bool:
        cluster = self.cluster
        broker = cluster.brokers[action.broker]
        now = cluster.clock.now_ms()
        if not broker.up:
            return self._skip(action, f"broker {action.broker} is {broker.state}")
        kind = action.kind
        if kind is FaultKind.POWER_LOSS:
            why_not = self._power_loss_forbidden(action.broker)
            if why_not is not None:
                return self._skip(action, why_not)
        elif kind is not FaultKind.CONTROLLER_CUT:
            why_not = self._outage_forbidden(action.broker)
            if why_not is not None:
                return self._skip(action, why_not)
        self._did(action)
        if kind in (FaultKind.KILL, FaultKind.POWER_LOSS):
            power = kind is FaultKind.POWER_LOSS
            await cluster.kill(action.broker, power_loss=power)
            if power:
                self._outstanding_power_loss.add(action.broker)
                self.checker.power_lost_at[action.broker] = now
            self.at(now + action.duration_ms, lambda: self._restart_after(action.broker))
        elif kind is FaultKind.CLEAN_RESTART:
            stopping = cluster.run_in_background(cluster.stop(action.broker), name="stop")
            self.at(now + action.duration_ms, lambda: self._restart_after(action.broker, stopping))
        elif kind is FaultKind.STALL:
            cluster.stall(action.broker)
            self.at(
                now + action.duration_ms,
                lambda: self._end(f"stall of broker {action.broker}", lambda: cluster.unstall(action.broker)),
            )
        elif kind is FaultKind.ISOLATE:
            self._cut(
                action.duration_ms, f"isolate broker {action.broker}", _isolate(broker_node(action.broker))
            )
        elif kind is FaultKind.ZOOKEEPER_CUT:
            cluster.disconnect(action.broker)
            self.at(
                now + action.duration_ms,
                lambda: self._end(
                    f"zookeeper cut of broker {action.broker}", lambda: cluster.reconnect(action.broker)
                ),
            )
        elif kind is FaultKind.CONTROLLER_CUT:
            self._cut(
                action.duration_ms,
                f"controller cut of broker {action.broker}",
                _controller_cut(broker_node(action.broker)),
            )
        elif kind is FaultKind.SESSION_EXPIRY:
            cluster.expire_session(action.broker)
        else:
            raise AssertionError(kind)
        return True

    def _end(self, what: str, heal: Callable[[], None]) -> None:
        self.note(f"end of {what}")
        heal()

    def _cut(self, duration_ms: int, what: str, link_filter: LinkFilter) -> None:
        key = f"filter-{next(self._link_filters)}"
        self.cluster.network.filters[key] = link_filter

        def heal() -> None:
            self.cluster.network.filters.pop(key, None)

        self.at(self.cluster.clock.now_ms() + duration_ms, lambda: self._end(what, heal))

    def _link_fault(self, action: LinkFault) -> bool:
        self._did(action)
        source, target = broker_node(action.source), broker_node(action.target)
        network = self.cluster.network
        now = self.cluster.clock.now_ms()
        if action.kind is FaultKind.PARTITION:
            self._cut(action.duration_ms, describe(action), _between(source, target, both_ways=True))
        elif action.kind is FaultKind.ONE_WAY_PARTITION:
            self._cut(action.duration_ms, describe(action), _between(source, target, both_ways=False))
        else:
            base = network.default
            if action.kind is FaultKind.SLOW_LINK:
                link = LinkBehaviour(
                    min_delay_ms=base.min_delay_ms,
                    max_delay_ms=base.max_delay_ms,
                    spike_probability=0.3,
                    spike_delay_ms=int(action.amount),
                )
            else:
                link = LinkBehaviour(
                    min_delay_ms=base.min_delay_ms,
                    max_delay_ms=base.max_delay_ms,
                    loss_probability=action.amount,
                )
            for pair in ((source, target), (target, source)):
                network.links[pair] = link

            def heal() -> None:
                for pair in ((source, target), (target, source)):
                    if network.links.get(pair) is link:
                        del network.links[pair]

            self.at(now + action.duration_ms, lambda: self._end(describe(action), heal))
        return True

    def _zookeeper_outage(self, action: ZooKeeperOutage) -> bool:
        if not self.cluster.zookeeper.serving:
            return self._skip(action, "ZooKeeper is already down")
        why_not = self._outage_forbidden(None)
        if why_not is not None:
            return self._skip(action, why_not)
        self._did(action)
        self.cluster.zookeeper_outage()
        self.at(
            self.cluster.clock.now_ms() + action.duration_ms,
            lambda: self._end("zookeeper outage", self.cluster.zookeeper_back),
        )
        return True

    def _disk_fault(self, action: DiskFaultAction) -> bool:
        broker = self.cluster.brokers[action.broker]
        if not broker.up:
            return self._skip(action, f"broker {action.broker} is {broker.state}")
        why_not = self._outage_forbidden(action.broker)
        if why_not is not None:
            return self._skip(action, why_not)
        self._did(action)
        broker.fs.inject_fault(action.fault)
        self.at(
            self.cluster.clock.now_ms() + action.duration_ms,
            lambda: self._end(f"disk fault on broker {action.broker}", broker.fs.clear_fault),
        )
        return True

    def _actor_crash(self, action: ActorCrash) -> bool:
        if not self.cluster.brokers[action.broker].up:
            return self._skip(action, f"broker {action.broker} is down")
        self._pending_crashes.setdefault(action.broker, []).append(action.actor)
        return self._did(action)

    def _install_crash_hook(self, broker_id: int) -> None:
        system = self.cluster.brokers[broker_id].system
        if system is None:
            return  # it exited as soon as it started (the exit is in the event log)
        pending = self._pending_crashes

        def before_handler(ref: ActorRef, message: object) -> None:
            wanted = pending.get(broker_id)
            if not wanted:
                return
            for index, kind in enumerate(wanted):
                if _actor_of_kind(ref.name, kind):
                    del wanted[index]
                    if kind == "broker" and self._outage_forbidden(broker_id) is not None:
                        # A broker actor's crash ends its node: an outage, which must wait.
                        self.note(
                            f"skip crashing broker on broker {broker_id}: {self._outage_forbidden(broker_id)}"
                        )
                        return
                    self.note(f"crashing {ref.name} on broker {broker_id} in {type(message).__name__}")
                    raise InjectedCrash(f"injected crash in {ref.name} handling {type(message).__name__}")

        system.before_handler = before_handler

    def _electable(self, broker_id: int) -> bool:
        """Up, running, registered in this process, holding its ZooKeeper session and with a
        working disk (a disk fault halts it at its next write or fsync): a broker the controller
        can elect and that stays up."""
        broker = self.cluster.brokers[broker_id]
        coordinator = broker.coordinator
        actor = self.cluster.broker_actor(broker_id)
        return (
            actor is not None
            and actor.registered
            and broker.up
            and not broker.stalled
            and not broker.zookeeper_cut
            and broker.fs.fault is None
            and coordinator is not None
            and coordinator.session_state is SessionState.CONNECTED
        )

    def _outage_forbidden(self, broker_id: int | None) -> str | None:
        """While a broker that lost power has not caught up, it may still be listed in an ISR
        with a log that lost acknowledged records (when it was the controller, or no controller
        saw it go). The other replicas are then the only copies: taking one of them down (or
        making it look dead to the controller) could get the truncated one elected from the ISR,
        a loss Kafka 2.4 does not protect against either (KIP-966). So no other broker goes down
        meanwhile."""
        others = self._outstanding_power_loss - ({broker_id} if broker_id is not None else set())
        if others:
            return f"broker(s) {sorted(others)} not caught up after losing power"
        return None

    def _power_loss_forbidden(self, broker_id: int) -> str | None:
        """Why losing ``broker_id``'s unflushed writes now could lose acknowledged records in a way
        Kafka does not promise to survive (None if it cannot): another broker's power loss is not
        caught up yet, or a partition would be left without another live, intact ISR member."""
        others = self._outstanding_power_loss - {broker_id}
        if others:
            return f"power loss of broker(s) {sorted(others)} not caught up yet"
        zookeeper = self.cluster.zookeeper
        # Every partition ZooKeeper knows, topics being deleted included (their replicas still
        # serve until the deletion completes).
        for topic in zookeeper.peek_children(zk_data.TOPICS_PATH):
            for partition in zookeeper.peek_children(f"{zk_data.topic_path(topic)}/partitions"):
                tp = TopicPartition(topic, int(partition))
                zk = self.checker.zk_state(tp)
                if zk is None or broker_id not in zk[0].isr:
                    continue
                intact = [m for m in zk[0].isr if m != broker_id and self._electable(m)]
                if not intact:
                    return f"{tp} has no other live ISR member (ISR {list(zk[0].isr)})"
        return None

    def _update_outstanding_power_loss(self) -> None:
        for broker_id in list(self._outstanding_power_loss):
            why_not = self._not_caught_up(broker_id)
            if why_not is None:
                self._outstanding_power_loss.discard(broker_id)
                self.note(f"broker {broker_id} caught up after its power loss")

    def _not_caught_up(self, broker_id: int) -> str | None:
        """Why ``broker_id`` cannot yet be trusted again after losing power (None once it can):
        it must be up and registered in this process, and every partition ZooKeeper lists it in
        the ISR of must have a live leader whose committed records it holds again."""
        cluster = self.cluster
        broker = cluster.brokers[broker_id]
        actor = cluster.broker_actor(broker_id)
        if not broker.up or actor is None or not actor.registered:
            return "not up and registered"
        zookeeper = cluster.zookeeper
        for topic in zookeeper.peek_children(zk_data.TOPICS_PATH):
            for partition in zookeeper.peek_children(f"{zk_data.topic_path(topic)}/partitions"):
                tp = TopicPartition(topic, int(partition))
                zk = self.checker.zk_state(tp)
                if zk is None or broker_id not in zk[0].isr:
                    continue
                found = self.checker.leader_log(tp)
                if found is None:
                    return f"{tp} has no live leader"
                leader, leader_log, _ = found
                if leader == broker_id:
                    return f"{tp} is led by the broker that lost power"
                own = cluster.log(broker_id, tp)
                if own is None or own.log_end_offset < leader_log.high_watermark:
                    return f"{tp} is behind its leader's high watermark"
        return None


def _actor_of_kind(name: str, kind: str) -> bool:
    if kind == "partition":
        return name.startswith("partition/")
    if kind == "replica-fetcher":
        return name.startswith("replica-fetcher-")
    return name == kind


def _between(a: str, b: str, *, both_ways: bool) -> LinkFilter:
    def crosses(source: str, target: str, direction: str, envelope: WireEnvelope) -> bool:
        if (source, target) == (a, b):
            return False
        return not (both_ways and (source, target) == (b, a))

    return crosses


def _isolate(node: str) -> LinkFilter:
    def crosses(source: str, target: str, direction: str, envelope: WireEnvelope) -> bool:
        return node not in (source, target)

    return crosses


def _controller_cut(node: str) -> LinkFilter:
    """Only controller traffic to or from ``node`` is lost: requests the controller sends it (or
    it sends the controller, controlled shutdown) and their answers."""

    def crosses(source: str, target: str, direction: str, envelope: WireEnvelope) -> bool:
        if node not in (source, target):
            return True
        sender = envelope.sender.name if envelope.sender is not None else ""
        controller_message = CONTROLLER_ACTOR_NAME in (envelope.target, sender)
        return not controller_message

    return crosses


# ------------------------------------------------------------------------------------ entry points


def run_seed(seed: int, options: SimOptions | None = None, plan: Sequence[Action] | None = None) -> RunResult:
    """Run one seed (or a given plan with that seed's randomness) to completion."""
    options = options if options is not None else SimOptions()
    chosen = list(plan) if plan is not None else generate_plan(seed, options.steps, options.plan)
    run = _Run(seed, chosen, options)
    started = time.perf_counter()
    try:
        violation = asyncio.run(run.run())
    except Exception as error:  # noqa: BLE001 - a crash of the simulated cluster is a finding
        _log.exception("seed %d crashed", seed)
        violation = Violation("SimulationError", run.cluster.clock.now_ms(), repr(error))
        run.note(f"VIOLATION {violation}")
    acked = sum(len(producer.acked()) for topic in run.topics.values() for producer in topic.producers)
    return RunResult(
        seed=seed,
        violation=violation,
        events=run.events,
        steps=len(chosen),
        virtual_ms=run.cluster.clock.now_ms(),
        wall_s=time.perf_counter() - started,
        faults=run.faults,
        checks=run.checker.checks_total,
        acked_records=acked,
        plan=chosen,
    )


def shrink(result: RunResult, options: SimOptions, *, budget: int = 60) -> RunResult:
    """The shortest plan found (dropping actions, ddmin-style) that still fails the same invariant,
    within ``budget`` re-runs."""
    assert result.violation is not None
    invariant = result.violation.invariant
    best = result
    plan = list(result.plan)
    chunk = max(1, len(plan) // 2)
    runs = 0
    while chunk >= 1 and runs < budget:
        index = 0
        removed_any = False
        while index < len(plan) and runs < budget:
            candidate = plan[:index] + plan[index + chunk :]
            if not any(isinstance(a, CreateTopic) for a in candidate):
                index += chunk
                continue
            runs += 1
            attempt = run_seed(result.seed, options, candidate)
            if attempt.violation is not None and attempt.violation.invariant == invariant:
                plan, best, removed_any = candidate, attempt, True
            else:
                index += chunk
        if not removed_any:
            chunk //= 2
    return best
