"""An in-process cluster on virtual time for tests: ``ops.sim.cluster.SimCluster`` (every broker
built by ``ops.wiring`` with the real controller, on memory adapters, the in-memory ZooKeeper and
the simulated network), with what tests need on top of it.

Nothing here decides leadership: topics are created the way Kafka's ``AdminZkClient`` creates
them (the config znode, then ``/brokers/topics/<t>``), and the active controller elects, moves
and fences leaders on its own. Tests steer it the way an operator or a fault would: broker kills
(``kill``, with ``power_loss=True`` losing what was never fsynced), clean stops with controlled
shutdown (``stop_broker``), restarts, ZooKeeper session expiry, network cuts (``cut``, ``heal``)
and a preferred replica election (``preferred_replica_election``).

What a test may still do by hand is what a client, a follower or an impostor would do:

* produce, fetch, list epochs (``produce``, ``fetch``, ``offsets_for_leader_epoch``) as a client
  sends them, and ``follower_fetch`` as a follower would (a test playing a broker that is down);
* ``send_leader_and_isr``/``send_update_metadata``/``stop_replica``: raw controller requests, ONLY
  for tests that play a stale or forged controller to check how a broker fences or applies one;
* white-box peeks: actors, logs, ZooKeeper (``zk_partition_state``, ``zookeeper.peek``).

Network faults beyond SimCluster's link filters: ``network.drop_replies_when`` loses the replies a
predicate picks (after the target acted on the request; the asker sees the peer as unavailable),
and ``network.rewrite_replies`` replaces a reply on its way back (a misbehaving peer).

Time is virtual only: ``advance``, ``complete`` and ``wait_for`` move the shared ManualClock.
Links have no latency by default (``LinkBehaviour(0, 0)``), so a step's timing is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from actors.common.client_protocol import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    TopicConfigEntry,
)
from actors.common.errors import ErrorCode
from actors.common.names import admin_ref, broker_node, broker_ref, controller_ref
from actors.common.protocol import (
    BrokerEndpoint,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    OffsetForLeaderEpochPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    StopReplicaRequest,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.broker import BrokerActor
from actors.server.config import BrokerConfig
from actors.server.replica.partition import PartitionActor
from actors.server.replica.partition_state import Role
from ops.codec import wire_codec
from ops.sim.cluster import SimCluster
from runtime.codec import WireEnvelope
from runtime.coordination import MemoryCoordinator, NodeExistsError
from runtime.errors import PeerUnavailableError
from runtime.rng import node_rng
from runtime.storage.log import Log
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import iterate_batches
from runtime.system import ActorSystem
from runtime.transport.sim import LinkBehaviour, LinkFilter, SimNetwork

__all__ = ["FaultyNetwork", "InProcessCluster", "batch", "started", "values_of"]

CLIENT = "client"
# What tests assume of every broker unless they say otherwise (BrokerConfig field names).
DEFAULT_BROKER_CONFIG: dict[str, Any] = {
    "replica_lag_time_max_ms": 10_000,
    "replica_fetch_wait_max_ms": 500,
    "replica_fetch_backoff_ms": 1_000,
    "min_insync_replicas": 2,
    "controlled_shutdown_retry_backoff_ms": 1_000,
    # Kafka's default is on; off here so that a leader stays where the test's faults put it (a
    # test of the rebalance turns it on).
    "auto_leader_rebalance_enable": False,
}


def batch(*values: bytes, key: bytes | None = None) -> bytes:
    return build_batch([SimpleRecord(value=value, key=key) for value in values])


def values_of(records: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every complete batch's records."""
    return [
        (record.offset, record.value) for batch_ in iterate_batches(records) for record in batch_.records()
    ]


class FaultyNetwork(SimNetwork):
    """The simulated network, plus faults that look at a reply's content: a reply
    ``drop_replies_when`` picks never arrives (the asker sees the peer as unavailable), though the
    request was handled; ``rewrite_replies`` may replace a reply on its way back."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.drop_replies_when: Callable[[object], bool] | None = None
        self.dropped_replies: list[object] = []
        self.rewrite_replies: Callable[[object], object] | None = None

    def transfer_reply(self, reply: object) -> object:
        if self.drop_replies_when is not None and self.drop_replies_when(reply):
            self.dropped_replies.append(reply)
            raise PeerUnavailableError("?", "reply lost in the network")
        if self.rewrite_replies is not None:
            reply = self.rewrite_replies(reply)
        return super().transfer_reply(reply)


def _between(a: str, b: str) -> LinkFilter:
    """Nothing crosses between nodes ``a`` and ``b`` (either way)."""

    def crosses(source: str, target: str, direction: str, envelope: WireEnvelope) -> bool:
        return {source, target} != {a, b}

    return crosses


@dataclass
class InProcessCluster(SimCluster):
    """See the module docstring. Use as ``async with InProcessCluster(...) as cluster:``."""

    link: LinkBehaviour = field(default_factory=lambda: LinkBehaviour(min_delay_ms=0, max_delay_ms=0))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.network: FaultyNetwork = FaultyNetwork(
            clock=self.clock, rng=node_rng(self.seed, "network"), codec=wire_codec(), activity=self.activity
        )
        self.network.default = self.link
        # An operator's ZooKeeper session (AdminZkClient, zkCli): topic and config znodes.
        self.operator = MemoryCoordinator(self.zookeeper, session_timeout_ms=30_000)
        self._cuts = 0
        self._client_node: ActorSystem | None = None

    async def __aenter__(self) -> InProcessCluster:
        await super().__aenter__()
        await self.operator.start()
        self._stack.push_async_callback(self.operator.close)
        for path in zk_data.PERSISTENT_ZK_PATHS:
            await self.operator.ensure_path(path)
        self._client_node = await self.client(CLIENT)
        return self

    def config(self, broker_id: int) -> BrokerConfig:
        return BrokerConfig(
            broker_id=broker_id,
            zookeeper_session_timeout_ms=self.session_timeout_ms,
            **{**DEFAULT_BROKER_CONFIG, **self.config_overrides},
        )

    @property
    def client_node(self) -> ActorSystem:
        """The client node requests are sent from (``client(name)`` makes more)."""
        assert self._client_node is not None, "use the cluster as an async context manager"
        return self._client_node

    # ------------------------------------------------------------------------------ brokers

    async def start_broker(self, broker_id: int) -> None:
        """Start a broker and let it settle: registered (once a killed incarnation's session is
        gone), known to the active controller (this broker, when it is the first one up), which
        has finished its work and sent everything it had to send."""
        await self.start(broker_id)
        await self.wait_for(lambda: self._known_to_controller(broker_id), within_ms=30_000, step_ms=10)

    async def start_brokers(self, *broker_ids: int) -> None:
        for broker_id in broker_ids:
            await self.start_broker(broker_id)

    def _known_to_controller(self, broker_id: int) -> bool:
        broker = self.broker_actor(broker_id)
        if broker is None or not broker.registered:
            return False
        active = self.active_controllers()
        if len(active) != 1:
            return False
        _, controller = active[0]
        stats = controller.statistics()
        registration = self.zookeeper.peek(zk_data.broker_id_path(broker_id))
        return (
            registration is not None
            and stats.event_queue_size == 0
            and controller.running is None
            and not any(channel.queue or channel.in_flight for channel in controller.channels.values())
            and broker.controller_epoch == stats.controller_epoch
            and broker.has_current_metadata
        )

    async def stop_broker(self, broker_id: int) -> None:
        """A clean stop (SIGTERM): Kafka's controlled shutdown first, then actors stop, logs close
        with the clean-shutdown marker, the session closes."""
        await self.complete(self.stop(broker_id))
        await self.settle()

    async def wait_until_gone(self, broker_id: int, *, within_ms: int = 60_000) -> int:
        """After a kill: wait until the broker's session has expired (its registration is gone);
        the virtual ms it took."""
        return await self.wait_for(
            lambda: self.zookeeper.peek(zk_data.broker_id_path(broker_id)) is None, within_ms=within_ms
        )

    # --------------------------------------------------------------------------- network

    def cut(self, a: int | str, b: int | str) -> str:
        """Nothing crosses between two nodes (broker ids or node names), either way, until
        ``heal``; ZooKeeper is not affected. Returns the cut's key (for ``heal``)."""
        node_a = broker_node(a) if isinstance(a, int) else a
        node_b = broker_node(b) if isinstance(b, int) else b
        self._cuts += 1
        key = f"cut-{self._cuts}"
        self.network.filters[key] = _between(node_a, node_b)
        return key

    def block(self, link_filter: LinkFilter) -> str:
        """Add a link filter (False: the message is lost) until ``heal``."""
        self._cuts += 1
        key = f"block-{self._cuts}"
        self.network.filters[key] = link_filter
        return key

    def heal(self, *keys: str) -> None:
        """Remove the named cuts, or every filter."""
        if not keys:
            self.network.filters.clear()
        for key in keys:
            self.network.filters.pop(key, None)

    # --------------------------------------------------------------------------- ZooKeeper

    async def create_topic(
        self,
        name: str,
        assignment: Mapping[int, Iterable[int]],
        *,
        configs: Mapping[str, str] | None = None,
        through_admin: int | None = None,
        wait: bool = True,
    ) -> None:
        """Create a topic with this replica assignment. By default as Kafka's
        ``AdminZkClient.createTopicWithAssignment`` does: the config znode, then
        ``/brokers/topics/<name>`` (brokers that are down may be named). With ``through_admin``, as
        a client does: a CreateTopics request to that broker's admin actor, which answers once its
        metadata names every leader (the brokers named must be registered). The controller then
        elects the first live replica of each partition; with ``wait``, until every partition with
        a live replica is led and every live replica and broker has heard of it."""
        partitions = {p: tuple(replicas) for p, replicas in assignment.items()}
        if through_admin is not None:
            request = CreateTopicsRequest(
                topics=(
                    CreatableTopic(
                        name=name,
                        assignments=tuple(sorted(partitions.items())),
                        configs=tuple(TopicConfigEntry(name=k, value=v) for k, v in (configs or {}).items()),
                    ),
                ),
                timeout_ms=30_000,
            )
            response = await self.complete(
                self.client_node.ask(admin_ref(through_admin), request, timeout_ms=60_000), step_ms=10
            )
            assert isinstance(response, CreateTopicsResponse)
            (result,) = response.topics
            assert result.error_code is ErrorCode.NONE, result
        else:
            config_data = zk_data.encode_topic_config(dict(configs or {}))
            try:
                await self.operator.create(zk_data.topic_config_path(name), config_data)
            except NodeExistsError:
                await self.operator.set(zk_data.topic_config_path(name), config_data, version=-1)
            await self.operator.create(
                zk_data.topic_path(name),
                zk_data.encode_topic_assignment(zk_data.TopicAssignment(partitions=partitions)),
            )
        if wait:
            for partition, replicas in partitions.items():
                if any(self.brokers[r].up for r in replicas if r in self.brokers):
                    await self.wait_for_leader(TopicPartition(name, partition))

    def zk_partition_state(self, tp: TopicPartition) -> tuple[zk_data.PartitionState, int]:
        """The partition state znode: (state, its zkVersion)."""
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        found = self.zookeeper.peek(path)
        assert found is not None, f"no {path}"
        data, stat = found
        return zk_data.decode_partition_state(data, path=path), stat.version

    def assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        found = self.zookeeper.peek(zk_data.topic_path(tp.topic))
        assert found is not None, f"no topic {tp.topic}"
        return tuple(zk_data.decode_topic_assignment(tp.topic, found[0]).partitions[tp.partition])

    def controller_id(self) -> int:
        """The broker ``/controller`` names (-1: none)."""
        found = self.zookeeper.peek(zk_data.CONTROLLER_PATH)
        return -1 if found is None else zk_data.decode_controller(found[0]).broker_id

    def controller_epoch(self) -> int:
        found = self.zookeeper.peek(zk_data.CONTROLLER_EPOCH_PATH)
        assert found is not None
        return zk_data.decode_controller_epoch(found[0])

    def broker_epoch(self, broker_id: int) -> int:
        """The czxid of ``/brokers/ids/<id>`` (KIP-380's broker epoch)."""
        found = self.zookeeper.peek(zk_data.broker_id_path(broker_id))
        assert found is not None, f"broker {broker_id} is not registered"
        return found[1].czxid

    async def preferred_replica_election(self, *tps: TopicPartition) -> None:
        """Ask for a preferred replica election by hand (``/admin/preferred_replica_election``, as
        ``kafka-preferred-replica-election.sh`` does) and wait until the controller has done it
        (it deletes the znode). Waiting for the new leader to settle is the caller's choice."""
        await self.operator.create(
            zk_data.PREFERRED_REPLICA_ELECTION_PATH,
            zk_data.encode_preferred_replica_election(
                [zk_data.TopicPartition(topic=tp.topic, partition=tp.partition) for tp in tps]
            ),
        )
        await self.wait_for(
            lambda: self.zookeeper.peek(zk_data.PREFERRED_REPLICA_ELECTION_PATH) is None,
            within_ms=30_000,
            step_ms=10,
        )

    def current_leader_and_isr(self, tp: TopicPartition) -> LeaderAndIsrPartitionState:
        """The partition's state as the controller last wrote it, in LeaderAndIsr form (what a
        replayed or duplicated controller request carries)."""
        state, version = self.zk_partition_state(tp)
        return LeaderAndIsrPartitionState(
            topic=tp.topic,
            partition=tp.partition,
            controller_epoch=state.controller_epoch,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            zk_version=version,
            replicas=self.assignment(tp),
        )

    def watch_children(self, path: str) -> list[tuple[int, str, bytes]]:
        """Every child znode created under ``path`` from now on: (virtual ms, name, data), noted
        when it is created (the controller may delete it at once: ISR change notifications).
        A child watch of the operator's session, re-armed at each change."""
        seen: list[tuple[int, str, bytes]] = []
        known: set[str] = set(self.zookeeper.peek_children(path))
        session = self.operator.session_id
        assert session is not None

        def look(_: object = None) -> None:
            children = self.zookeeper.get_children(session, path, look)
            for name in sorted(set(children) - known):
                found = self.zookeeper.peek(f"{path}/{name}")
                seen.append((self.clock.now_ms(), name, found[0] if found is not None else b""))
            known.clear()
            known.update(children)

        look()
        return seen

    # ------------------------------------------------------------------------------ waits

    def leader_settled(self, tp: TopicPartition) -> bool:
        """The partition has a leader in ZooKeeper, the leader and every live replica have applied
        that leader epoch, and every live broker's metadata names it."""
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        found = self.zookeeper.peek(path)
        if found is None:
            return False
        state = zk_data.decode_partition_state(found[0], path=path)
        if state.leader < 0 or not self.brokers[state.leader].up:
            return False
        leader = self.partition_actor(state.leader, tp)
        if (
            leader is None
            or leader.state.role is not Role.LEADER
            or leader.state.leader_epoch != state.leader_epoch
        ):
            return False
        for replica in self.assignment(tp):
            if replica in self.brokers and self.brokers[replica].up:
                actor = self.partition_actor(replica, tp)
                if actor is None or actor.state.leader_epoch != state.leader_epoch:
                    return False
        for broker in self.up_brokers():
            broker_actor = self.broker_actor(broker.broker_id)
            cached = None if broker_actor is None else broker_actor.metadata.partition_state(tp)
            if cached is None or cached.leader_epoch != state.leader_epoch:
                return False
        return True

    async def wait_for_leader(
        self,
        tp: TopicPartition,
        leader: int | None = None,
        *,
        epoch: int | None = None,
        within_ms: int = 60_000,
    ) -> zk_data.PartitionState:
        """Wait until ``tp`` has a settled leader (``leader_settled``), ``leader`` if given, at
        leader epoch ``epoch`` if given; its ZooKeeper state."""

        def done() -> bool:
            if not self.leader_settled(tp):
                return False
            state, _ = self.zk_partition_state(tp)
            return (leader is None or state.leader == leader) and (
                epoch is None or state.leader_epoch == epoch
            )

        await self.wait_for(done, within_ms=within_ms, step_ms=10)
        return self.zk_partition_state(tp)[0]

    async def wait_for_state(
        self,
        tp: TopicPartition,
        predicate: Callable[[zk_data.PartitionState], bool],
        *,
        within_ms: int = 60_000,
        step_ms: int = 10,
    ) -> zk_data.PartitionState:
        """Wait until the partition state znode satisfies ``predicate``; that state."""

        def holds() -> bool:
            found = self.zookeeper.peek(zk_data.partition_state_path(tp.topic, tp.partition))
            return found is not None and predicate(self.zk_partition_state(tp)[0])

        await self.wait_for(holds, within_ms=within_ms, step_ms=step_ms)
        return self.zk_partition_state(tp)[0]

    async def wait_for_isr(self, tp: TopicPartition, isr: Iterable[int], *, within_ms: int = 60_000) -> None:
        """Wait until ZooKeeper's ISR is exactly ``isr`` (as a set) and the leader applied it."""
        wanted = set(isr)

        def done() -> bool:
            found = self.zookeeper.peek(zk_data.partition_state_path(tp.topic, tp.partition))
            if found is None:
                return False
            state, _ = self.zk_partition_state(tp)
            if set(state.isr) != wanted or state.leader < 0:
                return False
            leader = self.partition_actor(state.leader, tp)
            return leader is not None and set(leader.state.isr) == wanted

        await self.wait_for(done, within_ms=within_ms, step_ms=10)

    # ------------------------------------------------------------------------------ clients

    def produce_request(
        self, tp: TopicPartition, records: bytes, *, acks: int = -1, timeout_ms: int = 30_000
    ) -> ProduceRequest:
        return ProduceRequest(
            acks=acks,
            timeout_ms=timeout_ms,
            partitions=(ProducePartitionData(topic=tp.topic, partition=tp.partition, records=records),),
        )

    async def produce(
        self, broker_id: int, tp: TopicPartition, records: bytes, *, acks: int = -1, timeout_ms: int = 30_000
    ) -> ProduceResponse:
        response = await self.client_node.ask(
            broker_ref(broker_id),
            self.produce_request(tp, records, acks=acks, timeout_ms=timeout_ms),
            timeout_ms=timeout_ms + 60_000,
        )
        assert isinstance(response, ProduceResponse)
        return response

    async def fetch(
        self, broker_id: int, tp: TopicPartition, offset: int, *, max_wait_ms: int = 0, leader_epoch: int = -1
    ) -> FetchResponse:
        response = await self.client_node.ask(
            broker_ref(broker_id),
            FetchRequest(
                replica_id=-1,
                max_wait_ms=max_wait_ms,
                min_bytes=1,
                max_bytes=10 << 20,
                partitions=(
                    FetchPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=leader_epoch,
                    ),
                ),
            ),
            timeout_ms=max_wait_ms + 30_000,
        )
        assert isinstance(response, FetchResponse)
        return response

    async def follower_fetch(
        self,
        broker_id: int,
        tp: TopicPartition,
        offset: int,
        *,
        replica_id: int,
        leader_epoch: int = -1,
        log_start_offset: int = 0,
    ) -> FetchResponse:
        """A fetch as follower ``replica_id`` would send it (a test playing a follower that is not
        running)."""
        response = await self.client_node.ask(
            broker_ref(broker_id),
            FetchRequest(
                replica_id=replica_id,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=10 << 20,
                partitions=(
                    FetchPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                        log_start_offset=log_start_offset,
                        current_leader_epoch=leader_epoch,
                    ),
                ),
            ),
            timeout_ms=30_000,
        )
        assert isinstance(response, FetchResponse)
        return response

    async def offsets_for_leader_epoch(
        self, broker_id: int, tp: TopicPartition, leader_epoch: int, *, current_leader_epoch: int = -1
    ) -> OffsetsForLeaderEpochResponse:
        response = await self.client_node.ask(
            broker_ref(broker_id),
            OffsetsForLeaderEpochRequest(
                replica_id=-1,
                partitions=(
                    OffsetForLeaderEpochPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        current_leader_epoch=current_leader_epoch,
                        leader_epoch=leader_epoch,
                    ),
                ),
            ),
            timeout_ms=30_000,
        )
        assert isinstance(response, OffsetsForLeaderEpochResponse)
        return response

    async def controlled_shutdown_request(
        self, broker_id: int, *, broker_epoch: int
    ) -> ControlledShutdownResponse:
        """A ControlledShutdown request to the active controller, as broker ``broker_id`` sends it
        when it stops (``stop_broker`` runs the real one); returns as soon as the answer arrives
        (virtual time moves 1 ms at a time meanwhile)."""
        response = await self.complete(
            self.client_node.ask(
                controller_ref(self.controller_id()),
                ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch),
                timeout_ms=30_000,
            ),
            step_ms=1,
        )
        assert isinstance(response, ControlledShutdownResponse)
        return response

    # ------------------------------------------------- a stale or forged controller (fencing)

    def live_endpoints(self) -> tuple[BrokerEndpoint, ...]:
        return tuple(
            BrokerEndpoint(broker_id=b.broker_id, host=f"broker-{b.broker_id}", port=9092)
            for b in sorted(self.up_brokers(), key=lambda b: b.broker_id)
        )

    async def send_leader_and_isr(
        self,
        broker_id: int,
        *states: LeaderAndIsrPartitionState,
        controller_epoch: int | None = None,
        controller_id: int | None = None,
        broker_epoch: int | None = None,
    ) -> LeaderAndIsrResponse:
        """A raw LeaderAndIsr, with no znode written: ONLY for a test that plays a stale or forged
        controller (by default it claims the active controller's id and epoch) to check how a
        broker fences it. Leadership itself is the real controller's."""
        leaders = {state.leader for state in states}
        response = await self.complete(
            self.client_node.ask(
                broker_ref(broker_id),
                LeaderAndIsrRequest(
                    controller_id=self.controller_id() if controller_id is None else controller_id,
                    controller_epoch=(
                        self.controller_epoch() if controller_epoch is None else controller_epoch
                    ),
                    broker_epoch=self.broker_epoch(broker_id) if broker_epoch is None else broker_epoch,
                    partition_states=states,
                    live_leaders=tuple(e for e in self.live_endpoints() if e.broker_id in leaders),
                ),
                timeout_ms=30_000,
            ),
            step_ms=1,
        )
        assert isinstance(response, LeaderAndIsrResponse)
        await self.settle()
        return response

    async def stop_replica(
        self, broker_id: int, *tps: TopicPartition, delete: bool, broker_epoch: int | None = None
    ) -> object:
        """A raw StopReplica claiming the active controller's id and epoch: ONLY for a test of how
        a broker applies one on its own. The caller drives it (``complete``, ``run_in_background``)."""
        return await self.client_node.ask(
            broker_ref(broker_id),
            StopReplicaRequest(
                controller_id=self.controller_id(),
                controller_epoch=self.controller_epoch(),
                broker_epoch=self.broker_epoch(broker_id) if broker_epoch is None else broker_epoch,
                delete_partitions=delete,
                partitions=tps,
            ),
            timeout_ms=30_000,
        )

    async def send_update_metadata(
        self, broker_id: int, *, controller_id: int, controller_epoch: int, broker_epoch: int | None = None
    ) -> UpdateMetadataResponse:
        """A raw, empty UpdateMetadata: ONLY for a test that plays a stale or forged controller."""
        response = await self.complete(
            self.client_node.ask(
                broker_ref(broker_id),
                UpdateMetadataRequest(
                    controller_id=controller_id,
                    controller_epoch=controller_epoch,
                    broker_epoch=self.broker_epoch(broker_id) if broker_epoch is None else broker_epoch,
                    partition_states=(),
                    live_brokers=(),
                ),
                timeout_ms=30_000,
            ),
            step_ms=1,
        )
        assert isinstance(response, UpdateMetadataResponse)
        return response

    # ------------------------------------------------------------------------------ peeking

    def broker(self, broker_id: int) -> BrokerActor:
        """The live BrokerActor instance (its statistics)."""
        actor = self.broker_actor(broker_id)
        assert actor is not None, f"broker {broker_id} is not running"
        return actor

    def partition(self, broker_id: int, tp: TopicPartition) -> PartitionActor:
        """The live PartitionActor instance (white-box checks)."""
        actor = self.partition_actor(broker_id, tp)
        assert actor is not None, f"broker {broker_id} hosts no {tp}"
        return actor

    def log(self, broker_id: int, tp: TopicPartition) -> Log:
        log = super().log(broker_id, tp)
        assert log is not None, f"broker {broker_id} has no log for {tp}"
        return log


async def started(
    *broker_ids: int,
    others: tuple[int, ...] = (),
    session_timeout_ms: int = 6_000,
    link: LinkBehaviour | None = None,
    **config: Any,
) -> InProcessCluster:
    """A cluster with these brokers started in this order (the first becomes the controller) and
    ``others`` not started yet; the caller ends it with ``await cluster.__aexit__(None, None, None)``.
    ``config``: BrokerConfig fields for every broker; ``link``: the network's latency (none by
    default)."""
    cluster = InProcessCluster(
        broker_ids=tuple(sorted({*broker_ids, *others})),
        config_overrides=dict(config),
        session_timeout_ms=session_timeout_ms,
        link=link if link is not None else LinkBehaviour(min_delay_ms=0, max_delay_ms=0),
    )
    await cluster.__aenter__()
    try:
        await cluster.start_brokers(*broker_ids)
    except BaseException:
        await cluster.__aexit__(None, None, None)
        raise
    return cluster
