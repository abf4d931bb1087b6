"""Domain value types shared by the Kafka roles."""

from __future__ import annotations

from typing import TypeAlias

# One TopicPartition for the whole code base, defined at the bottom layer (the storage engine
# names its directories and checkpoint entries with it).
from runtime.storage.topic_partition import TopicPartition

__all__ = [
    "NO_LEADER",
    "UNKNOWN_OFFSET",
    "BrokerId",
    "TopicPartition",
]

BrokerId: TypeAlias = int

# Kafka's sentinels: LeaderAndIsr.NoLeader and Log.UnknownOffset.
NO_LEADER = -1
UNKNOWN_OFFSET = -1
