"""Domain value types shared by the Kafka roles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "NO_LEADER",
    "UNKNOWN_OFFSET",
    "BrokerId",
    "TopicPartition",
    "broker_node",
    "fetcher_name",
    "partition_name",
]

BrokerId: TypeAlias = int

# Kafka's sentinels: LeaderAndIsr.NoLeader and Log.UnknownOffset.
NO_LEADER = -1
UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def broker_node(broker_id: BrokerId) -> str:
    """The actor-system node id of a broker process."""
    return str(broker_id)


def partition_name(tp: TopicPartition) -> str:
    """The actor name of a partition replica on its broker."""
    return f"partition/{tp}"


def fetcher_name(fetcher_id: int, source_broker_id: BrokerId) -> str:
    """Kafka's ReplicaFetcherThread-<fetcherId>-<sourceBrokerId>, as an actor name."""
    return f"replica-fetcher-{fetcher_id}-{source_broker_id}"
