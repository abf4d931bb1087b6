"""What the controller sends brokers after each step of an event: LeaderAndIsr, UpdateMetadata,
StopReplica, batched per broker (Kafka's ``ControllerBrokerRequestBatch``).

During an event the controller adds partition states for brokers; before the event's script waits
on its next step (and when it ends) ``build`` turns them into at most one request of each kind per
broker, LeaderAndIsr first, then UpdateMetadata, then StopReplica — the order Kafka sends them in.
Every LeaderAndIsr also queues an UpdateMetadata for the partition to every live broker, so
metadata caches follow leadership.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from actors.common.protocol import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from actors.common.types import BrokerId, TopicPartition
from actors.controller.state import ControllerContext, LeaderIsrAndEpoch

__all__ = ["BrokerRequest", "RequestBatch"]

BrokerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


@dataclass(slots=True)
class RequestBatch:
    controller_id: BrokerId
    leader_and_isr: dict[BrokerId, dict[TopicPartition, LeaderAndIsrPartitionState]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    update_metadata_brokers: set[BrokerId] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    update_metadata_all_partitions: bool = False
    deleted_topics: set[str] = field(default_factory=set)
    stop_replica: dict[tuple[BrokerId, bool], set[TopicPartition]] = field(
        default_factory=lambda: defaultdict(set)
    )

    def is_empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata_brokers or self.stop_replica)

    def add_leader_and_isr(
        self,
        context: ControllerContext,
        brokers: Iterable[BrokerId],
        tp: TopicPartition,
        leadership: LeaderIsrAndEpoch,
        *,
        is_new: bool = False,
    ) -> None:
        state = LeaderAndIsrPartitionState(
            topic=tp.topic,
            partition=tp.partition,
            controller_epoch=leadership.controller_epoch,
            leader=leadership.leader,
            leader_epoch=leadership.leader_epoch,
            isr=leadership.isr,
            zk_version=leadership.zk_version,
            replicas=context.replicas(tp),
            adding_replicas=context.adding_replicas.get(tp, ()),
            removing_replicas=context.removing_replicas.get(tp, ()),
            is_new=is_new,
        )
        for broker_id in brokers:
            if context.is_live(broker_id):
                self.leader_and_isr[broker_id][tp] = state
        self.add_update_metadata(context.live_or_shutting_down_ids(), [tp])

    def add_update_metadata(
        self, brokers: Iterable[BrokerId], partitions: Iterable[TopicPartition] | None
    ) -> None:
        """UpdateMetadata for ``partitions`` (None: every partition) to ``brokers``."""
        self.update_metadata_brokers.update(brokers)
        if partitions is None:
            self.update_metadata_all_partitions = True
        else:
            self.update_metadata_partitions.update(partitions)

    def add_stop_replica(self, broker_id: BrokerId, tp: TopicPartition, *, delete: bool) -> None:
        self.stop_replica[(broker_id, delete)].add(tp)

    def build(self, context: ControllerContext) -> list[tuple[BrokerId, BrokerRequest]]:
        requests: list[tuple[BrokerId, BrokerRequest]] = []
        endpoints = {b: live.endpoint for b, live in context.live_brokers.items()}
        for broker_id, states in sorted(self.leader_and_isr.items()):
            if broker_id not in context.live_brokers:
                continue
            leaders = {state.leader for state in states.values()}
            requests.append(
                (
                    broker_id,
                    LeaderAndIsrRequest(
                        controller_id=self.controller_id,
                        controller_epoch=context.controller_epoch,
                        broker_epoch=context.live_brokers[broker_id].broker_epoch,
                        partition_states=tuple(states[tp] for tp in sorted(states)),
                        live_leaders=tuple(endpoints[b] for b in sorted(leaders) if b in endpoints),
                    ),
                )
            )
        if self.update_metadata_brokers:
            partitions = (
                context.all_partitions()
                if self.update_metadata_all_partitions
                else sorted(tp for tp in self.update_metadata_partitions if tp in context.leadership)
            )
            metadata_states = tuple(
                self._metadata_state(context, tp) for tp in partitions if tp in context.leadership
            )
            live = tuple(endpoints[b] for b in sorted(endpoints))
            for broker_id in sorted(self.update_metadata_brokers):
                if broker_id not in context.live_brokers:
                    continue
                requests.append(
                    (
                        broker_id,
                        UpdateMetadataRequest(
                            controller_id=self.controller_id,
                            controller_epoch=context.controller_epoch,
                            broker_epoch=context.live_brokers[broker_id].broker_epoch,
                            partition_states=metadata_states,
                            live_brokers=live,
                            deleted_topics=tuple(sorted(self.deleted_topics)),
                        ),
                    )
                )
        for (broker_id, delete), tps in sorted(self.stop_replica.items()):
            if broker_id not in context.live_brokers:
                continue
            requests.append(
                (
                    broker_id,
                    StopReplicaRequest(
                        controller_id=self.controller_id,
                        controller_epoch=context.controller_epoch,
                        broker_epoch=context.live_brokers[broker_id].broker_epoch,
                        delete_partitions=delete,
                        partitions=tuple(sorted(tps)),
                    ),
                )
            )
        return requests

    @staticmethod
    def _metadata_state(context: ControllerContext, tp: TopicPartition) -> UpdateMetadataPartitionState:
        leadership = context.leadership[tp]
        replicas = context.replicas(tp)
        return UpdateMetadataPartitionState(
            topic=tp.topic,
            partition=tp.partition,
            controller_epoch=leadership.controller_epoch,
            leader=leadership.leader,
            leader_epoch=leadership.leader_epoch,
            isr=leadership.isr,
            zk_version=leadership.zk_version,
            replicas=replicas,
            offline_replicas=tuple(r for r in replicas if not context.is_live(r)),
        )
