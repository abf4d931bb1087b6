"""The controller's model of the cluster, and its two state machines as data tables.

``ControllerContext`` is what the active controller knows (docs/controller.md): live brokers
with their epochs, brokers shutting down, topic assignments (with the adding and removing replicas
of partitions being reassigned, KIP-455), each partition's leader/ISR/epochs and zkVersion, and the
state of every partition and replica. It is loaded from ZooKeeper at failover
and kept current by the controller's events; it never does I/O.

The state machines are tables of valid previous states, as Kafka's ``PartitionStateMachine`` and
``ReplicaStateMachine`` declare them. A transition from a state not in the table is a programming
error: an assertion naming the partition (or replica) and both states.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from actors.common.protocol import BrokerEndpoint
from actors.common.racks import rack_constraint_broken
from actors.common.types import NO_LEADER, BrokerId, TopicPartition

__all__ = [
    "PARTITION_VALID_PREVIOUS_STATES",
    "REPLICA_VALID_PREVIOUS_STATES",
    "ControllerContext",
    "LeaderIsrAndEpoch",
    "LiveBroker",
    "PartitionMachineState",
    "ReplicaAssignment",
    "ReplicaMachineState",
]


class PartitionMachineState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaMachineState(enum.Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


_P = PartitionMachineState
_R = ReplicaMachineState

PARTITION_VALID_PREVIOUS_STATES: Final[Mapping[PartitionMachineState, frozenset[PartitionMachineState]]] = {
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
}

REPLICA_VALID_PREVIOUS_STATES: Final[Mapping[ReplicaMachineState, frozenset[ReplicaMachineState]]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderIsrAndEpoch:
    """A partition state znode plus its zkVersion (Kafka's LeaderIsrAndControllerEpoch)."""

    leader: BrokerId
    leader_epoch: int
    isr: tuple[BrokerId, ...]
    controller_epoch: int
    zk_version: int

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's full replica set RS with, while it is being reassigned (KIP-455), the replicas
    being added (in the target, not in the original set) and removed (in the original set, not in
    the target). RS lists the target replicas first, in their order, then the removed ones."""

    replicas: tuple[BrokerId, ...]
    adding: tuple[BrokerId, ...] = ()
    removing: tuple[BrokerId, ...] = ()

    @property
    def origin(self) -> tuple[BrokerId, ...]:
        """ORS: the replicas before the reassignment (what a cancellation goes back to)."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[BrokerId, ...]:
        """TRS: the replicas once the reassignment is complete."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: tuple[BrokerId, ...]) -> ReplicaAssignment:
        """Moving from this assignment's original replicas to ``target`` (which replaces any
        reassignment in progress): RS = TRS then the rest of ORS."""
        origin = self.origin
        replicas = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(
            replicas,
            tuple(r for r in replicas if r not in origin),
            tuple(r for r in replicas if r not in target),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveBroker:
    endpoint: BrokerEndpoint
    broker_epoch: int
    # The registration says the process started uncleanly and no controller has seen it yet.
    unclean_start: bool = False

    @property
    def broker_id(self) -> BrokerId:
        return self.endpoint.broker_id


@dataclass(slots=True)
class ControllerContext:
    controller_epoch: int = 0
    # zkVersion of /controller_epoch: every controller write is fenced on it.
    epoch_zk_version: int = -1
    live_brokers: dict[BrokerId, LiveBroker] = field(default_factory=dict)
    shutting_down: set[BrokerId] = field(default_factory=set)
    assignments: dict[str, dict[int, tuple[BrokerId, ...]]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionMachineState] = field(default_factory=dict)
    replica_states: dict[tuple[TopicPartition, BrokerId], ReplicaMachineState] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    # The zxid of the last write of each partition state znode (its Stat's mzxid) when it was last
    # read from ZooKeeper; failover compares it with broker epochs: a broker registered after it
    # (a larger broker epoch) registered again since.
    state_mzxid: dict[TopicPartition, int] = field(default_factory=dict)
    topic_configs: dict[str, Mapping[str, str]] = field(default_factory=dict)
    # KIP-455: the replicas being added and removed of each reassigning partition (``assignments``
    # holds its full replica set), and the partitions whose reassignment is in progress.
    adding_replicas: dict[TopicPartition, tuple[BrokerId, ...]] = field(default_factory=dict)
    removing_replicas: dict[TopicPartition, tuple[BrokerId, ...]] = field(default_factory=dict)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    # Replicas a reassignment removed while their broker was down: their logs are still there,
    # and are deleted when the broker starts again (beyond Kafka 2.4, which leaves them; kept in
    # memory only, so a controller failover forgets them).
    stray_replicas: dict[BrokerId, set[TopicPartition]] = field(default_factory=dict)

    # ------------------------------------------------------------------------------ queries

    def replicas(self, tp: TopicPartition) -> tuple[BrokerId, ...]:
        return self.assignments.get(tp.topic, {}).get(tp.partition, ())

    def full_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return ReplicaAssignment(
            self.replicas(tp), self.adding_replicas.get(tp, ()), self.removing_replicas.get(tp, ())
        )

    def is_reassigning(self, tp: TopicPartition) -> bool:
        return tp in self.partitions_being_reassigned

    def all_partitions(self) -> list[TopicPartition]:
        return sorted(
            TopicPartition(topic, partition)
            for topic, partitions in self.assignments.items()
            for partition in partitions
        )

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def partitions_on_broker(self, broker_id: BrokerId) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def partitions_led_by(self, broker_id: BrokerId) -> list[TopicPartition]:
        return [tp for tp, state in sorted(self.leadership.items()) if state.leader == broker_id]

    def is_live(self, broker_id: BrokerId) -> bool:
        """Alive in ZooKeeper (shutting-down brokers are still live)."""
        return broker_id in self.live_brokers

    def is_live_and_not_shutting_down(self, broker_id: BrokerId) -> bool:
        return broker_id in self.live_brokers and broker_id not in self.shutting_down

    def live_or_shutting_down_ids(self) -> list[BrokerId]:
        return sorted(self.live_brokers)

    def partition_state(self, tp: TopicPartition) -> PartitionMachineState:
        return self.partition_states.get(tp, PartitionMachineState.NON_EXISTENT)

    def replica_state(self, tp: TopicPartition, broker_id: BrokerId) -> ReplicaMachineState:
        return self.replica_states.get((tp, broker_id), ReplicaMachineState.NON_EXISTENT)

    def offline_partition_count(self) -> int:
        return sum(
            1
            for tp, state in self.partition_states.items()
            if state is PartitionMachineState.OFFLINE and tp.topic not in self.topics_to_delete
        )

    def preferred_replica_imbalance_count(self) -> int:
        count = 0
        for tp, leadership in self.leadership.items():
            replicas = self.replicas(tp)
            if not replicas or tp.topic in self.topics_to_delete:
                continue
            if replicas[0] in self.adding_replicas.get(tp, ()):
                # Kafka's rule: a preferred replica still being added is not counted until it
                # joins the ISR (the reassignment's completion moves the leader then).
                count += replicas[0] in leadership.isr
            elif leadership.leader != replicas[0]:
                count += 1
        return count

    def rack_constraint_violating_partition_count(self) -> int:
        """Partitions whose replicas span fewer racks than they could (actors/common/racks.py),
        judged by the racks of the live brokers (a replica on a broker that is down counts as
        rack-less: the controller does not know where it was). Topics being deleted are left out."""
        racks = {broker_id: live.endpoint.rack for broker_id, live in self.live_brokers.items()}
        if not any(rack is not None for rack in racks.values()):
            return 0
        return sum(
            1
            for topic, partitions in self.assignments.items()
            if topic not in self.topics_to_delete
            for replicas in partitions.values()
            if rack_constraint_broken(replicas, racks)
        )

    # ---------------------------------------------------------------------------- transitions

    def set_partition_state(self, tp: TopicPartition, target: PartitionMachineState) -> PartitionMachineState:
        current = self.partition_state(tp)
        assert current in PARTITION_VALID_PREVIOUS_STATES[target], (
            f"illegal partition state transition for {tp}: {current.value} -> {target.value}"
        )
        if target is PartitionMachineState.NON_EXISTENT:
            self.partition_states.pop(tp, None)
        else:
            self.partition_states[tp] = target
        return current

    def set_replica_state(
        self, tp: TopicPartition, broker_id: BrokerId, target: ReplicaMachineState
    ) -> ReplicaMachineState:
        current = self.replica_state(tp, broker_id)
        assert current in REPLICA_VALID_PREVIOUS_STATES[target], (
            f"illegal replica state transition for replica {broker_id} of {tp}: "
            f"{current.value} -> {target.value}"
        )
        if target is ReplicaMachineState.NON_EXISTENT:
            self.replica_states.pop((tp, broker_id), None)
        else:
            self.replica_states[(tp, broker_id)] = target
        return current

    # ----------------------------------------------------------------------------- updates

    def add_topic(
        self,
        topic: str,
        partitions: Mapping[int, Iterable[BrokerId]],
        adding: Mapping[int, Iterable[BrokerId]] | None = None,
        removing: Mapping[int, Iterable[BrokerId]] | None = None,
    ) -> None:
        """A topic's assignment; with ``adding``/``removing`` (a topic znode read at failover), its
        partitions with either are reassigning."""
        self.assignments[topic] = {p: tuple(replicas) for p, replicas in partitions.items()}
        for p in self.assignments[topic]:
            tp = TopicPartition(topic, p)
            added = tuple((adding or {}).get(p, ()))
            removed = tuple((removing or {}).get(p, ()))
            if added or removed:
                self.set_full_assignment(tp, ReplicaAssignment(self.replicas(tp), added, removed))
                self.partitions_being_reassigned.add(tp)

    def set_full_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.assignments.setdefault(tp.topic, {})[tp.partition] = assignment.replicas
        for known, value in (
            (self.adding_replicas, assignment.adding),
            (self.removing_replicas, assignment.removing),
        ):
            if value:
                known[tp] = value
            else:
                known.pop(tp, None)

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            self.leadership.pop(tp, None)
            self.state_mzxid.pop(tp, None)
            self.partition_states.pop(tp, None)
            for broker_id in self.replicas(tp):
                self.replica_states.pop((tp, broker_id), None)
            self.adding_replicas.pop(tp, None)
            self.removing_replicas.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
        self.assignments.pop(topic, None)
        self.topics_to_delete.discard(topic)
        self.topic_configs.pop(topic, None)
