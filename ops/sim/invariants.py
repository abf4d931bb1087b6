"""The invariants the simulation checks, each under its Kafka or TLA+ name.

Checked after every settled step of virtual time (cheap, from the actors' state and ZooKeeper):

* ``SingleLeaderPerEpoch``: at most one broker ever leads a partition in one leader epoch.
* ``MonotonicHighWatermark``: a leader's high watermark never moves backwards within its epoch
  (per leader process).
* ``LeaderInIsr``: ZooKeeper's leader is in ZooKeeper's ISR, and a leader is in its own ISR.
* ``IsrWithinReplicas``: the ISR holds assigned replicas only.
* ``ZkIsrIsTheLeaders``: where ZooKeeper and the leader agree on the leader epoch, ZooKeeper's ISR
  is the leader's committed ISR, or the one it proposed (its write landed before its answer).
* ``SingleActiveController``: at most one active controller per controller epoch.
* ``AcknowledgedOnMinInsyncReplicas``: when its acknowledgement arrives, an acks=all record is in
  the logs of at least ``min.insync.replicas`` replicas (Kafka's NOT_ENOUGH_REPLICAS rule).

Checked every second of virtual time and at the end (they read logs):

* ``NoLostAcknowledgedRecord``: every record acknowledged with acks=all is in the current
  leader's log at the offset it was acknowledged at (topics that never allowed unclean elections
  or ``min.insync.replicas`` = 1).
* ``NoDuplicateRecord``: a value is in a leader's log at most once (idempotent producers).
* ``StrongIsr``: every ISR member holds every record below the leader's high watermark, as the
  leader has it (``min.insync.replicas`` ≥ 2, no unclean election; members that lost power since
  they joined the ISR are exempt, as Kafka's durability model exempts them).
* ``ConsumedRecordsStay``: a record a consumer read is still at its offset (a consumer never
  sees a record above the high watermark, or one later truncated).
* ``DeletedTopicStaysDeleted``: a topic created again holds none of the deleted topic's records.

Checked once the faults are healed:

* ``Liveness``: within a bound, every partition has a live leader and its whole replica set in
  the ISR, and every replica's log is the leader's; no reassignment is left in progress (the topic
  znodes name no adding or removing replicas, ``/admin/reassign_partitions`` is gone).
* ``ReassignmentReachesItsTarget``: then a partition whose last reassignment request was accepted
  (and not cancelled since) has the requested replicas as its assignment in ZooKeeper; one whose
  last accepted request was a cancellation has the replicas it had before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.replica.partition import PartitionActor
from actors.server.replica.partition_state import CommittedIsr, PendingExpandIsr, PendingShrinkIsr, Role
from ops.sim.cluster import SimCluster
from ops.sim.workload import ConsumerClient, ProducerClient, parse_value
from runtime.storage.log import Log
from runtime.storage.records import iterate_batches

__all__ = ["Checker", "TopicModel", "Violation", "log_values"]


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: str
    at_ms: int
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant} at {self.at_ms} ms: {self.detail}"


@dataclass
class TopicModel:
    """What the workload knows of one topic slot."""

    name: str
    generation: int = 0
    alive: bool = False
    partitions: int = 0
    replication_factor: int = 0
    # Unclean elections or min.insync.replicas=1 were allowed at some point: Kafka promises
    # nothing about acknowledged records then, so the data invariants skip this generation.
    tainted: bool = False
    # A create or delete request is in flight.
    busy: bool = False
    # The czxid of /brokers/topics/<name> for this generation: a create answered "already
    # exists" is this generation again when the znode is the same one (its deletion never took).
    znode_czxid: int = -1
    incarnation: int = 0
    # Every producer of this generation (their acknowledged records are checked) and the ones the
    # plan's produce actions use.
    producers: list[ProducerClient] = field(default_factory=list)
    active_producers: list[ProducerClient] = field(default_factory=list)
    consumer: ConsumerClient | None = None
    # partition -> the assignment its reassignment requests should end with (None: unknown, e.g.
    # a request whose answer was lost), for this generation.
    reassignment_targets: dict[int, tuple[int, ...] | None] = field(default_factory=dict)

    def tps(self) -> list[TopicPartition]:
        return [TopicPartition(self.name, p) for p in range(self.partitions)]


def log_values(log: Log, *, below: int | None = None, start: int | None = None) -> dict[int, bytes | None]:
    """offset -> value of every record in ``log`` (from ``start``, below ``below`` if given)."""
    values: dict[int, bytes | None] = {}
    start = log.log_start_offset if start is None else max(start, log.log_start_offset)
    end = log.log_end_offset if below is None else min(below, log.log_end_offset)
    while start < end:
        info = log.read(start, max_bytes=1 << 30, max_offset=end)
        if not info.records:
            break
        for batch in iterate_batches(info.records):
            for record in batch.records():
                if record.offset < end:
                    values[record.offset] = record.value
            start = max(start, batch.header.last_offset + 1)
    return values


class Failed(Exception):
    """An invariant does not hold; the run stops here."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation


@dataclass
class Checker:
    cluster: SimCluster
    topics: dict[int, TopicModel]
    # broker -> virtual time of its last power loss
    power_lost_at: dict[int, int] = field(default_factory=dict)
    on_change: Callable[[str], None] | None = None
    checks_total: int = 0
    _leaders: dict[tuple[TopicPartition, int], int] = field(default_factory=dict)
    _high_watermarks: dict[tuple[TopicPartition, int, int], int] = field(default_factory=dict)
    _zk_seen: dict[TopicPartition, tuple[int, int, tuple[int, ...]]] = field(default_factory=dict)
    _isr_joined_at: dict[tuple[TopicPartition, int], int] = field(default_factory=dict)
    # (partition, member, leader, leader epoch) -> when that leader first had the member in its
    # maximal ISR: an expansion is decided then, though ZooKeeper may record it later.
    _isr_proposed_at: dict[tuple[TopicPartition, int, int, int], int] = field(default_factory=dict)
    _controllers: dict[int, int] = field(default_factory=dict)
    # topic -> the czxid of its /brokers/topics znode when last seen: a new one is a new generation.
    _generations: dict[str, int] = field(default_factory=dict)
    _last_step_ms: int = -1
    _decoded: dict[str, tuple[int, tuple[zk_data.PartitionState, int]]] = field(default_factory=dict)

    # ------------------------------------------------------------------------------ helpers

    def fail(self, invariant: str, detail: str) -> None:
        raise Failed(Violation(invariant, self.cluster.clock.now_ms(), detail))

    @property
    def _by_name(self) -> dict[str, TopicModel]:
        return {topic.name: topic for topic in self.topics.values() if topic.alive}

    def alive_topics(self) -> Iterable[TopicModel]:
        return (topic for topic in self.topics.values() if topic.alive)

    def zk_state(self, tp: TopicPartition) -> tuple[zk_data.PartitionState, int] | None:
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        found = self.cluster.zookeeper.peek(path)
        if found is None:
            return None
        data, stat = found
        cached = self._decoded.get(path)
        if cached is not None and cached[0] == stat.mzxid:
            return cached[1]
        decoded = zk_data.decode_partition_state(data, path=path), stat.version
        self._decoded[path] = (stat.mzxid, decoded)
        return decoded

    def forget_topic(self, name: str) -> None:
        """A topic was deleted: its epochs start again at 0 when it is created again."""
        for leader_key in [key for key in self._leaders if key[0].topic == name]:
            del self._leaders[leader_key]
        for hw_key in [key for key in self._high_watermarks if key[0].topic == name]:
            del self._high_watermarks[hw_key]
        for joined_key in [key for key in self._isr_joined_at if key[0].topic == name]:
            del self._isr_joined_at[joined_key]
        for proposed_key in [key for key in self._isr_proposed_at if key[0].topic == name]:
            del self._isr_proposed_at[proposed_key]
        for tp in [tp for tp in self._zk_seen if tp.topic == name]:
            del self._zk_seen[tp]

    def _follow_generations(self, topics: Iterable[str]) -> None:
        """A topic whose znode was created again (a new czxid) is a new generation: its epochs
        start again at 0. Told by the znode, not by the create's answer: the old generation's
        deletion can complete after the request left, and the new generation's first leaders
        may be seen before the answer arrives."""
        for name in topics:
            found = self.cluster.zookeeper.peek(zk_data.topic_path(name))
            if found is None:
                continue
            czxid = found[1].czxid
            known = self._generations.get(name)
            if known is not None and known != czxid:
                self.forget_topic(name)
            self._generations[name] = czxid

    # ------------------------------------------------------------------------ every step

    def step(self) -> None:
        now = self.cluster.clock.now_ms()
        if now == self._last_step_ms:
            return
        self._last_step_ms = now
        self.checks_total += 1
        self._check_controllers()
        hosted = {(broker_id, actor.state.tp): actor for broker_id, actor in self.cluster.partition_actors()}
        self._follow_generations(sorted({tp.topic for _, tp in hosted}))
        for (broker_id, _), actor in hosted.items():
            state = actor.state
            if state.role is not Role.LEADER or actor.log is None:
                continue
            tp = state.tp
            if state.local_broker_id not in state.isr:
                self.fail(
                    "LeaderInIsr", f"{tp}: leader {broker_id} is not in its own ISR {sorted(state.isr)}"
                )
            key = (tp, state.leader_epoch)
            first = self._leaders.setdefault(key, broker_id)
            if first != broker_id:
                self.fail(
                    "SingleLeaderPerEpoch",
                    f"{tp} epoch {state.leader_epoch}: led by broker {first} and by broker {broker_id}",
                )
            # Per leader process: a broker restarted into the same epoch (a controller failover does
            # not bump it) starts from its checkpointed HW, as Kafka's does.
            hw_key = (
                tp,
                state.leader_epoch,
                broker_id * 1_000_000 + self.cluster.brokers[broker_id].incarnation,
            )
            high_watermark = actor.log.high_watermark
            highest = self._high_watermarks.get(hw_key, -1)
            if high_watermark < highest:
                self.fail(
                    "MonotonicHighWatermark",
                    f"{tp} epoch {state.leader_epoch} on broker {broker_id}: "
                    f"HW {highest} -> {high_watermark}",
                )
            self._high_watermarks[hw_key] = high_watermark
            for member in state.maximal_isr:
                self._isr_proposed_at.setdefault((tp, member, broker_id, state.leader_epoch), now)
            self._check_isr_members_hold_the_high_watermark(broker_id, actor, hosted)
            zk = self.zk_state(tp)
            if zk is not None:
                self._check_zk_isr_is_the_leaders(broker_id, actor.state, zk)
        # Every topic still in ZooKeeper, also one whose deletion was asked without an answer:
        # its ISR history counts if it turns out never deleted.
        for topic in self.topics.values():
            for tp in topic.tps():
                zk = self.zk_state(tp)
                if zk is None:
                    continue
                self._check_zk_state(topic, tp, zk[0], zk[1])
        self._check_acknowledged_with_min_isr(now)

    def _check_isr_members_hold_the_high_watermark(
        self, leader: int, actor: PartitionActor, hosted: dict[tuple[int, TopicPartition], PartitionActor]
    ) -> None:
        """The cheap half of StrongIsr, every step: a member of the leader's ISR that is up ends at
        or beyond the leader's HW (the deep check compares the records)."""
        state = actor.state
        topic = self._by_name.get(state.tp.topic)
        if topic is None or topic.tainted or actor.policy.min_insync_replicas < 2 or actor.log is None:
            return
        high_watermark = actor.log.high_watermark
        for member in state.isr:
            if member == leader:
                continue
            follower = hosted.get((member, state.tp))
            if follower is None or follower.log is None:
                continue
            lost_at = self.power_lost_at.get(member)
            if lost_at is not None and lost_at >= self._isr_joined_at.get((state.tp, member), -1):
                continue
            if follower.log.log_end_offset < high_watermark:
                self.fail(
                    "StrongIsr",
                    f"{state.tp}: ISR member {member} ends at {follower.log.log_end_offset}, below leader "
                    f"{leader}'s HW {high_watermark}",
                )

    def _check_acknowledged_with_min_isr(self, now: int) -> None:
        """When its acknowledgement arrives, an acks=all record is in at least min.insync.replicas
        replicas' logs (the ISR it was committed in). A broker that cannot be read, or whose copy
        may be gone for a reason Kafka's durability model allows, counts as a possible holder: one
        down or going down (halting) since the record was sent, or one that lost power since then
        (a follower that fetched the record counts for the acknowledgement even if its unflushed
        copy is lost)."""
        for topic in self.alive_topics():
            for producer in topic.producers:
                acked, producer.newly_acked = producer.newly_acked, []
                if topic.tainted:
                    continue
                for outcome in acked:
                    assert outcome.partition is not None
                    assert outcome.offset is not None
                    tp = TopicPartition(topic.name, outcome.partition)
                    holders = []
                    possible = []
                    required = 0
                    for broker_id, broker in self.cluster.brokers.items():
                        node = broker.node
                        if (
                            (node is None and broker.went_down_ms >= outcome.sent_ms)
                            or (node is not None and node.system.closing)
                            or self.power_lost_at.get(broker_id, -1) >= outcome.sent_ms
                        ):
                            possible.append(broker_id)
                            continue
                        if node is None:
                            continue
                        # A broker in controlled shutdown still replicates: it counts. A restarted
                        # one holds its log before its partition actor starts again.
                        actor = self.cluster.partition_actor(broker_id, tp)
                        if actor is not None:
                            required = max(required, actor.policy.min_insync_replicas)
                        log = actor.log if actor is not None else self.cluster.log(broker_id, tp)
                        if log is None:
                            continue
                        if log.log_start_offset <= outcome.offset < log.log_end_offset:
                            found = log_values(log, start=outcome.offset)
                            if found.get(outcome.offset) == outcome.value:
                                holders.append(broker_id)
                    if len(holders) + len(possible) < required:
                        self.fail(
                            "AcknowledgedOnMinInsyncReplicas",
                            f"{tp}: {outcome.value!r} acknowledged at offset {outcome.offset} is on "
                            f"brokers {holders} only; min.insync.replicas is {required}",
                        )

    def _check_controllers(self) -> None:
        epochs: dict[int, int] = {}
        for broker_id, controller in self.cluster.active_controllers():
            assert controller.logic is not None
            epoch = controller.logic.context.controller_epoch
            if epoch in epochs:
                self.fail(
                    "SingleActiveController",
                    f"brokers {epochs[epoch]} and {broker_id} are both active in controller epoch {epoch}",
                )
            epochs[epoch] = broker_id
            if self._controllers.get(epoch) != broker_id:
                self._controllers[epoch] = broker_id
                self._changed(f"controller: broker {broker_id} active in epoch {epoch}")

    def _check_zk_state(
        self, topic: TopicModel, tp: TopicPartition, state: zk_data.PartitionState, version: int
    ) -> None:
        seen = (state.leader, state.leader_epoch, state.isr)
        if self._zk_seen.get(tp) != seen:
            previous = self._zk_seen.get(tp)
            self._zk_seen[tp] = seen
            self._changed(f"{tp}: leader {state.leader} epoch {state.leader_epoch} isr {list(state.isr)}")
            now = self.cluster.clock.now_ms()
            before = set(previous[2]) if previous is not None else set()
            for member in state.isr:
                if member not in before:
                    # Joined when its leader decided so (a follower may lose power between the
                    # decision and ZooKeeper's record of it: Kafka's model exempts it then).
                    proposed = self._isr_proposed_at.get((tp, member, state.leader, state.leader_epoch), now)
                    self._isr_joined_at[(tp, member)] = min(proposed, now)
        if state.leader != -1 and state.leader not in state.isr:
            self.fail(
                "LeaderInIsr", f"{tp}: ZooKeeper names leader {state.leader} outside ISR {list(state.isr)}"
            )

    def _check_zk_isr_is_the_leaders(
        self, broker_id: int, state: object, zk: tuple[zk_data.PartitionState, int]
    ) -> None:
        from actors.server.replica.partition_state import PartitionState

        assert isinstance(state, PartitionState)
        zk_state, _ = zk
        if zk_state.leader != broker_id or zk_state.leader_epoch != state.leader_epoch:
            return  # a newer election the leader has not heard of yet, or an older one
        if not set(zk_state.isr) <= set(state.assigned_replicas):
            self.fail(
                "IsrWithinReplicas",
                f"{state.tp}: ISR {list(zk_state.isr)} outside replicas {list(state.assigned_replicas)}",
            )
        zk_isr = frozenset(zk_state.isr)
        isr_state = state.isr_state
        allowed = {isr_state.isr}
        if isinstance(isr_state, PendingExpandIsr):
            allowed.add(isr_state.isr | {isr_state.new_in_sync_replica})
        elif isinstance(isr_state, PendingShrinkIsr):
            allowed.add(isr_state.isr - isr_state.out_of_sync_replicas)
        else:
            assert isinstance(isr_state, CommittedIsr)
        if zk_isr not in allowed:
            self.fail(
                "ZkIsrIsTheLeaders",
                f"{state.tp} epoch {state.leader_epoch}: ZooKeeper ISR {sorted(zk_isr)}, leader {broker_id} "
                f"believes {sorted(isr_state.isr)} ({type(isr_state).__name__})",
            )

    def _changed(self, text: str) -> None:
        if self.on_change is not None:
            self.on_change(text)

    # ------------------------------------------------------------------------- deep checks

    def deep(self, *, final: bool = False) -> None:
        self.checks_total += 1
        for topic in self.alive_topics():
            for tp in topic.tps():
                self._check_partition_data(topic, tp, final=final)

    def leader_log(self, tp: TopicPartition) -> tuple[int, Log, int] | None:
        """(leader id, its log, leader epoch) when ZooKeeper's leader is up and acting as leader
        in that epoch."""
        zk = self.zk_state(tp)
        if zk is None or zk[0].leader == -1:
            return None
        leader = zk[0].leader
        if not self.cluster.brokers[leader].up or self.cluster.brokers[leader].stalled:
            return None
        actor = self.cluster.partition_actor(leader, tp)
        if actor is None or actor.log is None or actor.state.role is not Role.LEADER:
            return None
        if actor.state.leader_epoch != zk[0].leader_epoch:
            return None
        return leader, actor.log, actor.state.leader_epoch

    def _check_partition_data(self, topic: TopicModel, tp: TopicPartition, *, final: bool) -> None:
        # DeletedTopicStaysDeleted, on every replica that is up.
        for broker_id, broker in self.cluster.brokers.items():
            if not broker.up:
                continue
            log = self.cluster.log(broker_id, tp)
            if log is None:
                continue
            for offset, value in log_values(log).items():
                parsed = parse_value(value)
                if parsed is not None and parsed[1] != topic.generation:
                    self.fail(
                        "DeletedTopicStaysDeleted",
                        f"{tp} (generation {topic.generation}) on broker {broker_id} holds {value!r} "
                        f"at offset {offset}, written before the topic was deleted",
                    )
        found = self.leader_log(tp)
        if found is None:
            return
        leader, log, epoch = found
        values = log_values(log)
        duplicates = [v for v, n in Counter(v for v in values.values() if v is not None).items() if n > 1]
        if duplicates and not topic.tainted:
            self.fail("NoDuplicateRecord", f"{tp} leader {leader}: {duplicates[0]!r} appears more than once")
        if topic.tainted:
            return
        for producer in topic.producers:
            for outcome in producer.outcomes.values():
                if outcome.partition != tp.partition or outcome.offset is None:
                    continue
                if outcome.offset < log.log_start_offset:
                    continue
                held = values.get(outcome.offset)
                if held != outcome.value:
                    self.fail(
                        "NoLostAcknowledgedRecord",
                        f"{tp}: {outcome.value!r} was acknowledged at offset {outcome.offset} "
                        f"(at {outcome.acked_ms} ms); leader {leader} (epoch {epoch}, LEO "
                        f"{log.log_end_offset}, HW {log.high_watermark}) holds {held!r} there",
                    )
        if topic.consumer is not None:
            for (partition, offset), value in topic.consumer.seen.items():
                if partition != tp.partition or offset < log.log_start_offset:
                    continue
                if offset >= log.log_end_offset and not final:
                    continue
                if values.get(offset) != value:
                    self.fail(
                        "ConsumedRecordsStay",
                        f"{tp}: the consumer read {value!r} at offset {offset}; leader {leader} holds "
                        f"{values.get(offset)!r} there",
                    )
        self._check_strong_isr(topic, tp, leader, log, values)

    def _check_strong_isr(
        self, topic: TopicModel, tp: TopicPartition, leader: int, log: Log, values: dict[int, bytes | None]
    ) -> None:
        zk = self.zk_state(tp)
        actor = self.cluster.partition_actor(leader, tp)
        if zk is None or actor is None or actor.statistics().min_insync_replicas < 2:
            return
        high_watermark = log.high_watermark
        for member in zk[0].isr:
            if member == leader or not self.cluster.brokers[member].up:
                continue
            lost_at = self.power_lost_at.get(member)
            if lost_at is not None and lost_at >= self._isr_joined_at.get((tp, member), -1):
                continue  # it lost power since it joined the ISR: exempt, as in Kafka's model
            member_log = self.cluster.log(member, tp)
            if member_log is None:
                if high_watermark > 0:
                    self.fail(
                        "StrongIsr",
                        f"{tp}: ISR member {member} has no log (leader {leader}, HW {high_watermark})",
                    )
                continue  # nothing committed yet; its LeaderAndIsr may still be on the way
            if member_log.log_end_offset < high_watermark:
                self.fail(
                    "StrongIsr",
                    f"{tp}: ISR member {member} ends at {member_log.log_end_offset}, below leader {leader}'s "
                    f"HW {high_watermark}",
                )
            start = max(log.log_start_offset, member_log.log_start_offset)
            member_values = log_values(member_log, below=high_watermark)
            for offset in range(start, high_watermark):
                if member_values.get(offset) != values.get(offset):
                    self.fail(
                        "StrongIsr",
                        f"{tp}: below HW {high_watermark}, ISR member {member} holds "
                        f"{member_values.get(offset)!r} at offset {offset}, leader {leader} "
                        f"{values.get(offset)!r}",
                    )

    # ---------------------------------------------------------------------------- liveness

    def healed(self) -> str | None:
        """Why the cluster is not yet whole (None when every partition has a live leader, its
        whole replica set in the ISR, and every replica holds the leader's log)."""
        if not self.cluster.active_controllers():
            return "no active controller"
        for topic in self.alive_topics():
            for tp in topic.tps():
                zk = self.zk_state(tp)
                if zk is None:
                    return f"{tp} has no partition state in ZooKeeper"
                found = self.leader_log(tp)
                if found is None:
                    state = zk[0]
                    return f"{tp} has no live leader (ZooKeeper: {state.leader}, epoch {state.leader_epoch})"
                leader, log, _ = found
                reassigning = self._reassigning(tp)
                if reassigning is not None:
                    return reassigning
                actor = self.cluster.partition_actor(leader, tp)
                assert actor is not None
                replicas = actor.state.assigned_replicas
                if set(zk[0].isr) != set(replicas):
                    return f"{tp}: ISR {list(zk[0].isr)} is not all of {list(replicas)}"
                for member in replicas:
                    member_log = self.cluster.log(member, tp)
                    if member_log is None or member_log.log_end_offset != log.log_end_offset:
                        end = None if member_log is None else member_log.log_end_offset
                        return (
                            f"{tp}: replica {member} ends at {end}, leader {leader} at {log.log_end_offset}"
                        )
        if self.cluster.zookeeper.peek(zk_data.REASSIGN_PARTITIONS_PATH) is not None:
            return f"{zk_data.REASSIGN_PARTITIONS_PATH} is still there"
        return None

    def _reassigning(self, tp: TopicPartition) -> str | None:
        """Why ``tp``'s reassignment is not over (None when the topic znode shows none)."""
        found = self.cluster.zookeeper.peek(zk_data.topic_path(tp.topic))
        if found is None:
            return None
        assignment = zk_data.decode_topic_assignment(tp.topic, found[0])
        if tp.partition in assignment.reassigning:
            return (
                f"{tp} is still being reassigned: replicas {list(assignment.partitions[tp.partition])}, "
                f"adding {list(assignment.adding_replicas.get(tp.partition, ()))}, "
                f"removing {list(assignment.removing_replicas.get(tp.partition, ()))}"
            )
        return None

    def check_reassignment_targets(self) -> None:
        """Once healed: each partition's assignment is what its reassignment requests asked for."""
        for topic in self.alive_topics():
            found = self.cluster.zookeeper.peek(zk_data.topic_path(topic.name))
            if found is None:
                continue
            assignment = zk_data.decode_topic_assignment(topic.name, found[0])
            for partition, target in sorted(topic.reassignment_targets.items()):
                actual = assignment.partitions.get(partition)
                if target is not None and actual is not None and actual != target:
                    self.fail(
                        "ReassignmentReachesItsTarget",
                        f"{topic.name}-{partition}: assignment {list(actual)}, requested {list(target)}",
                    )

    def converged(self) -> None:
        """Once healed: every replica's log is the leader's, record for record."""
        for topic in self.alive_topics():
            for tp in topic.tps():
                found = self.leader_log(tp)
                if found is None:
                    continue
                leader, log, _ = found
                values = log_values(log)
                for broker_id in self.cluster.brokers:
                    member_log = self.cluster.log(broker_id, tp)
                    if member_log is None or broker_id == leader:
                        continue
                    member_values = log_values(member_log)
                    for offset in range(
                        max(log.log_start_offset, member_log.log_start_offset), log.log_end_offset
                    ):
                        if member_values.get(offset) != values.get(offset):
                            self.fail(
                                "Liveness",
                                f"{tp}: healed, yet replica {broker_id} holds {member_values.get(offset)!r} "
                                f"at offset {offset} where leader {leader} holds {values.get(offset)!r}",
                            )
