"""The partitions a broker hosts and their roles: Kafka's ``ReplicaManager.becomeLeaderOrFollower`` and
``stopReplicas`` (docs/replication.md §6.2, docs/controller.md §5), after the broker fenced the request on the
controller epoch.

House rules
-----------
1. One PartitionActor per hosted partition (a child of the broker, restarted by its supervisor,
   which then starts from the last role recorded here: ``initial_role``).
2. A LeaderAndIsr partition state is applied only with a leader epoch above the hosted one; an
   equal or lower one answers STALE_CONTROLLER_EPOCH for that partition (Kafka 2.4), and a state
   that does not list this broker among the replicas UNKNOWN_TOPIC_OR_PARTITION.
3. Becoming leader: the partition stops being fetched. Becoming follower (only of a leader the
   metadata knows alive, as in Kafka's makeFollowers): it is removed from its fetcher and added to
   the fetcher of the new leader at the new epoch, which truncates before fetching. A replica whose
   leader is not alive is still hosted and its log created (KAFKA-1647: its checkpoints exist), its
   leader epoch left as it was, so the same state sent again with a live leader applies.
4. StopReplica without delete: the partition leaves its fetcher and goes offline; its actor, log
   and leader epoch stay (Kafka keeps the ``Partition``), so a stale LeaderAndIsr is still fenced.
5. StopReplica(delete): the partition leaves its fetcher, its actor deletes the log and stops.
   Until the broker hears it stopped, the partition is *stopping*: a LeaderAndIsr for it waits
   (applied once the name is free) and a repeated deletion waits for the same answer, so a
   partition of the same name is never started beside the one still deleting its log. A
   LeaderAndIsr for a *new* partition (``is_new``) that finds a log here but no partition deletes
   that log first: a new partition has no records anywhere, so it is a deleted topic's, left by a
   reassignment that removed this replica while the broker was down (beyond Kafka 2.4).
6. ``__consumer_offsets`` partitions: the node's group coordinator is told
   ``OffsetsPartitionElected(partition, leader_epoch)`` when this broker becomes their leader and
   ``OffsetsPartitionResigned(partition)`` when it becomes a follower (or a follower of a dead
   leader), or the partition is stopped or deleted (Kafka's ``onLeadershipChange`` and
   ``handleStopReplicaRequest``; Kafka resigns on a deleting StopReplica only, actorlog on any,
   since a stopped partition accepts no appends). A restarted coordinator asks again
   (``GroupCoordinatorStarted``): every offsets partition led here is elected anew.

Effects go through the broker's context: this object decides, records and tells.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

from actors.common.errors import ErrorCode
from actors.common.names import partition_name
from actors.common.protocol import LeaderAndIsrPartitionState
from actors.common.topic_names import GROUP_METADATA_TOPIC_NAME
from actors.common.types import NO_LEADER, BrokerId, TopicPartition
from actors.group.coordinator_actor import OffsetsPartitionElected, OffsetsPartitionResigned
from actors.server.config import BrokerConfig, TopicPolicy
from actors.server.fetcher.manager import FetcherKey, ReplicaFetcherManager
from actors.server.metadata_cache import MetadataCache
from actors.server.replica.messages import (
    BecomeFollower,
    BecomeLeader,
    CreateLog,
    ReplicaStopped,
    StopReplica,
    UpdateTopicConfig,
)
from actors.server.replica.partition import PartitionActor
from actors.server.replication_quota import ReplicationQuota
from actors.server.state_changes import StateChangeLog
from runtime.context import Context
from runtime.coordination.base import Coordinator
from runtime.ref import ActorRef
from runtime.storage.config import LogConfig
from runtime.storage.log_manager import LogManager
from runtime.supervision import SupervisorStrategy

__all__ = ["HostedPartition", "HostedPartitions", "PartitionDeleted"]

Role: TypeAlias = BecomeLeader | BecomeFollower | CreateLog


@dataclass(slots=True)
class HostedPartition:
    ref: ActorRef
    leader_epoch: int
    leader: BrokerId
    fetcher: FetcherKey | None = None
    # The last role applied: a restarted partition actor starts from it (None once offline).
    role: Role | None = None


@dataclass(frozen=True, slots=True)
class PartitionDeleted:
    """To the broker: a partition asked to delete its log answered (or the ask failed, then
    KAFKA_STORAGE_ERROR); its actor has stopped."""

    tp: TopicPartition
    error_code: ErrorCode


@dataclass(slots=True)
class _Stopping:
    """A partition deleting its log: its actor may still run."""

    ref: ActorRef
    # The newest LeaderAndIsr state that arrived meanwhile, applied once the actor is gone.
    deferred: LeaderAndIsrPartitionState | None = None


class HostedPartitions:
    def __init__(
        self,
        *,
        config: BrokerConfig,
        log_manager: LogManager,
        coordinator: Coordinator,
        metadata: MetadataCache,
        topic_config: Callable[[str], tuple[TopicPolicy, LogConfig]],
        state_changes: StateChangeLog | None = None,
        group_coordinator: ActorRef | None = None,
        follower_quota: ReplicationQuota | None = None,
    ) -> None:
        """``group_coordinator``: the node's ``group-coordinator`` actor, told of leadership changes
        of ``__consumer_offsets`` partitions (rule 6); None where no coordinator runs (tests).
        ``follower_quota``: the broker's follower replication quota, shared by its fetchers.
        ``topic_config``: each topic's settings (the broker's ``topic_settings.py``)."""
        self.config = config
        self.group_coordinator = group_coordinator
        self.broker_id = config.broker_id
        self.state_changes = state_changes
        self.log_manager = log_manager
        self.coordinator = coordinator
        self.metadata = metadata
        self._topic_config = topic_config
        self.partitions: dict[TopicPartition, HostedPartition] = {}
        self.stopping: dict[TopicPartition, _Stopping] = {}
        self.fetcher_manager = ReplicaFetcherManager(config, self._leader_epoch_of, follower_quota)

    def __len__(self) -> int:
        return len(self.partitions)

    def ref(self, tp: TopicPartition) -> ActorRef | None:
        hosted = self.partitions.get(tp)
        return hosted.ref if hosted is not None else None

    def refs(self) -> Iterator[ActorRef]:
        """Every hosted partition's actor."""
        return (hosted.ref for hosted in self.partitions.values())

    def led(self) -> Iterator[ActorRef]:
        """The partitions this broker leads (the isr-expiration task ticks them)."""
        return (
            hosted.ref
            for hosted in self.partitions.values()
            if hosted.leader == self.broker_id and isinstance(hosted.role, BecomeLeader)
        )

    def _leader_epoch_of(self, tp: TopicPartition) -> int | None:
        hosted = self.partitions.get(tp)
        return hosted.leader_epoch if hosted is not None else None

    # -------------------------------------------------------------------------- LeaderAndIsr

    def apply(self, ctx: Context[Any], state: LeaderAndIsrPartitionState) -> ErrorCode:
        """One partition state of a LeaderAndIsr request; returns that partition's error."""
        tp = state.tp
        stopping = self.stopping.get(tp)
        if stopping is not None:
            # Rule 5: applied (and fenced) once the actor deleting the old log has stopped.
            stopping.deferred = state
            return ErrorCode.NONE
        hosted = self.partitions.get(tp)
        local_epoch = hosted.leader_epoch if hosted is not None else -1
        if state.leader_epoch <= local_epoch:
            ctx.log.info(
                "%s: ignoring LeaderAndIsr with leader epoch %d (local %d)",
                tp,
                state.leader_epoch,
                local_epoch,
            )
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if self.broker_id not in state.replicas:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if state.is_new and hosted is None and self.log_manager.get_log(tp) is not None:
            # A new partition has no records anywhere yet: a log here is a deleted topic's of the
            # same name, left while this broker was down when a reassignment removed its replica.
            ctx.log.warning("%s: deleting a stale log before the new partition starts here", tp)
            error = self._delete_unhosted_log(ctx, tp)
            if error is not ErrorCode.NONE:
                return error
        policy, log_config = self._topic_config(tp.topic)
        if state.leader == self.broker_id:
            hosted = self._host(ctx, tp, state, BecomeLeader(state, policy, log_config))
            self._remove_from_fetcher(ctx, tp, hosted)
            self._offsets_elected(ctx, tp, state.leader_epoch)
            return ErrorCode.NONE
        if not self.metadata.is_alive(state.leader):
            # Kafka's makeFollowers: a follower of a dead leader is not made follower yet (a later
            # LeaderAndIsr with a live leader will), but its log exists from now on (KAFKA-1647).
            ctx.log.info("%s: leader %d is not alive; not becoming its follower", tp, state.leader)
            self._offsets_resigned(ctx, tp)
            if hosted is None:
                created = self._host(ctx, tp, state, CreateLog(policy, log_config))
                created.leader_epoch, created.leader = local_epoch, NO_LEADER
            return ErrorCode.NONE
        hosted = self._host(ctx, tp, state, BecomeFollower(state, policy, log_config))
        self._remove_from_fetcher(ctx, tp, hosted)
        hosted.fetcher = self.fetcher_manager.add(ctx, tp, state.leader, state.leader_epoch)
        self._offsets_resigned(ctx, tp)
        return ErrorCode.NONE

    def _host(
        self,
        ctx: Context[Any],
        tp: TopicPartition,
        state: LeaderAndIsrPartitionState,
        role: Role,
    ) -> HostedPartition:
        """Record the partition's new role and hand it over: a new (or restarted) partition actor
        reads it at start; a running one is told."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            broker = ctx.self_ref

            def initial_role() -> Role | None:
                current = self.partitions.get(tp)
                return current.role if current is not None else None

            incarnations = itertools.count()
            ref = ctx.spawn(
                partition_name(tp),
                lambda: PartitionActor(
                    tp=tp,
                    config=self.config,
                    log_manager=self.log_manager,
                    coordinator=self.coordinator,
                    broker=broker,
                    initial_role=initial_role,
                    # Every incarnation after the first is a supervisor restart.
                    restarted=next(incarnations) > 0,
                    state_changes=self.state_changes,
                ),
                supervision=SupervisorStrategy.restart(),
            )
            hosted = HostedPartition(ref, state.leader_epoch, state.leader, role=role)
            self.partitions[tp] = hosted
        else:
            hosted.role = role
            ctx.tell(hosted.ref, role)
        hosted.leader_epoch = state.leader_epoch
        hosted.leader = state.leader
        return hosted

    def _remove_from_fetcher(self, ctx: Context[Any], tp: TopicPartition, hosted: HostedPartition) -> None:
        key = hosted.fetcher
        if key is None:
            return
        hosted.fetcher = None
        self.fetcher_manager.remove(ctx, tp, key)

    # ------------------------------------------------------------------- group coordinator (rule 6)

    def _offsets_elected(self, ctx: Context[Any], tp: TopicPartition, leader_epoch: int) -> None:
        if self.group_coordinator is not None and tp.topic == GROUP_METADATA_TOPIC_NAME:
            ctx.tell(
                self.group_coordinator,
                OffsetsPartitionElected(partition=tp.partition, leader_epoch=leader_epoch),
            )

    def _offsets_resigned(self, ctx: Context[Any], tp: TopicPartition) -> None:
        if self.group_coordinator is not None and tp.topic == GROUP_METADATA_TOPIC_NAME:
            ctx.tell(self.group_coordinator, OffsetsPartitionResigned(partition=tp.partition))

    def elect_offsets_partitions_again(self, ctx: Context[Any]) -> None:
        """A (re)started group coordinator knows nothing: every offsets partition led here is
        elected anew, at its current leader epoch."""
        for tp, hosted in self.partitions.items():
            if hosted.leader == self.broker_id and isinstance(hosted.role, BecomeLeader):
                self._offsets_elected(ctx, tp, hosted.leader_epoch)

    def stop_idle_fetchers(self, ctx: Context[Any]) -> None:
        self.fetcher_manager.stop_idle(ctx)

    # --------------------------------------------------------------------------- StopReplica

    def update_topic_config(
        self, ctx: Context[Any], topic: str, policy: TopicPolicy, log_config: LogConfig
    ) -> None:
        """A topic's configuration changed: every hosted partition of it applies the new settings
        (and a partition actor restarted later starts from them)."""
        for tp, hosted in self.partitions.items():
            if tp.topic != topic:
                continue
            if hosted.role is not None:
                hosted.role = dataclasses.replace(hosted.role, policy=policy, log_config=log_config)
            ctx.tell(hosted.ref, UpdateTopicConfig(policy, log_config))

    def stop(self, ctx: Context[Any], tp: TopicPartition) -> None:
        """StopReplica without delete (rule 4)."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            return
        self._remove_from_fetcher(ctx, tp, hosted)
        hosted.role = None
        hosted.leader = NO_LEADER
        ctx.tell(hosted.ref, StopReplica(delete=False))
        self._offsets_resigned(ctx, tp)

    def delete(self, ctx: Context[Any], tp: TopicPartition, *, timeout_ms: int) -> ErrorCode | None:
        """StopReplica(delete) (rule 5): a hosted partition's actor deletes its log and stops, and
        the broker hears ``PartitionDeleted`` (None is returned then, also when that deletion is
        already under way); a log without an actor is deleted here (its outcome is returned).
        Either way the log directory is renamed for deletion before the answer, so a deletion the
        controller counts as done is durable."""
        if tp in self.stopping:
            return None
        self._offsets_resigned(ctx, tp)
        hosted = self.partitions.pop(tp, None)
        if hosted is None:
            return self._delete_unhosted_log(ctx, tp)
        self._remove_from_fetcher(ctx, tp, hosted)
        self.stopping[tp] = _Stopping(hosted.ref)

        def adapt(reply: object) -> PartitionDeleted:
            error = reply.error_code if isinstance(reply, ReplicaStopped) else ErrorCode.KAFKA_STORAGE_ERROR
            return PartitionDeleted(tp, error)

        ctx.ask(hosted.ref, StopReplica(True), timeout_ms=timeout_ms, on_reply=adapt, on_failure=adapt)
        return None

    def _delete_unhosted_log(self, ctx: Context[Any], tp: TopicPartition) -> ErrorCode:
        try:
            self.log_manager.delete_log(tp)
        except OSError as error:
            # A failed log dir: the broker halts, as on any I/O error (README, Guarantees).
            ctx.log.error("cannot delete the log of %s: %s; halting the broker", tp, error)
            self.log_manager.mark_offline(f"deleting {tp}: {error}")
            ctx.halt_node(f"log directory {self.log_manager.log_dir} failed deleting {tp}: {error}")
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    def deleted(self, ctx: Context[Any], message: PartitionDeleted) -> None:
        """The broker heard ``PartitionDeleted``: the name is free; a LeaderAndIsr that waited applies."""
        stopping = self.stopping.pop(message.tp, None)
        if stopping is None:
            return
        if message.error_code is not ErrorCode.NONE:
            # The ask failed or the deletion did: make sure the actor is gone before anything
            # starts under its name (a later deletion retry removes the log).
            ctx.stop(stopping.ref)
        if stopping.deferred is not None:
            self.apply(ctx, stopping.deferred)
