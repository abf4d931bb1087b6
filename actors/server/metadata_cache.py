"""A broker's metadata cache: live brokers, partition states and the controller, as the controller
last said (UpdateMetadata). It answers Metadata requests and tells ``makeFollowers`` whether a new
leader is alive. Pure data; the broker actor owns it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.common.errors import ErrorCode
from actors.common.protocol import (
    BrokerEndpoint,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from actors.common.types import NO_LEADER, TopicPartition

__all__ = ["MetadataCache"]


@dataclass(slots=True)
class MetadataCache:
    controller_id: int = -1
    live_brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    partitions: dict[TopicPartition, UpdateMetadataPartitionState] = field(default_factory=dict)
    cluster_id: str | None = None

    def update(self, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply an UpdateMetadata request; returns the partitions removed (deleted topics)."""
        self.controller_id = request.controller_id
        self.live_brokers = {broker.broker_id: broker for broker in request.live_brokers}
        deleted = set(request.deleted_topics)
        removed = [tp for tp in self.partitions if tp.topic in deleted]
        for tp in removed:
            del self.partitions[tp]
        for state in request.partition_states:
            self.partitions[state.tp] = state
        return removed

    def add_live_broker(self, endpoint: BrokerEndpoint) -> None:
        """A leader named in a LeaderAndIsr is alive (its endpoint travels with the request)."""
        self.live_brokers[endpoint.broker_id] = endpoint

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers

    def contains(self, tp: TopicPartition) -> bool:
        return tp in self.partitions

    def topics(self) -> set[str]:
        return {tp.topic for tp in self.partitions}

    def partition_state(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        return self.partitions.get(tp)

    def response(self, topics: tuple[str, ...] | None) -> MetadataResponse:
        """Kafka's Metadata response: unknown topics get UNKNOWN_TOPIC_OR_PARTITION, partitions
        without a leader LEADER_NOT_AVAILABLE, offline replicas are listed."""
        by_topic: dict[str, list[UpdateMetadataPartitionState]] = {}
        for tp, state in sorted(self.partitions.items()):
            by_topic.setdefault(tp.topic, []).append(state)
        names = sorted(by_topic) if topics is None else list(topics)
        topic_metadata: list[TopicMetadata] = []
        for name in names:
            states = by_topic.get(name)
            if states is None:
                topic_metadata.append(
                    TopicMetadata(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partitions=())
                )
                continue
            partitions = tuple(
                PartitionMetadata(
                    partition=state.partition,
                    error_code=ErrorCode.NONE
                    if state.leader != NO_LEADER
                    else ErrorCode.LEADER_NOT_AVAILABLE,
                    leader=state.leader,
                    leader_epoch=state.leader_epoch,
                    replicas=state.replicas,
                    isr=state.isr,
                    offline_replicas=state.offline_replicas,
                )
                for state in states
            )
            topic_metadata.append(TopicMetadata(name=name, error_code=ErrorCode.NONE, partitions=partitions))
        return MetadataResponse(
            brokers=tuple(sorted(self.live_brokers.values(), key=lambda b: b.broker_id)),
            controller_id=self.controller_id,
            topics=tuple(topic_metadata),
            cluster_id=self.cluster_id,
        )

    def followed_out_of_isr(self, broker_id: int) -> tuple[str, ...]:
        """Partitions with a live leader that name ``broker_id`` as a replica but not in their ISR."""
        return tuple(
            sorted(
                str(tp)
                for tp, state in self.partitions.items()
                if broker_id in state.replicas
                and broker_id not in state.isr
                and state.leader >= 0
                and state.leader != broker_id
            )
        )
