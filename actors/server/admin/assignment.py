"""Replica assignment for new topics: Kafka's rack-unaware algorithm (docs/controller.md §8).

Brokers are sorted by id. ``start_index`` picks the first replica of partition 0 and
``next_replica_shift`` how far the second replica sits from the first; both are random in ``[0, n)``
unless given (tests pass a fixed value). Leaders go round-robin over the brokers, and the shift grows
by one every ``n`` partitions so that the followers of one broker's partitions spread over the
others.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from actors.common.types import BrokerId

__all__ = ["AssignmentError", "assign_replicas_to_brokers"]


class AssignmentError(ValueError):
    """The request cannot be satisfied (Kafka's InvalidPartitions / InvalidReplicationFactor)."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


def assign_replicas_to_brokers(
    broker_ids: Sequence[BrokerId],
    partitions: int,
    replication_factor: int,
    *,
    rng: random.Random,
    fixed_start_index: int | None = None,
    start_partition_id: int = 0,
) -> dict[int, tuple[BrokerId, ...]]:
    # The messages are Kafka's (AdminUtils.assignReplicasToBrokers), word for word: tools and users
    # match on them.
    if partitions <= 0:
        raise AssignmentError("INVALID_PARTITIONS", "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError("INVALID_REPLICATION_FACTOR", "Replication factor must be larger than 0.")
    brokers = sorted(set(broker_ids))
    count = len(brokers)
    if replication_factor > count:
        raise AssignmentError(
            "INVALID_REPLICATION_FACTOR",
            f"Replication factor: {replication_factor} larger than available brokers: {count}.",
        )
    start_index = fixed_start_index if fixed_start_index is not None else rng.randrange(count)
    next_replica_shift = fixed_start_index if fixed_start_index is not None else rng.randrange(count)
    current_partition = max(start_partition_id, 0)
    assignment: dict[int, tuple[BrokerId, ...]] = {}
    for _ in range(partitions):
        if current_partition > 0 and current_partition % count == 0:
            next_replica_shift += 1
        first = (current_partition + start_index) % count
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            shift = 1 + (next_replica_shift + j) % (count - 1)
            replicas.append(brokers[(first + shift) % count])
        assignment[current_partition] = tuple(replicas)
        current_partition += 1
    return assignment
