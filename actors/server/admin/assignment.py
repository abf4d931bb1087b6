"""Replica assignment for new topics and added partitions: Kafka's ``AdminUtils.assignReplicasToBrokers``,
rack-unaware and rack-aware (docs/controller.md §8).

Both variants walk a list of brokers round-robin. ``start_index`` picks the first replica of
partition 0 and ``next_replica_shift`` how far the second replica sits from the first; both are
random in ``[0, n)`` unless ``fixed_start_index`` gives them (CreatePartitions and tests do). The
shift grows by one every ``n`` partitions so that the followers of one broker's partitions spread
over the others.

* Without racks (``racks`` absent, or no broker has one) the list is the brokers sorted by id.
* With a rack on every broker the list alternates racks (racks in order, each rack's brokers by
  id, one broker per rack in turn), and a further replica skips a broker whose rack already holds a
  replica of the partition, until every rack holds one, and a broker already holding one, until
  every broker does. A partition thus spans ``min(replication factor, racks)`` racks.
* Some brokers with a rack and others without: refused, as Kafka refuses it.

The results are Kafka's to the broker, for the same start index and shift: clients, tools and
operators compare assignments with what Kafka would have made.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from actors.common.types import BrokerId

__all__ = [
    "MIXED_RACKS_ERROR",
    "MIXED_RACKS_MESSAGE",
    "MIXED_RACKS_TOOL_MESSAGE",
    "AssignmentError",
    "assign_replicas_to_brokers",
    "rack_alternated_brokers",
]

# Kafka's messages, word for word: tools and users match on them. The first is AdminUtils' (a
# topic's placement); the second AdminZkClient.getBrokerMetadatas' (partition addition and the
# reassignment tool, whose --disable-rack-aware it names).
MIXED_RACKS_MESSAGE = "Not all brokers have rack information for replica rack aware assignment."
MIXED_RACKS_TOOL_MESSAGE = (
    "Not all brokers have rack information. Add --disable-rack-aware in command line"
    " to make replica assignment without rack information."
)
# Kafka throws an AdminOperationException, which is no API error (a 2.4 broker answers it as
# UNKNOWN_SERVER_ERROR with the message); the project answers the error code naming the cause.
MIXED_RACKS_ERROR = "INVALID_REPLICA_ASSIGNMENT"


class AssignmentError(ValueError):
    """The request cannot be satisfied (Kafka's InvalidPartitions / InvalidReplicationFactor, or
    the mixed-racks refusal). ``error_name`` is the ErrorCode member's name."""

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
    racks: Mapping[BrokerId, str | None] | None = None,
) -> dict[int, tuple[BrokerId, ...]]:
    """Partition id → replicas (the first is the preferred leader), for ``partitions`` partitions
    numbered from ``start_partition_id``. ``racks``: each broker's ``broker.rack`` (a broker
    missing from it has none); absent, the placement ignores racks."""
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
    broker_racks = {b: (racks or {}).get(b) for b in brokers}
    racked = {b: rack for b, rack in broker_racks.items() if rack is not None}
    if racked and len(racked) < count:
        raise AssignmentError(MIXED_RACKS_ERROR, MIXED_RACKS_MESSAGE)
    # The same two draws in the same order in both variants, as Kafka makes them.
    start_index = fixed_start_index if fixed_start_index is not None else rng.randrange(count)
    next_replica_shift = fixed_start_index if fixed_start_index is not None else rng.randrange(count)
    first_partition = max(start_partition_id, 0)
    if not racked:
        return _rack_unaware(
            brokers, partitions, replication_factor, start_index, next_replica_shift, first_partition
        )
    return _rack_aware(
        racked, partitions, replication_factor, start_index, next_replica_shift, first_partition
    )


def rack_alternated_brokers(racks: Mapping[BrokerId, str]) -> list[BrokerId]:
    """Kafka's ``getRackAlternatedBrokerList``: racks in order, each rack's brokers by id, taking one
    broker from each rack in turn (a rack that ran out is skipped). Racks are ordered as Java
    orders strings (UTF-16 code units), which differs from Python's order only beyond the BMP."""
    by_rack: dict[str, list[BrokerId]] = {}
    for broker_id in sorted(racks):
        by_rack.setdefault(racks[broker_id], []).append(broker_id)
    queues = [by_rack[rack] for rack in sorted(by_rack, key=_java_string_order)]
    arranged: list[BrokerId] = []
    for round_index in range(max(len(q) for q in queues) if queues else 0):
        arranged.extend(q[round_index] for q in queues if round_index < len(q))
    return arranged


def _java_string_order(rack: str) -> bytes:
    return rack.encode("utf-16-be", "surrogatepass")


def _replica_index(first_index: int, shift: int, replica: int, count: int) -> int:
    return (first_index + 1 + (shift + replica) % (count - 1)) % count


def _rack_unaware(
    brokers: list[BrokerId],
    partitions: int,
    replication_factor: int,
    start_index: int,
    next_replica_shift: int,
    first_partition: int,
) -> dict[int, tuple[BrokerId, ...]]:
    count = len(brokers)
    assignment: dict[int, tuple[BrokerId, ...]] = {}
    for partition in range(first_partition, first_partition + partitions):
        if partition > 0 and partition % count == 0:
            next_replica_shift += 1
        first = (partition + start_index) % count
        replicas = [brokers[first]]
        replicas.extend(
            brokers[_replica_index(first, next_replica_shift, j, count)]
            for j in range(replication_factor - 1)
        )
        assignment[partition] = tuple(replicas)
    return assignment


def _rack_aware(
    racks: Mapping[BrokerId, str],
    partitions: int,
    replication_factor: int,
    start_index: int,
    next_replica_shift: int,
    first_partition: int,
) -> dict[int, tuple[BrokerId, ...]]:
    arranged = rack_alternated_brokers(racks)
    count = len(arranged)
    rack_count = len(set(racks.values()))
    assignment: dict[int, tuple[BrokerId, ...]] = {}
    for partition in range(first_partition, first_partition + partitions):
        if partition > 0 and partition % count == 0:
            next_replica_shift += 1
        first = (partition + start_index) % count
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        brokers_used = {leader}
        # One candidate counter for the whole partition: a skipped broker is not offered again
        # for the next replica (Kafka's ``k``).
        candidate = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, next_replica_shift * rack_count, candidate, count)]
                candidate += 1
                rack = racks[broker]
                rack_ok = rack not in racks_used or len(racks_used) == rack_count
                broker_ok = broker not in brokers_used or len(brokers_used) == count
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        assignment[partition] = tuple(replicas)
    return assignment
