"""The controller's event logic (docs/propagation.md §2, docs/controller.md), as sans-I/O scripts.

Each controller event is a *script*: a generator that yields ZooKeeper requests (pure data from
``runtime.coordination.requests``, optionally ``Watched``) and receives their results (or their
exception, thrown in). The ControllerActor drives one script at a time — Kafka's single controller
event thread — so the steps of an event read top to bottom like Kafka's blocking code while nothing
here awaits or touches I/O. Requests to brokers are collected in a ``RequestBatch``; the actor
sends it whenever the script waits on a step and when the event ends, so each state-machine step's
requests leave before the next step's ZooKeeper work (Kafka's batch per ``handleStateChanges``).

Fencing: every controller write to ZooKeeper is a multi with a check of ``/controller_epoch`` at the
version this controller set when it won (``fence``). A failed check raises ``FencedError``: another
controller took over, and this one resigns. Partition state writes are also conditional on the
zkVersion last read; a conflict is re-read and retried.

Events and what they do:
* election — create ``/controller`` and bump ``/controller_epoch`` in one multi; the winner runs
  failover: watch brokers, topics, deletions, ISR notifications and the preferred-election znode;
  delete stale ISR notifications; load the cluster; send everyone metadata; bring replicas online
  (removing dead ones from ISRs) and elect leaders for new and offline partitions;
* broker change — new, dead and bounced (re-registered with a larger czxid) brokers;
* topic change / deletion, ISR change notification, controlled shutdown, preferred election and the
  automatic rebalance;
* partition reassignment (KIP-455, docs/controller.md §9): AlterPartitionReassignments and
  ListPartitionReassignments from a broker's admin actor, the ``/admin/reassign_partitions`` znode
  appearing, and the state znode of a reassigning partition changing (its ISR may now hold every
  target replica); failover and broker startup resume reassignments in progress.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import Callable, Collection, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from actors.common.errors import ErrorCode
from actors.common.protocol import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    BrokerEndpoint,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListenerEndpoint,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    PartitionResult,
)
from actors.common.types import NO_LEADER, BrokerId, TopicPartition
from actors.controller.election import (
    ElectionResult,
    controlled_shutdown_leader,
    new_partition_leader,
    offline_partition_leader,
    preferred_replica_leader,
    reassignment_leader,
)
from actors.controller.requests import RequestBatch
from actors.controller.state import (
    ControllerContext,
    LeaderIsrAndEpoch,
    LiveBroker,
    PartitionMachineState,
    ReplicaAssignment,
    ReplicaMachineState,
)
from actors.server import zk_data
from actors.server.state_changes import StateChange, StateChangeLog
from actors.server.zk_data import TopicAssignment
from runtime.coordination.base import ANY_VERSION, CheckOp, CreateOp, SetDataOp, SetDataOpResult, Stat
from runtime.coordination.errors import BadVersionError, CoordinationError, NodeExistsError, NoNodeError
from runtime.coordination.requests import (
    FencedError,
    WriteOutcome,
    ZkCreate,
    ZkDelete,
    ZkDeleteRecursive,
    ZkExists,
    ZkFencedCreateMany,
    ZkFencedSetMany,
    ZkGet,
    ZkGetChildren,
    ZkGetChildrenData,
    ZkGetMany,
    ZkMulti,
    ZkRequest,
)
from runtime.histogram import Histogram
from runtime.scripts import Watch

__all__ = [
    "ControllerLogic",
    "ElectionKind",
    "ElectionOutcome",
    "Script",
    "WatchKind",
    "Watched",
]


class WatchKind(enum.Enum):
    CONTROLLER = "controller"
    BROKERS = "brokers"
    TOPICS = "topics"
    DELETE_TOPICS = "delete_topics"
    ISR_CHANGES = "isr_change_notification"
    PREFERRED_ELECTION = "preferred_replica_election"
    # A data watch on /brokers/topics/<t> (Kafka's PartitionModificationsHandler): the event
    # carries the topic, taken from the watched path.
    PARTITION_MODIFICATIONS = "partition_modifications"
    # An exists watch on /admin/reassign_partitions (Kafka's PartitionReassignmentHandler).
    PARTITION_REASSIGNMENT = "reassign_partitions"
    # A data watch on a reassigning partition's state znode (Kafka's
    # PartitionReassignmentIsrChangeHandler): the event carries the partition, from the path.
    PARTITION_REASSIGNMENT_ISR_CHANGE = "partition_reassignment_isr_change"


# A request whose watch, when it fires, becomes a controller event of ``kind`` (the script
# driver's watch step).
Watched = Watch


Step = ZkRequest | Watched
Script = Generator[Step, Any, None]


class ElectionKind(enum.Enum):
    OFFLINE = "offline"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    # ElectLeaders(unclean): the offline algorithm with unclean elections allowed, whatever the
    # topic's unclean.leader.election.enable says (Kafka's allowUnclean = true).
    UNCLEAN = "unclean"
    # A completing reassignment moves the leader onto a target replica (Kafka's
    # ReassignPartitionLeaderElectionStrategy).
    REASSIGNMENT = "reassignment"


# The reason a state-change event gives for each kind of election (an unclean one says so).
_ELECTION_REASONS = {
    ElectionKind.OFFLINE: "broker_down",
    ElectionKind.PREFERRED: "preferred",
    ElectionKind.CONTROLLED_SHUTDOWN: "controlled_shutdown",
    ElectionKind.UNCLEAN: "unclean",
    ElectionKind.REASSIGNMENT: "reassignment",
}

# ElectLeaders' election_type values (Kafka's ElectionType).
PREFERRED_ELECTION_TYPE = 0
UNCLEAN_ELECTION_TYPE = 1


@dataclass(slots=True)
class ElectionOutcome:
    elected: list[TopicPartition] = field(default_factory=list)
    failed: list[TopicPartition] = field(default_factory=list)


class ControllerLogic:
    """The active controller's state and scripts. One instance per activation."""

    def __init__(
        self,
        *,
        broker_id: BrokerId,
        default_unclean_leader_election: bool,
        now_ms: Callable[[], int],
        now_ns: Callable[[], int],
        wall_clock_ms: Callable[[], int],
        session_id: Callable[[], int | None],
        log: logging.Logger | logging.LoggerAdapter[logging.Logger],
    ) -> None:
        self.broker_id = broker_id
        # The actor's logger (its context's): the scripts' lines carry the node and actor.
        self.log = log
        # The ZooKeeper session this broker holds now (the owner of the ephemerals it creates).
        self._session_id = session_id
        self.default_unclean_leader_election = default_unclean_leader_election
        self._now_ms = now_ms
        self._now_ns = now_ns
        self._wall_clock_ms = wall_clock_ms
        self.context = ControllerContext()
        self.batch = RequestBatch(broker_id)
        self.active = False
        self.unclean_leader_elections_total = 0
        self.leader_election_seconds = Histogram()
        # Set when a replica's deletion failed on a live broker: the actor retries the deletion
        # event after a back-off.
        self.deletion_retry_wanted = False
        # The simulation's negative control ProtocolFault.ELECT_OUTSIDE_ISR: every offline
        # election may pick a replica outside the ISR, as if unclean elections were enabled.
        self.elect_outside_isr = False
        # Where state-change events go (the broker process's ring), if anywhere.
        self.state_changes: StateChangeLog | None = None
        # The creation zxid of the /admin/reassign_partitions znode last acted on: Kafka acts on
        # the znode when it appears, not when its data changes.
        self._zk_reassignment_czxid: int | None = None

    # --------------------------------------------------------------------------------- helpers

    @property
    def fence(self) -> CheckOp:
        return CheckOp(path=zk_data.CONTROLLER_EPOCH_PATH, version=self.context.epoch_zk_version)

    def take_batch(self) -> RequestBatch:
        batch = self.batch
        self.batch = RequestBatch(self.broker_id)
        return batch

    def _unclean_enabled(self, topic: str) -> bool:
        config = self.context.topic_configs.get(topic, {})
        value = config.get("unclean.leader.election.enable")
        return self.default_unclean_leader_election if value is None else value.strip().lower() == "true"

    def _live_brokers(self, registrations: dict[str, tuple[bytes, Stat]]) -> dict[BrokerId, LiveBroker]:
        live: dict[BrokerId, LiveBroker] = {}
        for name, (data, stat) in registrations.items():
            try:
                broker_id = zk_data.parse_broker_id(name)
                registration = zk_data.decode_broker_registration(broker_id, data)
            except zk_data.ZkDataError as error:
                self.log.error("ignoring an unreadable broker registration %s: %s", name, error)
                continue
            endpoint = next(
                (
                    e
                    for e in registration.endpoints
                    if e.listener_name in (zk_data.HTTP_LISTENER_NAME, zk_data.HTTPS_LISTENER_NAME)
                ),
                registration.endpoints[0] if registration.endpoints else None,
            )
            if endpoint is None:
                continue
            live[broker_id] = LiveBroker(
                endpoint=BrokerEndpoint(
                    broker_id=broker_id,
                    host=endpoint.host,
                    port=endpoint.port,
                    rack=registration.rack,
                    security_protocol=endpoint.security_protocol,
                    endpoints=tuple(
                        ListenerEndpoint(
                            listener_name=e.listener_name,
                            host=e.host,
                            port=e.port,
                            security_protocol=e.security_protocol,
                        )
                        for e in registration.endpoints
                    ),
                ),
                broker_epoch=stat.czxid,
                unclean_start=registration.unclean_start,
            )
        return live

    # ------------------------------------------------------------------------------- election

    def elect(self) -> Script:
        """Try to become the controller (docs/controller.md §2). Sets ``active`` and runs failover on a
        win."""
        stat = yield Watched(ZkExists(zk_data.CONTROLLER_PATH, watch=True), WatchKind.CONTROLLER)
        if stat is not None:
            try:
                held, stat = yield ZkGet(zk_data.CONTROLLER_PATH)
            except NoNodeError:
                held = None
            if held is not None:
                if zk_data.decode_controller(held).broker_id != self.broker_id:
                    return  # another broker is the controller
                if stat.ephemeral_owner != self._session_id():
                    # This broker id's, but another session's: a previous process of this broker
                    # (restarted before its session expired) still holds it. That process may have
                    # lost what it had not flushed; this one is not registered yet. The znode goes
                    # with that session, and its watch brings a new election (seed 4625).
                    return
                # Ours, yet this broker is not the controller: an activation that ended on an error
                # (Kafka's triggerControllerMove deletes it then). Left in place, no broker would
                # ever be controller again while this session lives.
                self.log.warning("removing /controller left by this broker's previous activation")
                try:
                    yield ZkDelete(zk_data.CONTROLLER_PATH, version=stat.version)
                except (NoNodeError, BadVersionError):
                    return  # changed meanwhile: its watch brings a new election
        try:
            data, epoch_stat = yield ZkGet(zk_data.CONTROLLER_EPOCH_PATH)
            epoch, epoch_version = zk_data.decode_controller_epoch(data), epoch_stat.version
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                yield ZkCreate(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(0))
            data, epoch_stat = yield ZkGet(zk_data.CONTROLLER_EPOCH_PATH)
            epoch, epoch_version = zk_data.decode_controller_epoch(data), epoch_stat.version
        registration = zk_data.encode_controller(
            zk_data.ControllerRegistration(broker_id=self.broker_id, timestamp_ms=self._wall_clock_ms())
        )
        new_epoch = epoch + 1
        try:
            results = yield ZkMulti(
                (
                    CreateOp(path=zk_data.CONTROLLER_PATH, data=registration, ephemeral=True),
                    SetDataOp(
                        path=zk_data.CONTROLLER_EPOCH_PATH,
                        data=zk_data.encode_controller_epoch(new_epoch),
                        version=epoch_version,
                    ),
                )
            )
            result = results[1]
            assert isinstance(result, SetDataOpResult)
            new_version = result.stat.version
        except CoordinationError:
            # Maybe a retried multi of ours landed: we won iff /controller is ours at the new epoch.
            try:
                controller_data, _ = yield ZkGet(zk_data.CONTROLLER_PATH)
                data, epoch_stat = yield ZkGet(zk_data.CONTROLLER_EPOCH_PATH)
            except NoNodeError:
                return
            holder = zk_data.decode_controller(controller_data).broker_id
            if holder != self.broker_id or zk_data.decode_controller_epoch(data) != new_epoch:
                return
            new_version = epoch_stat.version
        self.context = ControllerContext(controller_epoch=new_epoch, epoch_zk_version=new_version)
        self.active = True
        self.log.info("broker %d is the controller (controller epoch %d)", self.broker_id, new_epoch)
        yield from self.on_controller_failover()

    def on_controller_failover(self) -> Script:
        context = self.context
        registrations = yield Watched(
            ZkGetChildrenData(zk_data.BROKER_IDS_PATH, watch=True), WatchKind.BROKERS
        )
        context.live_brokers = self._live_brokers(registrations)
        yield from self._load_topics()
        deleting = yield Watched(
            ZkGetChildren(zk_data.DELETE_TOPICS_PATH, watch=True), WatchKind.DELETE_TOPICS
        )
        context.topics_to_delete = {t for t in deleting if t in context.assignments}
        notifications = yield Watched(
            ZkGetChildren(zk_data.ISR_CHANGE_NOTIFICATION_PATH, watch=True), WatchKind.ISR_CHANGES
        )
        for name in notifications:
            yield ZkDeleteRecursive(
                zk_data.isr_change_notification_path(zk_data.isr_change_sequence_number(name)), self.fence
            )
        preferred = yield Watched(
            ZkExists(zk_data.PREFERRED_REPLICA_ELECTION_PATH, watch=True), WatchKind.PREFERRED_ELECTION
        )
        yield from self._forget_restarts_nobody_handled()
        # Everyone learns the brokers and every partition, then replicas and partitions start.
        self.batch.add_update_metadata(context.live_or_shutting_down_ids(), None)
        yield from self._start_replica_state_machine()
        yield from self._start_partition_state_machine()
        yield from self._abandon_reassignments(context.topics_to_delete)
        yield from self._initialize_partition_reassignments()
        yield from self.resume_topic_deletions()
        if preferred is not None:
            yield from self.on_preferred_replica_election()

    def _load_topics(self) -> Script:
        context = self.context
        names = yield Watched(ZkGetChildren(zk_data.TOPICS_PATH, watch=True), WatchKind.TOPICS)
        for topic, assignment in (yield from self._read_assignments(names)).items():
            # A reassignment in progress is resumed from the topic znode's adding/removing replicas.
            context.add_topic(
                topic, assignment.partitions, assignment.adding_replicas, assignment.removing_replicas
            )
        yield from self._load_topic_configs(list(context.assignments))
        yield from self._load_leadership(list(context.all_partitions()))

    def _load_leadership(self, tps: list[TopicPartition]) -> Script:
        """Read the partition state znodes of ``tps`` into the context (leader, ISR, epochs, and
        the zxid of each state's last write); a missing or unreadable one is left out."""
        context = self.context
        paths = {tp: zk_data.partition_state_path(tp.topic, tp.partition) for tp in tps}
        states = yield ZkGetMany(tuple(paths.values()))
        for tp, path in paths.items():
            found = states.get(path)
            if found is not None:
                leadership = self._decode_state(tp, found)
                if leadership is not None:
                    self._learned(tp, leadership)
                    context.leadership[tp] = leadership
                    context.state_mzxid[tp] = found[1].mzxid

    def _load_topic_configs(self, topics: list[str]) -> Script:
        paths = {topic: zk_data.topic_config_path(topic) for topic in topics}
        found = yield ZkGetMany(tuple(paths.values()))
        for topic, path in paths.items():
            value = found.get(path)
            if value is None:
                self.context.topic_configs.pop(topic, None)
            else:
                try:
                    self.context.topic_configs[topic] = zk_data.decode_topic_config(topic, value[0])
                except zk_data.ZkDataError as error:
                    self.log.error("ignoring unreadable topic config for %s: %s", topic, error)

    def _record(
        self,
        kind: str,
        tp: TopicPartition,
        leadership: LeaderIsrAndEpoch,
        reason: str,
        previous: LeaderIsrAndEpoch | None,
    ) -> None:
        """A state-change event (actors/server/state_changes.py) of a partition state this
        controller wrote or read."""
        if self.state_changes is None:
            return
        min_insync = self.context.topic_configs.get(tp.topic, {}).get("min.insync.replicas")
        self.state_changes.record(
            StateChange(
                ts_ms=self._wall_clock_ms(),
                kind=kind,
                tp=tp,
                leader=leadership.leader,
                leader_epoch=leadership.leader_epoch,
                zk_version=leadership.zk_version,
                isr=tuple(leadership.isr),
                previous_isr=None if previous is None else tuple(previous.isr),
                replicas=tuple(self.context.replicas(tp)) or None,
                min_insync_replicas=int(min_insync) if min_insync and min_insync.isdigit() else None,
                reason=reason,
            )
        )

    def _learned(self, tp: TopicPartition, read: LeaderIsrAndEpoch) -> None:
        """A partition state read from ZooKeeper that this controller has not seen: a leader's ISR
        change (it may have died before its own event was collected), or any state at failover."""
        known = self.context.leadership.get(tp)
        if known is None or (known.leader_epoch, known.zk_version) != (read.leader_epoch, read.zk_version):
            self._record("state_learned", tp, read, "zookeeper", known)

    def _decode_state(self, tp: TopicPartition, found: tuple[bytes, Stat]) -> LeaderIsrAndEpoch | None:
        data, stat = found
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        try:
            state = zk_data.decode_partition_state(data, path=path)
        except zk_data.ZkDataError as error:
            self.log.error("ignoring an unreadable partition state %s: %s", path, error)
            return None
        if state.controller_epoch > self.context.controller_epoch:
            # A newer controller already decided for this partition: we have been superseded.
            raise FencedError(f"{path} was written by controller epoch {state.controller_epoch}")
        return LeaderIsrAndEpoch(
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            controller_epoch=state.controller_epoch,
            zk_version=stat.version,
        )

    def _forget_restarts_nobody_handled(self) -> Script:
        """A broker that restarted while no controller was running (it was the controller, or
        every controller was down) was never handled as bounced: ZooKeeper still names it leader
        or ISR member as its previous process was, though the new process may have lost what was
        not flushed. A registration newer than the partition state's last write (broker epoch >
        mzxid) proves the re-registration; such replicas leave the ISR and lose the leadership,
        exactly what the controller does for a bounced broker it sees. Kafka 2.4 keeps them, and
        can elect a leader whose log lost acknowledged records.

        A re-registration also follows a session expiry, with the process and its log intact, so
        it proves no loss: only a registration that says ``unclean_start`` (a process that started
        uncleanly on a used log dir, or inherited that through a clean restart, and that no
        controller has seen yet) makes a suspect (seed 5859: broker 1's session expired and it
        re-registered intact while broker 3, which had just lost power, still looked alive through
        its previous process's session; taking 1 out left 3 to lead with an empty log; seed 4831:
        a clean restart kept what an unseen power loss before it had cost). A suspect
        leaves only when a live ISR member that is not one remains to lead. Otherwise removing it
        would leave the ISR to dead members only, and the suspect, perhaps the one intact copy,
        could not be elected (seed 4625: broker 3's session
        expired while the controller, broker 1, stalled; broker 1 then lost power; the next
        controller took 3 out of the ISR [1, 3], and broker 1 came back to lead with an empty log)."""
        context = self.context
        by_broker: dict[BrokerId, list[TopicPartition]] = {}
        for tp, leadership in sorted(context.leadership.items()):
            if tp.topic in context.topics_to_delete:
                continue
            written = context.state_mzxid.get(tp)
            if written is None:
                continue
            members = sorted({*leadership.isr, leadership.leader} - {NO_LEADER})
            suspects = [b for b in members if self._started_uncleanly_after(b, written)]
            trusted = [b for b in leadership.isr if context.is_live(b) and b not in suspects]
            if not trusted:
                continue
            for broker_id in suspects:
                by_broker.setdefault(broker_id, []).append(tp)
        for broker_id, tps in sorted(by_broker.items()):
            self.log.info(
                "broker %d restarted after the last change of %s: treating it as bounced",
                broker_id, ", ".join(str(tp) for tp in tps),
            )  # fmt: skip
            yield from self._remove_replica_from_isr(broker_id, tps)

    def _started_uncleanly_after(self, broker_id: BrokerId, zxid: int) -> bool:
        live = self.context.live_brokers.get(broker_id)
        return live is not None and live.broker_epoch > zxid and live.unclean_start

    def _start_replica_state_machine(self) -> Script:
        context = self.context
        online: list[tuple[TopicPartition, BrokerId]] = []
        offline: list[tuple[TopicPartition, BrokerId]] = []
        for tp in context.all_partitions():
            for replica in context.replicas(tp):
                if tp.topic in context.topics_to_delete:
                    # Whether an earlier controller's StopReplica(delete) succeeded is unknown:
                    # resume_topic_deletions asks again (deleting twice is harmless).
                    context.replica_states[(tp, replica)] = ReplicaMachineState.OFFLINE
                    continue
                if context.is_live(replica):
                    context.replica_states[(tp, replica)] = ReplicaMachineState.ONLINE
                    online.append((tp, replica))
                else:
                    context.replica_states[(tp, replica)] = ReplicaMachineState.OFFLINE
                    offline.append((tp, replica))
        self._replicas_online(online)
        yield from self._replicas_offline(offline)

    def _start_partition_state_machine(self) -> Script:
        context = self.context
        for tp in context.all_partitions():
            leadership = context.leadership.get(tp)
            if leadership is None:
                context.partition_states[tp] = PartitionMachineState.NEW
            elif leadership.has_leader and context.is_live(leadership.leader):
                context.partition_states[tp] = PartitionMachineState.ONLINE
            else:
                context.partition_states[tp] = PartitionMachineState.OFFLINE
        yield from self.trigger_online_partition_state_change()

    # ----------------------------------------------------------------------------- brokers

    def on_broker_change(self) -> Script:
        context = self.context
        registrations = yield Watched(
            ZkGetChildrenData(zk_data.BROKER_IDS_PATH, watch=True), WatchKind.BROKERS
        )
        current = self._live_brokers(registrations)
        previous = context.live_brokers
        new = sorted(set(current) - set(previous))
        dead = sorted(set(previous) - set(current))
        bounced = sorted(
            b for b in set(current) & set(previous) if current[b].broker_epoch > previous[b].broker_epoch
        )
        if not (new or dead or bounced):
            context.live_brokers = current
            return
        self.log.info("brokers changed: new %s, dead %s, bounced %s", new, dead, bounced)
        if dead or bounced:
            context.live_brokers = {b: live for b, live in current.items() if b not in bounced}
            yield from self.on_broker_failure([*dead, *bounced])
        context.live_brokers = current
        if new or bounced:
            yield from self.on_broker_startup([*new, *bounced])

    def on_broker_startup(self, brokers: list[BrokerId]) -> Script:
        context = self.context
        existing = [b for b in context.live_or_shutting_down_ids() if b not in brokers]
        self.batch.add_update_metadata(existing, [])
        self.batch.add_update_metadata(brokers, None)
        for broker_id in brokers:
            context.shutting_down.discard(broker_id)
        self._replicas_online([(tp, b) for b in brokers for tp in context.partitions_on_broker(b)])
        yield from self.trigger_online_partition_state_change()
        started = set(brokers)
        for broker_id in brokers:
            # Logs of replicas removed while the broker was down go now, unless the partition
            # came back to it meanwhile.
            for tp in sorted(context.stray_replicas.pop(broker_id, ())):
                if broker_id not in context.replicas(tp):
                    self.batch.add_stop_replica(broker_id, tp, delete=True)
        # Reassignments with a target replica on a started broker go on (Kafka's
        # maybeResumeReassignments): it may be the replica they wait for.
        for tp in sorted(context.partitions_being_reassigned):
            if started & set(context.full_assignment(tp).target):
                yield from self._on_partition_reassignment(tp, context.full_assignment(tp))
        self._retry_ineligible_replicas(lambda broker_id: broker_id in started)
        yield from self.resume_topic_deletions()

    def on_broker_failure(self, dead: list[BrokerId]) -> Script:
        context = self.context
        for broker_id in dead:
            context.shutting_down.discard(broker_id)
        dead_set = set(dead)
        leaderless = [
            tp
            for tp, leadership in sorted(context.leadership.items())
            if leadership.leader in dead_set and tp.topic not in context.topics_to_delete
        ]
        for tp in leaderless:
            context.set_partition_state(tp, PartitionMachineState.OFFLINE)
        yield from self.trigger_online_partition_state_change()
        offline = []
        for broker_id in dead:
            for tp in context.partitions_on_broker(broker_id):
                if tp.topic in context.topics_to_delete:
                    # Its StopReplica(delete), if any was sent, is lost with the broker: the
                    # deletion waits for the broker to come back (Kafka's failReplicaDeletion).
                    self._fail_replica_deletion(tp, broker_id)
                else:
                    offline.append((tp, broker_id))
        yield from self._replicas_offline(offline)
        if not leaderless:
            self.batch.add_update_metadata(context.live_or_shutting_down_ids(), [])

    # ---------------------------------------------------------------------- replica transitions

    def _replicas_online(self, replicas: Iterable[tuple[TopicPartition, BrokerId]]) -> None:
        """OnlineReplica: each live replica gets LeaderAndIsr for its partition (if it has a leader)."""
        context = self.context
        for tp, broker_id in replicas:
            if tp.topic in context.topics_to_delete:
                continue
            context.set_replica_state(tp, broker_id, ReplicaMachineState.ONLINE)
            leadership = context.leadership.get(tp)
            if leadership is not None:
                self.batch.add_leader_and_isr(context, [broker_id], tp, leadership)

    def _replicas_offline(self, replicas: list[tuple[TopicPartition, BrokerId]]) -> Script:
        """OfflineReplica: StopReplica (no delete) to the broker if it is still up, and removal from
        the ISR in ZooKeeper with a leader epoch bump (a one-member ISR is left as is)."""
        context = self.context
        by_broker: dict[BrokerId, list[TopicPartition]] = {}
        for tp, broker_id in replicas:
            context.set_replica_state(tp, broker_id, ReplicaMachineState.OFFLINE)
            if context.is_live(broker_id):
                self.batch.add_stop_replica(broker_id, tp, delete=False)
            by_broker.setdefault(broker_id, []).append(tp)
        for broker_id, tps in sorted(by_broker.items()):
            yield from self._remove_replica_from_isr(broker_id, tps)

    def _remove_replica_from_isr(
        self, broker_id: BrokerId, tps: list[TopicPartition], reason: str = "broker_down"
    ) -> Script:
        context = self.context

        def change(tp: TopicPartition, current: LeaderIsrAndEpoch) -> LeaderIsrAndEpoch | None:
            if broker_id not in current.isr and current.leader != broker_id:
                return None
            new_isr = (
                current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != broker_id)
            )
            new_leader = NO_LEADER if current.leader == broker_id else current.leader
            return LeaderIsrAndEpoch(
                leader=new_leader,
                leader_epoch=current.leader_epoch + 1,
                isr=new_isr,
                controller_epoch=context.controller_epoch,
                zk_version=current.zk_version,
            )

        updated = yield from self._update_leadership(tps, change, "controller_isr_shrink", lambda _: reason)
        for tp, leadership in updated.items():
            if not leadership.has_leader and tp in context.partition_states:
                context.partition_states[tp] = PartitionMachineState.OFFLINE
            others = [r for r in context.replicas(tp) if r != broker_id]
            self.batch.add_leader_and_isr(context, others, tp, leadership)

    # -------------------------------------------------------------------- partition transitions

    def trigger_online_partition_state_change(self) -> Script:
        """Move every New or Offline partition (not being deleted) to Online."""
        context = self.context
        candidates = [
            tp
            for tp, state in sorted(context.partition_states.items())
            if state in (PartitionMachineState.NEW, PartitionMachineState.OFFLINE)
            and tp.topic not in context.topics_to_delete
        ]
        new = [tp for tp in candidates if context.partition_states[tp] is PartitionMachineState.NEW]
        offline = [tp for tp in candidates if context.partition_states[tp] is PartitionMachineState.OFFLINE]
        yield from self._initialize_new_partitions(new)
        yield from self.elect_leaders(offline, ElectionKind.OFFLINE)

    def _initialize_new_partitions(self, partitions: list[TopicPartition]) -> Script:
        context = self.context
        creates: list[tuple[str, bytes]] = []
        planned: dict[str, tuple[TopicPartition, ElectionResult]] = {}
        for tp in partitions:
            # Kafka's isReplicaOnline(includeShuttingDownBrokers = false): a broker in controlled
            # shutdown neither leads nor joins the ISR of a new partition.
            result = new_partition_leader(context.replicas(tp), context.is_live_and_not_shutting_down)
            if result is None:
                self.log.warning(
                    "%s stays new: none of its replicas %s is alive", tp, list(context.replicas(tp))
                )
                continue
            path = zk_data.partition_state_path(tp.topic, tp.partition)
            creates.append(
                (
                    path,
                    zk_data.encode_partition_state(
                        zk_data.PartitionState(
                            leader=result.leader,
                            leader_epoch=0,
                            isr=result.isr,
                            controller_epoch=context.controller_epoch,
                        )
                    ),
                )
            )
            planned[path] = (tp, result)
        if not creates:
            return
        started = self._now_ns()
        outcomes: list[WriteOutcome] = yield ZkFencedCreateMany(self.fence, tuple(creates))
        for outcome in outcomes:
            tp, result = planned[outcome.path]
            if not outcome.ok:
                self.log.error("%s: could not create its state znode (%s)", tp, outcome.error)
                continue
            leadership = LeaderIsrAndEpoch(
                leader=result.leader,
                leader_epoch=0,
                isr=result.isr,
                controller_epoch=context.controller_epoch,
                zk_version=outcome.new_version or 0,
            )
            self._record("leader_election", tp, leadership, "new_partition", None)
            context.leadership[tp] = leadership
            context.set_partition_state(tp, PartitionMachineState.ONLINE)
            for replica in context.replicas(tp):
                if context.replica_state(tp, replica) is ReplicaMachineState.NON_EXISTENT:
                    context.set_replica_state(tp, replica, ReplicaMachineState.NEW)
                if context.is_live(replica):
                    context.set_replica_state(tp, replica, ReplicaMachineState.ONLINE)
            self.batch.add_leader_and_isr(context, context.replicas(tp), tp, leadership, is_new=True)
        self.leader_election_seconds.observe((self._now_ns() - started) / 1e9)
        for tp in sorted(tp for tp, _ in planned.values() if context.is_reassigning(tp)):
            # Reassigned before it had any state (no replica was live): its state znode exists
            # only now, and with it something to watch and complete on.
            yield from self._on_partition_reassignment(tp, context.full_assignment(tp))

    def elect_leaders(
        self, partitions: list[TopicPartition], kind: ElectionKind
    ) -> Generator[Step, Any, ElectionOutcome]:
        """Elect leaders with ``kind``'s algorithm; write them (conditionally, fenced); queue
        LeaderAndIsr to the partitions' replicas and UpdateMetadata to every broker."""
        context = self.context
        outcome = ElectionOutcome()
        if not partitions:
            return outcome
        if kind is ElectionKind.OFFLINE:
            # Kafka reads the topic's config from ZooKeeper when it elects: whether an unclean
            # election is allowed is the topic's setting now, not when the topic was loaded.
            yield from self._load_topic_configs(sorted({tp.topic for tp in partitions}))
        started = self._now_ns()
        unclean: set[TopicPartition] = set()

        def change(tp: TopicPartition, current: LeaderIsrAndEpoch) -> LeaderIsrAndEpoch | None:
            replicas = context.replicas(tp)
            if kind is ElectionKind.OFFLINE:
                # Shutting-down brokers are not live here (only the controlled-shutdown election
                # itself may consider them): elected, they would be moved again at once.
                result = offline_partition_leader(
                    replicas,
                    current.isr,
                    context.is_live_and_not_shutting_down,
                    unclean_leader_election_enable=self._unclean_enabled(tp.topic),
                )
                if self.elect_outside_isr:
                    live = [r for r in replicas if context.is_live(r)]
                    if live:
                        isr = tuple(dict.fromkeys([live[0], *(r for r in current.isr if context.is_live(r))]))
                        result = ElectionResult(live[0], isr)
            elif kind is ElectionKind.UNCLEAN:
                result = offline_partition_leader(
                    replicas,
                    current.isr,
                    context.is_live_and_not_shutting_down,
                    unclean_leader_election_enable=True,
                )
            elif kind is ElectionKind.PREFERRED:
                result = preferred_replica_leader(
                    replicas, current.isr, context.is_live_and_not_shutting_down
                )
            elif kind is ElectionKind.REASSIGNMENT:
                result = reassignment_leader(
                    context.full_assignment(tp).target, current.isr, context.is_live_and_not_shutting_down
                )
            else:
                result = controlled_shutdown_leader(
                    replicas, current.isr, context.is_live, lambda b: b in context.shutting_down
                )
            if result is None:
                outcome.failed.append(tp)
                return None
            if result.unclean:
                unclean.add(tp)
            return LeaderIsrAndEpoch(
                leader=result.leader,
                leader_epoch=current.leader_epoch + 1,
                isr=result.isr,
                controller_epoch=context.controller_epoch,
                zk_version=current.zk_version,
            )

        default_reason = _ELECTION_REASONS[kind]
        updated = yield from self._update_leadership(
            partitions, change, "leader_election", lambda tp: "unclean" if tp in unclean else default_reason
        )
        for tp, leadership in updated.items():
            context.set_partition_state(tp, PartitionMachineState.ONLINE)
            self.batch.add_leader_and_isr(context, context.replicas(tp), tp, leadership)
            outcome.elected.append(tp)
            if tp in unclean:
                self.unclean_leader_elections_total += 1
                self.log.warning("%s: unclean leader election of broker %d", tp, leadership.leader)
        for tp in outcome.failed:
            if (
                kind is ElectionKind.OFFLINE
                and context.partition_state(tp) is not PartitionMachineState.OFFLINE
            ):
                context.set_partition_state(tp, PartitionMachineState.OFFLINE)
            self.log.warning("%s: no eligible leader for a %s election", tp, kind.value)
        self.leader_election_seconds.observe((self._now_ns() - started) / 1e9)
        return outcome

    def _update_leadership(
        self,
        partitions: list[TopicPartition],
        change: Callable[[TopicPartition, LeaderIsrAndEpoch], LeaderIsrAndEpoch | None],
        event_kind: str,
        event_reason: Callable[[TopicPartition], str],
    ) -> Generator[Step, Any, dict[TopicPartition, LeaderIsrAndEpoch]]:
        """Read each partition's state znode, compute its change, write it conditionally (fenced);
        re-read and retry the ones another writer (a leader's ISR change) changed meanwhile, until
        each is written or needs no change (Kafka retries BADVERSION until done: giving up left a
        dead replica in the ISR until the next event)."""
        context = self.context
        updated: dict[TopicPartition, LeaderIsrAndEpoch] = {}
        remaining = list(partitions)
        while remaining:
            paths = {tp: zk_data.partition_state_path(tp.topic, tp.partition) for tp in remaining}
            found = yield ZkGetMany(tuple(paths.values()))
            updates: list[tuple[str, bytes, int]] = []
            planned: dict[str, tuple[TopicPartition, LeaderIsrAndEpoch]] = {}
            for tp, path in paths.items():
                current_raw = found.get(path)
                if current_raw is None:
                    continue
                current = self._decode_state(tp, current_raw)
                if current is None:
                    continue
                self._learned(tp, current)
                context.leadership[tp] = current
                target = change(tp, current)
                if target is None:
                    continue
                data = zk_data.encode_partition_state(
                    zk_data.PartitionState(
                        leader=target.leader, leader_epoch=target.leader_epoch, isr=target.isr,
                        controller_epoch=target.controller_epoch,
                    )
                )  # fmt: skip
                updates.append((path, data, current.zk_version))
                planned[path] = (tp, target)
            if not updates:
                break
            outcomes: list[WriteOutcome] = yield ZkFencedSetMany(self.fence, tuple(updates))
            retry: list[TopicPartition] = []
            for write in outcomes:
                tp, target = planned[write.path]
                if write.ok:
                    assert write.new_version is not None
                    leadership = LeaderIsrAndEpoch(
                        leader=target.leader, leader_epoch=target.leader_epoch, isr=target.isr,
                        controller_epoch=target.controller_epoch, zk_version=write.new_version,
                    )  # fmt: skip
                    self._record(event_kind, tp, leadership, event_reason(tp), context.leadership.get(tp))
                    context.leadership[tp] = leadership
                    updated[tp] = leadership
                elif write.error == "bad_version":
                    retry.append(tp)
            remaining = retry
        return updated

    # ------------------------------------------------------------------------------- topics

    def _read_assignments(self, topics: Iterable[str]) -> Generator[Step, Any, dict[str, TopicAssignment]]:
        """Each topic's assignment, read with a data watch (partition modifications)."""
        paths = {topic: zk_data.topic_path(topic) for topic in topics}
        found = yield Watched(ZkGetMany(tuple(paths.values()), watch=True), WatchKind.PARTITION_MODIFICATIONS)
        assignments: dict[str, TopicAssignment] = {}
        for topic, path in sorted(paths.items()):
            value = found.get(path)
            if value is None:
                continue  # deleted meanwhile
            try:
                assignments[topic] = zk_data.decode_topic_assignment(topic, value[0])
            except zk_data.ZkDataError as error:
                self.log.error("ignoring an unreadable topic assignment for %s: %s", topic, error)
        return assignments

    def on_topic_change(self) -> Script:
        context = self.context
        names = yield Watched(ZkGetChildren(zk_data.TOPICS_PATH, watch=True), WatchKind.TOPICS)
        fresh = [topic for topic in names if topic not in context.assignments]
        new_topics: list[str] = []
        for topic, assignment in (yield from self._read_assignments(fresh)).items():
            context.add_topic(topic, assignment.partitions)
            new_topics.append(topic)
        if not new_topics:
            return
        yield from self._load_topic_configs(new_topics)
        partitions = [tp for topic in new_topics for tp in context.partitions_of(topic)]
        for tp in partitions:
            context.set_partition_state(tp, PartitionMachineState.NEW)
            for replica in context.replicas(tp):
                context.set_replica_state(tp, replica, ReplicaMachineState.NEW)
        self.log.info("new topics %s: %d partition(s)", new_topics, len(partitions))
        yield from self._initialize_new_partitions(partitions)

    def on_partition_modifications(self, topic: str) -> Script:
        """Kafka's ``processPartitionModifications``: partitions added to an existing topic start
        like a new topic's (replicas assigned by whoever rewrote the assignment)."""
        context = self.context
        found = (yield from self._read_assignments([topic])).get(topic)
        if found is None or topic not in context.assignments:
            return  # deleted, or not yet known (the topic-change handler will load it)
        if topic in context.topics_to_delete:
            self.log.info("ignoring a partition change of %s: it is being deleted", topic)
            return
        known = context.assignments[topic]
        added = {p: replicas for p, replicas in found.partitions.items() if p not in known}
        if not added:
            return
        context.add_topic(topic, {**known, **added})
        partitions = [TopicPartition(topic, p) for p in sorted(added)]
        for tp in partitions:
            context.set_partition_state(tp, PartitionMachineState.NEW)
            for replica in context.replicas(tp):
                context.set_replica_state(tp, replica, ReplicaMachineState.NEW)
        self.log.info("new partitions of %s: %s", topic, sorted(added))
        yield from self._initialize_new_partitions(partitions)

    def on_topic_deletion(self) -> Script:
        context = self.context
        requested = yield Watched(
            ZkGetChildren(zk_data.DELETE_TOPICS_PATH, watch=True), WatchKind.DELETE_TOPICS
        )
        for topic in requested:
            if topic not in context.assignments:
                # Unknown topic: nothing to delete; drop the request.
                yield ZkDeleteRecursive(zk_data.delete_topic_path(topic), self.fence)
                continue
            if topic not in context.topics_to_delete:
                context.topics_to_delete.add(topic)
                self.log.info("topic %s marked for deletion", topic)
        yield from self._abandon_reassignments(context.topics_to_delete)
        # A new request also retries replicas whose deletion failed (Kafka retries them with the
        # next event that resumes deletions).
        self._retry_ineligible_replicas(lambda broker_id: True)
        yield from self.resume_topic_deletions()

    def resume_topic_deletions(self) -> Script:
        """Kafka's ``TopicDeletionManager.resumeDeletions``: a topic marked for deletion stays
        marked (its znodes stay, so it cannot be created again) until every one of its replicas
        has answered StopReplica(delete) successfully. Live replicas not yet asked are asked now; a
        replica on a dead broker, or whose broker failed the request, is ineligible until that
        broker starts again. Only then is the topic removed from ZooKeeper."""
        context = self.context
        for topic in sorted(context.topics_to_delete):
            replicas = [(tp, b) for tp in context.partitions_of(topic) for b in context.replicas(tp)]
            if all(
                context.replica_state(tp, b) is ReplicaMachineState.DELETION_SUCCESSFUL for tp, b in replicas
            ):
                yield from self._complete_topic_deletion(topic)
                continue
            for tp, broker_id in replicas:
                state = context.replica_state(tp, broker_id)
                if state in (ReplicaMachineState.DELETION_SUCCESSFUL, ReplicaMachineState.DELETION_STARTED):
                    continue
                if state is ReplicaMachineState.DELETION_INELIGIBLE:
                    continue
                self._move_replica(tp, broker_id, ReplicaMachineState.OFFLINE)
                if context.is_live(broker_id):
                    self._move_replica(tp, broker_id, ReplicaMachineState.DELETION_STARTED)
                    self.batch.add_stop_replica(broker_id, tp, delete=True)
                else:
                    self._move_replica(tp, broker_id, ReplicaMachineState.DELETION_INELIGIBLE)
            waiting = sorted(
                {
                    b
                    for tp, b in replicas
                    if context.replica_state(tp, b) is ReplicaMachineState.DELETION_INELIGIBLE
                }
            )
            if waiting:
                self.log.info("deletion of %s waits for replicas on brokers %s", topic, waiting)

    def on_unclean_leader_election_enabled(self, topic: str) -> Script:
        """Kafka's ``TopicUncleanLeaderElectionEnable``: a topic now allows unclean elections, so
        its offline partitions (no live ISR member) may get a leader now."""
        context = self.context
        if topic not in context.assignments or topic in context.topics_to_delete:
            return
        yield from self._load_topic_configs([topic])
        if self._unclean_enabled(topic):
            self.log.info("unclean leader election enabled for %s: electing its offline partitions", topic)
            yield from self.trigger_online_partition_state_change()

    def on_stop_replica_deletion_response(
        self, broker_id: BrokerId, partitions: Sequence[TopicPartition], failed: Collection[TopicPartition]
    ) -> Script:
        """Kafka's ``TopicDeletionStopReplicaResponseReceived``: each replica of ``partitions`` on
        ``broker_id`` was deleted, except those in ``failed`` (ineligible until the broker starts
        again, or the deletion is retried after a back-off)."""
        context = self.context
        for tp in partitions:
            if tp.topic not in context.topics_to_delete:
                continue
            if context.replica_state(tp, broker_id) is not ReplicaMachineState.DELETION_STARTED:
                continue
            if tp in failed:
                self.log.warning("replica %d of %s not deleted yet; asking again later", broker_id, tp)
                self._move_replica(tp, broker_id, ReplicaMachineState.DELETION_INELIGIBLE)
                # Kafka waits for the broker to restart (a storage error halts it); a replica whose
                # actor was busy or restarting is asked again after a back-off too.
                self.deletion_retry_wanted = True
            else:
                self._move_replica(tp, broker_id, ReplicaMachineState.DELETION_SUCCESSFUL)
        yield from self.resume_topic_deletions()

    def _complete_topic_deletion(self, topic: str) -> Script:
        context = self.context
        yield ZkDeleteRecursive(zk_data.topic_path(topic), self.fence)
        yield ZkDeleteRecursive(zk_data.topic_config_path(topic), self.fence)
        yield ZkDeleteRecursive(zk_data.delete_topic_path(topic), self.fence)
        context.remove_topic(topic)
        self.batch.deleted_topics.add(topic)
        self.batch.add_update_metadata(context.live_or_shutting_down_ids(), [])
        self.log.info("deleted topic %s: every replica deleted its log", topic)

    def _retry_ineligible_replicas(self, broker_matches: Callable[[BrokerId], bool]) -> None:
        """Ineligible replicas on live brokers ``broker_matches`` picks become eligible again
        (Kafka's ``markTopicEligibleForDeletion``); ``resume_topic_deletions`` asks them again."""
        context = self.context
        for topic in context.topics_to_delete:
            for tp in context.partitions_of(topic):
                for broker_id in context.replicas(tp):
                    if (
                        context.replica_state(tp, broker_id) is ReplicaMachineState.DELETION_INELIGIBLE
                        and context.is_live(broker_id)
                        and broker_matches(broker_id)
                    ):
                        self._move_replica(tp, broker_id, ReplicaMachineState.OFFLINE)

    def _fail_replica_deletion(self, tp: TopicPartition, broker_id: BrokerId) -> None:
        """A replica of a topic being deleted whose broker died: ineligible until it starts again."""
        state = self.context.replica_state(tp, broker_id)
        if state in (ReplicaMachineState.DELETION_SUCCESSFUL, ReplicaMachineState.DELETION_INELIGIBLE):
            return
        if state is not ReplicaMachineState.DELETION_STARTED:
            self._move_replica(tp, broker_id, ReplicaMachineState.OFFLINE)
        self._move_replica(tp, broker_id, ReplicaMachineState.DELETION_INELIGIBLE)

    def _move_replica(self, tp: TopicPartition, broker_id: BrokerId, target: ReplicaMachineState) -> None:
        if self.context.replica_state(tp, broker_id) is not target:
            self.context.set_replica_state(tp, broker_id, target)

    # ----------------------------------------------------------------- partition reassignment

    def on_alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest
    ) -> Generator[Step, Any, AlterPartitionReassignmentsResponse]:
        """Kafka's ``processApiPartitionReassignment`` (KIP-455): per partition, start a
        reassignment to the given replicas (replacing one in progress) or, with ``replicas=None``,
        cancel the one in progress. The latest request wins over ``/admin/reassign_partitions``:
        the partitions it names leave that znode."""
        wanted: dict[TopicPartition, tuple[BrokerId, ...] | None] = {}
        for partition in request.partitions:
            replicas = None if partition.replicas is None else tuple(partition.replicas)
            wanted[TopicPartition(partition.topic, partition.partition)] = replicas
        errors, planned = self._plan_reassignments(wanted)
        if planned:
            yield from self._remove_from_zk_reassignment(lambda tp, _: tp in planned)
        for tp, assignment in planned.items():
            started = yield from self._on_partition_reassignment(tp, assignment)
            if not started:
                errors[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        results = []
        for tp in wanted:
            code, message = errors.get(tp, (ErrorCode.NONE, None))
            results.append(
                PartitionResult(
                    topic=tp.topic, partition=tp.partition, error_code=code, error_message=message
                )
            )
        return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NONE, results=tuple(results))

    def on_list_partition_reassignments(
        self, request: ListPartitionReassignmentsRequest
    ) -> Generator[Step, Any, ListPartitionReassignmentsResponse]:
        """Kafka's ``processListPartitionReassignments``: the ongoing reassignments among the
        partitions asked about (all of them when ``partitions`` is None); others are left out."""
        context = self.context
        asked = (
            sorted(context.partitions_being_reassigned)
            if request.partitions is None
            else list(dict.fromkeys(TopicPartition(tp.topic, tp.partition) for tp in request.partitions))
        )
        ongoing = []
        for tp in asked:
            assignment = context.full_assignment(tp)
            if assignment.is_being_reassigned:
                ongoing.append(
                    OngoingPartitionReassignment(
                        topic=tp.topic,
                        partition=tp.partition,
                        replicas=assignment.replicas,
                        adding_replicas=assignment.adding,
                        removing_replicas=assignment.removing,
                    )
                )
        yield from ()  # a script, though it needs nothing from ZooKeeper
        return ListPartitionReassignmentsResponse(error_code=ErrorCode.NONE, reassignments=tuple(ongoing))

    def on_zk_partition_reassignment(self) -> Generator[Step, Any, set[TopicPartition]]:
        """Kafka's ``processZkPartitionReassignment``: the ``/admin/reassign_partitions`` znode
        names target replicas; each valid one starts (or replaces) a reassignment, the others
        leave the znode. As in Kafka, a znode is acted on when it appears (or at failover): a later
        change of its data is not, so the znode's creation zxid is remembered. Returns the
        partitions whose reassignment started."""
        stat = yield Watched(
            ZkExists(zk_data.REASSIGN_PARTITIONS_PATH, watch=True), WatchKind.PARTITION_REASSIGNMENT
        )
        if stat is None or stat.czxid == self._zk_reassignment_czxid:
            return set()
        self._zk_reassignment_czxid = stat.czxid
        try:
            data, _ = yield ZkGet(zk_data.REASSIGN_PARTITIONS_PATH)
        except NoNodeError:
            return set()
        try:
            requested = zk_data.decode_reassign_partitions(data)
        except zk_data.ZkDataError as error:
            # Left in place it would block every later reassignment through ZooKeeper.
            self.log.error("deleting an unreadable reassignment request: %s", error)
            yield ZkDeleteRecursive(zk_data.REASSIGN_PARTITIONS_PATH, self.fence)
            return set()
        wanted: dict[TopicPartition, tuple[BrokerId, ...] | None] = {
            TopicPartition(raw.topic, raw.partition): replicas for raw, replicas in requested.items()
        }
        errors, planned = self._plan_reassignments(wanted)
        started: set[TopicPartition] = set()
        for tp, assignment in planned.items():
            if (yield from self._on_partition_reassignment(tp, assignment)):
                started.add(tp)
            else:
                errors[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        if errors:
            self.log.warning(
                "reassignments in %s refused: %s",
                zk_data.REASSIGN_PARTITIONS_PATH,
                ", ".join(f"{tp}: {code.name}" for tp, (code, _) in sorted(errors.items())),
            )
            yield from self._remove_from_zk_reassignment(lambda tp, _: tp in errors)
        return started

    def on_partition_reassignment_isr_change(self, tp: TopicPartition) -> Script:
        """Kafka's ``processPartitionReassignmentIsrChange``: the state znode of a reassigning
        partition changed; once every target replica is in the ISR the reassignment completes."""
        if not self.context.is_reassigning(tp):
            return
        if (yield from self._reassignment_complete(tp, self.context.full_assignment(tp))):
            yield from self._on_partition_reassignment(tp, self.context.full_assignment(tp))

    def _plan_reassignments(
        self, wanted: dict[TopicPartition, tuple[BrokerId, ...] | None]
    ) -> tuple[dict[TopicPartition, tuple[ErrorCode, str | None]], dict[TopicPartition, ReplicaAssignment]]:
        """Validate each request (Kafka's ``replicasAreValid`` and ``maybeBuildReassignment``)
        and compute the assignment to move to: ``None`` cancels (back to the original replicas)."""
        context = self.context
        errors: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        planned: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in wanted.items():
            current = context.full_assignment(tp)
            if not current.replicas or tp.topic in context.topics_to_delete:
                errors[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif target is None:
                if current.is_being_reassigned:
                    planned[tp] = current.reassign_to(current.origin)
                else:
                    errors[tp] = (
                        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                        f"No reassignment of {tp} is in progress.",
                    )
            elif not target or len(set(target)) != len(target) or any(r < 0 for r in target):
                errors[tp] = (
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The replica list {list(target)} must be non-empty, without duplicates or negative ids.",
                )
            else:
                assignment = current.reassign_to(target)
                missing = sorted(r for r in assignment.adding if not context.is_live(r))
                if missing:
                    errors[tp] = (
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Replica(s) {missing} of {list(target)} are not live brokers.",
                    )
                else:
                    planned[tp] = assignment
        return errors, planned

    def _on_partition_reassignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> Generator[Step, Any, bool]:
        """Kafka's ``onPartitionReassignment`` (KIP-455). Returns False when the topic's znode is
        gone (deleted under us).

        First the assignment in ZooKeeper, then in memory, moves to ``assignment`` (RS = TRS then
        the rest of ORS, with its adding and removing replicas); replicas of a replaced or
        cancelled reassignment that are no longer in RS are stopped and deleted. Then, while some
        target replica is not in the ISR: the leader epoch goes up and RS gets LeaderAndIsr (so the
        leader learns the new followers and the adding replicas start fetching), and the adding
        replicas become NewReplica. Once every target replica is in the ISR: the adding replicas
        go online, RS = TRS in memory, the leader moves to a live in-ISR target replica if it is
        being removed or dead (else its epoch goes up), the removed replicas go offline (out of the
        ISR) and are deleted, ZooKeeper gets RS = TRS with no adding/removing replicas, and the
        partition leaves ``/admin/reassign_partitions``. ZooKeeper's RS changes to TRS last: until
        then it is the only record of ORS, so a new controller can resume or cancel."""
        context = self.context
        current = context.full_assignment(tp)
        if current != assignment:
            if not (yield from self._write_assignment(tp, assignment)):
                return False
            context.set_full_assignment(tp, assignment)
            self.log.info(
                "%s: reassigning from %s to %s (adding %s, removing %s)",
                tp, list(assignment.origin), list(assignment.target), list(assignment.adding),
                list(assignment.removing),
            )  # fmt: skip
            unneeded = [r for r in current.replicas if r not in assignment.replicas]
            if unneeded:
                yield from self._stop_removed_replicas(tp, unneeded)
                if context.partition_state(tp) is PartitionMachineState.OFFLINE:
                    # It led (an added replica elected while the leader was down): elect again.
                    yield from self.elect_leaders([tp], ElectionKind.OFFLINE)
        context.partitions_being_reassigned.add(tp)
        if not (yield from self._reassignment_complete(tp, assignment)):
            yield from self._bump_leader_epoch(tp, context.replicas(tp))
            for replica in assignment.adding:
                if context.replica_state(tp, replica) is ReplicaMachineState.NON_EXISTENT:
                    context.set_replica_state(tp, replica, ReplicaMachineState.NEW)
            return True
        completed = ReplicaAssignment(assignment.target)
        leadership = context.leadership.get(tp)
        leader = NO_LEADER if leadership is None else leadership.leader
        context.set_full_assignment(tp, completed)
        if leader in completed.replicas and context.is_live_and_not_shutting_down(leader):
            yield from self._bump_leader_epoch(tp, completed.replicas)
        else:
            # The leader is being removed, or is dead: a live in-ISR target replica takes over. If
            # none can, the reassignment stays in progress and is tried again on its next trigger.
            outcome = yield from self.elect_leaders([tp], ElectionKind.REASSIGNMENT)
            if not outcome.elected:
                context.set_full_assignment(tp, assignment)
                self.log.warning(
                    "%s: no live in-sync target replica in %s can lead yet", tp, list(completed.replicas)
                )
                return True
        for replica in assignment.adding:
            if context.replica_state(tp, replica) is ReplicaMachineState.NON_EXISTENT:
                context.set_replica_state(tp, replica, ReplicaMachineState.NEW)
        self._replicas_online([(tp, r) for r in assignment.adding if context.is_live(r)])
        yield from self._stop_removed_replicas(tp, list(assignment.removing))
        if not (yield from self._write_assignment(tp, completed)):
            return False
        context.partitions_being_reassigned.discard(tp)
        yield from self._remove_from_zk_reassignment(
            lambda found, replicas: found == tp and replicas == completed.replicas
        )
        self.batch.add_update_metadata(context.live_or_shutting_down_ids(), [tp])
        self.log.info("%s: reassignment complete; replicas %s", tp, list(completed.replicas))
        return True

    def _reassignment_complete(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> Generator[Step, Any, bool]:
        """Every target replica is in the ISR, as the state znode says now (read with a watch,
        Kafka's PartitionReassignmentIsrChangeHandler, while the partition is reassigning)."""
        if not assignment.is_being_reassigned:
            return True
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        try:
            found = yield Watched(ZkGet(path, watch=True), WatchKind.PARTITION_REASSIGNMENT_ISR_CHANGE)
        except NoNodeError:
            return False  # not started yet: no state, so no ISR
        leadership = self._decode_state(tp, found)
        if leadership is None:
            return False
        self._learned(tp, leadership)
        self.context.leadership[tp] = leadership
        return set(assignment.target) <= set(leadership.isr)

    def _bump_leader_epoch(self, tp: TopicPartition, recipients: Sequence[BrokerId]) -> Script:
        """Kafka's ``updateLeaderEpochAndSendRequest``: the same leader and ISR at the next leader
        epoch, sent to ``recipients`` with the current assignment (a partition without a leader is
        left to its election, which sends the assignment too)."""
        context = self.context

        def change(_: TopicPartition, current: LeaderIsrAndEpoch) -> LeaderIsrAndEpoch | None:
            if not current.has_leader:
                return None
            return LeaderIsrAndEpoch(
                leader=current.leader,
                leader_epoch=current.leader_epoch + 1,
                isr=current.isr,
                controller_epoch=context.controller_epoch,
                zk_version=current.zk_version,
            )

        updated = yield from self._update_leadership(
            [tp], change, "leader_epoch_bump", lambda _: "reassignment"
        )
        leadership = updated.get(tp)
        if leadership is not None:
            self.batch.add_leader_and_isr(context, recipients, tp, leadership)

    def _stop_removed_replicas(self, tp: TopicPartition, replicas: list[BrokerId]) -> Script:
        """Kafka's ``stopRemovedReplicasOfReassignedPartition``: offline (StopReplica, out of the
        ISR), then deleted (StopReplica delete=true) without waiting for the answer, then gone. A
        replica on a dead broker keeps its log there until that broker starts again (Kafka's
        keeps it for good)."""
        context = self.context
        removed = [
            r for r in replicas if context.replica_state(tp, r) is not ReplicaMachineState.NON_EXISTENT
        ]
        yield from self._replicas_offline([(tp, r) for r in removed])
        for replica in removed:
            context.set_replica_state(tp, replica, ReplicaMachineState.DELETION_STARTED)
            if context.is_live(replica):
                self.batch.add_stop_replica(replica, tp, delete=True)
            else:
                context.stray_replicas.setdefault(replica, set()).add(tp)
            context.set_replica_state(tp, replica, ReplicaMachineState.DELETION_SUCCESSFUL)
            context.set_replica_state(tp, replica, ReplicaMachineState.NON_EXISTENT)

    def _write_assignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> Generator[Step, Any, bool]:
        """The topic znode with ``tp`` at ``assignment`` (fenced, whatever its version, as Kafka's
        ``setTopicAssignmentRaw``). False when the znode is gone."""
        context = self.context
        partitions = dict(context.assignments.get(tp.topic, {}))
        adding = {p.partition: r for p, r in context.adding_replicas.items() if p.topic == tp.topic}
        removing = {p.partition: r for p, r in context.removing_replicas.items() if p.topic == tp.topic}
        partitions[tp.partition] = assignment.replicas
        adding[tp.partition] = assignment.adding
        removing[tp.partition] = assignment.removing
        data = zk_data.encode_topic_assignment(
            TopicAssignment(partitions=partitions, adding_replicas=adding, removing_replicas=removing)
        )
        outcomes: list[WriteOutcome] = yield ZkFencedSetMany(
            self.fence, ((zk_data.topic_path(tp.topic), data, ANY_VERSION),)
        )
        if not outcomes[0].ok:
            self.log.error("%s: cannot write its assignment (%s)", tp, outcomes[0].error)
            return False
        return True

    def _remove_from_zk_reassignment(
        self, remove: Callable[[TopicPartition, tuple[BrokerId, ...]], bool]
    ) -> Script:
        """Kafka's ``maybeRemoveFromZkReassignment``: the partitions ``remove`` picks leave
        ``/admin/reassign_partitions``; the znode is deleted when none is left."""
        try:
            data, _ = yield ZkGet(zk_data.REASSIGN_PARTITIONS_PATH)
            requested = zk_data.decode_reassign_partitions(data)
        except NoNodeError:
            return
        except zk_data.ZkDataError:
            requested = {}
        kept = {
            raw: replicas
            for raw, replicas in requested.items()
            if not remove(TopicPartition(raw.topic, raw.partition), replicas)
        }
        if len(kept) == len(requested) and requested:
            return
        if kept:
            outcomes: list[WriteOutcome] = yield ZkFencedSetMany(
                self.fence,
                ((zk_data.REASSIGN_PARTITIONS_PATH, zk_data.encode_reassign_partitions(kept), ANY_VERSION),),
            )
            if outcomes[0].ok:
                return
        yield ZkDeleteRecursive(zk_data.REASSIGN_PARTITIONS_PATH, self.fence)

    def _initialize_partition_reassignments(self) -> Script:
        """Kafka's ``initializePartitionReassignments`` at failover: the reassignments named in
        ``/admin/reassign_partitions`` start (or resume, replacing what the topic znodes say),
        then every other partition the topic znodes show reassigning resumes."""
        started = yield from self.on_zk_partition_reassignment()
        for tp in sorted(self.context.partitions_being_reassigned - started):
            yield from self._on_partition_reassignment(tp, self.context.full_assignment(tp))

    def _abandon_reassignments(self, topics: Collection[str]) -> Script:
        """A topic marked for deletion: its reassignments end where they are (every replica of RS,
        added ones included, is deleted with the topic) and leave ``/admin/reassign_partitions``.
        Kafka 2.4 instead holds the deletion until they complete, which never happens when a
        target replica's broker is gone."""
        context = self.context
        dropped = {tp for tp in context.partitions_being_reassigned if tp.topic in topics}
        if not dropped:
            return
        for tp in dropped:
            context.partitions_being_reassigned.discard(tp)
            context.adding_replicas.pop(tp, None)
            context.removing_replicas.pop(tp, None)
        self.log.info(
            "reassignments of %s end: the topic is being deleted", sorted(str(tp) for tp in dropped)
        )
        yield from self._remove_from_zk_reassignment(lambda tp, _: tp.topic in topics)

    # ---------------------------------------------------------------- ISR change notifications

    def on_isr_change_notification(self) -> Script:
        context = self.context
        names = yield Watched(
            ZkGetChildren(zk_data.ISR_CHANGE_NOTIFICATION_PATH, watch=True), WatchKind.ISR_CHANGES
        )
        if not names:
            return
        paths = [
            zk_data.isr_change_notification_path(zk_data.isr_change_sequence_number(name)) for name in names
        ]
        found = yield ZkGetMany(tuple(paths))
        changed: set[TopicPartition] = set()
        for path, value in found.items():
            if value is None:
                continue
            try:
                changed |= {
                    TopicPartition(tp.topic, tp.partition)
                    for tp in zk_data.decode_isr_change_notification(value[0], path=path)
                }
            except zk_data.ZkDataError as error:
                self.log.error("ignoring an unreadable ISR change notification %s: %s", path, error)
        known = sorted(tp for tp in changed if tp in context.leadership or context.replicas(tp))
        if known:
            yield from self._load_leadership(known)
            self.batch.add_update_metadata(context.live_or_shutting_down_ids(), known)
        for tp in known:
            # A reassignment waits for its target replicas to join the ISR.
            if context.is_reassigning(tp):
                yield from self.on_partition_reassignment_isr_change(tp)
        # Deleted once processed. Not in a ``finally``: a script closed when the controller resigns
        # must not yield (close() would raise); a notification left behind is read again by the
        # next controller, or removed at its failover.
        for path in paths:
            yield ZkDeleteRecursive(path, self.fence)

    # ------------------------------------------------------------------ controlled shutdown

    def on_controlled_shutdown(
        self, broker_id: BrokerId, broker_epoch: int
    ) -> Generator[Step, Any, tuple[ErrorCode, list[TopicPartition]]]:
        context = self.context
        live = context.live_brokers.get(broker_id)
        if live is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch < live.broker_epoch:  # no -1 bypass (docs/security.md)
            return ErrorCode.STALE_BROKER_EPOCH, []
        context.shutting_down.add(broker_id)
        hosted = [
            tp
            for tp in context.partitions_on_broker(broker_id)
            if len(context.replicas(tp)) > 1 and tp.topic not in context.topics_to_delete
        ]
        led = [
            tp
            for tp in hosted
            if (lead := context.leadership.get(tp)) is not None and lead.leader == broker_id
        ]
        leading = set(led)  # a set: a list scan per hosted partition was quadratic
        followed = [tp for tp in hosted if tp not in leading]
        yield from self.elect_leaders(led, ElectionKind.CONTROLLED_SHUTDOWN)
        for tp in followed:
            self.batch.add_stop_replica(broker_id, tp, delete=False)
        yield from self._replicas_offline_for_shutdown(broker_id, followed)
        remaining = [tp for tp in context.partitions_led_by(broker_id) if len(context.replicas(tp)) > 1]
        return ErrorCode.NONE, remaining

    def _replicas_offline_for_shutdown(self, broker_id: BrokerId, tps: list[TopicPartition]) -> Script:
        for tp in tps:
            self.context.set_replica_state(tp, broker_id, ReplicaMachineState.OFFLINE)
        yield from self._remove_replica_from_isr(broker_id, tps, "controlled_shutdown")

    # --------------------------------------------------------------- preferred leader election

    def on_preferred_replica_election(self) -> Script:
        """The ``/admin/preferred_replica_election`` znode: elect the preferred replicas it names,
        then delete it."""
        stat = yield Watched(
            ZkExists(zk_data.PREFERRED_REPLICA_ELECTION_PATH, watch=True), WatchKind.PREFERRED_ELECTION
        )
        if stat is None:
            return
        try:
            data, _ = yield ZkGet(zk_data.PREFERRED_REPLICA_ELECTION_PATH)
            requested = zk_data.decode_preferred_replica_election(data)
        except (NoNodeError, zk_data.ZkDataError) as error:
            self.log.error("cannot read the preferred replica election request: %s", error)
            requested = frozenset()
        context = self.context
        partitions = sorted(
            tp
            for raw in requested
            if (tp := TopicPartition(raw.topic, raw.partition)) in context.leadership
            and tp.topic not in context.topics_to_delete
            and not context.is_reassigning(tp)
            and context.leadership[tp].leader != context.replicas(tp)[0]
        )
        yield from self.elect_leaders(partitions, ElectionKind.PREFERRED)
        yield ZkDeleteRecursive(zk_data.PREFERRED_REPLICA_ELECTION_PATH, self.fence)
        # Re-arm the watch for the next request.
        yield Watched(
            ZkExists(zk_data.PREFERRED_REPLICA_ELECTION_PATH, watch=True), WatchKind.PREFERRED_ELECTION
        )

    def on_elect_leaders(self, request: ElectLeadersRequest) -> Generator[Step, Any, ElectLeadersResponse]:
        """Kafka's ``processReplicaLeaderElection`` for the ElectLeaders API (KIP-460).

        Preferred: a partition already led by its preferred replica needs no election
        (ELECTION_NOT_NEEDED); one whose preferred replica is not live and in the ISR cannot have
        it (PREFERRED_LEADER_NOT_AVAILABLE). Unclean: only a partition without a live leader is
        elected, by the offline algorithm with unclean elections allowed whatever the topic's
        config (an ISR member first, else the first live replica); ELIGIBLE_LEADERS_NOT_AVAILABLE
        when no replica is live. Unknown partitions are UNKNOWN_TOPIC_OR_PARTITION, those of a
        topic being deleted INVALID_TOPIC_EXCEPTION. ``partitions=None`` means every partition,
        and then (as Kafka's KafkaApis does) those needing no election are left out."""
        context = self.context
        if request.election_type == PREFERRED_ELECTION_TYPE:
            kind, failure = ElectionKind.PREFERRED, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        elif request.election_type == UNCLEAN_ELECTION_TYPE:
            kind, failure = ElectionKind.UNCLEAN, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        else:
            return ElectLeadersResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"unknown election type {request.election_type} (0 preferred, 1 unclean)",
            )
        everything = request.partitions is None
        wanted = (
            context.all_partitions()
            if request.partitions is None
            else list(dict.fromkeys(TopicPartition(tp.topic, tp.partition) for tp in request.partitions))
        )
        errors: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        electable: list[TopicPartition] = []
        for tp in wanted:
            leadership = context.leadership.get(tp)
            if not context.replicas(tp):
                errors[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif tp.topic in context.topics_to_delete:
                errors[tp] = (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
            elif leadership is None:
                # Not started yet (no live replica when it was created): nothing to elect from.
                errors[tp] = (failure, f"{tp} has no leader and ISR state yet")
            elif self._election_not_needed(tp, kind, leadership.leader):
                errors[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
            else:
                electable.append(tp)
        outcome = yield from self.elect_leaders(electable, kind)
        elected = set(outcome.elected)
        for tp in electable:
            if tp not in elected:
                errors[tp] = (
                    failure,
                    f"Failed to elect leader for partition {tp} under strategy {kind.name}",
                )
        results = []
        for tp in wanted:
            code, message = errors.get(tp, (ErrorCode.NONE, None))
            if everything and code is ErrorCode.ELECTION_NOT_NEEDED:
                continue
            results.append(
                PartitionResult(
                    topic=tp.topic, partition=tp.partition, error_code=code, error_message=message
                )
            )
        if electable:
            self.log.info(
                "%s leader election asked for %d partition(s): %d elected",
                kind.value, len(electable), len(elected),
            )  # fmt: skip
        return ElectLeadersResponse(error_code=ErrorCode.NONE, results=tuple(results))

    def _election_not_needed(self, tp: TopicPartition, kind: ElectionKind, leader: BrokerId) -> bool:
        """Preferred: led by its preferred replica already. Unclean: its leader is live."""
        if kind is ElectionKind.PREFERRED:
            return leader == self.context.replicas(tp)[0]
        return self.context.is_live_and_not_shutting_down(leader)

    def on_auto_rebalance(self, imbalance_percentage: int) -> Script:
        """docs/controller.md §7: per preferred broker, rebalance when too many of its partitions are led
        elsewhere."""
        context = self.context
        if context.partitions_being_reassigned:
            return  # Kafka 2.4 rebalances only while no reassignment is in progress
        by_preferred: dict[BrokerId, list[TopicPartition]] = {}
        for tp in context.all_partitions():
            replicas = context.replicas(tp)
            if replicas and tp.topic not in context.topics_to_delete and tp in context.leadership:
                by_preferred.setdefault(replicas[0], []).append(tp)
        to_elect: list[TopicPartition] = []
        for broker_id, tps in sorted(by_preferred.items()):
            if not context.is_live_and_not_shutting_down(broker_id):
                continue
            not_led = [tp for tp in tps if context.leadership[tp].leader != broker_id]
            if len(not_led) / len(tps) > imbalance_percentage / 100:
                to_elect += [tp for tp in not_led if broker_id in context.leadership[tp].isr]
        if to_elect:
            self.log.info("auto leader rebalance: preferred election for %d partition(s)", len(to_elect))
            yield from self.elect_leaders(to_elect, ElectionKind.PREFERRED)
