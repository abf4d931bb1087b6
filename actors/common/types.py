"""Domain value types shared by the Kafka roles."""

from __future__ import annotations

from typing import TypeAlias

# One TopicPartition for the whole code base: the storage engine names its directories and
# checkpoint entries with it, and runtime/ cannot import actors/, so it is defined there.
from runtime.storage.checkpoint import TopicPartition

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


def broker_node(broker_id: BrokerId) -> str:
    """The actor-system node id of a broker process."""
    return str(broker_id)


def partition_name(tp: TopicPartition) -> str:
    """The actor name of a partition replica on its broker."""
    return f"partition/{tp}"


def fetcher_name(fetcher_id: int, source_broker_id: BrokerId) -> str:
    """Kafka's ReplicaFetcherThread-<fetcherId>-<sourceBrokerId>, as an actor name."""
    return f"replica-fetcher-{fetcher_id}-{source_broker_id}"
